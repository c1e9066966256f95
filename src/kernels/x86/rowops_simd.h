// The row kernels (contracts in kernels/rowops.h) written once against the vector vocabulary of
// x86/simd_avx512.h or x86/simd_avx2.h; x86/rowops_avx512.c and x86/rowops_avx2.c include this
// file after one of them, and the exported names get its suffix (trit_kernel_norm_fwd_avx2...).
//
// Rows are walked SIMD_VL floats at a time with a masked tail, so any length works without a
// scalar remainder loop. Sums the reference takes in double are taken here in double too, half a
// vector at a time (float halves widened), in an order fixed by the row length alone. Element
// formulas keep the reference's operation order and use no fused multiply-add, so given the same
// statistics and exponentials they round the same way (the GELU slope excepted: it shares one
// division between its two terms). Each width has its own (fixed) summation order, so AVX2 and
// AVX-512 agree with each other as each agrees with the reference: to about 1e-6 relative, and
// bit for bit in the column sums, embedding and Adam.
#include "kernels/rowops.h"

#include <math.h>
#include <omp.h>
#include <string.h>

#define ROWOPS_CAT_(a, b) a##_##b
#define ROWOPS_CAT(a, b) ROWOPS_CAT_(a, b)
#define ROWOPS_FN(name) ROWOPS_CAT(trit_kernel_##name, SIMD_SUFFIX)
#define VL SIMD_VL

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t index_at(const void *idx, bool i64, int64_t i) {
    return i64 ? ((const int64_t *)idx)[i] : (int64_t)((const int32_t *)idx)[i];
}

// Column sums walk every row of a column block. Each column is summed over rows in order
// whatever the blocks, so the split is free to follow the thread count: one block per thread
// (a multiple of VL wide, at most COLS_MAX), which keeps each row's run long enough for the
// hardware prefetchers and every thread busy.
#define COLS_MAX 1024

static int64_t col_block_width(int64_t N, bool parallel) {
    const int64_t T = parallel ? omp_get_max_threads() : 1;
    int64_t nb = T;
    while ((N + nb - 1) / nb > COLS_MAX) nb += T;
    const int64_t w = (N + nb - 1) / nb;
    return (w + VL - 1) / VL * VL;
}

// ---- layernorm / rmsnorm ---------------------------------------------------------------------

// Sum of x + r (stored to s) or of x, in double.
static double norm_row_sum(float *s, const float *x, const float *r, int64_t C) {
    vd a0 = vd_zero(), a1 = vd_zero();
    for (int64_t j = 0; j < C; j += VL) {
        const vtail k = vtail_of(C - j);
        vf xv = vload(k, x + j);
        if (r) {
            xv = vadd(xv, vload(k, r + j));
            vstore(s + j, k, xv);
        }
        a0 = vd_add(a0, vd_lo(xv));
        a1 = vd_add(a1, vd_hi(xv));
    }
    return vd_reduce_add(vd_add(a0, a1));
}

// One row: s = x + r when r, then the norm of v = s or x.
static void norm_fwd_row(float *y, double *st, float *s, const float *x, const float *r, const float *w,
                         const float *b, int64_t C, double eps, bool center) {
    double mean = 0.0;
    if (r || center) {
        const double sum = norm_row_sum(s, x, r, C);
        if (center) mean = sum / (double)C;
    }
    const float *v = r ? s : x;
    const vd mv = vd_set1(mean);
    vd a0 = vd_zero(), a1 = vd_zero();
    for (int64_t j = 0; j < C; j += VL) {
        const vtail k = vtail_of(C - j);
        const vf xv = vload(k, v + j);
        const vd d0 = vd_sub_or0(vtail_lo(k), vd_lo(xv), mv), d1 = vd_sub_or0(vtail_hi(k), vd_hi(xv), mv);
        a0 = vd_fmadd(d0, d0, a0);
        a1 = vd_fmadd(d1, d1, a1);
    }
    const double var = vd_reduce_add(vd_add(a0, a1));
    const double rstd = 1.0 / sqrt(var / (double)C + eps);
    st[0] = mean;
    st[1] = rstd;
    const vf m = vset1((float)mean), sd = vset1((float)rstd);
    for (int64_t j = 0; j < C; j += VL) {
        const vtail k = vtail_of(C - j);
        vf t = vmul(vsub(vload(k, v + j), m), sd);
        if (w) t = vmul(t, vload(k, w + j));
        if (b) t = vadd(t, vload(k, b + j));
        vstore(y + j, k, t);
    }
}

