// The mixed-precision GEMM (kernels/gemm_lowp.h) of every implementation this machine runs,
// against the portable oracle trit_kernel_gemm_mixed_ref: operand dtypes f32/bf16/f16 in every
// mix the graph uses, all four transpose cases, padded leading dimensions, odd sizes, C f32
// and bf16, accumulate on and off, NaN propagation, 1 vs 2 threads, and the accuracy of the
// three matmul precisions on 1024 x 1024 products against fp64.
//
// Tolerance: 16-bit products are exact in fp32, so implementations differ only in summation
// order (and HIGH in whether its three products are summed per k or per pass): |C - C_ref| <=
// 1e-5 * sum_k |a_ik||b_kj| (+ |C0| when accumulating), plus one bf16 step
// (2^-7 of |C_ref|) for a bf16 C, whose two roundings may land on neighbouring values.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_census.h"
#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "trit/trit.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct impl {
    const char *name;
    trit_kernel_gemm_mixed_fn *fn;
    uint32_t needs;
} impl;

static const impl IMPLS[] = {
    {"ref", trit_kernel_gemm_mixed_ref, 0},
    {"avx2", trit_kernel_gemm_mixed_avx2, TRIT_FEAT_AVX2},
    {"avx512", trit_kernel_gemm_mixed_avx512, TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512},
    {"avx512bf16", trit_kernel_gemm_mixed_avx512bf16, TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512 | TRIT_FEAT_AVX512_BF16},
};

// Whether the CPU runs k (by the dispatch's detection); the census counts it against what the
// CPU's own flags allow, and names it when skipped.
static bool runnable(census *c, const impl *k) {
    census_count(c, k->name, k->needs, census_cpu_features());
    if ((trit_cpu_detected_features() & k->needs) != k->needs) return false;
    census_ran(c);
    return true;
}

// A stored operand: rows x cols values of dtype dt with leading dim ld, and |value| in f32.
typedef struct mat {
    void *p;
    float *absv;
    trit_dtype dt;
    int64_t rows, cols, ld;
} mat;

static mat mat_make(trit_dtype dt, int64_t rows, int64_t cols, uint64_t seed) {
    mat m = {.dt = dt, .rows = rows, .cols = cols, .ld = cols + 3};
    const int64_t n = rows * m.ld;
    float *f = malloc(sizeof(float) * (size_t)n);
    m.absv = malloc(sizeof(float) * (size_t)n);
    m.p = malloc(trit_dtype_nbytes(dt, n) + 4);
    assert_true(f && m.absv && m.p);
    trit_rng_fill_uniform(f, n, seed, 1, 0, -1.0f, 1.0f);
    trit_dtype_traits_of(dt)->from_f32(m.p, f, n, NULL, 0);
    trit_dtype_traits_of(dt)->to_f32(m.absv, m.p, n, NULL, 0);
    for (int64_t i = 0; i < n; i++) m.absv[i] = fabsf(m.absv[i]);
    free(f);
    return m;
}

static void mat_free(mat *m) {
    free(m->p);
    free(m->absv);
}

typedef struct problem {
    int64_t M, N, K;
    bool acc;
    trit_dtype cdt;
    trit_matmul_precision prec;
    mat a, b;  // a: (M, K) or (K, M) stored; b: (K, N) or (N, K)
    trit_gemm_operand A, B;
    int64_t ldc;
    void *C0;     // starting C (M, ldc), NaN when not accumulating
    float *bias;  // (N) or NULL (never with acc)
} problem;

static void problem_make(problem *p, trit_dtype adt, trit_dtype bdt, bool ta, bool tb, int64_t M, int64_t N,
                         int64_t K, trit_dtype cdt, bool acc, trit_matmul_precision prec, uint64_t seed) {
    *p = (problem){.M = M, .N = N, .K = K, .acc = acc, .cdt = cdt, .prec = prec, .ldc = N + 2};
    p->a = ta ? mat_make(adt, K, M, seed) : mat_make(adt, M, K, seed);
    p->b = tb ? mat_make(bdt, N, K, seed + 1) : mat_make(bdt, K, N, seed + 1);
    p->A = (trit_gemm_operand){p->a.p, adt, p->a.ld, ta};
    p->B = (trit_gemm_operand){p->b.p, bdt, p->b.ld, tb};
    const int64_t nc = M * p->ldc;
    float *c = malloc(sizeof(float) * (size_t)nc);
    trit_rng_fill_uniform(c, nc, seed, 9, 0, -1.0f, 1.0f);
    if (!acc)
        for (int64_t i = 0; i < nc; i++) c[i] = NAN;  // a kernel that reads C without accumulating fails
    p->C0 = malloc(trit_dtype_nbytes(cdt, nc));
    trit_dtype_traits_of(cdt)->from_f32(p->C0, c, nc, NULL, 0);
    free(c);
}

