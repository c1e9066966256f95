// AVX-512 row kernels (contracts in kernels/rowops.h). Rows are walked 16 floats at a time with a
// masked tail, so any length works without a scalar remainder loop. Sums the reference takes in
// double are taken here in double too, 8 lanes per vector (float halves widened), in an order
// fixed by the row length alone. Element formulas keep the reference's operation order and use
// no fused multiply-add, so given the same statistics and exponentials they round the same way
// (the GELU slope excepted: it shares one division between its two terms).
#include "kernels/rowops.h"

#include "kernels/x86/exp_avx512.h"

#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

static inline __mmask16 tail_mask(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1);
}
static inline __m512 load(__mmask16 k, const float *p) { return _mm512_maskz_loadu_ps(k, p); }
static inline __m512d lo_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
static inline __m512d hi_pd(__m512 v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }
static inline __m512 to_ps(__m512d lo, __m512d hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}
static inline __m512 set1(float v) { return _mm512_set1_ps(v); }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t index_at(const void *idx, bool i64, int64_t i) {
    return i64 ? ((const int64_t *)idx)[i] : (int64_t)((const int32_t *)idx)[i];
}

// Column sums walk every row of a column block. Each column is summed over rows in order
// whatever the blocks, so the split is free to follow the thread count: one block per thread
// (a multiple of 16 wide, at most COLS_MAX), which keeps each row's run long enough for the
// hardware prefetchers and every thread busy.
#define COLS_MAX 1024

static int64_t col_block_width(int64_t N, bool parallel) {
    const int64_t T = parallel ? omp_get_max_threads() : 1;
    int64_t nb = T;
    while ((N + nb - 1) / nb > COLS_MAX) nb += T;
    const int64_t w = (N + nb - 1) / nb;
    return (w + 15) / 16 * 16;
}

// ---- layernorm / rmsnorm ---------------------------------------------------------------------

// One row: s = x + r when r, then the norm of v = s or x.
static void norm_fwd_row(float *y, double *st, float *s, const float *x, const float *r, const float *w,
                         const float *b, int64_t C, double eps, bool center) {
    const float *v = x;
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    if (r || center) {
        for (int64_t j = 0; j < C; j += 16) {
            const __mmask16 k = tail_mask(C - j);
            __m512 xv = load(k, x + j);
            if (r) {
                xv = _mm512_add_ps(xv, load(k, r + j));
                _mm512_mask_storeu_ps(s + j, k, xv);
            }
            a0 = _mm512_add_pd(a0, lo_pd(xv));
            a1 = _mm512_add_pd(a1, hi_pd(xv));
        }
        if (r) v = s;
    }
    const double mean = center ? _mm512_reduce_add_pd(_mm512_add_pd(a0, a1)) / (double)C : 0.0;
    const __m512d mv = _mm512_set1_pd(mean);
    a0 = a1 = _mm512_setzero_pd();
    for (int64_t j = 0; j < C; j += 16) {
        const __mmask16 k = tail_mask(C - j);
        const __m512 xv = load(k, v + j);
        const __m512d d0 = _mm512_maskz_sub_pd((__mmask8)k, lo_pd(xv), mv);
        const __m512d d1 = _mm512_maskz_sub_pd((__mmask8)(k >> 8), hi_pd(xv), mv);
        a0 = _mm512_fmadd_pd(d0, d0, a0);
        a1 = _mm512_fmadd_pd(d1, d1, a1);
    }
    const double var = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
    const double rstd = 1.0 / sqrt(var / (double)C + eps);
    st[0] = mean;
    st[1] = rstd;
    const __m512 m = set1((float)mean), sd = set1((float)rstd);
    for (int64_t j = 0; j < C; j += 16) {
        const __mmask16 k = tail_mask(C - j);
        __m512 t = _mm512_mul_ps(_mm512_sub_ps(load(k, v + j), m), sd);
        if (w) t = _mm512_mul_ps(t, load(k, w + j));
        if (b) t = _mm512_add_ps(t, load(k, b + j));
        _mm512_mask_storeu_ps(y + j, k, t);
    }
}

