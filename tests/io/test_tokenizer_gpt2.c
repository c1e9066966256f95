// GPT-2's tokenizer from its files: ids identical to tiktoken's gpt2 encoding (fixtures made by
// tests/reference/make_gpt2_tokenizer_fixtures.py) on a text of every Unicode category and on
// tinyshakespeare, the three file layouts, the tokenizer file, a tokenizer.json trained by
// Hugging Face's tokenizers with its ids, and a small vocabulary written here for the rules
// (special tokens, merging by the rank of the concatenation) and bad files.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "trit/io.h"
#include "trit/tokenizer.h"
#include "io/io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *env_or(const char *name, const char *dflt) {
    const char *v = getenv(name);
    return v && *v ? v : dflt;
}

static uint8_t *read_rel(const char *base, const char *name, size_t *len) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", base, name);
    uint8_t *data = NULL;
    return trit_file_read_all(path, &data, len) == TRIT_OK ? data : NULL;
}

static const char *gpt2_dir(void) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/gpt2", env_or("TRIT_DATA_DIR", "../shared/data"));
    return dir;
}

// GPT-2's own files, or a skip where they are absent.
static trit_tokenizer *load_gpt2_or_skip(void) {
    char path[1100];
    snprintf(path, sizeof path, "%s/encoder.json", gpt2_dir());
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        print_message("%s not found (TRIT_DATA_DIR): skipping\n", path);
        skip();
    }
    fclose(fp);
    trit_tokenizer *tok = trit_tokenizer_load_gpt2(gpt2_dir());
    if (!tok) fail_msg("%s", trit_last_error());
    return tok;
}

static const char *fixtures(void) {
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/reference/fixtures", env_or("TRIT_SOURCE_DIR", "."));
    return dir;
}

static int32_t *parse_ids(const char *s, size_t *n) {
    size_t cap = 1024;
    int32_t *ids = malloc(cap * sizeof *ids);
    *n = 0;
    for (char *end; *s;) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        if (*n == cap) ids = realloc(ids, (cap *= 2) * sizeof *ids);
        assert_non_null(ids);
        ids[(*n)++] = (int32_t)v;
        s = end;
    }
    return ids;
}

