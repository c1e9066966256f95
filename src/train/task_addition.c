// The built-in task: D-digit addition written as text, the answer least significant digit
// first ("123+456=9750" for 123 + 456 = 579, D = 3), so each answer digit depends only on the
// operand digits at its place and the carry the model has just written. Problems are Philox
// draws keyed by (seed, problem index), so batches are a pure function of the step. A fixed
// hash holds out about one operand pair in ten: training never sees them, the test only them.
#include "trit/train.h"
#include "train/train_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char ALPHABET[] = "+0123456789=";
enum { HOLDOUT_SEED = 0x5eed, TEST_SEED = 0x7e57, MAX_ATTEMPTS = 64 };

int64_t trit_addition_text_len(int64_t digits) { return 3 * digits + 3; }

static uint64_t pow10u(int64_t d) {
    uint64_t p = 1;
    while (d-- > 0) p *= 10;
    return p;
}

trit_status trit_addition_format(int64_t digits, uint64_t a, uint64_t b, char *buf, size_t n) {
    if (digits < 1 || digits > TRIT_ADDITION_MAX_DIGITS)
        return trit_error(TRIT_ERR_RANGE, "addition: digits must be in 1..%d", TRIT_ADDITION_MAX_DIGITS);
    uint64_t lim = pow10u(digits);
    if (a >= lim || b >= lim)
        return trit_error(TRIT_ERR_RANGE, "addition: operands must have at most %lld digits", (long long)digits);
    int64_t len = trit_addition_text_len(digits);
    if (n < (size_t)len + 1) return trit_error(TRIT_ERR_RANGE, "addition: buffer of %zu bytes is too small", n);
    int d = (int)digits;
    snprintf(buf, n, "%0*" PRIu64 "+%0*" PRIu64 "=", d, a, d, b);
    uint64_t c = a + b;
    for (int i = 0; i <= d; i++, c /= 10) buf[2 * d + 2 + i] = (char)('0' + c % 10);
    buf[len] = 0;
    return TRIT_OK;
}

bool trit_addition_held_out(int64_t digits, uint64_t a, uint64_t b) {
    uint64_t key = a * pow10u(digits) + b;
    return trit_rng_u32(HOLDOUT_SEED, TRIT_STREAM_HOLDOUT, key) % 10 == 0;
}

trit_tokenizer *trit_addition_tokenizer(void) {
    return trit_tokenizer_train_char(ALPHABET, sizeof ALPHABET - 1);
}

trit_status trit_addition_init(trit_addition *t, int64_t digits, const trit_tokenizer *tok) {
    if (digits < 1 || digits > TRIT_ADDITION_MAX_DIGITS)
        return trit_error(TRIT_ERR_RANGE, "addition: digits must be in 1..%d, got %lld",
                          TRIT_ADDITION_MAX_DIGITS, (long long)digits);
    memset(t, 0, sizeof *t);
    t->digits = digits;
    for (int i = 0; i < 256; i++) t->id_of[i] = -1;
    int32_t *ids = NULL;
    size_t n = 0;
    trit_status s = trit_tokenizer_encode(tok, ALPHABET, sizeof ALPHABET - 1, &ids, &n);
    if (s != TRIT_OK) return s;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= 16) {
            free(ids);
            return trit_error(TRIT_ERR_FORMAT, "addition: the tokenizer does not map \"%s\" to 12 small ids",
                              ALPHABET);
        }
        t->id_of[(uint8_t)ALPHABET[i]] = ids[i];
        t->byte_of[ids[i]] = (uint8_t)ALPHABET[i];
    }
    free(ids);
    return TRIT_OK;
}

// Problem `index` of a stream: operands drawn until one is (or, for held_out, is not) in the
// training set. After MAX_ATTEMPTS misses (chance 0.9^64 or 0.1^64) the last draw is nudged.
static void draw_problem(int64_t digits, uint64_t seed, uint64_t stream, int64_t index, bool held_out,
                         uint64_t *a, uint64_t *b) {
    uint64_t lim = pow10u(digits);
    for (uint64_t k = 0;; k++) {
        uint64_t base = ((uint64_t)index * MAX_ATTEMPTS + k) * 4;
        uint64_t ra = (uint64_t)trit_rng_u32(seed, stream, base) << 32 | trit_rng_u32(seed, stream, base + 1);
        uint64_t rb = (uint64_t)trit_rng_u32(seed, stream, base + 2) << 32 | trit_rng_u32(seed, stream, base + 3);
        *a = ra % lim;
        *b = rb % lim;
        if (trit_addition_held_out(digits, *a, *b) == held_out) return;
        if (k + 1 == MAX_ATTEMPTS) break;
    }
    while (trit_addition_held_out(digits, *a, *b) != held_out) *b = (*b + 1) % lim;
}