void trit_kernel_norm_fwd_avx512(float *y, double *stats, float *s, const float *x, const float *r,
                                 const float *w, const float *b, int64_t rows, int64_t C, double eps, bool center) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++)
        norm_fwd_row(y + i * C, stats + 2 * i, r ? s + i * C : NULL, x + i * C, r ? r + i * C : NULL, w, b, C, eps,
                     center);
}

static void norm_bwd_x_row(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                           const float *w, const double *st, int64_t C, bool center) {
    const __m512d mean = _mm512_set1_pd(st[0]), rstd = _mm512_set1_pd(st[1]);
    __m512d g0 = _mm512_setzero_pd(), g1 = _mm512_setzero_pd(), gx0 = _mm512_setzero_pd(), gx1 = _mm512_setzero_pd();
    for (int64_t j = 0; j < C; j += 16) {  // masked lanes load dy = 0, so they add nothing
        const __mmask16 k = tail_mask(C - j);
        const __m512 dyv = load(k, dy + j), xv = load(k, x + j);
        __m512d d0 = lo_pd(dyv), d1 = hi_pd(dyv);
        if (w) {
            const __m512 wv = load(k, w + j);
            d0 = _mm512_mul_pd(d0, lo_pd(wv));
            d1 = _mm512_mul_pd(d1, hi_pd(wv));
        }
        g0 = _mm512_add_pd(g0, d0);
        g1 = _mm512_add_pd(g1, d1);
        gx0 = _mm512_fmadd_pd(d0, _mm512_mul_pd(_mm512_sub_pd(lo_pd(xv), mean), rstd), gx0);
        gx1 = _mm512_fmadd_pd(d1, _mm512_mul_pd(_mm512_sub_pd(hi_pd(xv), mean), rstd), gx1);
    }
    const double sum_g = _mm512_reduce_add_pd(_mm512_add_pd(g0, g1));
    const double sum_gx = _mm512_reduce_add_pd(_mm512_add_pd(gx0, gx1));
    const __m512 mg = set1(center ? (float)(sum_g / (double)C) : 0.0f), mgx = set1((float)(sum_gx / (double)C));
    const __m512 m = set1((float)st[0]), sd = set1((float)st[1]);
    for (int64_t j = 0; j < C; j += 16) {
        const __mmask16 k = tail_mask(C - j);
        __m512 g = load(k, dy + j);
        if (w) g = _mm512_mul_ps(g, load(k, w + j));
        const __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_sub_ps(load(k, x + j), m), sd), mgx);
        __m512 d = _mm512_mul_ps(sd, _mm512_sub_ps(_mm512_sub_ps(g, mg), t));
        if (gres) d = _mm512_add_ps(load(k, gres + j), d);
        if (dx) _mm512_mask_storeu_ps(dx + j, k, _mm512_add_ps(load(k, dx + j), d));
        if (dx2) _mm512_mask_storeu_ps(dx2 + j, k, _mm512_add_ps(load(k, dx2 + j), d));
    }
}

void trit_kernel_norm_bwd_x_avx512(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                                   const float *w, const double *stats, int64_t rows, int64_t C, bool center) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++)
        norm_bwd_x_row(dx ? dx + i * C : NULL, dx2 ? dx2 + i * C : NULL, x + i * C, dy + i * C,
                       gres ? gres + i * C : NULL, w, stats + 2 * i, C, center);
}

