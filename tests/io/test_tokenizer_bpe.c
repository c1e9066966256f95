// Byte-level BPE: known merges on hand-checkable texts, the pre-splitting rules, training and
// encoding against naive oracles (full recount per merge; lowest-rank-first rescans), exact round
// trips on arbitrary bytes, and tinyshakespeare when it is present.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/io.h"
#include "trit/tokenizer.h"
#include "io/pretokenize.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void assert_round_trip(const trit_tokenizer *tok, const uint8_t *text, size_t len, size_t *n_tokens) {
    int32_t *ids;
    size_t n;
    assert_int_equal(trit_tokenizer_encode(tok, text, len, &ids, &n), TRIT_OK);
    uint8_t *back;
    size_t blen;
    assert_int_equal(trit_tokenizer_decode(tok, ids, n, &back, &blen), TRIT_OK);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    assert_int_equal(back[blen], 0);
    if (n_tokens) *n_tokens = n;
    free(ids);
    free(back);
}

// "aaabdaaabac": aa (4) -> 256, then ab (3) -> 257, then (256, 257) (2) -> 258.
static void test_known_merges(void **state) {
    (void)state;
    const char *text = "aaabdaaabac";
    trit_tokenizer *tok = trit_tokenizer_train_bpe(text, strlen(text), 259);
    assert_non_null(tok);
    assert_int_equal(trit_tokenizer_get_kind(tok), TRIT_TOKENIZER_BPE);
    assert_int_equal(trit_tokenizer_vocab_size(tok), 259);
    assert_int_equal(trit_tokenizer_num_merges(tok), 3);
    const int32_t want[3][2] = {{'a', 'a'}, {'a', 'b'}, {256, 257}};
    for (int r = 0; r < 3; r++) {
        int32_t l, rr;
        assert_int_equal(trit_tokenizer_merge(tok, r, &l, &rr), TRIT_OK);
        assert_int_equal(l, want[r][0]);
        assert_int_equal(rr, want[r][1]);
    }
    const uint8_t *b;
    size_t bl;
    assert_int_equal(trit_tokenizer_token_bytes(tok, 258, &b, &bl), TRIT_OK);
    assert_int_equal(bl, 4);
    assert_memory_equal(b, "aaab", 4);
    int32_t *ids;
    size_t n;
    assert_int_equal(trit_tokenizer_encode(tok, text, strlen(text), &ids, &n), TRIT_OK);
    const int32_t enc[5] = {258, 'd', 258, 'a', 'c'};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, enc, sizeof enc);
    free(ids);
    int32_t l, r;
    assert_int_equal(trit_tokenizer_merge(tok, 3, &l, &r), TRIT_ERR_RANGE);
    trit_tokenizer_free(tok);
}

// Every pair of "abcd" occurs once: the tie goes to the smallest (left, right).
static void test_tie_break_and_early_stop(void **state) {
    (void)state;
    trit_tokenizer *tok = trit_tokenizer_train_bpe("abcd", 4, 257);
    int32_t l, r;
    assert_int_equal(trit_tokenizer_merge(tok, 0, &l, &r), TRIT_OK);
    assert_int_equal(l, 'a');
    assert_int_equal(r, 'b');
    trit_tokenizer_free(tok);
    // Chunks "ab", " ab", " ab", " ab": ab (4) then (" ", ab) (3), then no pair is left, and no
    // merge crosses the space ("b" + " " never forms).
    const char *t2 = "ab ab ab ab";
    tok = trit_tokenizer_train_bpe(t2, strlen(t2), 300);
    assert_non_null(tok);
    assert_int_equal(trit_tokenizer_vocab_size(tok), 258);
    assert_int_equal(trit_tokenizer_merge(tok, 0, &l, &r), TRIT_OK);
    assert_int_equal(l, 'a');
    assert_int_equal(r, 'b');
    assert_int_equal(trit_tokenizer_merge(tok, 1, &l, &r), TRIT_OK);
    assert_int_equal(l, ' ');
    assert_int_equal(r, 256);
    trit_tokenizer_free(tok);
}

