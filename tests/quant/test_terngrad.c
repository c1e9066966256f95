// TernGrad: ternarized gradients are unbiased (the mean of 1e5 draws within 3 sigma of g), the
// scale is max |g| or the 2.5-sigma clip, the wire form decodes to scale * {-1, 0, 1}; an
// all-zero gradient, NaN/Inf (reported by index), a huge dynamic range and tiny tensors (n not
// a multiple of 4) are handled; codes do not depend on the thread count. Bucketed scales: each
// bucket's scale is its own max |g| (under the clip bound), the result stays unbiased, and a
// bucket that is not a whole number of bytes is refused. Scale sharing: encode splits into its scales
// and the codes under a given (larger, shared) scale, which stay unbiased.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trit/quant.h"

static void test_unbiased(void **state) {
    (void)state;
    enum { N = 8, DRAWS = 100000 };
    const float g[N] = {0.5f, -0.25f, 0.01f, -1.0f, 0.0f, 0.9f, -0.003f, 0.125f};
    double sum[N] = {0};
    uint8_t codes[2];
    for (int d = 0; d < DRAWS; d++) {
        float s, out[N] = {0};
        assert_int_equal(trit_terngrad_encode(g, N, 0, 0.0, 7, (uint64_t)d, codes, &s), TRIT_OK);
        assert_true(s == 1.0f);
        assert_int_equal(trit_terngrad_accumulate(codes, &s, N, 0, out), TRIT_OK);
        for (int i = 0; i < N; i++) {
            assert_true(out[i] == 0.0f || fabsf(out[i]) == s);
            assert_true(out[i] == 0.0f || (out[i] > 0) == (g[i] > 0));
            sum[i] += out[i];
        }
    }
    for (int i = 0; i < N; i++) {
        const double p = fabs(g[i]), sigma = sqrt((p - p * p) / DRAWS);
        assert_true(fabs(sum[i] / DRAWS - g[i]) <= 3 * sigma + 1e-12);
    }
}

static void test_clip_and_edges(void **state) {
    (void)state;
    enum { N = 1001 };
    float g[N], out[N];
    uint8_t codes[N / 4 + 1];
    float s;
    for (int i = 0; i < N; i++) g[i] = (float)((i % 21) - 10) * 0.01f;
    g[500] = 100.0f;  // an outlier: the clip at 2.5 sigma bounds the scale
    double mean = 0, sq = 0;
    for (int i = 0; i < N; i++) mean += g[i], sq += (double)g[i] * g[i];
    mean /= N;
    const double sigma = sqrt(sq / N - mean * mean);
    assert_int_equal(trit_terngrad_encode(g, N, 0, 2.5, 1, 1, codes, &s), TRIT_OK);
    assert_true(fabsf(s - (float)(2.5 * sigma)) <= 1e-6f * s);
    memset(out, 0, sizeof out);
    trit_terngrad_accumulate(codes, &s, N, 0, out);
    assert_true(out[500] == s);  // the outlier clipped to the bound, kept with probability 1
    assert_int_equal(trit_terngrad_encode(g, N, 0, 0.0, 1, 1, codes, &s), TRIT_OK);
    assert_true(s == 100.0f);
    // All zero: scale 0, every code 0.
    memset(g, 0, sizeof g);
    assert_int_equal(trit_terngrad_encode(g, N, 0, 2.5, 1, 1, codes, &s), TRIT_OK);
    assert_true(s == 0.0f);
    memset(out, 0, sizeof out);
    trit_terngrad_accumulate(codes, &s, N, 0, out);
    for (int i = 0; i < N; i++) assert_true(out[i] == 0.0f);
    // NaN and Inf are reported with their index, nothing is written to the scale.
    g[77] = NAN;
    s = -1;
    assert_int_equal(trit_terngrad_encode(g, N, 0, 0.0, 1, 1, codes, &s), TRIT_ERR_NUMERIC);
    assert_non_null(strstr(trit_last_error(), "value 77"));
    assert_true(s == -1);
    g[77] = -INFINITY;
    assert_int_equal(trit_terngrad_encode(g, N, 0, 2.5, 1, 1, codes, &s), TRIT_ERR_NUMERIC);
    // Huge dynamic range: no overflow in the statistics, codes stay ternary.
    g[77] = 1e30f, g[78] = -1e-30f, g[79] = 3e38f;
    assert_int_equal(trit_terngrad_encode(g, N, 0, 2.5, 1, 1, codes, &s), TRIT_OK);
    assert_true(isfinite(s) && s > 0);
    assert_int_equal(trit_terngrad_encode(g, N, 0, 0.0, 1, 1, codes, &s), TRIT_OK);
    assert_true(s == 3e38f);
    // Tiny tensors: n = 1 and 3 use one byte.
    assert_int_equal(trit_terngrad_bytes(1), 1);
    assert_int_equal(trit_terngrad_bytes(3), 1);
    assert_int_equal(trit_terngrad_bytes(5), 2);
    const float one[3] = {-2.0f, 0.0f, 2.0f};
    assert_int_equal(trit_terngrad_encode(one, 3, 0, 0.0, 1, 1, codes, &s), TRIT_OK);
    memset(out, 0, sizeof out);
    trit_terngrad_accumulate(codes, &s, 3, 0, out);
    assert_true(out[0] == -2.0f && out[1] == 0.0f && out[2] == 2.0f);
    assert_int_equal(trit_terngrad_encode(one, 0, 0, 0.0, 1, 1, codes, &s), TRIT_ERR_INVALID);
}