static void problem_add_bias(problem *p, uint64_t seed) {
    p->bias = malloc(sizeof(float) * (size_t)p->N);
    assert_non_null(p->bias);
    trit_rng_fill_uniform(p->bias, p->N, seed, 11, 0, -2.0f, 2.0f);
}

static void problem_free(problem *p) {
    mat_free(&p->a);
    mat_free(&p->b);
    free(p->C0);
    free(p->bias);
}

// C as f32 after running `fn` from C0.
static float *run(const problem *p, trit_kernel_gemm_mixed_fn *fn) {
    const int64_t nc = p->M * p->ldc;
    void *c = malloc(trit_dtype_nbytes(p->cdt, nc));
    memcpy(c, p->C0, trit_dtype_nbytes(p->cdt, nc));
    fn(p->M, p->N, p->K, &p->A, &p->B, c, p->cdt, p->ldc, p->acc, p->prec, p->bias);
    float *f = malloc(sizeof(float) * (size_t)nc);
    trit_dtype_traits_of(p->cdt)->to_f32(f, c, nc, NULL, 0);
    free(c);
    return f;
}

static float absat(const mat *m, bool trans, int64_t r, int64_t c) {
    return trans ? m->absv[c * m->ld + r] : m->absv[r * m->ld + c];
}

static void check_close(const problem *p, const float *got, const float *want, const char *what) {
    float c0[1];
    for (int64_t i = 0; i < p->M; i++)
        for (int64_t j = 0; j < p->N; j++) {
            double bound = 0;
            for (int64_t k = 0; k < p->K; k++) bound += (double)absat(&p->a, p->A.trans, i, k) * absat(&p->b, p->B.trans, k, j);
            trit_dtype_traits_of(p->cdt)->to_f32(c0, (const char *)p->C0 + trit_dtype_nbytes(p->cdt, i * p->ldc + j), 1,
                                                  NULL, 0);
            double tol = 1e-5 * (bound + (p->acc ? fabs(c0[0]) : 0) + (p->bias ? fabs(p->bias[j]) : 0));
            if (p->cdt == TRIT_BF16) tol += fabs(want[i * p->ldc + j]) * 0x1p-7;  // one bf16 step
            if (p->cdt == TRIT_F16) tol += fabs(want[i * p->ldc + j]) * 0x1p-10 + 0x1p-24;  // one f16 step
            const double d = fabs((double)got[i * p->ldc + j] - want[i * p->ldc + j]);
            if (!(d <= tol))
                fail_msg("%s: C[%lld,%lld] = %.9g, reference %.9g (tolerance %.3g)", what, (long long)i, (long long)j,
                         got[i * p->ldc + j], want[i * p->ldc + j], tol);
        }
}

