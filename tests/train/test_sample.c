// The sampler: greedy is argmax (lowest id on ties), temperature sharpens, top-k and top-p
// keep exactly the tokens they should, draws follow softmax(logits / T) (a chi-square check on
// 20000 draws), and a seed fixes the sequence. Generation through the KV cache, sampled and
// greedy (the one decode loop), is checked against picking from the logits of full recomputation.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"

enum { V = 6 };
static const float LOGITS[V] = {1.0f, 3.0f, 0.5f, 2.5f, -1.0f, 3.0f};

static trit_sampler *sampler(double temp, int64_t k, double p, uint64_t seed) {
    trit_sample_config c = {temp, k, p, seed, 0, TRIT_F32};
    trit_sampler *s = trit_sampler_new(V, &c);
    assert_non_null(s);
    return s;
}

static void counts(trit_sampler *s, int n, int64_t *hist) {
    memset(hist, 0, V * sizeof *hist);
    for (int i = 0; i < n; i++) {
        int32_t t = trit_sampler_pick(s, LOGITS, (uint64_t)i);
        assert_true(t >= 0 && t < V);
        hist[t]++;
    }
}

static void test_greedy(void **state) {
    (void)state;
    trit_sampler *s = sampler(0, 0, 1, 1);
    assert_int_equal(trit_sampler_pick(s, LOGITS, 0), 1);  // tie between 1 and 5: lowest id
    trit_sampler_free(s);
    s = sampler(1.0, 1, 1, 1);
    assert_int_equal(trit_sampler_pick(s, LOGITS, 5), 1);
    trit_sampler_free(s);
}

static void test_distribution_matches_softmax(void **state) {
    (void)state;
    const int n = 20000;
    for (int ti = 0; ti < 2; ti++) {
        double temp = ti ? 2.0 : 0.7;
        trit_sampler *s = sampler(temp, 0, 1, 123);
        int64_t hist[V];
        counts(s, n, hist);
        double z = 0, p[V];
        for (int i = 0; i < V; i++) z += p[i] = exp(LOGITS[i] / temp);
        double chi2 = 0;
        for (int i = 0; i < V; i++) {
            double e = n * p[i] / z;
            chi2 += (hist[i] - e) * (hist[i] - e) / e;
        }
        // 5 degrees of freedom: P(chi2 > 25) < 2e-4.
        if (chi2 > 25) fail_msg("temperature %g: chi-square %.1f", temp, chi2);
        trit_sampler_free(s);
    }
}

static void test_top_k_and_top_p(void **state) {
    (void)state;
    int64_t hist[V];
    trit_sampler *s = sampler(1.0, 3, 1, 9);  // keeps 1, 5 (3.0) and 3 (2.5)
    counts(s, 3000, hist);
    assert_true(hist[1] > 0 && hist[5] > 0 && hist[3] > 0);
    assert_int_equal(hist[0] + hist[2] + hist[4], 0);
    trit_sampler_free(s);
    // Probabilities at T = 1: 1 and 5 hold 0.34 each, 3 holds 0.21, the rest 0.11.
    s = sampler(1.0, 0, 0.5, 9);  // 0.34 < 0.5 <= 0.68: tokens 1 and 5
    counts(s, 3000, hist);
    assert_true(hist[1] > 1200 && hist[5] > 1200);
    assert_int_equal(hist[0] + hist[2] + hist[3] + hist[4], 0);
    trit_sampler_free(s);
    s = sampler(1.0, 0, 0.1, 9);  // the single most likely token
    counts(s, 500, hist);
    assert_int_equal(hist[1], 500);
    trit_sampler_free(s);
}

static void test_seed_fixes_draws(void **state) {
    (void)state;
    trit_sampler *a = sampler(1.0, 0, 1, 5), *b = sampler(1.0, 0, 1, 5), *c = sampler(1.0, 0, 1, 6);
    int differ = 0;
    for (int i = 0; i < 200; i++) {
        int32_t x = trit_sampler_pick(a, LOGITS, (uint64_t)i);
        assert_int_equal(x, trit_sampler_pick(b, LOGITS, (uint64_t)i));
        differ += x != trit_sampler_pick(c, LOGITS, (uint64_t)i);
    }
    assert_true(differ > 20);
    trit_sampler_free(a);
    trit_sampler_free(b);
    trit_sampler_free(c);
    trit_sample_config bad = {-1, 0, 1, 1, 0, TRIT_F32};
    assert_null(trit_sampler_new(V, &bad));
    bad = (trit_sample_config){1, 0, 0, 1, 0, TRIT_F32};
    assert_null(trit_sampler_new(V, &bad));
    bad = (trit_sample_config){1, 0, 1, 1, 0, TRIT_BF16};  // the KV cache is f32 or f16
    assert_null(trit_sampler_new(V, &bad));
}