void ROWOPS_FN(norm_fwd)(float *y, double *stats, float *s, const float *x, const float *r, const float *w,
                         const float *b, int64_t rows, int64_t C, double eps, bool center) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++)
        norm_fwd_row(y + i * C, stats + 2 * i, r ? s + i * C : NULL, x + i * C, r ? r + i * C : NULL, w, b, C, eps,
                     center);
}

// sum(g) and sum(g * xhat) of one row, g = dy * w, in double.
static void norm_bwd_sums(double *sum_g, double *sum_gx, const float *x, const float *dy, const float *w,
                          const double *st, int64_t C) {
    const vd mean = vd_set1(st[0]), rstd = vd_set1(st[1]);
    vd g0 = vd_zero(), g1 = vd_zero(), gx0 = vd_zero(), gx1 = vd_zero();
    for (int64_t j = 0; j < C; j += VL) {  // masked lanes load dy = 0, so they add nothing
        const vtail k = vtail_of(C - j);
        const vf dyv = vload(k, dy + j), xv = vload(k, x + j);
        vd d0 = vd_lo(dyv), d1 = vd_hi(dyv);
        if (w) {
            const vf wv = vload(k, w + j);
            d0 = vd_mul(d0, vd_lo(wv));
            d1 = vd_mul(d1, vd_hi(wv));
        }
        g0 = vd_add(g0, d0);
        g1 = vd_add(g1, d1);
        gx0 = vd_fmadd(d0, vd_mul(vd_sub(vd_lo(xv), mean), rstd), gx0);
        gx1 = vd_fmadd(d1, vd_mul(vd_sub(vd_hi(xv), mean), rstd), gx1);
    }
    *sum_g = vd_reduce_add(vd_add(g0, g1));
    *sum_gx = vd_reduce_add(vd_add(gx0, gx1));
}

static void norm_bwd_x_row(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                           const float *w, const double *st, int64_t C, bool center, bool store) {
    double sum_g, sum_gx;
    norm_bwd_sums(&sum_g, &sum_gx, x, dy, w, st, C);
    const vf mg = vset1(center ? (float)(sum_g / (double)C) : 0.0f), mgx = vset1((float)(sum_gx / (double)C));
    const vf m = vset1((float)st[0]), sd = vset1((float)st[1]);
    for (int64_t j = 0; j < C; j += VL) {
        const vtail k = vtail_of(C - j);
        vf g = vload(k, dy + j);
        if (w) g = vmul(g, vload(k, w + j));
        const vf t = vmul(vmul(vsub(vload(k, x + j), m), sd), mgx);
        vf d = vmul(sd, vsub(vsub(g, mg), t));
        if (gres) d = vadd(vload(k, gres + j), d);
        if (dx) vstore(dx + j, k, store ? d : vadd(vload(k, dx + j), d));
        if (dx2) vstore(dx2 + j, k, store ? d : vadd(vload(k, dx2 + j), d));
    }
}

void ROWOPS_FN(norm_bwd_x)(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                           const float *w, const double *stats, int64_t rows, int64_t C, bool center,
                           bool store) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++)
        norm_bwd_x_row(dx ? dx + i * C : NULL, dx2 ? dx2 + i * C : NULL, x + i * C, dy + i * C,
                       gres ? gres + i * C : NULL, w, stats + 2 * i, C, center, store);
}

// Adds the column sums of one block (acc: two vd a vector of columns, nv vectors) into dst.
static void add_col_sums(float *dst, const vd *acc, int64_t n) {
    for (int64_t q = 0; q < (n + VL - 1) / VL; q++) {
        const vtail k = vtail_of(n - VL * q);
        vstore(dst + VL * q, k, vadd(vload(k, dst + VL * q), vf_of(acc[2 * q], acc[2 * q + 1])));
    }
}