static void test_thread_count_independent(void **state) {
    (void)state;
    enum { N = 3 * 16384 + 5 };
    float *g = malloc(sizeof(float) * N), s1, s2;
    uint8_t *c1 = malloc(N / 4 + 1), *c2 = malloc(N / 4 + 1);
    trit_rng_fill_normal(g, N, 3, 3, 0, 0.0f, 1.0f);
    trit_threads_set(1);
    trit_terngrad_encode(g, N, 0, 2.5, 9, 4, c1, &s1);
    trit_threads_set(2);
    trit_terngrad_encode(g, N, 0, 2.5, 9, 4, c2, &s2);
    trit_threads_set(0);
    assert_true(s1 == s2);
    assert_memory_equal(c1, c2, trit_terngrad_bytes(N));
    float b1[N / 512 + 1], b2[N / 512 + 1];
    trit_threads_set(1);
    trit_terngrad_encode(g, N, 512, 2.5, 9, 4, c1, b1);
    trit_threads_set(2);
    trit_terngrad_encode(g, N, 512, 2.5, 9, 4, c2, b2);
    trit_threads_set(0);
    assert_memory_equal(b1, b2, sizeof b1);
    assert_memory_equal(c1, c2, trit_terngrad_bytes(N));
    free(g), free(c1), free(c2);
}

