// Integer matmuls for quantized inference: every implementation in the kernel table that this
// CPU can run against the portable reference, and the reference against an fp64 evaluation of
// the stated formula, on odd M and N, several K and group sizes, every weight dtype; the
// activation quantizer's codes, order and group sums; thread-count independence; the 16-row
// panel kernels bit for bit against the reference.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_census.h"
#include "kernels/kernel_table.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_panel.h"
#include "trit/trit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct problem {
    int64_t M, N, K, G;
    trit_dtype wdt;
    float *x, *ws, *want;
    uint8_t *w;
    trit_qact a;
} problem;

// qint4 codes drawn from [-8, 7] (ggml's q4_0 range) instead of the symmetric [-7, 7].
static bool q4_full_range;
// Every weight code the largest of its dtype and every input 1 (all codes 127): the largest sums
// a kernel's narrow partial sums can meet.
static bool extreme;

static void make(problem *p, trit_dtype wdt, int64_t M, int64_t N, int64_t K, int64_t G, uint64_t seed) {
    *p = (problem){M, N, K, G, wdt, NULL, NULL, NULL, NULL, {NULL, NULL, NULL}};
    p->x = malloc(sizeof(float) * (size_t)(M * K));
    p->ws = malloc(sizeof(float) * (size_t)(N * (K / G)));
    p->want = malloc(sizeof(float) * (size_t)(M * N));
    p->w = malloc(trit_dtype_nbytes(wdt, N * K));
    p->a.q = malloc((size_t)(M * K));
    p->a.scale = malloc(sizeof(float) * (size_t)M);
    p->a.gsum = malloc(sizeof(int32_t) * (size_t)(M * (K / G)));
    trit_rng_fill_normal(p->x, M * K, seed, 1, 0, 0.0f, 1.0f);
    for (int64_t i = 0; extreme && i < M * K; i++) p->x[i] = 1.0f;
    trit_rng_fill_uniform(p->ws, N * (K / G), seed, 2, 0, 0.001f, 0.01f);
    const int qmax = wdt == TRIT_QINT8 ? 127 : wdt == TRIT_QINT4 ? 7 : 1;
    for (int64_t i = 0; i < N * K; i++) {
        const int low = wdt == TRIT_QINT4 && q4_full_range ? 8 : qmax;
        const int c = extreme ? qmax : (int)(trit_rng_u32(seed, 3, (uint64_t)i) % (uint32_t)(low + qmax + 1)) - low;
        if (wdt == TRIT_QINT8) p->w[i] = (uint8_t)(int8_t)c;
        else if (wdt == TRIT_TERNARY && i % 4 == 0) p->w[i / 4] = (uint8_t)(c + 1);
        else if (wdt == TRIT_TERNARY) p->w[i / 4] |= (uint8_t)((c + 1) << (2 * (i % 4)));
        else if (i % 2 == 0) p->w[i / 2] = (uint8_t)(c + 8);
        else p->w[i / 2] |= (uint8_t)((c + 8) << 4);
    }
    if (trit_qgemm_supported(wdt, K, G)) trit_qact_quantize(p->x, M, K, G, wdt, &p->a);  // else panels only
}

static void drop(problem *p) {
    free(p->x), free(p->ws), free(p->want), free(p->w), free(p->a.q), free(p->a.scale), free(p->a.gsum);
}

static int code(const problem *p, int64_t n, int64_t k) {
    const int64_t i = n * p->K + k;
    if (p->wdt == TRIT_TERNARY) return ((p->w[i / 4] >> (i % 4 * 2)) & 3) - 1;
    return p->wdt == TRIT_QINT8 ? (int8_t)p->w[i] : ((p->w[i / 2] >> (i % 2 * 4)) & 15) - 8;
}

static int64_t pos(const problem *p, int64_t k) {
    if (p->wdt == TRIT_TERNARY) {
        const int64_t j = k % 128;
        return k - j + (j % 4) * 32 + j / 4;
    }
    if (p->wdt != TRIT_QINT4) return k;
    const int64_t j = k % 64;
    return k - j + (j % 2 ? 32 + j / 2 : j / 2);
}

static trit_kernel_qgemm_fn *ref_of(trit_dtype dt) {
    return dt == TRIT_QINT8 ? trit_kernel_qgemm_q8_ref : dt == TRIT_QINT4 ? trit_kernel_qgemm_q4_ref : trit_kernel_qgemm_t2_ref;
}