static void test_bad_arguments(void **state) {
    (void)state;
    assert_null(trit_tokenizer_train_bpe("abc", 3, 255));
    assert_int_equal(strstr(trit_last_error(), "255") != NULL, 1);
    assert_null(trit_tokenizer_train_bpe("", 0, 300));
    trit_tokenizer *tok = trit_tokenizer_train_bpe("abab", 4, 257);
    int32_t bad[2] = {65, 257};
    uint8_t *out;
    size_t n;
    assert_int_equal(trit_tokenizer_decode(tok, bad, 2, &out, &n), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "257"));
    bad[1] = -1;
    assert_int_equal(trit_tokenizer_decode(tok, bad, 2, &out, &n), TRIT_ERR_RANGE);
    trit_tokenizer_free(tok);
}

static void expect_chunks(const char *text, const char *const *want, int n_want) {
    size_t len = strlen(text), i = 0;
    int k = 0;
    while (i < len) {
        size_t e = trit_pretokenize_next((const uint8_t *)text, len, i);
        assert_true(k < n_want);
        assert_int_equal(e - i, strlen(want[k]));
        assert_memory_equal(text + i, want[k], e - i);
        i = e;
        k++;
    }
    assert_int_equal(k, n_want);
}

static void test_pretokenize(void **state) {
    (void)state;
    const char *w1[] = {"Hello", " world", "'s", " ", " end", "\n", "\n", "ok", " 123", "!!", " \t "};
    expect_chunks("Hello world's  end\n\nok 123!! \t ", w1, 11);
    const char *w2[] = {"x", "'ll", "'", "q", " \xc3\xa9t\xc3\xa9", ",", "\n"};
    expect_chunks("x'll'q \xc3\xa9t\xc3\xa9,\n", w2, 7);
    // A long run is cut at the chunk limit.
    size_t n = 3 * TRIT_BPE_MAX_CHUNK + 5;
    uint8_t *run = malloc(n);
    memset(run, 'a', n);
    assert_int_equal(trit_pretokenize_next(run, n, 0), TRIT_BPE_MAX_CHUNK);
    assert_int_equal(trit_pretokenize_next(run, n, 3 * TRIT_BPE_MAX_CHUNK), n);
    free(run);
}

// ---- naive oracles -----------------------------------------------------------------------

typedef struct {
    int32_t *s;
    int32_t n;
} seq;

static seq *split_chunks(const uint8_t *text, size_t len, int *n_chunks) {
    seq *c = calloc(len + 1, sizeof *c);
    int k = 0;
    for (size_t i = 0; i < len;) {
        size_t e = trit_pretokenize_next(text, len, i);
        c[k].n = (int32_t)(e - i);
        c[k].s = malloc((e - i) * sizeof(int32_t));
        for (size_t j = i; j < e; j++) c[k].s[j - i] = text[j];
        k++;
        i = e;
    }
    *n_chunks = k;
    return c;
}

static void merge_seq(seq *q, int32_t a, int32_t b, int32_t c) {
    int32_t k = 0;
    for (int32_t i = 0; i < q->n; i++) {
        if (i + 1 < q->n && q->s[i] == a && q->s[i + 1] == b) {
            q->s[k++] = c;
            i++;
        } else {
            q->s[k++] = q->s[i];
        }
    }
    q->n = k;
}