void trit_kernel_norm_bwd_params_avx512(float *dw, float *db, const float *x, const float *dy,
                                        const double *stats, int64_t rows, int64_t C) {
    const bool par = rows * C >= TRIT_ROWOPS_PAR_MIN;
    const int64_t width = col_block_width(C, par), nblocks = (C + width - 1) / width;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * width, n = min64(C - c0, width), nv = (n + 15) / 16;
        __m512d aw[2 * COLS_MAX / 16], ab[2 * COLS_MAX / 16];
        for (int64_t q = 0; q < 2 * nv; q++) aw[q] = ab[q] = _mm512_setzero_pd();
        for (int64_t i = 0; i < rows; i++) {
            const __m512d mean = _mm512_set1_pd(stats[2 * i]), rstd = _mm512_set1_pd(stats[2 * i + 1]);
            const float *xi = x + i * C + c0, *dyi = dy + i * C + c0;
            for (int64_t q = 0; q < nv; q++) {
                const __mmask16 k = tail_mask(n - 16 * q);
                const __m512 dyv = load(k, dyi + 16 * q), xv = load(k, xi + 16 * q);
                const __m512d d0 = lo_pd(dyv), d1 = hi_pd(dyv);
                const __m512d h0 = _mm512_mul_pd(_mm512_sub_pd(lo_pd(xv), mean), rstd);
                const __m512d h1 = _mm512_mul_pd(_mm512_sub_pd(hi_pd(xv), mean), rstd);
                aw[2 * q] = _mm512_add_pd(aw[2 * q], _mm512_mul_pd(d0, h0));
                aw[2 * q + 1] = _mm512_add_pd(aw[2 * q + 1], _mm512_mul_pd(d1, h1));
                ab[2 * q] = _mm512_add_pd(ab[2 * q], d0);
                ab[2 * q + 1] = _mm512_add_pd(ab[2 * q + 1], d1);
            }
        }
        for (int64_t q = 0; q < nv; q++) {
            const __mmask16 k = tail_mask(n - 16 * q);
            const int64_t j = c0 + 16 * q;
            if (dw) _mm512_mask_storeu_ps(dw + j, k, _mm512_add_ps(load(k, dw + j), to_ps(aw[2 * q], aw[2 * q + 1])));
            if (db) _mm512_mask_storeu_ps(db + j, k, _mm512_add_ps(load(k, db + j), to_ps(ab[2 * q], ab[2 * q + 1])));
        }
    }
}

// ---- GELU (the reference's formulas, kernels/ref/rowops.c) -----------------------------------------

#define GELU_C 0.79788456080286535588f  // sqrt(2/pi)
#define GELU_A 0.044715f

// u = sqrt(2/pi) (v + 0.044715 v^3), e = exp(-2|u|), h = (u >= 0 ? 1 : e) / (1 + e); gelu = v h.
static inline __m512 gelu_h(__m512 v, __m512 *e_out) {
    const __m512 u = _mm512_mul_ps(set1(GELU_C), _mm512_add_ps(v, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(set1(GELU_A), v), v), v)));
    const __m512 e = trit_exp_avx512(_mm512_mul_ps(set1(-2.0f), _mm512_abs_ps(u)));
    const __mmask16 pos = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_GE_OQ);
    *e_out = e;
    return _mm512_div_ps(_mm512_mask_blend_ps(pos, e, set1(1.0f)), _mm512_add_ps(set1(1.0f), e));
}

static inline __m512 gelu_v(__m512 v) {
    __m512 e;
    return _mm512_mul_ps(v, gelu_h(v, &e));
}