void ROWOPS_FN(norm_bwd_params)(float *dw, float *db, const float *x, const float *dy, const double *stats,
                                int64_t rows, int64_t C) {
    const bool par = rows * C >= TRIT_ROWOPS_PAR_MIN;
    const int64_t width = col_block_width(C, par), nblocks = (C + width - 1) / width;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * width, n = min64(C - c0, width), nv = (n + VL - 1) / VL;
        vd aw[2 * COLS_MAX / VL], ab[2 * COLS_MAX / VL];
        for (int64_t q = 0; q < 2 * nv; q++) aw[q] = ab[q] = vd_zero();
        for (int64_t i = 0; i < rows; i++) {
            const vd mean = vd_set1(stats[2 * i]), rstd = vd_set1(stats[2 * i + 1]);
            const float *xi = x + i * C + c0, *dyi = dy + i * C + c0;
            for (int64_t q = 0; q < nv; q++) {
                const vtail k = vtail_of(n - VL * q);
                const vf dyv = vload(k, dyi + VL * q), xv = vload(k, xi + VL * q);
                const vd d0 = vd_lo(dyv), d1 = vd_hi(dyv);
                const vd h0 = vd_mul(vd_sub(vd_lo(xv), mean), rstd), h1 = vd_mul(vd_sub(vd_hi(xv), mean), rstd);
                aw[2 * q] = vd_add(aw[2 * q], vd_mul(d0, h0));
                aw[2 * q + 1] = vd_add(aw[2 * q + 1], vd_mul(d1, h1));
                ab[2 * q] = vd_add(ab[2 * q], d0);
                ab[2 * q + 1] = vd_add(ab[2 * q + 1], d1);
            }
        }
        if (dw) add_col_sums(dw + c0, aw, n);
        if (db) add_col_sums(db + c0, ab, n);
    }
}

// ---- GELU (the reference's formulas, kernels/ref/rowops.c) -----------------------------------------

#define GELU_C 0.79788456080286535588f  // sqrt(2/pi)
#define GELU_A 0.044715f

// u = sqrt(2/pi) (v + 0.044715 v^3) and e = exp(-2|u|).
static inline vf gelu_u(vf v, vf *e) {
    const vf u = vmul(vset1(GELU_C), vadd(v, vmul(vmul(vmul(vset1(GELU_A), v), v), v)));
    *e = vexp(vmul(vset1(-2.0f), vabs(u)));
    return u;
}

// gelu = v h, h = (u >= 0 ? 1 : e) / (1 + e).
static inline vf gelu_v(vf v) {
    vf e;
    const vf u = gelu_u(v, &e);
    return vmul(v, vdiv(vselect(vge0(u), e, vset1(1.0f)), vadd(vset1(1.0f), e)));
}

// h + v (2e / (1 + e)^2) sqrt(2/pi) (1 + 3 * 0.044715 v^2), the second term only where e != 0.
// One division, 1 / (1 + e), serves both h and the second term (a division costs as much as
// the rest of the slope; the extra roundings stay within two ulps).
static inline vf gelu_slope_v(vf v) {
    vf e;
    const vf u = gelu_u(v, &e);
    const vf inv = vdiv(vset1(1.0f), vadd(vset1(1.0f), e));
    const vf h = vmul(vselect(vge0(u), e, vset1(1.0f)), inv);
    const vf q = vmul(vmul(vmul(vset1(2.0f), e), inv), inv);
    const vf t = vmul(vmul(vmul(v, q), vset1(GELU_C)), vadd(vset1(1.0f), vmul(vmul(vset1(3.0f * GELU_A), v), v)));
    return vadd_where(vne0(e), h, t);
}

void ROWOPS_FN(gelu_fwd)(float *y, const float *x, const float *b, int64_t rows, int64_t N) {
    if (!b) {
        const int64_t n = rows * N, nchunks = (n + TRIT_ROWOPS_CHUNK - 1) / TRIT_ROWOPS_CHUNK;
#pragma omp parallel for schedule(static) if (n >= TRIT_ROWOPS_PAR_MIN)
        for (int64_t c = 0; c < nchunks; c++) {
            const int64_t hi = min64(n, (c + 1) * TRIT_ROWOPS_CHUNK);
            for (int64_t i = c * TRIT_ROWOPS_CHUNK; i < hi; i += VL) {
                const vtail k = vtail_of(hi - i);
                vstore(y + i, k, gelu_v(vload(k, x + i)));
            }
        }
        return;
    }
#pragma omp parallel for schedule(static) if (rows * N >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < N; j += VL) {
            const vtail k = vtail_of(N - j);
            vstore(y + i * N + j, k, gelu_v(vadd(vload(k, x + i * N + j), vload(k, b + j))));
        }
}

