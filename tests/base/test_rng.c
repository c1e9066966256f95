// Philox4x32-10 known answers, the distributions' moments, and the promise that a fill is the
// same whatever the thread count or however the range is split.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "trit/base.h"

// Known-answer vectors of the Random123 distribution (kat_vectors, "philox4x32 10" lines).
static void test_philox_known_answers(void **state) {
    (void)state;
    static const struct {
        uint32_t ctr[4], key[2], want[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
         {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
         {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t k = 0; k < sizeof kat / sizeof kat[0]; k++) {
        uint32_t out[4];
        trit_philox4x32(kat[k].ctr, kat[k].key, out);
        for (int i = 0; i < 4; i++) assert_int_equal(out[i], kat[k].want[i]);
    }
}

// rng_block packs (counter, stream) into the counter words and the seed into the key.
static void test_block_layout(void **state) {
    (void)state;
    uint64_t seed = 0x299f31d0a4093822ull;
    uint64_t stream = 0x0370734413198a2eull;
    uint64_t counter = 0x85a308d3243f6a88ull;
    uint32_t out[4];
    trit_rng_block(seed, stream, counter, out);
    assert_int_equal(out[0], 0xd16cfe09);
    assert_int_equal(out[3], 0x24126ea1);
    // Element i is word i%4 of block i/4.
    for (uint64_t i = 0; i < 12; i++) {
        trit_rng_block(7, 3, i / 4, out);
        assert_int_equal(trit_rng_u32(7, 3, i), out[i % 4]);
        assert_true(trit_rng_uniform(7, 3, i) == (float)(out[i % 4] >> 8) * 0x1p-24f);
    }
    // Different streams and seeds give different numbers.
    assert_int_not_equal(trit_rng_u32(7, 3, 0), trit_rng_u32(7, 4, 0));
    assert_int_not_equal(trit_rng_u32(7, 3, 0), trit_rng_u32(8, 3, 0));
}

static void moments(const float *x, int64_t n, double *mean, double *var) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double m = s / (double)n, q = 0;
    for (int64_t i = 0; i < n; i++) q += (x[i] - m) * (x[i] - m);
    *mean = m;
    *var = q / (double)(n - 1);
}

#define N_STAT 1000000

static void test_uniform_moments(void **state) {
    (void)state;
    float *x = malloc(N_STAT * sizeof *x);
    assert_non_null(x);
    trit_rng_fill_uniform(x, N_STAT, 1234, 0, 0, 0.0f, 1.0f);
    for (int64_t i = 0; i < N_STAT; i++) {
        assert_true(x[i] >= 0.0f);
        assert_true(x[i] < 1.0f);
    }
    double m, v;
    moments(x, N_STAT, &m, &v);
    // sd of the mean is sqrt(1/12/1e6) = 2.9e-4; 5 sigma bounds. Var of var ~ 1/180/1e6.
    assert_true(fabs(m - 0.5) < 1.5e-3);
    assert_true(fabs(v - 1.0 / 12.0) < 4e-4);
    // [lo, hi) scaling.
    trit_rng_fill_uniform(x, N_STAT, 1234, 1, 0, -3.0f, 5.0f);
    float lo = x[0], hi = x[0];
    for (int64_t i = 0; i < N_STAT; i++) {
        lo = fminf(lo, x[i]);
        hi = fmaxf(hi, x[i]);
    }
    assert_true(lo >= -3.0f && lo < -2.99f);
    assert_true(hi < 5.0f && hi > 4.99f);
    // Where float spacing is coarse (0.125 at 2^20), lo + (hi - lo) * u rounds up to hi for
    // u > 15/16; the interval must stay half-open anyway.
    trit_rng_fill_uniform(x, 10000, 1234, 2, 0, 1048576.0f, 1048577.0f);
    for (int64_t i = 0; i < 10000; i++) assert_true(x[i] >= 1048576.0f && x[i] < 1048577.0f);
    free(x);
}

static void test_normal_moments(void **state) {
    (void)state;
    float *x = malloc(N_STAT * sizeof *x);
    assert_non_null(x);
    trit_rng_fill_normal(x, N_STAT, 99, 5, 0, 0.0f, 1.0f);
    double m, v;
    moments(x, N_STAT, &m, &v);
    // sd of the mean 1e-3, sd of the variance sqrt(2/1e6) = 1.4e-3: 5 sigma bounds.
    assert_true(fabs(m) < 5e-3);
    assert_true(fabs(v - 1.0) < 7e-3);
    int64_t beyond2 = 0;
    for (int64_t i = 0; i < N_STAT; i++) {
        assert_true(isfinite(x[i]));
        beyond2 += fabsf(x[i]) > 2.0f;
    }
    // P(|z| > 2) = 0.0455; sd of the count ~ 208.
    assert_true(llabs(beyond2 - 45500) < 1100);

    trit_rng_fill_normal(x, N_STAT, 99, 6, 0, 3.0f, 0.5f);
    moments(x, N_STAT, &m, &v);
    assert_true(fabs(m - 3.0) < 2.5e-3);
    assert_true(fabs(v - 0.25) < 2e-3);
    free(x);
}

static void test_normal_f64_matches_f32(void **state) {
    (void)state;
    enum { N = 10000 };
    float *a = malloc(N * sizeof *a);
    double *b = malloc(N * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    trit_rng_fill_normal(a, N, 42, 1, 17, 0.0f, 1.0f);
    trit_rng_fill_normal_f64(b, N, 42, 1, 17, 0.0, 1.0);
    // The f32 path sees 24 bits of the first uniform and the f64 path 53, so they part only where
    // that uniform is tiny (the far tail), and even there by little.
    double s = 0, q = 0;
    int close = 0;
    for (int i = 0; i < N; i++) {
        double diff = fabs((double)a[i] - b[i]);
        assert_true(diff < 0.05);
        close += diff < 2e-5 * (1.0 + fabs(b[i]));
        s += b[i];
        q += b[i] * b[i];
    }
    assert_true(close >= N - 10);
    assert_true(fabs(s / N) < 0.05);
    assert_true(fabs(q / N - 1.0) < 0.07);
    free(a);
    free(b);
}

// Bit-identical output with 1 and 2 threads, for a size that spans many parallel chunks.
static void test_thread_count_invariant(void **state) {
    (void)state;
    enum { N = 100003 };
    float *a = malloc(N * sizeof *a), *b = malloc(N * sizeof *b);
    double *c = malloc(N * sizeof *c), *d = malloc(N * sizeof *d);
    assert_true(a && b && c && d);
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    trit_rng_fill_uniform(a, N, 5, 2, 3, -1.0f, 1.0f);
    omp_set_num_threads(2);
    trit_rng_fill_uniform(b, N, 5, 2, 3, -1.0f, 1.0f);
    assert_memory_equal(a, b, N * sizeof *a);
    omp_set_num_threads(1);
    trit_rng_fill_normal(a, N, 5, 2, 3, 0.0f, 2.0f);
    trit_rng_fill_normal_f64(c, N, 5, 2, 3, 0.0, 2.0);
    omp_set_num_threads(2);
    trit_rng_fill_normal(b, N, 5, 2, 3, 0.0f, 2.0f);
    trit_rng_fill_normal_f64(d, N, 5, 2, 3, 0.0, 2.0);
    assert_memory_equal(a, b, N * sizeof *a);
    assert_memory_equal(c, d, N * sizeof *c);
    omp_set_num_threads(saved);
    free(a);
    free(b);
    free(c);
    free(d);
}

// fill(n, offset 0)[k..] == fill(n - k, offset k), for odd k too (normals come in pairs).
static void test_offsets_compose(void **state) {
    (void)state;
    enum { N = 9001 };
    float *full = malloc(N * sizeof *full), *part = malloc(N * sizeof *part);
    double *fd = malloc(N * sizeof *fd), *pd = malloc(N * sizeof *pd);
    assert_true(full && part && fd && pd);
    static const int64_t ks[] = {1, 2, 3, 4, 5, 4095, 4097, 8191};
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        int64_t k = ks[t];
        trit_rng_fill_uniform(full, N, 11, 0, 0, 0.0f, 1.0f);
        trit_rng_fill_uniform(part, N - k, 11, 0, (uint64_t)k, 0.0f, 1.0f);
        assert_memory_equal(full + k, part, (size_t)(N - k) * sizeof *full);
        assert_true(full[k] == trit_rng_uniform(11, 0, (uint64_t)k));
        trit_rng_fill_normal(full, N, 11, 0, 0, 0.0f, 1.0f);
        trit_rng_fill_normal(part, N - k, 11, 0, (uint64_t)k, 0.0f, 1.0f);
        assert_memory_equal(full + k, part, (size_t)(N - k) * sizeof *full);
        trit_rng_fill_normal_f64(fd, N, 11, 0, 0, 0.0, 1.0);
        trit_rng_fill_normal_f64(pd, N - k, 11, 0, (uint64_t)k, 0.0, 1.0);
        assert_memory_equal(fd + k, pd, (size_t)(N - k) * sizeof *fd);
    }
    // n <= 0 and NULL are no-ops, not crashes.
    part[0] = 7.0f;
    trit_rng_fill_uniform(part, 0, 1, 1, 1, 0.0f, 1.0f);
    trit_rng_fill_normal(part, -5, 1, 1, 1, 0.0f, 1.0f);
    trit_rng_fill_normal(NULL, 5, 1, 1, 1, 0.0f, 1.0f);
    assert_true(part[0] == 7.0f);
    free(full);
    free(part);
    free(fd);
    free(pd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_block_layout),
        cmocka_unit_test(test_uniform_moments),
        cmocka_unit_test(test_normal_moments),
        cmocka_unit_test(test_normal_f64_matches_f32),
        cmocka_unit_test(test_thread_count_invariant),
        cmocka_unit_test(test_offsets_compose),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