// h + v (2e / (1 + e)^2) sqrt(2/pi) (1 + 3 * 0.044715 v^2), the second term only where e != 0.
// One division, 1 / (1 + e), serves both h and the second term (a division costs as much as
// the rest of the slope; the extra roundings stay within two ulps).
static inline __m512 gelu_slope_v(__m512 v) {
    const __m512 u = _mm512_mul_ps(set1(GELU_C), _mm512_add_ps(v, _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(set1(GELU_A), v), v), v)));
    const __m512 e = trit_exp_avx512(_mm512_mul_ps(set1(-2.0f), _mm512_abs_ps(u)));
    const __mmask16 pos = _mm512_cmp_ps_mask(u, _mm512_setzero_ps(), _CMP_GE_OQ);
    const __m512 inv = _mm512_div_ps(set1(1.0f), _mm512_add_ps(set1(1.0f), e));
    const __m512 h = _mm512_mul_ps(_mm512_mask_blend_ps(pos, e, set1(1.0f)), inv);
    const __m512 q = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(set1(2.0f), e), inv), inv);
    const __m512 t = _mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(v, q), set1(GELU_C)),
                                   _mm512_add_ps(set1(1.0f), _mm512_mul_ps(_mm512_mul_ps(set1(3.0f * GELU_A), v), v)));
    const __mmask16 nz = _mm512_cmp_ps_mask(e, _mm512_setzero_ps(), _CMP_NEQ_UQ);
    return _mm512_mask_add_ps(h, nz, h, t);
}

void trit_kernel_gelu_fwd_avx512(float *y, const float *x, const float *b, int64_t rows, int64_t N) {
    if (!b) {
        const int64_t n = rows * N, nchunks = (n + TRIT_ROWOPS_CHUNK - 1) / TRIT_ROWOPS_CHUNK;
#pragma omp parallel for schedule(static) if (n >= TRIT_ROWOPS_PAR_MIN)
        for (int64_t c = 0; c < nchunks; c++) {
            const int64_t hi = min64(n, (c + 1) * TRIT_ROWOPS_CHUNK);
            for (int64_t i = c * TRIT_ROWOPS_CHUNK; i < hi; i += 16) {
                const __mmask16 k = tail_mask(hi - i);
                _mm512_mask_storeu_ps(y + i, k, gelu_v(load(k, x + i)));
            }
        }
        return;
    }
#pragma omp parallel for schedule(static) if (rows * N >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < N; j += 16) {
            const __mmask16 k = tail_mask(N - j);
            _mm512_mask_storeu_ps(y + i * N + j, k, gelu_v(_mm512_add_ps(load(k, x + i * N + j), load(k, b + j))));
        }
}

// dx += g * gelu'(x + b) over n elements; b: (n) or NULL.
static void gelu_bwd_dx_row(float *dx, const float *x, const float *b, const float *g, int64_t n) {
    for (int64_t j = 0; j < n; j += 16) {
        const __mmask16 k = tail_mask(n - j);
        __m512 v = load(k, x + j);
        if (b) v = _mm512_add_ps(v, load(k, b + j));
        const __m512 d = _mm512_mul_ps(load(k, g + j), gelu_slope_v(v));
        _mm512_mask_storeu_ps(dx + j, k, _mm512_add_ps(load(k, dx + j), d));
    }
}