static void test_activation_quantizer(void **state) {
    (void)state;
    problem p;
    make(&p, TRIT_QINT4, 2, 1, 128, 64, 4);
    for (int64_t m = 0; m < 2; m++) {
        float amax = 0;
        for (int64_t k = 0; k < 128; k++) amax = fmaxf(amax, fabsf(p.x[m * 128 + k]));
        assert_true(p.a.scale[m] == amax / 127.0f);
        int32_t gs[2] = {0, 0};
        for (int64_t k = 0; k < 128; k++) {
            const int c = p.a.q[m * 128 + pos(&p, k)];
            assert_true(fabsf((float)c * p.a.scale[m] - p.x[m * 128 + k]) <= 0.5001f * p.a.scale[m]);
            gs[k / 64] += c;
        }
        assert_int_equal(gs[0], p.a.gsum[m * 2]);
        assert_int_equal(gs[1], p.a.gsum[m * 2 + 1]);
    }
    drop(&p);
    float zero[64] = {0};
    int8_t q[64];
    float s;
    int32_t g;
    trit_qact a = {q, &s, &g};
    trit_qact_quantize(zero, 1, 64, 64, TRIT_QINT8, &a);
    assert_true(s == 0.0f && g == 0 && q[5] == 0);
    assert_true(trit_qgemm_supported(TRIT_QINT4, 768, 128));
    assert_false(trit_qgemm_supported(TRIT_QINT4, 768, 32));
    assert_false(trit_qgemm_supported(TRIT_NF4, 768, 64));
    assert_true(trit_qgemm_supported(TRIT_TERNARY, 768, 768));
    assert_false(trit_qgemm_supported(TRIT_TERNARY, 768, 64));
}

// The reference against the formula in double.
static void test_reference_matches_formula(void **state) {
    (void)state;
    const trit_dtype dts[3] = {TRIT_QINT8, TRIT_QINT4, TRIT_TERNARY};
    for (int d = 0; d < 3; d++) {
        problem p;
        make(&p, dts[d], 3, 7, 384, 128, 9);
        trit_kernel_qgemm_fn *ref = ref_of(dts[d]);
        ref(p.M, 0, p.N, p.K, p.G, &p.a, p.w, p.ws, p.want, p.N);
        for (int64_t m = 0; m < p.M; m++)
            for (int64_t n = 0; n < p.N; n++) {
                double y = 0, mag = 0;
                for (int64_t k = 0; k < p.K; k++) {
                    const double t = (double)code(&p, n, k) * p.ws[n * (p.K / p.G) + k / p.G] * p.a.q[m * p.K + pos(&p, k)];
                    y += t, mag += fabs(t);
                }
                y *= p.a.scale[m], mag *= p.a.scale[m];
                assert_true(fabs(y - p.want[m * p.N + n]) <= 1e-6 * mag);
            }
        drop(&p);
    }
}

static void test_every_kernel_matches_reference(void **state) {
    (void)state;
    const uint32_t usable = trit_cpu_usable_features();
    int nt, tested = 0;
    const trit_kernel_entry *t = trit_kernel_table(&nt);
    const int64_t Ms[3] = {1, 3, 17}, Ns[4] = {1, 5, 16, 37}, Ks[3] = {64, 192, 768};
    census cen = {.what = "x86 integer matmul kernels"};
    for (int i = 0; i < nt; i++) {
        if (t[i].id != TRIT_KERNEL_QGEMM || t[i].needs == 0) continue;
        census_count(&cen, t[i].name, t[i].needs, census_level_features());
        if (t[i].needs & ~usable) continue;
        trit_kernel_qgemm_fn *fn = (trit_kernel_qgemm_fn *)t[i].fn;
        trit_kernel_qgemm_fn *ref = ref_of(t[i].in);
        const int64_t step = t[i].in == TRIT_TERNARY ? 128 : 64;
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 4; b++)
                for (int c = 0; c < 3; c++)
                    for (int gi = 0; gi < 2; gi++) {
                        const int64_t K = Ks[c] * (step / 64), G = gi ? K : step;
                        problem p;
                        make(&p, t[i].in, Ms[a], Ns[b], K, G, (uint64_t)(a * 100 + b * 10 + c));
                        ref(p.M, 0, p.N, K, G, &p.a, p.w, p.ws, p.want, p.N);
                        float *got = malloc(sizeof(float) * (size_t)(p.M * p.N));
                        // Two calls over [0, n1) and [n1, N) as the threads split it.
                        const int64_t n1 = p.N / 2;
                        fn(p.M, 0, n1, K, G, &p.a, p.w, p.ws, got, p.N);
                        fn(p.M, n1, p.N, K, G, &p.a, p.w, p.ws, got, p.N);
                        float big = 0;
                        for (int64_t j = 0; j < p.M * p.N; j++) big = fmaxf(big, fabsf(p.want[j]));
                        for (int64_t j = 0; j < p.M * p.N; j++)
                            if (!(fabsf(got[j] - p.want[j]) <= 2e-6f * big + 1e-30f))
                                fail_msg("%s M=%lld N=%lld K=%lld G=%lld: [%lld] %g vs %g", t[i].name, (long long)p.M,
                                         (long long)p.N, (long long)K, (long long)G, (long long)j, got[j], p.want[j]);
                        free(got);
                        drop(&p);
                    }
        tested++;
        census_ran(&cen);
    }
    (void)tested;
    census_check(&cen);
}

// NF4 with the codebook and x rounded to bf16 (the AVX512-BF16 kernel's numerics), in double.
static double nf4_bf16_formula(const uint8_t *w, const float *ws, const float *x, int64_t n, int64_t K, int64_t G,
                               double *mag) {
    double y = 0;
    *mag = 0;
    for (int64_t k = 0; k < K; k++) {
        const int code = (w[(n * K + k) / 2] >> ((k & 1) * 4)) & 15;
        const double v = (double)trit_bf16_to_f32(trit_f32_to_bf16(trit_nf4_values[code])) *
                         trit_bf16_to_f32(trit_f32_to_bf16(x[k])) * ws[n * (K / G) + k / G];
        y += v, *mag += fabs(v);
    }
    return y;
}