// Full recount of every pair before every merge; returns the number of merges made.
static int naive_train(const uint8_t *text, size_t len, int n_merges, int32_t *merges) {
    int nc;
    seq *c = split_chunks(text, len, &nc);
    int32_t vocab = 256 + n_merges;
    int64_t *count = malloc((size_t)vocab * vocab * sizeof *count);
    int m = 0;
    for (; m < n_merges; m++) {
        memset(count, 0, (size_t)vocab * vocab * sizeof *count);
        for (int k = 0; k < nc; k++)
            for (int32_t i = 0; i + 1 < c[k].n; i++) count[(int64_t)c[k].s[i] * vocab + c[k].s[i + 1]]++;
        int64_t best = 0, arg = -1;
        for (int64_t p = 0; p < (int64_t)vocab * vocab; p++)
            if (count[p] > best) best = count[p], arg = p;
        if (arg < 0) break;
        merges[2 * m] = (int32_t)(arg / vocab);
        merges[2 * m + 1] = (int32_t)(arg % vocab);
        for (int k = 0; k < nc; k++) merge_seq(&c[k], merges[2 * m], merges[2 * m + 1], 256 + m);
    }
    for (int k = 0; k < nc; k++) free(c[k].s);
    free(c);
    free(count);
    return m;
}

// Apply the lowest-ranked merge present, all its occurrences left to right, until none applies.
static size_t naive_encode(const trit_tokenizer *tok, const uint8_t *text, size_t len, int32_t *out) {
    int nc;
    seq *c = split_chunks(text, len, &nc);
    int nm = trit_tokenizer_num_merges(tok);
    size_t n = 0;
    for (int k = 0; k < nc; k++) {
        for (;;) {
            int best = nm;
            for (int32_t i = 0; i + 1 < c[k].n; i++)
                for (int r = 0; r < best; r++) {
                    int32_t l, rr;
                    trit_tokenizer_merge(tok, r, &l, &rr);
                    if (l == c[k].s[i] && rr == c[k].s[i + 1]) {
                        best = r;
                        break;
                    }
                }
            if (best == nm) break;
            int32_t l, rr;
            trit_tokenizer_merge(tok, best, &l, &rr);
            merge_seq(&c[k], l, rr, 256 + best);
        }
        memcpy(out + n, c[k].s, (size_t)c[k].n * sizeof *out);
        n += (size_t)c[k].n;
        free(c[k].s);
    }
    free(c);
    return n;
}

// Text from a small alphabet with spaces, newlines and punctuation, so pairs collide and ties occur.
static uint8_t *random_text(size_t len) {
    const char alphabet[] = "aaaabbbcccdde  \n.,'sEt0";
    uint8_t *t = malloc(len);
    for (size_t i = 0; i < len; i++) t[i] = (uint8_t)alphabet[rnd() % (sizeof alphabet - 1)];
    return t;
}

static void test_train_matches_naive_oracle(void **state) {
    (void)state;
    for (int trial = 0; trial < 3; trial++) {
        size_t len = 3000 + 2000 * (size_t)trial;
        uint8_t *text = random_text(len);
        const int want = 120;
        int32_t oracle[2 * 120];
        int n = naive_train(text, len, want, oracle);
        trit_tokenizer *tok = trit_tokenizer_train_bpe(text, len, 256 + want);
        assert_non_null(tok);
        assert_int_equal(trit_tokenizer_num_merges(tok), n);
        for (int r = 0; r < n; r++) {
            int32_t l, rr;
            trit_tokenizer_merge(tok, r, &l, &rr);
            assert_int_equal(l, oracle[2 * r]);
            assert_int_equal(rr, oracle[2 * r + 1]);
        }
        // Encoding a different text must agree with the naive encoder.
        uint8_t *other = random_text(4000);
        int32_t *naive = malloc(4000 * sizeof *naive);
        size_t nn = naive_encode(tok, other, 4000, naive);
        int32_t *ids;
        size_t ni;
        assert_int_equal(trit_tokenizer_encode(tok, other, 4000, &ids, &ni), TRIT_OK);
        assert_int_equal(ni, nn);
        assert_memory_equal(ids, naive, nn * sizeof *ids);
        assert_true(ni < 4000); // merges were applied
        free(ids);
        free(naive);
        free(other);
        free(text);
        trit_tokenizer_free(tok);
    }
}