static void assert_ids(const trit_tokenizer *tok, const void *text, size_t len, const int32_t *want, size_t n_want) {
    int32_t *ids;
    size_t n;
    assert_int_equal(trit_tokenizer_encode(tok, text, len, &ids, &n), TRIT_OK);
    for (size_t i = 0; i < n && i < n_want; i++)
        if (ids[i] != want[i]) fail_msg("token %zu: %d, tiktoken %d", i, (int)ids[i], (int)want[i]);
    assert_int_equal(n, n_want);
    uint8_t *back;
    size_t back_len;
    assert_int_equal(trit_tokenizer_decode(tok, ids, n, &back, &back_len), TRIT_OK);
    assert_int_equal(back_len, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
}

// The fixture text with every Unicode category through `tok` gives the ids in `ids_name`.
static void check_fixture_ids(const trit_tokenizer *tok, const char *ids_name) {
    size_t len, n_ids_text, n_want;
    uint8_t *text = read_rel(fixtures(), "gpt2_text.txt", &len);
    uint8_t *ids_text = read_rel(fixtures(), ids_name, &n_ids_text);
    assert_non_null(text);
    assert_non_null(ids_text);
    ids_text = realloc(ids_text, n_ids_text + 1);
    ids_text[n_ids_text] = 0;
    int32_t *want = parse_ids((const char *)ids_text, &n_want);
    assert_true(n_want > 4000);
    assert_ids(tok, text, len, want, n_want);
    free(want);
    free(ids_text);
    free(text);
}

// tiktoken's ids (tests/reference/make_gpt2_tokenizer_fixtures.py).
static void check_fixture_text(const trit_tokenizer *tok) { check_fixture_ids(tok, "gpt2_text.ids"); }

// A tokenizer.json that Hugging Face's tokenizers trained and saved (special token at id 0, merges
// as pairs) gives the ids tokenizers gives (tests/reference/make_hf_tokenizer_fixtures.py).
static void test_hf_trained_tokenizer_json(void **state) {
    (void)state;
    char path[1100];
    snprintf(path, sizeof path, "%s/hf_bpe600_tokenizer.json", fixtures());
    trit_tokenizer *tok = trit_tokenizer_load_gpt2(path);
    if (!tok) fail_msg("%s", trit_last_error());
    assert_int_equal(trit_tokenizer_vocab_size(tok), 600);
    assert_int_equal(trit_tokenizer_special_id(tok, "<|endoftext|>"), 0);
    check_fixture_ids(tok, "hf_bpe600_text.ids");
    trit_tokenizer_free(tok);
}

static void test_known_answer(void **state) {
    (void)state;
    trit_tokenizer *tok = load_gpt2_or_skip();
    assert_int_equal(trit_tokenizer_get_kind(tok), TRIT_TOKENIZER_GPT2);
    assert_int_equal(trit_tokenizer_vocab_size(tok), 50257);
    assert_int_equal(trit_tokenizer_num_merges(tok), 50000);
    assert_int_equal(trit_tokenizer_special_id(tok, "<|endoftext|>"), 50256);
    assert_int_equal(trit_tokenizer_special_id(tok, "Hello"), -1);
    const int32_t want[] = {5962, 22307, 25, 198};
    assert_ids(tok, "First Citizen:\n", 15, want, 4);
    // A special token's text: the token, or (ordinary) its pieces.
    const int32_t eot[] = {64, 50256, 65};
    assert_ids(tok, "a<|endoftext|>b", 15, eot, 3);
    int32_t *ids;
    size_t n;
    assert_int_equal(trit_tokenizer_encode_ordinary(tok, "<|endoftext|>", 13, &ids, &n), TRIT_OK);
    assert_true(n > 1);
    for (size_t i = 0; i < n; i++) assert_int_not_equal(ids[i], 50256);
    free(ids);
    // Bytes that are not UTF-8 still make a round trip.
    const char raw[] = "ok \xff\xfe\xc3 \xed\xa0\x80 \0 end";
    assert_int_equal(trit_tokenizer_encode(tok, raw, sizeof raw - 1, &ids, &n), TRIT_OK);
    uint8_t *back;
    size_t len;
    assert_int_equal(trit_tokenizer_decode(tok, ids, n, &back, &len), TRIT_OK);
    assert_int_equal(len, sizeof raw - 1);
    assert_memory_equal(back, raw, len);
    free(back);
    free(ids);
    trit_tokenizer_free(tok);
}

static void test_tiktoken_text(void **state) {
    (void)state;
    trit_tokenizer *tok = load_gpt2_or_skip();
    check_fixture_text(tok);
    trit_tokenizer_free(tok);
}

static void test_tiktoken_tinyshakespeare(void **state) {
    (void)state;
    trit_tokenizer *tok = load_gpt2_or_skip();
    size_t len, flen;
    uint8_t *text = read_rel(env_or("TRIT_DATA_DIR", "../shared/data"), "tinyshakespeare.txt", &len);
    if (!text) {
        trit_tokenizer_free(tok);
        print_message("tinyshakespeare.txt not found (TRIT_DATA_DIR): skipping\n");
        skip();
    }
    uint8_t *fix = read_rel(fixtures(), "gpt2_tinyshakespeare.txt", &flen);
    assert_non_null(fix);
    unsigned long long want_n = 0;
    unsigned want_crc = 0;
    fix = realloc(fix, flen + 1);
    fix[flen] = 0;
    assert_int_equal(sscanf((const char *)fix, "%llu %x", &want_n, &want_crc), 2);
    int32_t *ids;
    size_t n;
    assert_int_equal(trit_tokenizer_encode(tok, text, len, &ids, &n), TRIT_OK);
    uint32_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t le[4];
        trit_le32_store(le, (uint32_t)ids[i]);
        crc = trit_crc32(crc, le, 4);
    }
    assert_int_equal(n, want_n);
    assert_int_equal(crc, want_crc);
    uint8_t *back;
    size_t back_len;
    assert_int_equal(trit_tokenizer_decode(tok, ids, n, &back, &back_len), TRIT_OK);
    assert_int_equal(back_len, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
    free(fix);
    free(text);
    trit_tokenizer_free(tok);
}

static void copy_file(const char *from, const char *to) {
    uint8_t *data;
    size_t n;
    assert_int_equal(trit_file_read_all(from, &data, &n), TRIT_OK);
    tfile_write(to, data, n);
    free(data);
}

// Hugging Face's names for the same two files, and trit's own tokenizer file.
static void test_other_layouts(void **state) {
    (void)state;
    trit_tokenizer *tok = load_gpt2_or_skip();
    char src[1200];
    char hf[1024];
    snprintf(hf, sizeof hf, "%s", tfile_path("hf"));
    assert_int_equal(mkdir(hf, 0755), 0);
    snprintf(src, sizeof src, "%s/encoder.json", gpt2_dir());
    copy_file(src, tfile_join(hf, "vocab.json"));
    snprintf(src, sizeof src, "%s/vocab.bpe", gpt2_dir());
    copy_file(src, tfile_join(hf, "merges.txt"));
    trit_tokenizer *hf_tok = trit_tokenizer_load_gpt2(hf);
    if (!hf_tok) fail_msg("%s", trit_last_error());
    check_fixture_text(hf_tok);
    trit_tokenizer_free(hf_tok);

    assert_int_equal(trit_tokenizer_save(tok, tfile_path("gpt2.bin")), TRIT_OK);
    trit_tokenizer *back = trit_tokenizer_load(tfile_path("gpt2.bin"));
    if (!back) fail_msg("%s", trit_last_error());
    assert_int_equal(trit_tokenizer_get_kind(back), TRIT_TOKENIZER_GPT2);
    assert_int_equal(trit_tokenizer_special_id(back, "<|endoftext|>"), 50256);
    check_fixture_text(back);
    trit_tokenizer_free(back);
    trit_tokenizer_free(tok);
}

// ---- a small vocabulary written here -------------------------------------------------------

static bool printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

// Raw bytes spelled in GPT-2's byte alphabet as UTF-8 (JSON-escaped when `json`).
static size_t spell(const char *raw, size_t n, bool json, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned b = (uint8_t)raw[i];
        unsigned c = b;
        if (!printable(b)) {
            c = 256;
            for (unsigned x = 0; x < b; x++) c += !printable(x);
        }
        if (json && (c == '"' || c == '\\')) out[k++] = '\\';
        if (c < 0x80) {
            out[k++] = (char)c;
        } else {
            out[k++] = (char)(0xC0 | c >> 6);
            out[k++] = (char)(0x80 | (c & 0x3F));
        }
    }
    out[k] = 0;
    return k;
}

