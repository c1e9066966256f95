// fp32 GEMM at every CPU level the machine has, against the portable oracle
// trit_kernel_gemm_ref_f32: odd sizes, all four transpose cases, padded leading dimensions,
// accumulate on and off, and bit-identical results with 1 and 2 threads.
//
// Tolerance: |C - C_ref| <= 1e-5 * (sum_k |a_ik||b_kj| + |C0_ij| when accumulating), i.e.
// relative to the magnitude the sum is built from, so cancellation cannot make it fail
// spuriously; both sides differ only in summation order.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_census.h"
#include "kernels/gemm.h"
#include "trit/base.h"

#define TOL 1e-5

typedef struct problem {
    bool ta, tb, acc;
    int64_t M, N, K, lda, ldb, ldc;
    float *A, *B, *C0;  // A: (M, K) or (K, M); B: (K, N) or (N, K); C0: (M, ldc)
    float *absA, *absB, *bound;
} problem;

static int64_t rows_a(const problem *p) { return p->ta ? p->K : p->M; }
static int64_t rows_b(const problem *p) { return p->tb ? p->N : p->K; }

// Random operands with leading dimensions a few elements past the row length; the padding
// of C holds a sentinel that must survive, and C starts as NaN unless accumulating.
static void problem_make(problem *p, bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool acc,
                         uint64_t seed) {
    *p = (problem){.ta = ta, .tb = tb, .acc = acc, .M = M, .N = N, .K = K};
    p->lda = (ta ? M : K) + 3;
    p->ldb = (tb ? K : N) + 5;
    p->ldc = N + 2;
    int64_t na = rows_a(p) * p->lda, nb = rows_b(p) * p->ldb, nc = M * p->ldc;
    p->A = malloc(sizeof(float) * (size_t)(na + 1));
    p->B = malloc(sizeof(float) * (size_t)(nb + 1));
    p->C0 = malloc(sizeof(float) * (size_t)nc);
    p->absA = malloc(sizeof(float) * (size_t)(na + 1));
    p->absB = malloc(sizeof(float) * (size_t)(nb + 1));
    p->bound = malloc(sizeof(float) * (size_t)nc);
    assert_non_null(p->A);
    assert_non_null(p->B);
    assert_non_null(p->C0);
    assert_non_null(p->absA);
    assert_non_null(p->absB);
    assert_non_null(p->bound);
    trit_rng_fill_uniform(p->A, na, seed, 1, 0, -1.0f, 1.0f);
    trit_rng_fill_uniform(p->B, nb, seed, 2, 0, -1.0f, 1.0f);
    trit_rng_fill_uniform(p->C0, nc, seed, 3, 0, -1.0f, 1.0f);
    if (!acc)  // without accumulate the old C must never be read
        for (int64_t i = 0; i < nc; i++) p->C0[i] = NAN;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = N; j < p->ldc; j++) p->C0[i * p->ldc + j] = 1234.5f;
    for (int64_t i = 0; i < na; i++) p->absA[i] = fabsf(p->A[i]);
    for (int64_t i = 0; i < nb; i++) p->absB[i] = fabsf(p->B[i]);
    for (int64_t i = 0; i < nc; i++) p->bound[i] = acc ? fabsf(p->C0[i]) : 0.0f;
    trit_kernel_gemm_ref_f32(ta, tb, M, N, K, p->absA, p->lda, p->absB, p->ldb, p->bound, p->ldc,
                             acc);
}

static void problem_free(problem *p) {
    free(p->A);
    free(p->B);
    free(p->C0);
    free(p->absA);
    free(p->absB);
    free(p->bound);
}

// C = C0, then the dispatched GEMM at the current level.
static float *run(const problem *p) {
    size_t n = (size_t)(p->M * p->ldc);
    float *C = malloc(sizeof(float) * n);
    assert_non_null(C);
    memcpy(C, p->C0, sizeof(float) * n);
    trit_kernel_gemm_f32(p->ta, p->tb, p->M, p->N, p->K, p->A, p->lda, p->B, p->ldb, C, p->ldc,
                         p->acc);
    return C;
}