void trit_addition_test_problem(const trit_addition *t, int64_t i, uint64_t *a, uint64_t *b) {
    draw_problem(t->digits, TEST_SEED, TRIT_STREAM_TASK_TEST, i, true, a, b);
}

void trit_addition_batch(const trit_addition *t, uint64_t seed, int64_t batch, int64_t B, bool held_out,
                         int32_t *x, int32_t *y) {
    const int64_t L = trit_addition_text_len(t->digits), T = L - 1;
    const int64_t answer_from = 2 * t->digits + 2;  // first answer byte in the text
    char text[3 * TRIT_ADDITION_MAX_DIGITS + 4];
    for (int64_t r = 0; r < B; r++) {
        uint64_t a, b;
        if (held_out) trit_addition_test_problem(t, batch * B + r, &a, &b);
        else draw_problem(t->digits, seed, TRIT_STREAM_TASK, batch * B + r, false, &a, &b);
        trit_addition_format(t->digits, a, b, text, sizeof text);
        for (int64_t i = 0; i < T; i++) {
            x[r * T + i] = t->id_of[(uint8_t)text[i]];
            y[r * T + i] = i + 1 >= answer_from ? t->id_of[(uint8_t)text[i + 1]] : -1;
        }
    }
}

trit_status trit_addition_score(const trit_addition *t, const trit_gpt *m, int64_t n, int64_t *correct,
                                int64_t print, FILE *fp) {
    const int64_t D = t->digits, L = trit_addition_text_len(D), prompt = 2 * D + 2;
    const int64_t V = trit_gpt_get_config(m)->vocab_size;
    trit_gpt_cache *cache = trit_gpt_cache_new(m);
    float *logits = malloc((size_t)V * sizeof *logits);
    trit_status s = cache && logits ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "addition: out of memory");
    char text[3 * TRIT_ADDITION_MAX_DIGITS + 4], got[3 * TRIT_ADDITION_MAX_DIGITS + 4];
    int32_t ids[3 * TRIT_ADDITION_MAX_DIGITS + 4], answer_ids[TRIT_ADDITION_MAX_DIGITS + 1];
    *correct = 0;
    for (int64_t i = 0; s == TRIT_OK && i < n; i++) {
        uint64_t a, b;
        trit_addition_test_problem(t, i, &a, &b);
        trit_addition_format(D, a, b, text, sizeof text);
        memcpy(got, text, (size_t)prompt);
        for (int64_t j = 0; j < prompt; j++) ids[j] = t->id_of[(uint8_t)text[j]];
        s = trit_greedy_decode(m, cache, ids, prompt, L - prompt, answer_ids, logits);
        if (s != TRIT_OK) break;
        for (int64_t j = prompt; j < L; j++) {
            const int32_t tok = answer_ids[j - prompt];
            got[j] = tok < 16 && t->byte_of[tok] ? (char)t->byte_of[tok] : '?';
        }
        got[L] = 0;
        bool ok = memcmp(got, text, (size_t)L) == 0;
        *correct += ok;
        if (i < print && fp) {
            // Shown the way people write sums: the answer digits back in their usual order.
            char answer[TRIT_ADDITION_MAX_DIGITS + 2];
            for (int64_t j = 0; j <= D; j++) answer[j] = got[L - 1 - j];
            answer[D + 1] = 0;
            fprintf(fp, "  %.*s%s %s\n", (int)prompt, text, answer, ok ? "(right)" : "(wrong)");
        }
    }
    free(logits);
    trit_gpt_cache_free(cache);
    return s;
}

trit_status trit_addition_accuracy(const trit_gpt *m, const trit_tokenizer *tok, int64_t digits,
                                   int64_t n, int64_t show, void *file, double *accuracy) {
    if (!m || !tok || n < 1 || !accuracy)
        return trit_error(TRIT_ERR_INVALID, "trit_addition_accuracy: needs a model, a tokenizer and n >= 1");
    if (trit_gpt_get_config(m)->seq_len < trit_addition_text_len(digits) - 1)
        return trit_error(TRIT_ERR_INVALID, "the model's context of %lld tokens is too short for %lld-digit "
                          "problems", (long long)trit_gpt_get_config(m)->seq_len, (long long)digits);
    trit_addition t;
    trit_status s = trit_addition_init(&t, digits, tok);
    int64_t correct = 0;
    if (s == TRIT_OK) s = trit_addition_score(&t, m, n, &correct, show, file);
    if (s == TRIT_OK) *accuracy = (double)correct / (double)n;
    return s;
}