// NF4 in the AVX2 kernel's 14-bit fixed point (codebook round(v * 16383), x as round(x * 16383
// / max|x|) with the float product the kernel rounds), in double.
static double nf4_fixed_formula(const uint8_t *w, const float *ws, const float *x, int64_t n, int64_t K, int64_t G,
                                double *mag) {
    float big = 0;
    for (int64_t k = 0; k < K; k++) big = fmaxf(big, fabsf(x[k]));
    const float inv = 16383.0f / big;
    double y = 0;
    *mag = 0;
    for (int64_t k = 0; k < K; k++) {
        const int code = (w[(n * K + k) / 2] >> ((k & 1) * 4)) & 15;
        const double v = (double)lrintf(trit_nf4_values[code] * 16383) * lrintf(x[k] * inv) * ws[n * (K / G) + k / G];
        y += v, *mag += fabs(v);
    }
    const double unit = (double)big / (16383.0 * 16383.0);
    *mag *= unit;
    return y * unit;
}

// Weight-only NF4: the reference against the codebook formula in double; every usable f32 row
// against the reference, the bf16 row against the formula over bf16-rounded values and the
// AVX2 row against the formula in fixed point. Sizes
// cover 1-4 tokens in a tile, a K that ends in half a 128-code span, K past one 2048 chunk,
// groups of 64, of 192 (not whole spans) and of a whole row.
static void test_nf4_kernels(void **state) {
    (void)state;
    const int64_t Ms[3] = {1, 3, 6}, Ns[3] = {1, 17, 40}, Ks[4] = {64, 192, 768, 4160};
    int nt, tested = 0;
    bool ran[256] = {false};
    const trit_kernel_entry *t = trit_kernel_table(&nt);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++)
                for (int gi = 0; gi < 3; gi++) {
                    const int64_t M = Ms[a], N = Ns[b], K = Ks[c], G = gi == 0 ? 64 : gi == 1 ? 192 : K;
                    if (K % G) continue;
                    float *x = malloc(sizeof(float) * (size_t)(M * K)), *xo = malloc(sizeof(float) * (size_t)(M * K));
                    float *ws = malloc(sizeof(float) * (size_t)(N * (K / G))), *want = malloc(sizeof(float) * (size_t)(M * N));
                    float *got = malloc(sizeof(float) * (size_t)(M * N));
                    uint8_t *w = malloc((size_t)(N * K / 2));
                    trit_rng_fill_normal(x, M * K, 5, 1, 0, 0.0f, 1.0f);
                    trit_rng_fill_uniform(ws, N * (K / G), 5, 2, 0, 0.01f, 0.1f);
                    for (int64_t i = 0; i < N * K / 2; i++) w[i] = (uint8_t)trit_rng_u32(5, 3, (uint64_t)i);
                    trit_nf4_act_order(x, M, K, xo);
                    trit_kernel_nf4_ref(M, 0, N, K, G, xo, w, ws, want, N);
                    for (int64_t m = 0; m < M; m++)
                        for (int64_t n = 0; n < N; n++) {
                            double y = 0, mag = 0;
                            for (int64_t k = 0; k < K; k++) {
                                const int code = (w[(n * K + k) / 2] >> ((k & 1) * 4)) & 15;
                                const double v = (double)trit_nf4_values[code] * ws[n * (K / G) + k / G] * x[m * K + k];
                                y += v, mag += fabs(v);
                            }
                            assert_true(fabs(y - want[m * N + n]) <= 1e-5 * mag + 1e-12);
                        }
                    for (int i = 0; i < nt; i++) {
                        if (t[i].id != TRIT_KERNEL_WGEMM || t[i].in != TRIT_NF4 || t[i].needs == 0 ||
                            (t[i].needs & ~trit_cpu_usable_features()))
                            continue;
                        ((trit_kernel_nf4_fn *)t[i].fn)(M, 0, N, K, G, xo, w, ws, got, N);
                        tested++;
                        ran[i] = true;
                        const bool bf16 = t[i].needs & TRIT_FEAT_AVX512_BF16;
                        const bool fixed = t[i].fn == (trit_kernel_fn)trit_kernel_nf4_avx2;
                        float big = 0;
                        for (int64_t j = 0; j < M * N; j++) big = fmaxf(big, fabsf(want[j]));
                        for (int64_t m = 0; m < M; m++)
                            for (int64_t n = 0; n < N; n++) {
                                double mag = 0, ref = want[m * N + n], tol = 1e-5 * big;
                                if (bf16) ref = nf4_bf16_formula(w, ws, x + m * K, n, K, G, &mag), tol = 1e-5 * mag;
                                if (fixed) ref = nf4_fixed_formula(w, ws, x + m * K, n, K, G, &mag), tol = 1e-5 * mag;
                                if (!(fabs(got[m * N + n] - ref) <= tol))
                                    fail_msg("%s M=%lld N=%lld K=%lld G=%lld: %g vs %g", t[i].name, (long long)M,
                                             (long long)N, (long long)K, (long long)G, got[m * N + n], ref);
                            }
                    }
                    free(x), free(xo), free(ws), free(want), free(got), free(w);
                }
    census cen = {.what = "x86 NF4 kernels"};
    assert_true(nt <= 256);
    for (int i = 0; i < nt; i++)
        if (t[i].id == TRIT_KERNEL_WGEMM && t[i].in == TRIT_NF4 && t[i].needs &&
            census_count(&cen, t[i].name, t[i].needs, census_level_features()) && ran[i])
            census_ran(&cen);
    printf("  %d NF4 kernel runs checked\n", tested);
    census_check(&cen);
}