// dx += g * gelu'(x + b) over n elements; b: (n) or NULL.
static void gelu_bwd_dx_row(float *dx, const float *x, const float *b, const float *g, int64_t n) {
    for (int64_t j = 0; j < n; j += VL) {
        const vtail k = vtail_of(n - j);
        vf v = vload(k, x + j);
        if (b) v = vadd(v, vload(k, b + j));
        const vf d = vmul(vload(k, g + j), gelu_slope_v(v));
        vstore(dx + j, k, vadd(dx == g ? vzero() : vload(k, dx + j), d));  // in place: 0 + d, as into a zeroed dx
    }
}

static void gelu_bwd_dx(float *dx, const float *x, const float *b, const float *g, int64_t rows, int64_t N) {
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
}

void ROWOPS_FN(gelu_bwd)(float *dx, float *db, const float *x, const float *b, const float *g, int64_t rows,
                         int64_t N) {
    if (!db) {
        if (dx) gelu_bwd_dx(dx, x, b, g, rows, N);
        return;
    }
    const bool par = rows * N >= TRIT_ROWOPS_PAR_MIN;
    const int64_t width = col_block_width(N, par), nblocks = (N + width - 1) / width;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * width, n = min64(N - c0, width), nv = (n + VL - 1) / VL;
        vd acc[2 * COLS_MAX / VL];
        for (int64_t q = 0; q < 2 * nv; q++) acc[q] = vd_zero();
        for (int64_t i = 0; i < rows; i++) {
            for (int64_t q = 0; q < nv; q++) {
                const vtail k = vtail_of(n - VL * q);
                const int64_t off = i * N + c0 + VL * q;
                vf v = vload(k, x + off);
                if (b) v = vadd(v, vload(k, b + c0 + VL * q));
                const vf d = vmul(vload(k, g + off), gelu_slope_v(v));
                acc[2 * q] = vd_add(acc[2 * q], vd_lo(d));
                acc[2 * q + 1] = vd_add(acc[2 * q + 1], vd_hi(d));
                if (dx) vstore(dx + off, k, vadd(dx == g ? vzero() : vload(k, dx + off), d));
            }
        }
        add_col_sums(db + c0, acc, n);
    }
}

// ---- softmax, log-softmax, cross-entropy ----------------------------------------------------------

// Max of a row (NaN lanes are skipped here; they still turn the sum, and so the row, into NaN).
static float row_max(const float *x, int64_t C) {
    vf m = vset1(-INFINITY);
    for (int64_t j = 0; j < C; j += VL) m = vmax(vload_or(vset1(-INFINITY), vtail_of(C - j), x + j), m);
    return vreduce_max(m);
}

// sum(exp(x - m)) in double; when e is not NULL the exponentials are stored there.
static double row_sumexp(float *e, const float *x, float m, int64_t C) {
    const vf mv = vset1(m);
    vd s0 = vd_zero(), s1 = vd_zero();
    for (int64_t j = 0; j < C; j += VL) {
        const vtail k = vtail_of(C - j);
        const vf ev = vexp(vsub(vload(k, x + j), mv));
        if (e) vstore(e + j, k, ev);
        s0 = vd_add_in(vtail_lo(k), s0, vd_lo(ev));
        s1 = vd_add_in(vtail_hi(k), s1, vd_hi(ev));
    }
    return vd_reduce_add(vd_add(s0, s1));
}