static void test_against_reference(void **state) {
    (void)state;
    const trit_dtype combos[][2] = {{TRIT_BF16, TRIT_BF16}, {TRIT_F32, TRIT_BF16}, {TRIT_BF16, TRIT_F32},
                                    {TRIT_F16, TRIT_F16},   {TRIT_F32, TRIT_F16},  {TRIT_F32, TRIT_F32}};
    const int64_t sizes[][3] = {{1, 1, 1}, {7, 33, 65}, {33, 7, 130}, {65, 130, 33}, {130, 65, 7}, {20, 40, 5000}};
    int checked = 0;
    census cen = {.what = "mixed GEMM kernels"};
    for (size_t k = 1; k < sizeof IMPLS / sizeof IMPLS[0]; k++) {
        if (!runnable(&cen, &IMPLS[k])) continue;
        for (size_t c = 0; c < sizeof combos / sizeof combos[0]; c++)
            for (int prec = 0; prec < 3; prec++)
                for (int t = 0; t < 4; t++)
                    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
                        const bool acc = (s + t) % 2 == 1;
                        const trit_dtype cdts[3] = {TRIT_BF16, TRIT_F32, TRIT_F16};
                        const trit_dtype cdt = cdts[(c + s) % 3];
                        problem p;
                        problem_make(&p, combos[c][0], combos[c][1], t & 1, t >> 1, sizes[s][0], sizes[s][1],
                                     sizes[s][2], cdt, acc, (trit_matmul_precision)prec, 100 + s);
                        if (!acc && (c + t) % 2 == 0) problem_add_bias(&p, 100 + s);
                        float *want = run(&p, trit_kernel_gemm_mixed_ref), *got = run(&p, IMPLS[k].fn);
                        char what[160];
                        snprintf(what, sizeof what, "%s %s x %s -> %s, %s, trans %d%d, %lldx%lldx%lld%s", IMPLS[k].name,
                                 trit_dtype_name(combos[c][0]), trit_dtype_name(combos[c][1]), trit_dtype_name(cdt),
                                 trit_matmul_precision_name((trit_matmul_precision)prec), t & 1, t >> 1,
                                 (long long)sizes[s][0], (long long)sizes[s][1], (long long)sizes[s][2],
                                 acc ? ", accumulate" : p.bias ? ", bias" : "");
                        check_close(&p, got, want, what);
                        free(want);
                        free(got);
                        problem_free(&p);
                        checked++;
                    }
    }
    printf("  %d cases checked against the reference\n", checked);
    census_check(&cen);
}

// f32 x f32 at the highest precision is the f32 GEMM, bit for bit, at every level.
static void test_highest_f32_is_sgemm(void **state) {
    (void)state;
    problem p;
    problem_make(&p, TRIT_F32, TRIT_F32, false, true, 70, 90, 200, TRIT_F32, false, TRIT_MATMUL_HIGHEST, 5);
    float *got = run(&p, trit_kernel_gemm_mixed);
    float *want = malloc(sizeof(float) * (size_t)(p.M * p.ldc));
    trit_kernel_gemm_f32(false, true, p.M, p.N, p.K, p.a.p, p.a.ld, p.b.p, p.b.ld, want, p.ldc, false);
    for (int64_t i = 0; i < p.M; i++) assert_memory_equal(got + i * p.ldc, want + i * p.ldc, sizeof(float) * (size_t)p.N);
    free(got);
    free(want);
    problem_free(&p);
}

// NaN in one operand value reaches exactly the C row it belongs to; TRIT_CPU=ref is the oracle.
static void test_nan_and_ref_level(void **state) {
    (void)state;
    problem p;
    problem_make(&p, TRIT_BF16, TRIT_BF16, false, false, 9, 17, 40, TRIT_F32, false, TRIT_MATMUL_MEDIUM, 6);
    ((uint16_t *)p.a.p)[3 * p.a.ld + 5] = 0x7fc0;  // NaN at A[3, 5]
    float *c = run(&p, trit_kernel_gemm_mixed);
    for (int64_t i = 0; i < p.M; i++)
        for (int64_t j = 0; j < p.N; j++) assert_true(isnan(c[i * p.ldc + j]) == (i == 3));
    free(c);
    const trit_cpu_isa saved = trit_cpu_level();
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_REF), TRIT_OK);
    float *a = run(&p, trit_kernel_gemm_mixed), *b = run(&p, trit_kernel_gemm_mixed_ref);
    assert_memory_equal(a, b, sizeof(float) * (size_t)(p.M * p.ldc));
    assert_int_equal(trit_cpu_set_level(saved), TRIT_OK);
    free(a);
    free(b);
    problem_free(&p);
}

static void test_threads_identical(void **state) {
    (void)state;
    problem p;
    problem_make(&p, TRIT_F32, TRIT_BF16, true, false, 300, 257, 520, TRIT_BF16, true, TRIT_MATMUL_HIGH, 7);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    float *one = run(&p, trit_kernel_gemm_mixed);
    omp_set_num_threads(2);
    float *two = run(&p, trit_kernel_gemm_mixed);
    omp_set_num_threads(saved);
    assert_memory_equal(one, two, sizeof(float) * (size_t)(p.M * p.ldc));
    free(one);
    free(two);
    problem_free(&p);
}