void trit_kernel_gelu_bwd_avx512(float *dx, float *db, const float *x, const float *b, const float *g,
                                 int64_t rows, int64_t N) {
    if (!db) {
        if (!dx) return;
        if (!b) {
            const int64_t n = rows * N, nchunks = (n + TRIT_ROWOPS_CHUNK - 1) / TRIT_ROWOPS_CHUNK;
#pragma omp parallel for schedule(static) if (n >= TRIT_ROWOPS_PAR_MIN)
            for (int64_t c = 0; c < nchunks; c++) {
                const int64_t lo = c * TRIT_ROWOPS_CHUNK;
                gelu_bwd_dx_row(dx + lo, x + lo, NULL, g + lo, min64(n, lo + TRIT_ROWOPS_CHUNK) - lo);
            }
            return;
        }
#pragma omp parallel for schedule(static) if (rows * N >= TRIT_ROWOPS_PAR_MIN)
        for (int64_t i = 0; i < rows; i++) gelu_bwd_dx_row(dx + i * N, x + i * N, b, g + i * N, N);
        return;
    }
    const bool par = rows * N >= TRIT_ROWOPS_PAR_MIN;
    const int64_t width = col_block_width(N, par), nblocks = (N + width - 1) / width;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * width, n = min64(N - c0, width), nv = (n + 15) / 16;
        __m512d acc[2 * COLS_MAX / 16];
        for (int64_t q = 0; q < 2 * nv; q++) acc[q] = _mm512_setzero_pd();
        for (int64_t i = 0; i < rows; i++) {
            for (int64_t q = 0; q < nv; q++) {
                const __mmask16 k = tail_mask(n - 16 * q);
                const int64_t off = i * N + c0 + 16 * q;
                __m512 v = load(k, x + off);
                if (b) v = _mm512_add_ps(v, load(k, b + c0 + 16 * q));
                const __m512 d = _mm512_mul_ps(load(k, g + off), gelu_slope_v(v));
                acc[2 * q] = _mm512_add_pd(acc[2 * q], lo_pd(d));
                acc[2 * q + 1] = _mm512_add_pd(acc[2 * q + 1], hi_pd(d));
                if (dx) _mm512_mask_storeu_ps(dx + off, k, _mm512_add_ps(load(k, dx + off), d));
            }
        }
        for (int64_t q = 0; q < nv; q++) {
            const __mmask16 k = tail_mask(n - 16 * q);
            float *dst = db + c0 + 16 * q;
            _mm512_mask_storeu_ps(dst, k, _mm512_add_ps(load(k, dst), to_ps(acc[2 * q], acc[2 * q + 1])));
        }
    }
}

// ---- softmax, log-softmax, cross-entropy ----------------------------------------------------------

// Max of a row (NaN lanes are skipped here; they still turn the sum, and so the row, into NaN).
static float row_max(const float *x, int64_t C) {
    __m512 m = set1(-INFINITY);
    for (int64_t j = 0; j < C; j += 16) {
        const __mmask16 k = tail_mask(C - j);
        m = _mm512_max_ps(_mm512_mask_loadu_ps(set1(-INFINITY), k, x + j), m);
    }
    return _mm512_reduce_max_ps(m);
}

// sum(exp(x - m)) in double; when e is not NULL the exponentials are stored there.
static double row_sumexp(float *e, const float *x, float m, int64_t C) {
    const __m512 mv = set1(m);
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
    for (int64_t j = 0; j < C; j += 16) {
        const __mmask16 k = tail_mask(C - j);
        const __m512 ev = trit_exp_avx512(_mm512_sub_ps(load(k, x + j), mv));
        if (e) _mm512_mask_storeu_ps(e + j, k, ev);
        s0 = _mm512_mask_add_pd(s0, (__mmask8)k, s0, lo_pd(ev));
        s1 = _mm512_mask_add_pd(s1, (__mmask8)(k >> 8), s1, hi_pd(ev));
    }
    return _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
}

void trit_kernel_softmax_fwd_avx512(float *y, const float *x, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * C;
        float *yi = y + i * C;
        const double s = row_sumexp(yi, xi, row_max(xi, C), C);
        const __m512 inv = set1((float)(1.0 / s));
        for (int64_t j = 0; j < C; j += 16) {
            const __mmask16 k = tail_mask(C - j);
            _mm512_mask_storeu_ps(yi + j, k, _mm512_mul_ps(load(k, yi + j), inv));
        }
    }
}

void trit_kernel_softmax_bwd_avx512(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *yi = y + i * C, *dyi = dy + i * C;
        float *dxi = dx + i * C;
        __m512d d0 = _mm512_setzero_pd(), d1 = _mm512_setzero_pd();
        for (int64_t j = 0; j < C; j += 16) {  // float products are exact in double
            const __mmask16 k = tail_mask(C - j);
            const __m512 yv = load(k, yi + j), gv = load(k, dyi + j);
            d0 = _mm512_fmadd_pd(lo_pd(gv), lo_pd(yv), d0);
            d1 = _mm512_fmadd_pd(hi_pd(gv), hi_pd(yv), d1);
        }
        const __m512 d = set1((float)_mm512_reduce_add_pd(_mm512_add_pd(d0, d1)));
        for (int64_t j = 0; j < C; j += 16) {
            const __mmask16 k = tail_mask(C - j);
            const __m512 t = _mm512_mul_ps(load(k, yi + j), _mm512_sub_ps(load(k, dyi + j), d));
            _mm512_mask_storeu_ps(dxi + j, k, _mm512_add_ps(load(k, dxi + j), t));
        }
    }
}

