// Flash-attention tile kernels: the f32 portable kernels and (where the CPU has them) the AVX2
// and AVX-512 ones against the portable f64 kernels on the same inputs. Row counts 1 to 7 and
// others around the 6-row register tiles, head sizes that are not multiples of 8 or 16 or that
// span several 16- or 64-column chunks, both coefficient layouts of accum, accumulate on and
// off, rows padded with sentinels that must survive, visibility masks (masked entries exactly 0)
// and NaN scores (the vector kernels keep them NaN).
//
// Tolerance: 1e-5 of the magnitude the result is built from (sum of |terms|), or 1e-6 absolute
// for probabilities, so summation order cannot make a check fail spuriously.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_census.h"
#include "kernels/flash.h"
#include "trit/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W TRIT_FLASH_W
#define SENTINEL 1234.5f

typedef enum { IMPL_REF, IMPL_AVX2, IMPL_AVX512, IMPL_COUNT } impl;

static const char *impl_name(impl k) { return k == IMPL_REF ? "ref" : k == IMPL_AVX2 ? "avx2" : "avx512"; }

static bool have(impl k) {
    return k == IMPL_REF || trit_cpu_detected_level() >= (k == IMPL_AVX2 ? TRIT_CPU_AVX2 : TRIT_CPU_AVX512);
}

// Each f32 implementation of each kernel, indexed by impl.
static trit_kernel_flash_scores_fn *const scores_f32[IMPL_COUNT] = {
    trit_kernel_flash_scores_ref_f32, trit_kernel_flash_scores_avx2_f32, trit_kernel_flash_scores_avx512_f32};
static trit_kernel_flash_accum_fn *const accum_f32[IMPL_COUNT] = {
    trit_kernel_flash_accum_ref_f32, trit_kernel_flash_accum_avx2_f32, trit_kernel_flash_accum_avx512_f32};
static trit_kernel_flash_softmax_fn *const softmax_f32[IMPL_COUNT] = {
    trit_kernel_flash_softmax_ref_f32, trit_kernel_flash_softmax_avx2_f32, trit_kernel_flash_softmax_avx512_f32};
static trit_kernel_flash_probs_fn *const probs_f32[IMPL_COUNT] = {
    trit_kernel_flash_probs_ref_f32, trit_kernel_flash_probs_avx2_f32, trit_kernel_flash_probs_avx512_f32};
static trit_kernel_flash_dscores_fn *const dscores_f32[IMPL_COUNT] = {
    trit_kernel_flash_dscores_ref_f32, trit_kernel_flash_dscores_avx2_f32, trit_kernel_flash_dscores_avx512_f32};

// Every width the CPU's own flags allow must be run; the others are named as skipped.
static void report_skipped(void) {
    census c = {.what = "flash kernel widths"};
    for (int k = IMPL_REF; k < IMPL_COUNT; k++) {
        const uint32_t needs = k == IMPL_REF ? 0 : k == IMPL_AVX2 ? TRIT_FEAT_AVX2 : TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512;
        census_count(&c, impl_name((impl)k), needs, census_cpu_features());
        if (have((impl)k)) census_ran(&c);
    }
    census_check(&c);
}

// n floats uniform in [lo, hi) and their double copies.
static float *rand_f(int64_t n, uint64_t seed, float lo, float hi, double **d) {
    float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    *d = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    assert_non_null(f);
    assert_non_null(*d);
    for (int64_t i = 0; i < n; i++) {
        f[i] = lo + (hi - lo) * trit_rng_uniform(seed, 5, (uint64_t)i);
        (*d)[i] = f[i];
    }
    return f;
}

static void check_close(const char *what, double got, double want, double scale, double tol) {
    if (got == want) return;  // also equal infinities
    if (!(fabs(got - want) <= tol * scale))
        fail_msg("%s: got %.9g, want %.9g (tolerance %.3g)", what, got, want, tol * scale);
}

// ---- scores ------------------------------------------------------------------------------