// NF4 tokens holding an Inf, a NaN, or only zeros: every usable row gives what the reference
// gives (NaN where it has NaN, the same infinities, zeros), whatever its own arithmetic.
static void test_nf4_nonfinite_tokens(void **state) {
    (void)state;
    enum { M = 3, N = 17, K = 128, G = 64 };
    float x[M * K] = {0}, xo[M * K], ws[N * (K / G)], want[M * N], got[M * N];
    uint8_t w[N * K / 2];
    trit_rng_fill_normal(x, 2 * K, 7, 1, 0, 0.0f, 1.0f);
    x[5] = INFINITY, x[K + 70] = NAN;  // token 2 stays zero
    trit_rng_fill_uniform(ws, N * (K / G), 7, 2, 0, 0.01f, 0.1f);
    for (int i = 0; i < N * K / 2; i++) w[i] = (uint8_t)trit_rng_u32(7, 3, (uint64_t)i);
    trit_nf4_act_order(x, M, K, xo);
    trit_kernel_nf4_ref(M, 0, N, K, G, xo, w, ws, want, N);
    for (int n = 0; n < N; n++) {
        assert_false(isfinite(want[n]));
        assert_true(isnan(want[N + n]));
        assert_true(want[2 * N + n] == 0);
    }
    int nt;
    const trit_kernel_entry *t = trit_kernel_table(&nt);
    for (int i = 0; i < nt; i++) {
        if (t[i].id != TRIT_KERNEL_WGEMM || t[i].in != TRIT_NF4 || (t[i].needs & ~trit_cpu_usable_features())) continue;
        ((trit_kernel_nf4_fn *)t[i].fn)(M, 0, N, K, G, xo, w, ws, got, N);
        for (int j = 0; j < M * N; j++)
            if (isnan(want[j]) ? !isnan(got[j]) : got[j] != want[j])
                fail_msg("%s output %d: %g, the reference %g", t[i].name, j, got[j], want[j]);
    }
}

// Weight-only FP8 (e4m3fn and e5m2): every implementation decodes each of the 256 codes to
// trit_fp8_to_f32's value (one code per row against a one-hot input: NaN codes give NaN, e5m2's
// Inf codes Inf, subnormals exact), and on random finite codes every usable row agrees with the
// reference, and the reference with the formula in double, on odd row counts and groups, within
// 1e-5 (2e-5 between two f32 implementations) of the sum of the terms' magnitudes: e4m3 values
// reach 448, so outputs are sums with heavy cancellation.
static void check_fp8_codes(trit_dtype dt, trit_kernel_fp8_fn *fn, const char *name) {
    enum { K = 16 };
    const trit_fp8_kind kind = dt == TRIT_F8_E5M2 ? TRIT_FP8_E5M2 : TRIT_FP8_E4M3;
    uint8_t w[256 * K] = {0};
    float x[K] = {1.0f}, ws[256], y[256];
    for (int n = 0; n < 256; n++) w[n * K] = (uint8_t)n, ws[n] = 1.0f;
    fn(1, 0, 256, K, K, x, w, ws, y, 256);
    for (int n = 0; n < 256; n++) {
        const float want = trit_fp8_to_f32((uint8_t)n, kind);
        if (!(y[n] == want || (isnan(y[n]) && isnan(want))))
            fail_msg("%s: code 0x%02x gives %g, want %g", name, n, y[n], want);
    }
}