void trit_kernel_log_softmax_fwd_avx512(float *y, const float *x, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * C;
        float *yi = y + i * C;
        const float m = row_max(xi, C);
        const __m512 mv = set1(m), ls = set1((float)log(row_sumexp(NULL, xi, m, C)));
        for (int64_t j = 0; j < C; j += 16) {
            const __mmask16 k = tail_mask(C - j);
            _mm512_mask_storeu_ps(yi + j, k, _mm512_sub_ps(_mm512_sub_ps(load(k, xi + j), mv), ls));
        }
    }
}

void trit_kernel_log_softmax_bwd_avx512(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *yi = y + i * C, *dyi = dy + i * C;
        float *dxi = dx + i * C;
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        for (int64_t j = 0; j < C; j += 16) {
            const __m512 gv = load(tail_mask(C - j), dyi + j);
            s0 = _mm512_add_pd(s0, lo_pd(gv));
            s1 = _mm512_add_pd(s1, hi_pd(gv));
        }
        const __m512 sr = set1((float)_mm512_reduce_add_pd(_mm512_add_pd(s0, s1)));
        for (int64_t j = 0; j < C; j += 16) {
            const __mmask16 k = tail_mask(C - j);
            const __m512 t = _mm512_sub_ps(load(k, dyi + j), _mm512_mul_ps(trit_exp_avx512(load(k, yi + j)), sr));
            _mm512_mask_storeu_ps(dxi + j, k, _mm512_add_ps(load(k, dxi + j), t));
        }
    }
}

void trit_kernel_ce_fwd_avx512(double *stats, double *loss, const float *x, const void *targets, bool t64,
                               int64_t ignore_index, int64_t rows, int64_t V) {
#pragma omp parallel for schedule(static) if (rows * V >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * V;
        const float m = row_max(xi, V);
        const double ls = log(row_sumexp(NULL, xi, m, V));
        stats[2 * i] = m;
        stats[2 * i + 1] = ls;
        const int64_t t = index_at(targets, t64, i);
        loss[i] = t == ignore_index ? 0.0 : ((double)m - (double)xi[t]) + ls;
    }
}

void trit_kernel_ce_bwd_avx512(float *dx, const float *x, const double *stats, const void *targets, bool t64,
                               int64_t ignore_index, float scale, int64_t rows, int64_t V) {
#pragma omp parallel for schedule(static) if (rows * V >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const int64_t t = index_at(targets, t64, i);
        if (t == ignore_index) continue;
        const float *xi = x + i * V;
        float *dxi = dx + i * V;
        const __m512 m = set1((float)stats[2 * i]), ls = set1((float)stats[2 * i + 1]), sc = set1(scale);
        for (int64_t j = 0; j < V; j += 16) {
            const __mmask16 k = tail_mask(V - j);
            const __m512 e = trit_exp_avx512(_mm512_sub_ps(_mm512_sub_ps(load(k, xi + j), m), ls));
            _mm512_mask_storeu_ps(dxi + j, k, _mm512_add_ps(load(k, dxi + j), _mm512_mul_ps(sc, e)));
        }
        dxi[t] -= scale;
    }
}