static void test_round_trip_any_bytes(void **state) {
    (void)state;
    // Train on text, then on random bytes (so merges involve NUL and invalid UTF-8), and encode both.
    size_t len = 20000;
    uint8_t *bytes = malloc(len);
    for (size_t i = 0; i < len; i++) bytes[i] = (uint8_t)(rnd() % 7 == 0 ? 0 : rnd());
    uint8_t *text = random_text(len);
    const uint8_t *corpora[2] = {text, bytes};
    for (int c = 0; c < 2; c++) {
        trit_tokenizer *tok = trit_tokenizer_train_bpe(corpora[c], len, 700);
        assert_non_null(tok);
        assert_round_trip(tok, bytes, len, NULL);
        assert_round_trip(tok, text, len, NULL);
        const uint8_t odd[] = {0xff, 0xfe, 0x00, 0xc3, 0x28, 0xe2, 0x82, 0x00, 0x00, 0xf0, 0x9f, 0x98, 0x80, ' ', 0x80};
        assert_round_trip(tok, odd, sizeof odd, NULL);
        assert_round_trip(tok, odd, 1, NULL);
        size_t n0 = 1;
        assert_round_trip(tok, odd, 0, &n0);
        assert_int_equal(n0, 0);
        // One class run longer than the chunk limit.
        size_t rl = 2 * TRIT_BPE_MAX_CHUNK + 77;
        uint8_t *run = malloc(rl);
        memset(run, 'a', rl);
        assert_round_trip(tok, run, rl, NULL);
        free(run);
        trit_tokenizer_free(tok);
    }
    free(bytes);
    free(text);
}

static uint8_t *read_data_file(const char *name, size_t *len) {
    const char *dir = getenv("TRIT_DATA_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir ? dir : "../shared/data", name);
    uint8_t *data = NULL;
    if (trit_file_read_all(path, &data, len) != TRIT_OK) return NULL;
    return data;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void test_tinyshakespeare(void **state) {
    (void)state;
    size_t len;
    uint8_t *text = read_data_file("tinyshakespeare.txt", &len);
    if (!text) {
        print_message("tinyshakespeare.txt not found (TRIT_DATA_DIR): skipping\n");
        skip();
    }
    size_t train_len = len < 200000 ? len : 200000;
    trit_tokenizer *tok = trit_tokenizer_train_bpe(text, train_len, 512);
    assert_non_null(tok);
    assert_int_equal(trit_tokenizer_vocab_size(tok), 512);
    size_t n;
    assert_round_trip(tok, text, len, &n);
    double ratio = (double)len / (double)n;
    print_message("512-vocab BPE: %zu bytes -> %zu tokens, %.3f bytes/token\n", len, n, ratio);
    assert_true(ratio > 1.5);
    trit_tokenizer_free(tok);
    // The full text at 4096 tokens must train in seconds (incremental pair counts).
    double t0 = now_s();
    tok = trit_tokenizer_train_bpe(text, len, 4096);
    double dt = now_s() - t0;
    assert_non_null(tok);
    assert_int_equal(trit_tokenizer_vocab_size(tok), 4096);
    assert_round_trip(tok, text, len, &n);
    print_message("4096-vocab BPE on %zu bytes: trained in %.2f s, %.3f bytes/token\n", len, dt, (double)len / (double)n);
    assert_true(dt < 30.0); // loose: only catches a per-merge recount
    trit_tokenizer_free(tok);
    free(text);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_merges),
        cmocka_unit_test(test_tie_break_and_early_stop),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_pretokenize),
        cmocka_unit_test(test_train_matches_naive_oracle),
        cmocka_unit_test(test_round_trip_any_bytes),
        cmocka_unit_test(test_tinyshakespeare),
    };
    trit_log_set_level(TRIT_LOG_ERROR);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