static void test_fp8_kernels(void **state) {
    (void)state;
    const int64_t Ms[2] = {1, 5}, Ns[3] = {1, 17, 40}, Ks[3] = {16, 208, 768};
    int nt;
    const trit_kernel_entry *t = trit_kernel_table(&nt);
    for (int d = 0; d < 2; d++) {
        const trit_dtype dt = d ? TRIT_F8_E5M2 : TRIT_F8_E4M3;
        const trit_fp8_kind kind = d ? TRIT_FP8_E5M2 : TRIT_FP8_E4M3;
        trit_kernel_fp8_fn *ref = d ? trit_kernel_fp8_e5m2_ref : trit_kernel_fp8_e4m3_ref;
        check_fp8_codes(dt, ref, d ? "e5m2 reference" : "e4m3 reference");
        for (int i = 0; i < nt; i++)
            if (t[i].id == TRIT_KERNEL_WGEMM && t[i].in == dt && t[i].needs && !(t[i].needs & ~trit_cpu_usable_features()))
                check_fp8_codes(dt, (trit_kernel_fp8_fn *)t[i].fn, t[i].name);
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 3; c++)
                    for (int gi = 0; gi < 2; gi++) {
                        const int64_t M = Ms[a], N = Ns[b], K = Ks[c], G = gi ? K : 16;
                        float *x = malloc(sizeof(float) * (size_t)(M * K));
                        float *ws = malloc(sizeof(float) * (size_t)(N * (K / G)));
                        float *want = malloc(sizeof(float) * (size_t)(M * N)), *got = malloc(sizeof(float) * (size_t)(M * N));
                        uint8_t *w = malloc((size_t)(N * K));
                        trit_rng_fill_normal(x, M * K, 6, 1, 0, 0.0f, 1.0f);
                        trit_rng_fill_uniform(ws, N * (K / G), 6, 2, 0, 0.01f, 0.1f);
                        for (int64_t i = 0; i < N * K; i++) {  // finite codes only
                            uint8_t code;
                            uint64_t draw = (uint64_t)i;
                            do code = (uint8_t)trit_rng_u32(6, 3, draw), draw += (uint64_t)(N * K);
                            while (!isfinite(trit_fp8_to_f32(code, kind)));
                            w[i] = code;
                        }
                        double *mag = malloc(sizeof(double) * (size_t)(M * N));  // sum of |terms| of each output
                        ref(M, 0, N, K, G, x, w, ws, want, N);
                        for (int64_t m = 0; m < M; m++)
                            for (int64_t n = 0; n < N; n++) {
                                double yd = 0;
                                mag[m * N + n] = 0;
                                for (int64_t k = 0; k < K; k++) {
                                    const double v =
                                        (double)trit_fp8_to_f32(w[n * K + k], kind) * ws[n * (K / G) + k / G] * x[m * K + k];
                                    yd += v, mag[m * N + n] += fabs(v);
                                }
                                assert_true(fabs(yd - want[m * N + n]) <= 1e-5 * mag[m * N + n] + 1e-12);
                            }
                        for (int i = 0; i < nt; i++) {
                            if (t[i].id != TRIT_KERNEL_WGEMM || t[i].in != dt || t[i].needs == 0 ||
                                (t[i].needs & ~trit_cpu_usable_features()))
                                continue;
                            ((trit_kernel_fp8_fn *)t[i].fn)(M, 0, N, K, G, x, w, ws, got, N);
                            for (int64_t j = 0; j < M * N; j++)  // both within 1e-5 of the terms' magnitude
                                if (!(fabs((double)got[j] - want[j]) <= 2e-5 * mag[j] + 1e-12))
                                    fail_msg("%s M=%lld N=%lld K=%lld G=%lld: %g vs %g", t[i].name, (long long)M,
                                             (long long)N, (long long)K, (long long)G, got[j], want[j]);
                        }
                        free(x), free(ws), free(want), free(got), free(w), free(mag);
                    }
    }
    assert_true(trit_fp8_gemm_supported(TRIT_F8_E4M3, 768, 16));
    assert_false(trit_fp8_gemm_supported(TRIT_F8_E4M3, 768, 24));
    assert_false(trit_fp8_gemm_supported(TRIT_NF4, 768, 64));
}

static void test_thread_count_independent(void **state) {
    (void)state;
    problem p;
    const trit_dtype dts[2] = {TRIT_QINT4, TRIT_TERNARY};
    for (int d = 0; d < 2; d++) {
        make(&p, dts[d], 5, 301, 768, 128, 77);
        float *y1 = malloc(sizeof(float) * 5 * 301), *y2 = malloc(sizeof(float) * 5 * 301);
        trit_threads_set(1);
        trit_kernel_qgemm(dts[d], 5, 301, 768, 128, &p.a, p.w, p.ws, y1, 301);
        trit_threads_set(2);
        trit_kernel_qgemm(dts[d], 5, 301, 768, 128, &p.a, p.w, p.ws, y2, 301);
        trit_threads_set(0);
        assert_memory_equal(y1, y2, sizeof(float) * 5 * 301);
        free(y1), free(y2);
        drop(&p);
    }
}

// A token's outputs do not depend on how many tokens share the call (prefill against decoding):
// every usable kernel, several tokens at once against one at a time, bit for bit.
static void test_tokens_alone_or_together(void **state) {
    (void)state;
    const uint32_t usable = trit_cpu_usable_features();
    int nt;
    const trit_kernel_entry *t = trit_kernel_table(&nt);
    enum { M = 8, N = 37 };
    for (int i = 0; i < nt; i++) {
        if (t[i].id != TRIT_KERNEL_QGEMM || (t[i].needs & ~usable)) continue;
        trit_kernel_qgemm_fn *fn = (trit_kernel_qgemm_fn *)t[i].fn;
        const int64_t K = t[i].in == TRIT_TERNARY ? 384 : 192;
        for (int gi = 0; gi < 2; gi++) {
            const int64_t G = gi ? K : K / 3;
            problem p;
            make(&p, t[i].in, M, N, K, G, 5 + (uint64_t)gi);
            float together[M * N], alone[M * N];
            fn(M, 0, N, K, G, &p.a, p.w, p.ws, together, N);
            for (int64_t m = 0; m < M; m++) {
                const trit_qact one = {p.a.q + m * K, p.a.scale + m, p.a.gsum + m * (K / G)};
                fn(1, 0, N, K, G, &one, p.w, p.ws, alone + m * N, N);
            }
            if (memcmp(together, alone, sizeof together) != 0)
                fail_msg("%s G=%lld: tokens together differ from alone", t[i].name, (long long)G);
            drop(&p);
        }
    }
}