// Generation with the cache equals picking each token from a fresh decode of the whole prefix,
// also past the context length (where the cache restarts from the last T/2 tokens).
static void test_generate_matches_recompute(void **state) {
    (void)state;
    trit_gpt_config g = trit_gpt_config_default();
    g.vocab_size = 11;
    g.seq_len = 8;
    g.n_layer = 1;
    g.n_head = 2;
    g.n_embd = 16;
    trit_gpt *m = trit_gpt_new(&g, 3);
    assert_non_null(m);
    trit_sample_config sc = {1.0, 0, 1, 4, 20, TRIT_F32};
    int32_t prompt[3] = {1, 2, 3}, out[20];
    int64_t n = 0;
    assert_int_equal(trit_generate(m, prompt, 3, &sc, out, &n, NULL, NULL), TRIT_OK);
    assert_int_equal(n, 20);

    // Replay: the cache holds hist[start, m) before token m is fed; when it is full it restarts
    // from the T/2 - 1 tokens before m. Each pick must equal the pick from recomputed logits.
    int32_t hist[23];
    memcpy(hist, prompt, sizeof prompt);
    memcpy(hist + 3, out, sizeof out);
    trit_sampler *s = trit_sampler_new(11, &sc);
    trit_gpt_cache *cache = trit_gpt_cache_new(m);
    float logits[11];
    int64_t start = 0, keep = g.seq_len / 2 - 1;
    for (int64_t mi = 0; mi < 22; mi++) {
        if (mi - start >= g.seq_len) start = mi - keep;
        if (mi < 2) continue;  // picks follow the prompt's last token
        trit_gpt_cache_reset(cache);
        for (int64_t j = start; j <= mi; j++) assert_int_equal(trit_gpt_decode(m, cache, hist[j], logits), TRIT_OK);
        int64_t i = mi - 2;  // index of the generated token these logits choose
        assert_int_equal(trit_sampler_pick(s, logits, (uint64_t)i), out[i]);
    }
    trit_gpt_cache_free(cache);
    trit_sampler_free(s);

    // A bad setting is reported as itself, not as an allocation failure.
    sc.top_k = -1;
    assert_int_equal(trit_generate(m, prompt, 3, &sc, out, &n, NULL, NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "top-k >= 0 (got -1)"));
    trit_gpt_free(m);
}

static int32_t argmax_of(const float *logits, int64_t n) {
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return (int32_t)best;
}

typedef struct seen {
    int32_t tok[32];
    int64_t n;
} seen;

static void see(void *ctx, int64_t i, int32_t token) {
    seen *s = ctx;
    assert_int_equal(i, s->n);
    s->tok[s->n++] = token;
}

// The one greedy decode loop: each token is the argmax of a fresh decode of the window the
// cache holds before it, with a prompt longer than the context (fed as the window restarts
// leave) and generation past the context; sampling at temperature 0 goes the same way, and the
// loop reports each token once, in order.
static void test_greedy_decode_matches_recompute(void **state) {
    (void)state;
    trit_gpt_config g = trit_gpt_config_default();
    g.vocab_size = 11, g.seq_len = 8, g.n_layer = 1, g.n_head = 2, g.n_embd = 16;
    trit_gpt *m = trit_gpt_new(&g, 5);
    assert_non_null(m);
    trit_gpt_cache *cache = trit_gpt_cache_new(m), *fresh = trit_gpt_cache_new(m);
    assert_non_null(cache);
    assert_non_null(fresh);
    float logits[11], check[11];
    enum { P = 10, N = 20 };
    int32_t hist[P + N], out[N];
    for (int i = 0; i < P; i++) hist[i] = (int32_t)((i * 7 + 3) % 11);
    seen s = {.n = 0};
    const trit_decode_fns fns = {NULL, see, &s};
    assert_int_equal(trit_decode_tokens(m, cache, hist, P, N, &fns, out, logits), TRIT_OK);
    assert_int_equal(s.n, N);
    assert_memory_equal(s.tok, out, sizeof out);
    memcpy(hist + P, out, sizeof out);
    int64_t start = 0, keep = g.seq_len / 2 - 1;
    for (int64_t j = 0; j < P + N - 1; j++) {
        if (j - start >= g.seq_len) start = j - keep;
        if (j < P - 1) continue;  // the first pick follows the prompt's last token
        trit_gpt_cache_reset(fresh);
        for (int64_t k = start; k <= j; k++) assert_int_equal(trit_gpt_decode(m, fresh, hist[k], check), TRIT_OK);
        assert_int_equal(argmax_of(check, 11), out[j - P + 1]);
    }
    assert_true(start > 0);  // the context did fill up

    int32_t again[N];
    assert_int_equal(trit_greedy_decode(m, cache, hist, P, N, again, logits), TRIT_OK);
    assert_memory_equal(again, out, sizeof out);
    trit_sample_config sc = {0, 0, 1, 1, N, TRIT_F32};
    int64_t n = 0;
    assert_int_equal(trit_generate(m, hist, P, &sc, again, &n, NULL, NULL), TRIT_OK);
    assert_int_equal(n, N);
    assert_memory_equal(again, out, sizeof out);

    // No tokens: the prompt is fed and the logits are those after its last token.
    assert_int_equal(trit_greedy_decode(m, cache, hist, 3, 0, NULL, logits), TRIT_OK);
    trit_gpt_cache_reset(fresh);
    for (int k = 0; k < 3; k++) assert_int_equal(trit_gpt_decode(m, fresh, hist[k], check), TRIT_OK);
    for (int v = 0; v < 11; v++) assert_float_equal(logits[v], check[v], 1e-5);
    // Bad input is reported.
    assert_int_equal(trit_greedy_decode(m, cache, hist, 0, 1, out, logits), TRIT_ERR_INVALID);
    hist[0] = 11;
    assert_int_equal(trit_greedy_decode(m, cache, hist, 2, 1, out, logits), TRIT_ERR_RANGE);
    trit_gpt_cache_free(fresh);
    trit_gpt_cache_free(cache);
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_distribution_matches_softmax),
        cmocka_unit_test(test_top_k_and_top_p),
        cmocka_unit_test(test_seed_fixes_draws),
        cmocka_unit_test(test_generate_matches_recompute),
        cmocka_unit_test(test_greedy_decode_matches_recompute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