static void check_scores(impl k, int64_t nr, int64_t hs) {
    const int64_t ldx = hs + 3;
    double *xd, *ytd, *std_;
    float *x = rand_f(nr * ldx, 11, -1, 1, &xd), *yt = rand_f(hs * W, 12, -1, 1, &ytd);
    float *st = malloc(sizeof(float) * (size_t)(nr * W));
    std_ = malloc(sizeof(double) * (size_t)(nr * W));
    scores_f32[k](nr, hs, x, ldx, yt, st);
    trit_kernel_flash_scores_ref_f64(nr, hs, xd, ldx, ytd, std_);
    char what[96];
    snprintf(what, sizeof what, "scores %s nr=%lld hs=%lld", impl_name(k), (long long)nr, (long long)hs);
    for (int64_t r = 0; r < nr; r++)
        for (int64_t i = 0; i < W; i++) {
            double mag = 0;
            for (int64_t c = 0; c < hs; c++) mag += fabs(xd[r * ldx + c] * ytd[c * W + i]);
            check_close(what, st[r * W + i], std_[r * W + i], mag, 1e-5);
        }
    free(x), free(xd), free(yt), free(ytd), free(st), free(std_);
}

static void test_scores(void **state) {
    (void)state;
    // Row counts leave every remainder 0..5 after the 6-row register tiles.
    const int64_t rows[] = {1, 2, 3, 4, 5, 6, 7, 8, 13, 64}, heads[] = {1, 5, 8, 13, 17, 37, 64, 80, 100, 128};
    for (int k = IMPL_REF; k < IMPL_COUNT; k++) {
        if (!have((impl)k)) continue;
        for (int a = 0; a < 10; a++)
            for (int b = 0; b < 10; b++) check_scores((impl)k, rows[a], heads[b]);
    }
    report_skipped();
}

// ---- accum -------------------------------------------------------------------------------

// coef: a (W, W) tile read as coef[r * rs + k * ks] with (rs, ks) = (1, W) or (W, 1).
static void check_accum(impl k, int64_t nr, int64_t nk, int64_t hs, bool by_column, bool accumulate, bool scaled) {
    const int64_t ldy = hs + 5, ldacc = hs + 2, rs = by_column ? 1 : W, ks = by_column ? W : 1;
    double *cd, *yd, *ad, *sd;
    float *coef = rand_f(W * W, 21, -1, 1, &cd), *y = rand_f(nk * ldy, 22, -1, 1, &yd);
    float *acc = rand_f(nr * ldacc, 23, -1, 1, &ad), *rowscale = rand_f(nr, 24, 0, 1, &sd);
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = hs; c < ldacc; c++) acc[r * ldacc + c] = SENTINEL;
    double *want = malloc(sizeof(double) * (size_t)(nr * ldacc));
    memcpy(want, ad, sizeof(double) * (size_t)(nr * ldacc));
    float *old = malloc(sizeof(float) * (size_t)(nr * ldacc));
    memcpy(old, acc, sizeof(float) * (size_t)(nr * ldacc));
    accum_f32[k](nr, nk, hs, coef, rs, ks, y, ldy, acc, ldacc, scaled ? rowscale : NULL, accumulate);
    trit_kernel_flash_accum_ref_f64(nr, nk, hs, cd, rs, ks, yd, ldy, want, ldacc, scaled ? sd : NULL, accumulate);
    char what[128];
    snprintf(what, sizeof what, "accum %s nr=%lld nk=%lld hs=%lld rs=%lld acc=%d scaled=%d", impl_name(k),
             (long long)nr, (long long)nk, (long long)hs, (long long)rs, accumulate, scaled);
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t c = 0; c < hs; c++) {
            double mag = accumulate ? fabs(old[r * ldacc + c]) : 0;
            for (int64_t j = 0; j < nk; j++) mag += fabs(cd[r * rs + j * ks] * yd[j * ldy + c]);
            check_close(what, acc[r * ldacc + c], want[r * ldacc + c], mag + 1e-30, 1e-5);
        }
        for (int64_t c = hs; c < ldacc; c++)
            if (acc[r * ldacc + c] != SENTINEL) fail_msg("%s: wrote past the row end at column %lld", what, (long long)c);
    }
    free(coef), free(cd), free(y), free(yd), free(acc), free(ad), free(rowscale), free(sd), free(want), free(old);
}