void trit_kernel_ce_dlogits_avx512(float *L, const double *stats, const void *targets, bool t64,
                                   int64_t ignore_index, float scale, int64_t rows, int64_t V) {
#pragma omp parallel for schedule(static) if (rows * V >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const int64_t t = index_at(targets, t64, i);
        float *li = L + i * V;
        if (t == ignore_index) {
            memset(li, 0, sizeof(float) * (size_t)V);
            continue;
        }
        const __m512 m = set1((float)stats[2 * i]), ls = set1((float)stats[2 * i + 1]), sc = set1(scale);
        for (int64_t j = 0; j < V; j += 16) {
            const __mmask16 k = tail_mask(V - j);
            const __m512 e = trit_exp_avx512(_mm512_sub_ps(_mm512_sub_ps(load(k, li + j), m), ls));
            _mm512_mask_storeu_ps(li + j, k, _mm512_mul_ps(sc, e));
        }
        li[t] -= scale;
    }
}

// ---- embedding backward -------------------------------------------------------------------------

void trit_kernel_embedding_bwd_avx512(float *gw, const float *go, const void *idx, bool i64, int64_t n,
                                      int64_t C) {
    const bool par = n * C >= TRIT_ROWOPS_PAR_MIN;
    const int64_t width = col_block_width(C, par), nblocks = (C + width - 1) / width;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * width, nc = min64(C - c0, width);
        for (int64_t i = 0; i < n; i++) {
            float *dst = gw + index_at(idx, i64, i) * C + c0;
            const float *src = go + i * C + c0;
            for (int64_t j = 0; j < nc; j += 16) {
                const __mmask16 k = tail_mask(nc - j);
                _mm512_mask_storeu_ps(dst + j, k, _mm512_add_ps(load(k, dst + j), load(k, src + j)));
            }
        }
    }
}

// ---- Adam / AdamW -------------------------------------------------------------------------------

static void adam_chunk(float *p, const float *g, float *m, float *v, int64_t n, const trit_adam_scalars *s,
                       bool decoupled) {
    const __m512 step = set1(s->step), wd = set1(s->weight_decay), decay_mul = set1(s->decay_mul);
    const __m512 b1 = set1(s->b1), omb1 = set1(s->omb1), b2 = set1(s->b2), omb2 = set1(s->omb2);
    const __m512 bc2 = set1(s->bc2_sqrt), eps = set1(s->eps);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 pv = load(k, p + i), gv = load(k, g + i);
        const __m512 x = decoupled ? _mm512_mul_ps(pv, decay_mul) : pv;
        const __m512 d = decoupled ? gv : _mm512_add_ps(gv, _mm512_mul_ps(wd, pv));
        const __m512 mi = _mm512_add_ps(_mm512_mul_ps(load(k, m + i), b1), _mm512_mul_ps(omb1, d));
        const __m512 vi = _mm512_add_ps(_mm512_mul_ps(load(k, v + i), b2), _mm512_mul_ps(_mm512_mul_ps(omb2, d), d));
        _mm512_mask_storeu_ps(m + i, k, mi);
        _mm512_mask_storeu_ps(v + i, k, vi);
        const __m512 den = _mm512_add_ps(_mm512_div_ps(_mm512_sqrt_ps(vi), bc2), eps);
        _mm512_mask_storeu_ps(p + i, k, _mm512_add_ps(x, _mm512_div_ps(_mm512_mul_ps(step, mi), den)));
    }
}

void trit_kernel_adam_avx512(float *p, const float *g, float *m, float *v, int64_t n, const trit_adam_scalars *s,
                             bool decoupled) {
    const int64_t nchunks = (n + TRIT_ROWOPS_CHUNK - 1) / TRIT_ROWOPS_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * TRIT_ROWOPS_CHUNK)
    for (int64_t c = 0; c < nchunks; c++) {
        const int64_t lo = c * TRIT_ROWOPS_CHUNK;
        adam_chunk(p + lo, g + lo, m + lo, v + lo, min64(n, lo + TRIT_ROWOPS_CHUNK) - lo, s, decoupled);
    }
}