// Sum of a row, in double (products of floats, when y is given, are exact in double).
static double row_dot(const float *g, const float *y, int64_t C) {
    vd d0 = vd_zero(), d1 = vd_zero();
    for (int64_t j = 0; j < C; j += VL) {
        const vtail k = vtail_of(C - j);
        const vf gv = vload(k, g + j);
        if (y) {
            const vf yv = vload(k, y + j);
            d0 = vd_fmadd(vd_lo(gv), vd_lo(yv), d0);
            d1 = vd_fmadd(vd_hi(gv), vd_hi(yv), d1);
        } else {
            d0 = vd_add(d0, vd_lo(gv));
            d1 = vd_add(d1, vd_hi(gv));
        }
    }
    return vd_reduce_add(vd_add(d0, d1));
}

void ROWOPS_FN(softmax_fwd)(float *y, const float *x, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * C;
        float *yi = y + i * C;
        const double s = row_sumexp(yi, xi, row_max(xi, C), C);
        const vf inv = vset1((float)(1.0 / s));
        for (int64_t j = 0; j < C; j += VL) {
            const vtail k = vtail_of(C - j);
            vstore(yi + j, k, vmul(vload(k, yi + j), inv));
        }
    }
}

void ROWOPS_FN(softmax_bwd)(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *yi = y + i * C, *dyi = dy + i * C;
        float *dxi = dx + i * C;
        const vf d = vset1((float)row_dot(dyi, yi, C));
        for (int64_t j = 0; j < C; j += VL) {
            const vtail k = vtail_of(C - j);
            const vf t = vmul(vload(k, yi + j), vsub(vload(k, dyi + j), d));
            vstore(dxi + j, k, vadd(vload(k, dxi + j), t));
        }
    }
}

void ROWOPS_FN(log_softmax_fwd)(float *y, const float *x, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *xi = x + i * C;
        float *yi = y + i * C;
        const float m = row_max(xi, C);
        const vf mv = vset1(m), ls = vset1((float)log(row_sumexp(NULL, xi, m, C)));
        for (int64_t j = 0; j < C; j += VL) {
            const vtail k = vtail_of(C - j);
            vstore(yi + j, k, vsub(vsub(vload(k, xi + j), mv), ls));
        }
    }
}

void ROWOPS_FN(log_softmax_bwd)(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const float *yi = y + i * C, *dyi = dy + i * C;
        float *dxi = dx + i * C;
        const vf sr = vset1((float)row_dot(dyi, NULL, C));
        for (int64_t j = 0; j < C; j += VL) {
            const vtail k = vtail_of(C - j);
            const vf t = vsub(vload(k, dyi + j), vmul(vexp(vload(k, yi + j)), sr));
            vstore(dxi + j, k, vadd(vload(k, dxi + j), t));
        }
    }
}

void ROWOPS_FN(ce_fwd)(double *stats, double *loss, const float *x, const void *targets, bool t64,
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

// out = scale * softmax(x) (+ out when accumulate) over one row, from the forward's stats.
static void ce_scaled_probs(float *out, const float *x, const double *st, float scale, int64_t V, bool accumulate) {
    const vf m = vset1((float)st[0]), ls = vset1((float)st[1]), sc = vset1(scale);
    for (int64_t j = 0; j < V; j += VL) {
        const vtail k = vtail_of(V - j);
        const vf p = vmul(sc, vexp(vsub(vsub(vload(k, x + j), m), ls)));
        vstore(out + j, k, accumulate ? vadd(vload(k, out + j), p) : p);
    }
}

void ROWOPS_FN(ce_bwd)(float *dx, const float *x, const double *stats, const void *targets, bool t64,
                       int64_t ignore_index, float scale, int64_t rows, int64_t V) {
#pragma omp parallel for schedule(static) if (rows * V >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const int64_t t = index_at(targets, t64, i);
        if (t == ignore_index) continue;
        ce_scaled_probs(dx + i * V, x + i * V, stats + 2 * i, scale, V, true);
        dx[i * V + t] -= scale;
    }
}

void ROWOPS_FN(ce_dlogits)(float *L, const double *stats, const void *targets, bool t64, int64_t ignore_index,
                           float scale, int64_t rows, int64_t V, bool bf16) {
#pragma omp parallel for schedule(static) if (rows * V >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const int64_t t = index_at(targets, t64, i);
        float *li = L + i * V;
        if (t == ignore_index) {
            memset(li, 0, sizeof(float) * (size_t)V);
            continue;
        }
        ce_scaled_probs(li, li, stats + 2 * i, scale, V, false);
        li[t] -= scale;
        if (bf16) trit_row_to_bf16_in_place(li, V);
    }
}