typedef struct {
    const char *a, *b;
} merge;

// Merges of the small vocabulary. "a b" -> ab, "b c" -> bc, "a bc" -> abc: "abcx" merges ab
// first, then (ab, c) because abc is a token, though no merge joins ab and c.
static const merge small_merges[] = {{"h", "e"},  {"l", "l"},  {"he", "ll"},  {"hell", "o"}, {" ", "h"},
                                     {" h", "e"}, {" he", "ll"}, {" hell", "o"}, {"a", "b"},   {"b", "c"},
                                     {"a", "bc"}};
enum { N_SMALL = sizeof small_merges / sizeof small_merges[0] };

// DIR/encoder.json: the 256 bytes (ids 0..255 in alphabet order, as GPT-2 has them), the merges'
// tokens, <|endoftext|>; DIR/vocab.bpe: the merges, then `extra` lines as given.
static void write_small(const char *dir, const char *extra) {
    mkdir(dir, 0755);
    size_t cap = 1 << 16, k = 0;
    char *json = malloc(cap), *bpe = malloc(cap), one[64], raw[2];
    int id = 0;
    k += (size_t)sprintf(json + k, "{");
    for (int pass = 0; pass < 2; pass++)
        for (unsigned b = 0; b < 256; b++) {
            if (printable(b) != (pass == 0)) continue;
            raw[0] = (char)b;
            spell(raw, 1, true, one);
            k += (size_t)sprintf(json + k, "\"%s\": %d, ", one, id++);
        }
    size_t kb = (size_t)sprintf(bpe, "#version: 0.2\n");
    for (int m = 0; m < N_SMALL; m++) {
        char joined[32], sa[64], sb[64];
        snprintf(joined, sizeof joined, "%s%s", small_merges[m].a, small_merges[m].b);
        spell(joined, strlen(joined), true, one);
        k += (size_t)sprintf(json + k, "\"%s\": %d, ", one, id++);
        spell(small_merges[m].a, strlen(small_merges[m].a), false, sa);
        spell(small_merges[m].b, strlen(small_merges[m].b), false, sb);
        kb += (size_t)sprintf(bpe + kb, "%s %s\n", sa, sb);
    }
    k += (size_t)sprintf(json + k, "\"<|endoftext|>\": %d}", id);
    kb += (size_t)snprintf(bpe + kb, cap - kb, "%s", extra);
    tfile_write(tfile_join(dir, "encoder.json"), json, k);
    tfile_write(tfile_join(dir, "vocab.bpe"), bpe, kb);
    free(json);
    free(bpe);
}