// Panels: every usable panel kernel (the portable one included) gives the plain reference's bits,
// over odd M and N (a partial last panel), groups of one step and of the whole row, in two calls
// split as the threads split; the entry point likewise on 1 and 2 threads. Columns past N and
// past the call's panels are left alone.
// The reference's arithmetic written out, over activations a in natural order: each group's exact
// integer sum times its scale (one rounded product, one rounded add) in group order, times the
// token's scale. For the groups only panels take (ternary in 64s, qint8 and qint4 in 32s).
static void formula(const problem *p, const trit_qact *a, float *y /* (M, N) */) {
    const int64_t NG = p->K / p->G;
    for (int64_t m = 0; m < p->M; m++)
        for (int64_t n = 0; n < p->N; n++) {
            float sum = 0;
            for (int64_t g = 0; g < NG; g++) {
                int64_t acc = 0;
                for (int64_t k = g * p->G; k < (g + 1) * p->G; k++) acc += code(p, n, k) * a->q[m * p->K + k];
                const float part = p->ws[n * NG + g] * (float)acc;
                sum += part;
            }
            y[m * p->N + n] = a->scale[m] * sum;
        }
}

static void check_panels(trit_kernel_qpanel_fn *fn, const char *name, trit_dtype wdt, int64_t M, int64_t N, int64_t K,
                         int64_t G) {
    problem p;
    make(&p, wdt, M, N, K, G, (uint64_t)(M * 1000 + N * 10 + K + G));
    trit_qpanels w;
    assert_int_equal(trit_qpanels_pack(wdt, N, K, G, p.w, p.ws, &w), TRIT_OK);
    // The same codes in the panels' (natural) order.
    int8_t *q = malloc((size_t)(M * K));
    float *scale = malloc(sizeof(float) * (size_t)M);
    int32_t *gsum = malloc(sizeof(int32_t) * (size_t)(M * (K / G)));
    const trit_qact a = {q, scale, gsum};
    trit_qpanels_quantize(&w, p.x, M, &a);
    const bool plain = trit_qgemm_supported(wdt, K, G);  // else no plain order to compare with
    for (int64_t m = 0; plain && m < M; m++)
        for (int64_t k = 0; k < K; k++) assert_int_equal(q[m * K + k], p.a.q[m * K + trit_qact_pos(wdt, k)]);
    if (plain) ref_of(wdt)(M, 0, N, K, G, &p.a, p.w, p.ws, p.want, N);
    else formula(&p, &a, p.want);
    const int64_t ldy = N + 3;
    float *got = malloc(sizeof(float) * (size_t)(M * ldy));
    // The epilogue's bias and residual (pass 3): the bits of the same adds done afterwards.
    float *bias = malloc(sizeof(float) * (size_t)N), *res = malloc(sizeof(float) * (size_t)(M * ldy));
    trit_rng_fill_normal(bias, N, 5, 1, 0, 0.0f, 1.0f);
    for (int pass = 0; pass < 4; pass++) {
        for (int64_t j = 0; j < M * ldy; j++) got[j] = -7.0f, res[j] = (float)j * 0.25f;
        if (pass == 0) {
            fn(M, 0, w.panels / 2, &w, &a, got, ldy, false);
            fn(M, w.panels / 2, w.panels, &w, &a, got, ldy, false);
        } else {
            const trit_qpanel_epilogue e = {.bias = bias, .res = res, .ldr = ldy};
            trit_threads_set(pass == 3 ? 2 : pass);
            trit_kernel_qgemm_panels(&w, M, &a, got, ldy, pass == 3 ? &e : NULL);
            trit_threads_set(0);
        }
        if (pass == 3)
            for (int64_t m = 0; m < M; m++)
                for (int64_t n = 0; n < ldy; n++) {
                    const float y = n < N ? got[m * ldy + n] : 0.0f, want = n < N ? p.want[m * N + n] + bias[n] : 0.0f;
                    assert_true(memcmp(&y, &want, sizeof y) == 0);
                    const float r = (float)(m * ldy + n) * 0.25f + want;
                    assert_true(memcmp(&res[m * ldy + n], &r, sizeof r) == 0);  // columns past N untouched
                    if (n < N) got[m * ldy + n] = p.want[m * N + n];  // for the checks below
                }
        for (int64_t m = 0; m < M; m++) {
            if (memcmp(got + m * ldy, p.want + m * N, sizeof(float) * (size_t)N) != 0)
                fail_msg("%s %s M=%lld N=%lld K=%lld G=%lld pass %d: token %lld differs from the reference", name,
                         trit_dtype_name(wdt), (long long)M, (long long)N, (long long)K, (long long)G, pass,
                         (long long)m);
            for (int64_t j = N; j < ldy; j++) assert_true(got[m * ldy + j] == -7.0f);
        }
    }
    free(got), free(q), free(scale), free(gsum), free(bias), free(res);
    trit_qpanels_free(&w);
    drop(&p);
}