static void test_accum(void **state) {
    (void)state;
    // Head sizes: ragged last vectors of 1 to 7 columns (AVX2) and chunks of 16 and 64 columns.
    const int64_t rows[] = {1, 2, 3, 4, 5, 6, 7, 9, 11, 64}, keys[] = {1, 5, 64};
    const int64_t heads[] = {1, 5, 8, 13, 17, 24, 37, 64, 80, 100, 128, 130};
    for (int k = IMPL_REF; k < IMPL_COUNT; k++) {
        if (!have((impl)k)) continue;
        for (int a = 0; a < 10; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 12; c++)
                    for (int mode = 0; mode < 6; mode++)
                        check_accum((impl)k, rows[a], keys[b], heads[c], mode & 1, mode >= 2, mode >= 4);
    }
    report_skipped();
}

// ---- element-wise softmax steps ----------------------------------------------------------

// Is key row r visible to lane i?
static bool visible(int64_t r, int64_t i, int64_t kofs, int64_t nq) { return i < nq && r + kofs <= i; }

static void check_softmax(impl k, int64_t nr, int64_t nq, int64_t kofs, bool first) {
    double *sd, *md, *ld_;
    float *st = rand_f(nr * W, 31, -6, 6, &sd), *m = rand_f(W, 32, -1, 3, &md);
    float *lf = rand_f(W, 33, 1, 5, &ld_);
    double l32[W], l64[W];
    float alpha[W];
    double alpha64[W];
    for (int64_t i = 0; i < W; i++) {
        if (first) m[i] = -INFINITY, md[i] = -INFINITY, lf[i] = 0, ld_[i] = 0;
        l32[i] = lf[i];
        l64[i] = ld_[i];
    }
    const float m_old0 = m[0];
    softmax_f32[k](st, nr, nq, kofs, 0.25f, m, l32, alpha);
    trit_kernel_flash_softmax_ref_f64(sd, nr, nq, kofs, 0.25, md, l64, alpha64);
    char what[128];
    snprintf(what, sizeof what, "softmax %s nr=%lld nq=%lld kofs=%lld first=%d", impl_name(k), (long long)nr,
             (long long)nq, (long long)kofs, first);
    for (int64_t i = 0; i < nq; i++) {
        check_close(what, m[i], md[i], fabs(md[i]) + 1, 1e-6);
        check_close(what, alpha[i], alpha64[i], 1, 1e-6);
        check_close(what, l32[i], l64[i], l64[i] + 1, 1e-6);
        if (first && alpha[i] != 0) fail_msg("%s: alpha of a first tile must be 0, got %g", what, alpha[i]);
        for (int64_t r = 0; r < nr; r++) {
            const float p = st[r * W + i];
            if (!visible(r, i, kofs, nq) && p != 0) fail_msg("%s: masked entry (%lld, %lld) = %g", what, (long long)r, (long long)i, p);
            check_close(what, p, sd[r * W + i], 1, 1e-6);
        }
    }
    // A lane that sees no key of the tile keeps its max.
    if (nq > 0 && kofs > 0 && !first && m[0] != m_old0) fail_msg("%s: lane 0 sees no key but its max changed", what);
    free(st), free(sd), free(m), free(md), free(lf), free(ld_);
}

static void check_probs(impl k, int64_t nr, int64_t nq, int64_t kofs) {
    double *sd, *lsed, *gd, *dd;
    float *st = rand_f(nr * W, 41, -6, 6, &sd), *lse = rand_f(W, 42, 1.5f, 4, &lsed);
    float *g = rand_f(nr * W, 43, -1, 1, &gd), *d = rand_f(W, 44, -1, 1, &dd);
    probs_f32[k](st, nr, nq, kofs, 0.25f, lse);
    dscores_f32[k](g, st, nr, d, 0.125f);
    trit_kernel_flash_probs_ref_f64(sd, nr, nq, kofs, 0.25, lsed);
    trit_kernel_flash_dscores_ref_f64(gd, sd, nr, dd, 0.125);
    char what[128];
    snprintf(what, sizeof what, "probs/dscores %s nr=%lld nq=%lld kofs=%lld", impl_name(k), (long long)nr, (long long)nq,
             (long long)kofs);
    for (int64_t r = 0; r < nr; r++)
        for (int64_t i = 0; i < W; i++) {
            const float p = st[r * W + i];
            if (!visible(r, i, kofs, nq) && (p != 0 || g[r * W + i] != 0))
                fail_msg("%s: masked entry (%lld, %lld) = %g, gradient %g", what, (long long)r, (long long)i, p, g[r * W + i]);
            check_close(what, p, sd[r * W + i], 1, 1e-6);
            check_close(what, g[r * W + i], gd[r * W + i], 1, 1e-6);
        }
    free(st), free(sd), free(lse), free(lsed), free(g), free(gd), free(d), free(dd);
}