static trit_tokenizer *small(void) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tfile_path("small"));
    write_small(dir, "");
    trit_tokenizer *tok = trit_tokenizer_load_gpt2(dir);
    if (!tok) fail_msg("%s", trit_last_error());
    return tok;
}

static void test_small_vocabulary(void **state) {
    (void)state;
    trit_tokenizer *tok = small();
    assert_int_equal(trit_tokenizer_vocab_size(tok), 256 + N_SMALL + 1);
    const int32_t eot = 256 + N_SMALL, hello = 259, sp_hello = 263, he = 256, ab = 264, abc = 266;
    assert_int_equal(trit_tokenizer_special_id(tok, "<|endoftext|>"), eot);
    const int32_t a[] = {hello, sp_hello};
    assert_ids(tok, "hello hello", 11, a, 2);
    const int32_t b[] = {hello, he};  // "hellohe": one chunk, merged pairwise
    assert_ids(tok, "hellohe", 7, b, 2);
    int32_t x = -1;
    for (int32_t i = 0; i < 256; i++) {
        const uint8_t *t;
        size_t n;
        assert_int_equal(trit_tokenizer_token_bytes(tok, i, &t, &n), TRIT_OK);
        if (n == 1 && t[0] == 'x') x = i;
    }
    const int32_t c[] = {abc, x};  // (ab, c) -> abc by the concatenation's rank
    assert_ids(tok, "abcx", 4, c, 2);
    const int32_t d[] = {ab, eot, hello};
    assert_ids(tok, "ab<|endoftext|>hello", 20, d, 3);
    int32_t l, r;
    assert_int_equal(trit_tokenizer_merge(tok, 10, &l, &r), TRIT_OK);
    assert_int_equal(l, (int32_t)('a' - 33));  // printable bytes are ids 0.. from '!' on
    assert_int_equal(r, 265);
    // Its tokenizer file gives the same tokenizer.
    assert_int_equal(trit_tokenizer_save(tok, tfile_path("small.bin")), TRIT_OK);
    trit_tokenizer *back = trit_tokenizer_load(tfile_path("small.bin"));
    if (!back) fail_msg("%s", trit_last_error());
    assert_ids(back, "abcx", 4, c, 2);
    assert_ids(back, "ab<|endoftext|>hello", 20, d, 3);
    trit_tokenizer_free(back);
    trit_tokenizer_free(tok);
}

static void expect_bad(const char *dir, const char *what) {
    trit_tokenizer *tok = trit_tokenizer_load_gpt2(dir);
    if (tok) fail_msg("'%s' loaded, expected an error about %s", dir, what);
    const char *msg = trit_last_error();
    if (!strstr(msg, what)) fail_msg("message '%s' does not say '%s'", msg, what);
    print_message("%s\n", msg);
}

static void expect_bad_merges(const char *extra, const char *what) {
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tfile_path("bad"));
    tfile_rm_rf(dir);
    write_small(dir, extra);
    expect_bad(dir, what);
}

static void test_bad_files(void **state) {
    (void)state;
    expect_bad_merges("h\n", "line 13: expected two tokens separated by one space");
    expect_bad_merges("h e l\n", "line 13: expected two tokens");
    expect_bad_merges("h  e\n", "line 13: expected two tokens");
    expect_bad_merges("\nl o\n", "line 13: expected two tokens");
    expect_bad_merges("h q\xc4\xa0\n", "uses \"q\xc4\xa0\", which");
    expect_bad_merges("zz y\n", "line 13: merge \"zz y\" uses \"zz\"");
    expect_bad_merges("e h\n", "makes a token");
    expect_bad_merges("h e\n", "repeats an earlier merge");
    expect_bad_merges("\xe2\x82\xac x\n", "uses");  // U+20AC is outside the byte alphabet

    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tfile_path("bad"));
    tfile_rm_rf(dir);
    write_small(dir, "");
    unlink(tfile_join(dir, "vocab.bpe"));
    expect_bad(dir, "has encoder.json but not vocab.bpe");
    expect_bad(tfile_path("no-such-dir"), "cannot open");
    tfile_rm_rf(dir);
    mkdir(dir, 0755);
    expect_bad(dir, "no GPT-2 tokenizer files");

    // The vocabulary itself.
    write_small(dir, "");
    const char *enc = tfile_join(dir, "encoder.json");
    tfile_write(enc, "{\"a\": 0", 7);
    expect_bad(dir, "not valid JSON");
    tfile_write(enc, "[1, 2]", 6);
    expect_bad(dir, "not a JSON object");
    tfile_rm_rf(dir);
    write_small(dir, "");
    uint8_t *good;
    size_t n;
    assert_int_equal(trit_file_read_all(enc, &good, &n), TRIT_OK);
    char *mod = malloc(n + 64);
    // The last id bumped out of range, then made a duplicate.
    memcpy(mod, good, n);
    char *last = strstr(mod, "\"<|endoftext|>\": ");
    assert_non_null(last);
    sprintf(last, "\"<|endoftext|>\": 9999}");
    tfile_write(enc, mod, strlen(mod));
    expect_bad(dir, "out of range");
    sprintf(last, "\"<|endoftext|>\": 3}");
    tfile_write(enc, mod, strlen(mod));
    expect_bad(dir, "id 3 is given to two tokens");
    // A token neither a byte, nor merged, nor special.
    sprintf(last, "\"zzz\": %d}", 256 + N_SMALL);
    tfile_write(enc, mod, strlen(mod));
    expect_bad(dir, "neither a byte, nor made by a merge");
    free(mod);
    free(good);
}