static void test_panels_match_reference(void **state) {
    (void)state;
    const uint32_t usable = trit_cpu_usable_features();
    int nt, tested = 0;
    const trit_kernel_entry *t = trit_kernel_table(&nt);
    const int64_t Ms[5] = {1, 3, 4, 6, 9}, Ns[4] = {1, 16, 37, 70};
    census cen = {.what = "(panel kernel, dtype) rows"};
    for (int i = 0; i < nt; i++) {
        if (t[i].id != TRIT_KERNEL_QPANEL) continue;
        census_count(&cen, t[i].name, t[i].needs, census_level_features());
        if (t[i].needs & ~usable) continue;
        const int64_t step = t[i].in == TRIT_TERNARY ? 128 : 64;
        for (int a = 0; a < 5; a++)
            for (int b = 0; b < 4; b++) {
                check_panels((trit_kernel_qpanel_fn *)t[i].fn, t[i].name, t[i].in, Ms[a], Ns[b], 3 * step, step);
                check_panels((trit_kernel_qpanel_fn *)t[i].fn, t[i].name, t[i].in, Ms[a], Ns[b], 6 * step, 6 * step);
            }
        // Ternary in groups of 64 (symmetric int2's default), which only panels take.
        for (int a = 0; t[i].in == TRIT_TERNARY && a < 5; a++) {
            check_panels((trit_kernel_qpanel_fn *)t[i].fn, t[i].name, t[i].in, Ms[a], 37, 3 * 64, 64);
            check_panels((trit_kernel_qpanel_fn *)t[i].fn, t[i].name, t[i].in, Ms[a], 70, 5 * 64, 64);
        }
        // Groups of 32 (ggml's q8_0 and q4_0 blocks), which only panels take; qint4 with ggml's
        // code -8 among its codes.
        for (int a = 0; t[i].in != TRIT_TERNARY && a < 5; a++)
            for (int full = 0; full < 2; full++) {
                q4_full_range = full;
                check_panels((trit_kernel_qpanel_fn *)t[i].fn, t[i].name, t[i].in, Ms[a], 37, 3 * 32, 32);
                check_panels((trit_kernel_qpanel_fn *)t[i].fn, t[i].name, t[i].in, Ms[a], 70, 10 * 32, 32);
                q4_full_range = false;
            }
        // The largest codes against the largest inputs over long groups: narrow partial sums
        // (AVX2's int16 runs of steps) must not wrap.
        extreme = true;
        check_panels((trit_kernel_qpanel_fn *)t[i].fn, t[i].name, t[i].in, 5, 37, 6 * step, 6 * step);
        extreme = false;
        // Enough tokens for the kernels that widen them in blocks (AVX2 qint8: 1 MB) to take two.
        check_panels((trit_kernel_qpanel_fn *)t[i].fn, t[i].name, t[i].in, 1400, 16, 6 * step, step);
        tested++;
        census_ran(&cen);
    }
    assert_true(tested >= 3);  // the portable kernel, for each dtype
    census_check(&cen);
}

// Every usable activation quantizer gives the portable one's bits, which follow the stated rule:
// scale absmax / 127 (NaN ignored), codes round-to-nearest-even of x / scale in [-127, 127] with
// NaN to 0, exact group sums; on rows of plain values, ties, NaN and Inf, all zeros, subnormals
// only, and lengths that end in a partial vector.
static void fill_row(float *x, int64_t K, int kind, uint64_t seed) {
    trit_rng_fill_normal(x, K, seed, 7, 0, 0.0f, 3.0f);
    for (int64_t k = 0; k < K; k++) {
        if (kind == 1) x[k] = (float)(k % 255 - 127) + (k % 3 ? 0.5f : 0.0f);  // scale 1, ties
        if (kind == 2) x[k] = 0.0f;
        if (kind == 3) x[k] = (float)(k % 7) * 1e-41f;
    }
    if (kind == 1) x[0] = 127.0f;
    if (kind == 4) x[K / 3] = NAN, x[K / 2] = -INFINITY;
    if (kind == 5) x[K - 1] = NAN;  // a NaN in the last (partial) vector, otherwise plain
    if (kind == 6) {  // quotients x / s a few ulps from half-integers, where x * (1 / s) may round apart
        const float amax = 100.3f, s = amax / 127.0f;
        for (int64_t k = 0; k < K; k++) {
            float v = ((float)(k % 253) - 126.0f + 0.5f) * s;
            for (int64_t u = k / 253 % 7; u > 0; u--) v = nextafterf(v, k % 2 ? INFINITY : -INFINITY);
            x[k] = fminf(amax, fmaxf(-amax, v));
        }
        x[0] = amax;
    }
}

// Lanes of a kind-6 row whose code by x * (1 / s) differs from the one by x / s: the row must
// have some, or it would not tell the division rule's kernels from a plain multiply.
static int64_t quotient_splits(const float *x, int64_t K, float s) {
    int64_t n = 0;
    for (int64_t k = 0; k < K; k++) n += nearbyintf(x[k] * (1.0f / s)) != nearbyintf(x[k] / s);
    return n;
}