static float *run_ref(const problem *p) {
    size_t n = (size_t)(p->M * p->ldc);
    float *C = malloc(sizeof(float) * n);
    assert_non_null(C);
    memcpy(C, p->C0, sizeof(float) * n);
    trit_kernel_gemm_ref_f32(p->ta, p->tb, p->M, p->N, p->K, p->A, p->lda, p->B, p->ldb, C,
                             p->ldc, p->acc);
    return C;
}

static void check_against_ref(bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool acc) {
    problem p;
    problem_make(&p, ta, tb, M, N, K, acc, (uint64_t)(M * 1000003 + N * 1009 + K));
    float *C = run(&p), *R = run_ref(&p);
    double worst = 0.0;
    for (int64_t i = 0; i < M; i++) {
        for (int64_t j = 0; j < p.ldc; j++) {
            int64_t e = i * p.ldc + j;
            if (j >= N) {
                if (C[e] != 1234.5f) fail_msg("padding of C row %lld was written", (long long)i);
                continue;
            }
            double err = fabs((double)C[e] - (double)R[e]) / ((double)p.bound[e] + 1e-30);
            if (err > worst) worst = err;
        }
    }
    if (worst > TOL)
        fail_msg("level %s ta=%d tb=%d M=%lld N=%lld K=%lld acc=%d: relative error %.3g > %g",
                 trit_cpu_level_name(trit_cpu_level()), ta, tb, (long long)M, (long long)N,
                 (long long)K, acc, worst, TOL);
    free(C);
    free(R);
    problem_free(&p);
}

// Whether this CPU runs `level`, by its own flags (kernel_census.h); the dispatch's detection
// must agree, or a level the CPU has would be skipped. A level it lacks is named as skipped.
static bool level_runnable(trit_cpu_isa level) {
    const uint32_t needs = level == TRIT_CPU_AVX512 ? TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512
                           : level == TRIT_CPU_AVX2 ? TRIT_FEAT_AVX2 : 0;
    const bool flags = !(needs & ~census_cpu_features()), detected = trit_cpu_detected_level() >= level;
    if (flags != detected)
        fail_msg("this CPU's flags %s %s, but the dispatch detects level %s", flags ? "allow" : "do not allow",
                 trit_cpu_level_name(level), trit_cpu_level_name(trit_cpu_detected_level()));
    if (!flags) printf("  %s not available on this CPU: skipped\n", trit_cpu_level_name(level));
    return flags;
}

// Forces `level` or skips the test when this machine cannot run it.
static void use_level(trit_cpu_isa level) {
    if (!level_runnable(level)) skip();
    assert_int_equal(trit_cpu_set_level(level), TRIT_OK);
}

static void restore_level(void) { trit_cpu_set_level(trit_cpu_detected_level()); }

static const int64_t sizes[] = {1, 7, 17, 64, 129};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void oracle_sweep(trit_cpu_isa level) {
    use_level(level);
    for (int t = 0; t < 4; t++)
        for (size_t a = 0; a < NSIZES; a++)
            for (size_t b = 0; b < NSIZES; b++)
                for (size_t c = 0; c < NSIZES; c++)
                    check_against_ref(t & 1, t & 2, sizes[a], sizes[b], sizes[c], (a + b + c) & 1);
    // Larger shapes: several K slices, row and column blocks, threads, ragged edges.
    for (int t = 0; t < 4; t++) {
        check_against_ref(t & 1, t & 2, 300, 300, 300, t & 1);
        check_against_ref(t & 1, t & 2, 129, 300, 17, false);
        check_against_ref(t & 1, t & 2, 300, 64, 300, true);
        check_against_ref(t & 1, t & 2, 1, 300, 700, false);
        check_against_ref(t & 1, t & 2, 300, 1, 129, true);
        check_against_ref(t & 1, t & 2, 50, 2100, 50, t & 2);
        check_against_ref(t & 1, t & 2, 601, 33, 257, false);
    }
    restore_level();
}