// tokenizer.json around the small vocabulary, merges as "A B" strings or as [A, B] pairs.
static void write_tokenizer_json(const char *path_arg, bool pairs, const char *pre) {
    char dir[1024], path[1024];
    snprintf(path, sizeof path, "%s", path_arg);  // tfile_* paths rotate through a few buffers
    snprintf(dir, sizeof dir, "%s", tfile_path("small"));
    write_small(dir, "");
    uint8_t *vocab;
    size_t n;
    assert_int_equal(trit_file_read_all(tfile_join(dir, "encoder.json"), &vocab, &n), TRIT_OK);
    char *json = malloc(n + 4096);
    size_t k = (size_t)sprintf(json, "{\"version\": \"1.0\", \"added_tokens\": [{\"id\": %d, \"content\": "
                               "\"<|endoftext|>\", \"special\": true}], \"pre_tokenizer\": %s, "
                               "\"model\": {\"type\": \"BPE\", \"vocab\": ", 256 + N_SMALL, pre);
    memcpy(json + k, vocab, n);
    k += n;
    k += (size_t)sprintf(json + k, ", \"merges\": [");
    for (int m = 0; m < N_SMALL; m++) {
        char sa[64], sb[64];
        spell(small_merges[m].a, strlen(small_merges[m].a), true, sa);
        spell(small_merges[m].b, strlen(small_merges[m].b), true, sb);
        k += (size_t)sprintf(json + k, pairs ? "%s[\"%s\", \"%s\"]" : "%s\"%s %s\"", m ? ", " : "", sa, sb);
    }
    k += (size_t)sprintf(json + k, "]}}");
    tfile_write(path, json, k);
    free(json);
    free(vocab);
}

static void test_tokenizer_json(void **state) {
    (void)state;
    const char *byte_level = "{\"type\": \"ByteLevel\", \"add_prefix_space\": false, \"use_regex\": true}";
    const int32_t eot = 256 + N_SMALL, hello = 259, ab = 264, abc = 266;
    for (int pairs = 0; pairs < 2; pairs++) {
        char dir[1024];
        snprintf(dir, sizeof dir, "%s", tfile_path(pairs ? "hf-pairs" : "hf-strings"));
        mkdir(dir, 0755);
        write_tokenizer_json(tfile_join(dir, "tokenizer.json"), pairs, byte_level);
        trit_tokenizer *tok = trit_tokenizer_load_gpt2(dir);
        if (!tok) fail_msg("%s", trit_last_error());
        assert_int_equal(trit_tokenizer_special_id(tok, "<|endoftext|>"), eot);
        const int32_t d[] = {ab, eot, hello, abc};
        assert_ids(tok, "ab<|endoftext|>helloabc", 23, d, 4);
        trit_tokenizer_free(tok);
    }
    char path[1024];
    snprintf(path, sizeof path, "%s", tfile_path("tokenizer.json"));
    write_tokenizer_json(path, false, "{\"type\": \"Whitespace\"}");
    expect_bad(path, "trit reads GPT-2's (\"ByteLevel\") only");
    write_tokenizer_json(path, false, "{\"type\": \"ByteLevel\", \"add_prefix_space\": true}");
    expect_bad(path, "add_prefix_space");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_vocabulary),
        cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_tokenizer_json),
        cmocka_unit_test(test_hf_trained_tokenizer_json),
        cmocka_unit_test(test_known_answer),
        cmocka_unit_test(test_tiktoken_text),
        cmocka_unit_test(test_tiktoken_tinyshakespeare),
        cmocka_unit_test(test_other_layouts),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