// A 16-bit C (with a bias) holds exactly the f32 C of the same call (the bias in C, then
// accumulating) rounded once: the same sums in the same order. The shapes take several K
// slices and, with B packed for all of K, several column blocks; 1 and 2 threads agree.
static void test_c16_is_rounded_f32(void **state) {
    (void)state;
    const int64_t sizes[][3] = {{70, 300, 3000}, {131, 1000, 384}, {5, 77, 0}};
    const trit_dtype cdts[2] = {TRIT_BF16, TRIT_F16};
    int checked = 0;
    census cen = {.what = "mixed GEMM kernels"};
    for (size_t k = 1; k < sizeof IMPLS / sizeof IMPLS[0]; k++) {
        if (!runnable(&cen, &IMPLS[k])) continue;
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++)
            for (int c = 0; c < 2; c++) {
                problem p, f;
                problem_make(&p, TRIT_BF16, TRIT_BF16, false, s == 1, sizes[s][0], sizes[s][1], sizes[s][2], cdts[c],
                             false, TRIT_MATMUL_MEDIUM, 40 + s);
                problem_add_bias(&p, 40 + s);
                problem_make(&f, TRIT_BF16, TRIT_BF16, false, s == 1, sizes[s][0], sizes[s][1], sizes[s][2], TRIT_F32,
                             false, TRIT_MATMUL_MEDIUM, 40 + s);
                problem_add_bias(&f, 40 + s);
                const int saved = omp_get_max_threads();
                omp_set_num_threads(1);
                float *one = run(&p, IMPLS[k].fn);
                omp_set_num_threads(2);
                float *two = run(&p, IMPLS[k].fn), *wide = run(&f, IMPLS[k].fn);
                omp_set_num_threads(saved);
                const int64_t nc = p.M * p.ldc;
                uint16_t *h = malloc(2 * (size_t)nc);
                float *want = malloc(sizeof(float) * (size_t)nc);
                trit_dtype_traits_of(cdts[c])->from_f32(h, wide, nc, NULL, 0);
                trit_dtype_traits_of(cdts[c])->to_f32(want, h, nc, NULL, 0);
                for (int64_t i = 0; i < p.M; i++) {
                    assert_memory_equal(one + i * p.ldc, want + i * p.ldc, sizeof(float) * (size_t)p.N);
                    assert_memory_equal(two + i * p.ldc, want + i * p.ldc, sizeof(float) * (size_t)p.N);
                }
                free(one), free(two), free(wide), free(h), free(want);
                problem_free(&p);
                problem_free(&f);
                checked++;
            }
    }
    printf("  %d 16-bit C cases equal to the rounded f32 C\n", checked);
    census_check(&cen);
}

// Max relative error (to the largest |C|) of f32 x f32 products against fp64, per precision.
static void test_precision_modes(void **state) {
    (void)state;
    enum { n = 1024 };
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    double *ref = calloc((size_t)n * n, sizeof(double));
    trit_rng_fill_uniform(a, n * n, 21, 1, 0, -1.0f, 1.0f);
    trit_rng_fill_uniform(b, n * n, 21, 2, 0, -1.0f, 1.0f);
#pragma omp parallel for
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++)
            for (int j = 0; j < n; j++) ref[(size_t)i * n + j] += (double)a[i * n + k] * b[k * n + j];
    double mx = 0;
    for (size_t i = 0; i < (size_t)n * n; i++) mx = fmax(mx, fabs(ref[i]));
    const trit_gemm_operand A = {a, TRIT_F32, n, false}, B = {b, TRIT_F32, n, false};
    double err[3];
    for (int prec = 0; prec < 3; prec++) {
        trit_kernel_gemm_mixed(n, n, n, &A, &B, c, TRIT_F32, n, false, (trit_matmul_precision)prec, NULL);
        err[prec] = 0;
        for (size_t i = 0; i < (size_t)n * n; i++) err[prec] = fmax(err[prec], fabs(c[i] - ref[i]) / mx);
    }
    printf("  1024^3 max error / max |C|: highest %.2e, high %.2e, medium %.2e\n", err[0], err[1], err[2]);
    assert_true(err[0] < 1e-5);
    assert_true(err[1] <= 10 * err[0]);
    assert_true(err[2] > 10 * err[1] && err[2] < 2e-2);
    free(a);
    free(b);
    free(c);
    free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference), cmocka_unit_test(test_highest_f32_is_sgemm),
        cmocka_unit_test(test_nan_and_ref_level), cmocka_unit_test(test_threads_identical),
        cmocka_unit_test(test_c16_is_rounded_f32),
        cmocka_unit_test(test_precision_modes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