static void test_softmax_steps(void **state) {
    (void)state;
    const int64_t rows[] = {1, 2, 3, 4, 5, 6, 7, 64}, nqs[] = {1, 17, 64}, kofss[] = {-70, -3, 0, 5, 63};
    for (int k = IMPL_REF; k < IMPL_COUNT; k++) {
        if (!have((impl)k)) continue;
        for (int a = 0; a < 8; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 5; c++) {
                    check_softmax((impl)k, rows[a], nqs[b], kofss[c], false);
                    check_softmax((impl)k, rows[a], nqs[b], kofss[c], true);
                    check_probs((impl)k, rows[a], nqs[b], kofss[c]);
                }
    }
    report_skipped();
}

// exp underflow: a score far below the running max gives 0 or a tiny positive number, never
// garbage; scores equal to the max give exactly 1.
static void test_extreme_scores(void **state) {
    (void)state;
    for (int k = IMPL_REF; k < IMPL_COUNT; k++) {
        if (!have((impl)k)) continue;
        float st[2 * W], m[W], alpha[W];
        double l[W];
        for (int64_t i = 0; i < W; i++) {
            st[i] = 1e4f;       // row 0: the max
            st[W + i] = -1e4f;  // row 1: far below it
            m[i] = -INFINITY;
            l[i] = 0;
        }
        softmax_f32[k](st, 2, W, -W, 1.0f, m, l, alpha);
        for (int64_t i = 0; i < W; i++) {
            assert_true(st[i] == 1.0f);
            assert_true(st[W + i] >= 0.0f && st[W + i] < 1e-37f);
            assert_true(m[i] == 1e4f);
            assert_true(l[i] == 1.0);  // 1 + 1e-38 rounds to 1
        }
    }
    report_skipped();
}

// A NaN score stays NaN in the vector kernels: its probability and its lane's l (softmax) are
// NaN, the other lanes are unaffected. (The portable kernels convert NaN to an integer in exp,
// which C leaves undefined, so they are not checked.)
static void test_nan_scores(void **state) {
    (void)state;
    for (int k = IMPL_AVX2; k < IMPL_COUNT; k++) {
        if (!have((impl)k)) continue;
        for (int64_t lane = 0; lane < W; lane += 9) {
            float st[3 * W], pt[3 * W], m[W], alpha[W], lse[W];
            double l[W];
            for (int64_t i = 0; i < 3 * W; i++) st[i] = pt[i] = (float)(i % 7) - 3.0f;
            for (int64_t i = 0; i < W; i++) m[i] = -INFINITY, l[i] = 0, lse[i] = 2.0f;
            st[W + lane] = pt[W + lane] = NAN;  // row 1: with kofs = -1 visible to every lane
            softmax_f32[k](st, 3, W, -1, 0.5f, m, l, alpha);
            probs_f32[k](pt, 3, W, -1, 0.5f, lse);
            for (int64_t i = 0; i < W; i++) {
                assert_true(isnan(st[W + i]) == (i == lane));
                assert_true(isnan(pt[W + i]) == (i == lane));
                assert_true(isnan(l[i]) == (i == lane));
            }
        }
    }
    report_skipped();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scores),
        cmocka_unit_test(test_accum),
        cmocka_unit_test(test_softmax_steps),
        cmocka_unit_test(test_extreme_scores),
        cmocka_unit_test(test_nan_scores),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