// ---- embedding backward -------------------------------------------------------------------------

void ROWOPS_FN(embedding_bwd)(float *gw, const float *go, const void *idx, bool i64, int64_t n, int64_t C) {
    const bool par = n * C >= TRIT_ROWOPS_PAR_MIN;
    const int64_t width = col_block_width(C, par), nblocks = (C + width - 1) / width;
#pragma omp parallel for schedule(static) if (par)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * width, nc = min64(C - c0, width);
        for (int64_t i = 0; i < n; i++) {
            float *dst = gw + index_at(idx, i64, i) * C + c0;
            const float *src = go + i * C + c0;
            for (int64_t j = 0; j < nc; j += VL) {
                const vtail k = vtail_of(nc - j);
                vstore(dst + j, k, vadd(vload(k, dst + j), vload(k, src + j)));
            }
        }
    }
}

// ---- Adam / AdamW -------------------------------------------------------------------------------

static void adam_chunk(float *p, const float *g, float *m, float *v, int64_t n, const trit_adam_scalars *s,
                       bool decoupled) {
    const vf step = vset1(s->step), wd = vset1(s->weight_decay), decay_mul = vset1(s->decay_mul);
    const vf b1 = vset1(s->b1), omb1 = vset1(s->omb1), b2 = vset1(s->b2), omb2 = vset1(s->omb2);
    const vf bc2 = vset1(s->bc2_sqrt), eps = vset1(s->eps);
    for (int64_t i = 0; i < n; i += VL) {
        const vtail k = vtail_of(n - i);
        const vf pv = vload(k, p + i), gv = vload(k, g + i);
        const vf x = decoupled ? vmul(pv, decay_mul) : pv;
        const vf d = decoupled ? gv : vadd(gv, vmul(wd, pv));
        const vf mi = vadd(vmul(vload(k, m + i), b1), vmul(omb1, d));
        const vf vi = vadd(vmul(vload(k, v + i), b2), vmul(vmul(omb2, d), d));
        vstore(m + i, k, mi);
        vstore(v + i, k, vi);
        const vf den = vadd(vdiv(vsqrt(vi), bc2), eps);
        vstore(p + i, k, vadd(x, vdiv(vmul(step, mi), den)));
    }
}

void ROWOPS_FN(adam)(float *p, const float *g, float *m, float *v, int64_t n, const trit_adam_scalars *s,
                     bool decoupled) {
    const int64_t nchunks = (n + TRIT_ROWOPS_CHUNK - 1) / TRIT_ROWOPS_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * TRIT_ROWOPS_CHUNK)
    for (int64_t c = 0; c < nchunks; c++) {
        const int64_t lo = c * TRIT_ROWOPS_CHUNK;
        adam_chunk(p + lo, g + lo, m + lo, v + lo, min64(n, lo + TRIT_ROWOPS_CHUNK) - lo, s, decoupled);
    }
}

// ---- attention of one query over cached keys -----------------------------------------------

// Keys and values are read through vload_f32 or vload_f16 (the f32 and f16 caches), so both
// kernels share one body.
static inline vf vload_f32(vtail k, const float *p) { return vload(k, p); }