static void test_ref_dispatch(void **state) {
    (void)state;
    use_level(TRIT_CPU_REF);
    check_against_ref(false, true, 17, 64, 129, true);
    problem p;
    problem_make(&p, true, false, 33, 65, 17, false, 7);
    float *C = run(&p), *R = run_ref(&p);
    assert_memory_equal(C, R, sizeof(float) * (size_t)(p.M * p.ldc));
    free(C);
    free(R);
    problem_free(&p);
    restore_level();
}

static void test_avx2_vs_ref(void **state) {
    (void)state;
    oracle_sweep(TRIT_CPU_AVX2);
}

static void test_avx512_vs_ref(void **state) {
    (void)state;
    oracle_sweep(TRIT_CPU_AVX512);
}

// K = 0: C becomes zero, or stays as it was when accumulating; M or N = 0 touches nothing.
static void check_empty(trit_cpu_isa level) {
    if (!level_runnable(level)) return;
    assert_int_equal(trit_cpu_set_level(level), TRIT_OK);
    float A[4] = {1, 2, 3, 4}, B[4] = {5, 6, 7, 8}, C[4] = {1, 1, 1, 1};
    trit_kernel_gemm_f32(false, false, 2, 2, 0, A, 1, B, 2, C, 2, true);
    for (int i = 0; i < 4; i++) assert_true(C[i] == 1.0f);
    trit_kernel_gemm_f32(false, false, 0, 2, 2, A, 2, B, 2, C, 2, false);
    trit_kernel_gemm_f32(false, false, 2, 0, 2, A, 2, B, 2, C, 2, false);
    for (int i = 0; i < 4; i++) assert_true(C[i] == 1.0f);
    trit_kernel_gemm_f32(false, false, 2, 2, 0, A, 1, B, 2, C, 2, false);
    for (int i = 0; i < 4; i++) assert_true(C[i] == 0.0f);
    // A small exact product: [1 2; 3 4] @ [5 6; 7 8] = [19 22; 43 50], plus C when accumulating.
    trit_kernel_gemm_f32(false, false, 2, 2, 2, A, 2, B, 2, C, 2, false);
    trit_kernel_gemm_f32(false, false, 2, 2, 2, A, 2, B, 2, C, 2, true);
    const float want[4] = {38, 44, 86, 100};
    assert_memory_equal(C, want, sizeof(want));
}

static void test_empty_and_exact(void **state) {
    (void)state;
    check_empty(TRIT_CPU_REF);
    check_empty(TRIT_CPU_AVX2);
    check_empty(TRIT_CPU_AVX512);
    restore_level();
}

// The same call with 1 and 2 threads gives the same bits, at every level the CPU has.
static void test_threads_bit_identical(void **state) {
    (void)state;
    int saved = omp_get_max_threads();
    const trit_cpu_isa levels[] = {TRIT_CPU_AVX2, TRIT_CPU_AVX512};
    const int64_t shapes[][3] = {{301, 257, 513}, {64, 700, 300}, {1000, 40, 129}};
    int ran = 0;
    for (size_t l = 0; l < 2; l++) {
        if (!level_runnable(levels[l])) continue;
        assert_int_equal(trit_cpu_set_level(levels[l]), TRIT_OK);
        for (int t = 0; t < 4; t++) {
            for (size_t s = 0; s < 3; s++) {
                problem p;
                problem_make(&p, t & 1, t & 2, shapes[s][0], shapes[s][1], shapes[s][2], t & 1,
                             (uint64_t)(s + 10));
                omp_set_num_threads(1);
                float *C1 = run(&p);
                omp_set_num_threads(2);
                float *C2 = run(&p);
                assert_memory_equal(C1, C2, sizeof(float) * (size_t)(p.M * p.ldc));
                free(C1);
                free(C2);
                problem_free(&p);
                ran++;
            }
        }
    }
    omp_set_num_threads(saved);
    restore_level();
    if (ran == 0) skip();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ref_dispatch),
        cmocka_unit_test(test_avx2_vs_ref),
        cmocka_unit_test(test_avx512_vs_ref),
        cmocka_unit_test(test_empty_and_exact),
        cmocka_unit_test(test_threads_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