// Every QACT_DIV row of the table against the division rule's reference, bit for bit.
static int check_div_kernels(const trit_kernel_entry *t, int nt, const float *x, int64_t K, int64_t G, int kind) {
    int8_t want[3072], got[3072];
    float ws, gs;
    int32_t wsum[48], gsum[48];
    int ran = 0;
    trit_kernel_qact_div_ref(x, K, G, want, &ws, wsum);
    for (int i = 0; i < nt; i++) {
        if (t[i].id != TRIT_KERNEL_QACT_DIV || (t[i].needs & ~trit_cpu_usable_features())) continue;
        memset(got, 0x55, sizeof got);
        ((trit_kernel_qact_fn *)t[i].fn)(x, K, G, got, &gs, gsum);
        if (memcmp(got, want, (size_t)K) != 0 || memcmp(&gs, &ws, sizeof ws) != 0 ||
            memcmp(gsum, wsum, sizeof(int32_t) * (size_t)(K / G)) != 0)
            fail_msg("%s kind %d K=%lld G=%lld differs from the reference", t[i].name, kind, (long long)K, (long long)G);
        if (K < 3072) assert_int_equal(got[K], 0x55);
        ran++;
    }
    return ran;
}

static void test_qact_kernels_match_reference(void **state) {
    (void)state;
    const uint32_t usable = trit_cpu_usable_features();
    int nt, tested = 0;
    const trit_kernel_entry *t = trit_kernel_table(&nt);
    const int64_t Ks[4] = {64, 136, 768, 3072}, Gs[4] = {64, 136, 64, 3072};
    float x[3072];
    int8_t want[3072], got[3072];
    float ws, gs;
    int32_t wsum[48], gsum[48];
    census cen = {.what = "activation quantizers"};
    for (int i = 0; i < nt; i++)
        if (t[i].id == TRIT_KERNEL_QACT) census_count(&cen, t[i].name, t[i].needs, census_level_features());
    int div_ran = 0;
    for (int kind = 0; kind < 7; kind++)
        for (int s = 0; s < 4; s++) {
            const int64_t K = Ks[s], G = Gs[s];
            fill_row(x, K, kind, (uint64_t)(10 * kind + s));
            div_ran += check_div_kernels(t, nt, x, K, G, kind);
            if (kind == 6 && K >= 768) assert_true(quotient_splits(x, K, x[0] / 127.0f) > 0);
            trit_kernel_qact_ref(x, K, G, want, &ws, wsum);
            float amax = 0;
            for (int64_t k = 0; k < K; k++) amax = isnan(x[k]) ? amax : fmaxf(amax, fabsf(x[k]));
            assert_true(ws == amax / 127.0f);
            for (int64_t k = 0; k < K; k++) {
                const float v = x[k] * (ws > 0 ? 1.0f / ws : 0.0f);
                const float c = isnan(v) ? 0.0f : fminf(127.0f, fmaxf(-127.0f, nearbyintf(v)));
                if ((float)want[k] != c) fail_msg("kind %d K=%lld: code %lld is %d, want %g", kind, (long long)K, (long long)k, want[k], c);
            }
            for (int i = 0; i < nt; i++) {
                if (t[i].id != TRIT_KERNEL_QACT) continue;
                if (t[i].needs & ~usable) continue;
                memset(got, 0x55, sizeof got);
                ((trit_kernel_qact_fn *)t[i].fn)(x, K, G, got, &gs, gsum);
                if (memcmp(got, want, (size_t)K) != 0 || memcmp(&gs, &ws, sizeof ws) != 0 ||
                    memcmp(gsum, wsum, sizeof(int32_t) * (size_t)(K / G)) != 0)
                    fail_msg("%s kind %d K=%lld G=%lld differs from the reference", t[i].name, kind, (long long)K,
                             (long long)G);
                if (K < 3072) assert_int_equal(got[K], 0x55);  // nothing written past the row
                tested += kind == 0 && s == 0;
                if (kind == 0 && s == 0) census_ran(&cen);
            }
        }
    assert_true(tested >= 1);
    assert_true(div_ran >= 1);
    census_check(&cen);
}

static void test_panels_refuse_bad_shapes(void **state) {
    (void)state;
    uint8_t w[64] = {0};
    float ws[4] = {1, 1, 1, 1};
    trit_qpanels p;
    assert_int_equal(trit_qpanels_pack(TRIT_QINT4, 1, 96, 48, w, ws, &p), TRIT_ERR_INVALID);
    assert_null(p.codes);
    assert_int_equal(trit_qpanels_pack(TRIT_TERNARY, 1, 128, 32, w, ws, &p), TRIT_ERR_INVALID);
    assert_int_equal(trit_qpanels_pack(TRIT_NF4, 1, 64, 64, w, ws, &p), TRIT_ERR_INVALID);
    assert_int_equal(trit_qpanels_pack(TRIT_QINT8, 0, 64, 64, w, ws, &p), TRIT_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_quantizer),
        cmocka_unit_test(test_reference_matches_formula),
        cmocka_unit_test(test_every_kernel_matches_reference),
        cmocka_unit_test(test_nf4_kernels),
        cmocka_unit_test(test_nf4_nonfinite_tokens),
        cmocka_unit_test(test_fp8_kernels),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_tokens_alone_or_together),
        cmocka_unit_test(test_panels_match_reference),
        cmocka_unit_test(test_panels_refuse_bad_shapes),
        cmocka_unit_test(test_qact_kernels_match_reference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