// ATTEND_PARTS(T, LOAD) defines, for elements of type T read by LOAD:
// attend_scores_T: p[j0, j0 + 4 VL) = scale * (q . k_j), four vectors of consecutive keys of one
//   key block (4 VL divides it), each one multiply-add per head dimension (lanes past n masked);
// attend_values_T: y[d0, d0 + 4 VL) = inv * sum_j p_j v_j over the head dimensions from d0
//   (lanes past hs masked);
// attend_T: the row (contract in kernels/rowops.h).
#define ATTEND_PARTS(T, LOAD)                                                                                  \
    static void attend_scores_##T(float *p, const float *q, const T *kt, int64_t j0, int64_t n, int64_t hs,    \
                                  float scale) {                                                               \
        const vtail k0 = vtail_of(n - j0), k1 = vtail_of(n - j0 - VL), k2 = vtail_of(n - j0 - 2 * VL),         \
                    k3 = vtail_of(n - j0 - 3 * VL);                                                            \
        vf s0 = vzero(), s1 = vzero(), s2 = vzero(), s3 = vzero();                                             \
        for (int64_t d = 0; d < hs; d++) {                                                                     \
            const T *row = kt + trit_attend_key_at(d, j0, hs);                                                 \
            const vf qd = vset1(q[d]);                                                                         \
            s0 = vfmadd(qd, LOAD(k0, row), s0);                                                                \
            s1 = vfmadd(qd, LOAD(k1, row + VL), s1);                                                           \
            s2 = vfmadd(qd, LOAD(k2, row + 2 * VL), s2);                                                       \
            s3 = vfmadd(qd, LOAD(k3, row + 3 * VL), s3);                                                       \
        }                                                                                                      \
        const vf sc = vset1(scale);                                                                            \
        vstore(p + j0, k0, vmul(s0, sc));                                                                      \
        vstore(p + j0 + VL, k1, vmul(s1, sc));                                                                 \
        vstore(p + j0 + 2 * VL, k2, vmul(s2, sc));                                                             \
        vstore(p + j0 + 3 * VL, k3, vmul(s3, sc));                                                             \
    }                                                                                                          \
    static void attend_values_##T(float *y, const float *p, const T *v, int64_t ldv, int64_t n, int64_t d0,    \
                                  int64_t hs, float inv) {                                                     \
        const vtail k0 = vtail_of(hs - d0), k1 = vtail_of(hs - d0 - VL), k2 = vtail_of(hs - d0 - 2 * VL),      \
                    k3 = vtail_of(hs - d0 - 3 * VL);                                                           \
        vf a0 = vzero(), a1 = vzero(), a2 = vzero(), a3 = vzero();                                             \
        for (int64_t j = 0; j < n; j++) {                                                                      \
            const T *row = v + j * ldv + d0;                                                                   \
            const vf pj = vset1(p[j]);                                                                         \
            a0 = vfmadd(pj, LOAD(k0, row), a0);                                                                \
            a1 = vfmadd(pj, LOAD(k1, row + VL), a1);                                                           \
            a2 = vfmadd(pj, LOAD(k2, row + 2 * VL), a2);                                                       \
            a3 = vfmadd(pj, LOAD(k3, row + 3 * VL), a3);                                                       \
        }                                                                                                      \
        const vf s = vset1(inv);                                                                               \
        vstore(y + d0, k0, vmul(a0, s));                                                                       \
        vstore(y + d0 + VL, k1, vmul(a1, s));                                                                  \
        vstore(y + d0 + 2 * VL, k2, vmul(a2, s));                                                              \
        vstore(y + d0 + 3 * VL, k3, vmul(a3, s));                                                              \
    }                                                                                                          \
    static inline void attend_##T(float *y, float *p, const float *q, const T *kt, const T *v, int64_t ldv,    \
                                  int64_t n, int64_t hs, float scale) {                                        \
        for (int64_t j0 = 0; j0 < n; j0 += 4 * VL) attend_scores_##T(p, q, kt, j0, n, hs, scale);              \
        const float inv = (float)(1.0 / row_sumexp(p, p, row_max(p, n), n));                                   \
        for (int64_t d0 = 0; d0 < hs; d0 += 4 * VL) attend_values_##T(y, p, v, ldv, n, d0, hs, inv);           \
    }

ATTEND_PARTS(float, vload_f32)
ATTEND_PARTS(uint16_t, vload_f16)

void ROWOPS_FN(attend)(float *y, float *p, const float *q, const float *kt, const float *v, int64_t ldv, int64_t n,
                       int64_t hs, float scale) {
    attend_float(y, p, q, kt, v, ldv, n, hs, scale);
}

void ROWOPS_FN(attend_f16)(float *y, float *p, const float *q, const uint16_t *kt, const uint16_t *v, int64_t ldv,
                           int64_t n, int64_t hs, float scale) {
    attend_uint16_t(y, p, q, kt, v, ldv, n, hs, scale);
}