static void test_buckets(void **state) {
    (void)state;
    enum { N = 1030, BUCKET = 256, NB = (N + BUCKET - 1) / BUCKET, DRAWS = 20000 };
    float g[N], scales[NB], out[N];
    uint8_t codes[N / 4 + 1];
    for (int i = 0; i < N; i++) g[i] = (float)((i * 37) % 101 - 50) * (i < BUCKET ? 1.0f : 1e-3f);
    assert_int_equal(trit_terngrad_nscales(N, BUCKET), NB);
    assert_int_equal(trit_terngrad_nscales(N, 0), 1);
    assert_int_equal(trit_terngrad_encode(g, N, BUCKET, 0.0, 5, 5, codes, scales), TRIT_OK);
    for (int b = 0; b < NB; b++) {
        float m = 0;
        for (int i = b * BUCKET; i < N && i < (b + 1) * BUCKET; i++) m = fabsf(g[i]) > m ? fabsf(g[i]) : m;
        assert_true(scales[b] == m);
    }
    // The clip bound caps every bucket's scale.
    assert_int_equal(trit_terngrad_encode(g, N, BUCKET, 0.5, 5, 5, codes, scales), TRIT_OK);
    const float small_max = scales[0];
    assert_int_equal(trit_terngrad_encode(g + BUCKET, BUCKET, 0, 0.0, 5, 5, codes, scales), TRIT_OK);
    const float bucket1_max = scales[0];
    assert_int_equal(trit_terngrad_encode(g, N, BUCKET, 0.5, 5, 5, codes, scales), TRIT_OK);
    assert_true(small_max < 50.0f && scales[1] == bucket1_max);
    // Unbiased in the small-valued buckets, where one scale for the tensor would make the
    // draws 1000 times coarser: 774 means, each within 5 sigma (3 sigma would fail one of them
    // by chance about every other seed).
    static double sum[N];
    memset(sum, 0, sizeof sum);
    for (int d = 0; d < DRAWS; d++) {
        memset(out, 0, sizeof out);
        assert_int_equal(trit_terngrad_encode(g, N, BUCKET, 0.0, 11, (uint64_t)d, codes, scales), TRIT_OK);
        assert_int_equal(trit_terngrad_accumulate(codes, scales, N, BUCKET, out), TRIT_OK);
        for (int i = 0; i < N; i++) {
            const int b = i / BUCKET;
            assert_true(out[i] == 0.0f || fabsf(out[i]) == scales[b]);
            sum[i] += out[i];
        }
    }
    for (int i = BUCKET; i < N; i++) {
        const double s = scales[i / BUCKET], p = fabs(g[i]) / s, sigma = s * sqrt((p - p * p) / DRAWS);
        if (fabs(sum[i] / DRAWS - g[i]) > 5 * sigma + 1e-9) fail_msg("value %d: mean %g, want %g", i, sum[i] / DRAWS, (double)g[i]);
    }
    assert_int_equal(trit_terngrad_encode(g, N, 6, 0.0, 1, 1, codes, scales), TRIT_ERR_INVALID);
    assert_int_equal(trit_terngrad_accumulate(codes, scales, N, -4, out), TRIT_ERR_INVALID);
}

// Scale sharing: encode is its two halves (the same codes and scales), and codes under a larger
// shared scale (another worker's max) stay unbiased for the clipped g, with values +-shared or 0.
static void test_shared_scale(void **state) {
    (void)state;
    enum { N = 10, DRAWS = 100000 };
    const float g[N] = {0.5f, -0.25f, 0.01f, -1.0f, 0.0f, 0.9f, -0.003f, 0.125f, 3.0f, -0.7f};
    uint8_t a[3], b[3];
    float s1, s2, bound;
    assert_int_equal(trit_terngrad_encode(g, N, 0, 1.0, 5, 9, a, &s1), TRIT_OK);
    assert_int_equal(trit_terngrad_scales(g, N, 0, 1.0, &s2, &bound), TRIT_OK);
    assert_true(s1 == s2 && bound == s1 && s1 < 3.0f);  // the clip at 1 sigma is below max |g| = 3
    assert_int_equal(trit_terngrad_encode_scaled(g, N, 0, &s2, bound, 5, 9, b), TRIT_OK);
    assert_memory_equal(a, b, sizeof a);
    const float shared = 4.0f;
    double sum[N] = {0};
    for (int d = 0; d < DRAWS; d++) {
        float out[N] = {0};
        assert_int_equal(trit_terngrad_encode_scaled(g, N, 0, &shared, bound, 5, (uint64_t)d, b), TRIT_OK);
        assert_int_equal(trit_terngrad_accumulate(b, &shared, N, 0, out), TRIT_OK);
        for (int i = 0; i < N; i++) {
            assert_true(out[i] == 0.0f || fabsf(out[i]) == shared);
            sum[i] += out[i];
        }
    }
    for (int i = 0; i < N; i++) {
        const double v = g[i] > bound ? bound : g[i] < -bound ? -bound : g[i];
        const double p = fabs(v) / shared, sigma = shared * sqrt((p - p * p) / DRAWS);
        if (fabs(sum[i] / DRAWS - v) > 4 * sigma + 1e-9) fail_msg("value %d: mean %g, want %g", i, sum[i] / DRAWS, v);
    }
    const float bad = NAN;
    assert_int_equal(trit_terngrad_encode_scaled(g, N, 0, &bad, bound, 5, 9, b), TRIT_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unbiased),
        cmocka_unit_test(test_clip_and_edges),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_buckets),
        cmocka_unit_test(test_shared_scale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
