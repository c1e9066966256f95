// Portable row kernels (the oracle of kernels/rowops.h), compiled for float and double. The
// arithmetic here is the ops' own: the f64 build is the gradient-check path and the f32 build
// is what machines without AVX-512 run.
#include "kernels/rowops.h"

#include "base/real.h"
#include "trit/base.h"

#include <math.h>
#include <string.h>

static inline int64_t index_at(const void *idx, bool i64, int64_t i) {
    return i64 ? ((const int64_t *)idx)[i] : (int64_t)((const int32_t *)idx)[i];
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// ---- layernorm / rmsnorm ---------------------------------------------------------------------

void R(trit_kernel_norm_fwd_ref)(real *y, double *stats, real *s, const real *x, const real *r, const real *w,
                                 const real *b, int64_t rows, int64_t C, double eps, bool center) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const real *xi = x + i * C;
        if (r) {
            real *si = s + i * C;
            const real *ri = r + i * C;
            for (int64_t j = 0; j < C; j++) si[j] = xi[j] + ri[j];
            xi = si;
        }
        real *yi = y + i * C;
        double mean = 0, var = 0;
        if (center) {
            for (int64_t j = 0; j < C; j++) mean += (double)xi[j];
            mean /= (double)C;
        }
        for (int64_t j = 0; j < C; j++) {
            const double d = (double)xi[j] - mean;
            var += d * d;
        }
        const double rstd = 1.0 / sqrt(var / (double)C + eps);
        stats[2 * i] = mean;
        stats[2 * i + 1] = rstd;
        const real m = (real)mean, sd = (real)rstd;
        for (int64_t j = 0; j < C; j++) {
            real v = (xi[j] - m) * sd;
            if (w) v *= w[j];
            if (b) v += b[j];
            yi[j] = v;
        }
    }
}

void R(trit_kernel_norm_bwd_x_ref)(real *dx, real *dx2, const real *x, const real *dy, const real *gres,
                                   const real *w, const double *stats, int64_t rows, int64_t C, bool center,
                                   bool store) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const real *xi = x + i * C, *dyi = dy + i * C;
        const double mean = stats[2 * i], rstd = stats[2 * i + 1];
        double sum_g = 0, sum_gx = 0;
        for (int64_t j = 0; j < C; j++) {
            const double g = (double)dyi[j] * (w ? (double)w[j] : 1.0);
            sum_g += g;
            sum_gx += g * (((double)xi[j] - mean) * rstd);
        }
        const real mg = center ? (real)(sum_g / (double)C) : 0, mgx = (real)(sum_gx / (double)C);
        const real m = (real)mean, sd = (real)rstd;
        for (int64_t j = 0; j < C; j++) {
            const real g = dyi[j] * (w ? w[j] : (real)1);
            real d = sd * (g - mg - (xi[j] - m) * sd * mgx);
            if (gres) d = gres[i * C + j] + d;
            if (dx) dx[i * C + j] = store ? d : dx[i * C + j] + d;
            if (dx2) dx2[i * C + j] = store ? d : dx2[i * C + j] + d;
        }
    }
}

void R(trit_kernel_norm_bwd_params_ref)(real *dw, real *db, const real *x, const real *dy, const double *stats,
                                        int64_t rows, int64_t C) {
    const int64_t nblocks = (C + TRIT_ROWOPS_COL_BLOCK - 1) / TRIT_ROWOPS_COL_BLOCK;
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * TRIT_ROWOPS_COL_BLOCK, n = min64(C - c0, TRIT_ROWOPS_COL_BLOCK);
        double acc_w[TRIT_ROWOPS_COL_BLOCK] = {0}, acc_b[TRIT_ROWOPS_COL_BLOCK] = {0};
        for (int64_t i = 0; i < rows; i++) {
            const real *xi = x + i * C + c0, *dyi = dy + i * C + c0;
            const double mean = stats[2 * i], rstd = stats[2 * i + 1];
            for (int64_t j = 0; j < n; j++) {
                acc_w[j] += (double)dyi[j] * (((double)xi[j] - mean) * rstd);
                acc_b[j] += (double)dyi[j];
            }
        }
        for (int64_t j = 0; j < n; j++) {
            if (dw) dw[c0 + j] += (real)acc_w[j];
            if (db) db[c0 + j] += (real)acc_b[j];
        }
    }
}

// ---- GELU --------------------------------------------------------------------------------------
// With u = sqrt(2/pi) (v + 0.044715 v^3) and e = exp(-2|u|): (1 + tanh u) / 2 = (u >= 0 ? 1 : e) /
// (1 + e) and 1 - tanh^2 u = 4e / (1 + e)^2, so neither the value nor the exact slope
//   gelu'(v) = (1 + tanh u) / 2 + 0.5 v (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 v^2)
// suffers the cancellation of 1 - tanh^2 near saturation; once e underflows the second term is
// exactly 0 (skipped, so v^2 overflowing to Inf cannot make 0 * Inf = NaN).
#define GELU_C ((real)0.79788456080286535588)  // sqrt(2/pi)
#define GELU_A ((real)0.044715)

static inline real gelu_half(real u, real e) { return (u >= 0 ? 1 : e) / (1 + e); }

static inline real gelu(real v) {
    const real u = GELU_C * (v + GELU_A * v * v * v), e = REXP(-2 * RFABS(u));
    return v * gelu_half(u, e);
}

static inline real gelu_slope(real v) {
    const real u = GELU_C * (v + GELU_A * v * v * v), e = REXP(-2 * RFABS(u));
    const real h = gelu_half(u, e);
    if (e == 0) return h;
    const real den = 1 + e;
    return h + v * (2 * e / (den * den)) * GELU_C * (1 + 3 * GELU_A * v * v);
}

void R(trit_kernel_gelu_fwd_ref)(real *y, const real *x, const real *b, int64_t rows, int64_t N) {
    if (!b) {  // element-wise: fixed chunks, whatever the row length
        const int64_t n = rows * N, nchunks = (n + TRIT_ROWOPS_CHUNK - 1) / TRIT_ROWOPS_CHUNK;
#pragma omp parallel for schedule(static) if (n >= TRIT_ROWOPS_PAR_MIN)
        for (int64_t k = 0; k < nchunks; k++)
            for (int64_t i = k * TRIT_ROWOPS_CHUNK; i < min64(n, (k + 1) * TRIT_ROWOPS_CHUNK); i++) y[i] = gelu(x[i]);
        return;
    }
#pragma omp parallel for schedule(static) if (rows * N >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < N; j++) y[i * N + j] = gelu(x[i * N + j] + b[j]);
}

void R(trit_kernel_gelu_bwd_ref)(real *dx, real *db, const real *x, const real *b, const real *g, int64_t rows,
                                 int64_t N) {
    if (!db) {
        if (!dx) return;
        const int64_t n = rows * N, nchunks = (n + TRIT_ROWOPS_CHUNK - 1) / TRIT_ROWOPS_CHUNK;
#pragma omp parallel for schedule(static) if (n >= TRIT_ROWOPS_PAR_MIN)
        for (int64_t k = 0; k < nchunks; k++)
            for (int64_t i = k * TRIT_ROWOPS_CHUNK; i < min64(n, (k + 1) * TRIT_ROWOPS_CHUNK); i++)
                dx[i] = (dx == g ? 0 : dx[i]) + g[i] * gelu_slope(b ? x[i] + b[i % N] : x[i]);
        return;
    }
    const int64_t nblocks = (N + TRIT_ROWOPS_COL_BLOCK - 1) / TRIT_ROWOPS_COL_BLOCK;
#pragma omp parallel for schedule(static) if (rows * N >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * TRIT_ROWOPS_COL_BLOCK, n = min64(N - c0, TRIT_ROWOPS_COL_BLOCK);
        double acc[TRIT_ROWOPS_COL_BLOCK] = {0};
        for (int64_t i = 0; i < rows; i++) {
            const real *xi = x + i * N + c0, *gi = g + i * N + c0;
            for (int64_t j = 0; j < n; j++) {
                const real d = gi[j] * gelu_slope(b ? xi[j] + b[c0 + j] : xi[j]);
                acc[j] += (double)d;
                if (dx) dx[i * N + c0 + j] = (dx == g ? 0 : dx[i * N + c0 + j]) + d;
            }
        }
        for (int64_t j = 0; j < n; j++) db[c0 + j] += (real)acc[j];
    }
}

// ---- softmax, log-softmax, cross-entropy ----------------------------------------------------------

// Max of one row x: (C), and sum(exp(x - max)) accumulated in double (>= 1, never 0).
static real row_max_sumexp(const real *x, int64_t C, double *sum_out) {
    real m = x[0];
    for (int64_t j = 1; j < C; j++)
        if (x[j] > m) m = x[j];
    double s = 0;
    for (int64_t j = 0; j < C; j++) s += (double)REXP(x[j] - m);
    *sum_out = s;
    return m;
}

void R(trit_kernel_softmax_fwd_ref)(real *y, const real *x, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const real *xi = x + i * C;
        real *yi = y + i * C;
        double s;
        const real m = row_max_sumexp(xi, C, &s), inv = (real)(1.0 / s);
        for (int64_t j = 0; j < C; j++) yi[j] = REXP(xi[j] - m) * inv;
    }
}

// The attention row over keys and values read through LOAD(pointer, index) (f32 or f16).
#define ATTEND_REF_BODY(LOAD)                                                                 \
    do {                                                                                      \
        for (int64_t j = 0; j < n; j++) {                                                     \
            real s = 0;                                                                       \
            for (int64_t d = 0; d < hs; d++) s += q[d] * (real)LOAD(kt, trit_attend_key_at(d, j, hs)); \
            p[j] = scale * s;                                                                 \
        }                                                                                     \
        double sum;                                                                           \
        const real m = row_max_sumexp(p, n, &sum), inv = (real)(1.0 / sum);                   \
        for (int64_t j = 0; j < n; j++) p[j] = REXP(p[j] - m);                                \
        for (int64_t d = 0; d < hs; d++) y[d] = 0;                                            \
        for (int64_t j = 0; j < n; j++)                                                       \
            for (int64_t d = 0; d < hs; d++) y[d] += p[j] * (real)LOAD(v, j * ldv + d);       \
        for (int64_t d = 0; d < hs; d++) y[d] *= inv;                                         \
    } while (0)
#define LOAD_REAL(a, i) ((a)[i])
#define LOAD_F16(a, i) trit_f16_to_f32((a)[i])

void R(trit_kernel_attend_ref)(real *y, real *p, const real *q, const real *kt, const real *v, int64_t ldv,
                               int64_t n, int64_t hs, real scale) {
    ATTEND_REF_BODY(LOAD_REAL);
}

void R(trit_kernel_attend_f16_ref)(real *y, real *p, const real *q, const uint16_t *kt, const uint16_t *v,
                                   int64_t ldv, int64_t n, int64_t hs, real scale) {
    ATTEND_REF_BODY(LOAD_F16);
}

void R(trit_kernel_softmax_bwd_ref)(real *dx, const real *y, const real *dy, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const real *yi = y + i * C, *dyi = dy + i * C;
        real *dxi = dx + i * C;
        double dot = 0;
        for (int64_t j = 0; j < C; j++) dot += (double)dyi[j] * (double)yi[j];
        const real d = (real)dot;
        for (int64_t j = 0; j < C; j++) dxi[j] += yi[j] * (dyi[j] - d);
    }
}

void R(trit_kernel_log_softmax_fwd_ref)(real *y, const real *x, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const real *xi = x + i * C;
        real *yi = y + i * C;
        double s;
        const real m = row_max_sumexp(xi, C, &s), ls = (real)log(s);
        for (int64_t j = 0; j < C; j++) yi[j] = (xi[j] - m) - ls;
    }
}

void R(trit_kernel_log_softmax_bwd_ref)(real *dx, const real *y, const real *dy, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const real *yi = y + i * C, *dyi = dy + i * C;
        real *dxi = dx + i * C;
        double sum = 0;
        for (int64_t j = 0; j < C; j++) sum += (double)dyi[j];
        const real sr = (real)sum;
        for (int64_t j = 0; j < C; j++) dxi[j] += dyi[j] - REXP(yi[j]) * sr;
    }
}

void R(trit_kernel_ce_fwd_ref)(double *stats, double *loss, const real *x, const void *targets, bool t64,
                               int64_t ignore_index, int64_t rows, int64_t V) {
#pragma omp parallel for schedule(static) if (rows * V >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const real *xi = x + i * V;
        double s;
        const real m = row_max_sumexp(xi, V, &s);
        const double ls = log(s);
        stats[2 * i] = m;
        stats[2 * i + 1] = ls;
        const int64_t t = index_at(targets, t64, i);
        // (max - x[t]) + log(sum): no cancellation of two large numbers.
        loss[i] = t == ignore_index ? 0.0 : ((double)m - (double)xi[t]) + ls;
    }
}

void R(trit_kernel_ce_bwd_ref)(real *dx, const real *x, const double *stats, const void *targets, bool t64,
                               int64_t ignore_index, real scale, int64_t rows, int64_t V) {
#pragma omp parallel for schedule(static) if (rows * V >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const int64_t t = index_at(targets, t64, i);
        if (t == ignore_index) continue;
        const real *xi = x + i * V;
        real *dxi = dx + i * V;
        const real m = (real)stats[2 * i], ls = (real)stats[2 * i + 1];
        for (int64_t j = 0; j < V; j++) dxi[j] += scale * REXP((xi[j] - m) - ls);
        dxi[t] -= scale;
    }
}

void R(trit_kernel_ce_dlogits_ref)(real *L, const double *stats, const void *targets, bool t64,
                                   int64_t ignore_index, real scale, int64_t rows, int64_t V, bool bf16) {
#pragma omp parallel for schedule(static) if (rows * V >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        const int64_t t = index_at(targets, t64, i);
        real *li = L + i * V;
        if (t == ignore_index) {
            memset(li, 0, sizeof(real) * (size_t)V);
            continue;
        }
        const real m = (real)stats[2 * i], ls = (real)stats[2 * i + 1];
        for (int64_t j = 0; j < V; j++) li[j] = scale * REXP((li[j] - m) - ls);
        li[t] -= scale;
#ifndef TRIT_REAL_F64
        if (bf16) trit_row_to_bf16_in_place(li, V);
#else
        (void)bf16;  // f32 kernels only
#endif
    }
}

// ---- embedding ---------------------------------------------------------------------------------

void R(trit_kernel_embedding_fwd_ref)(real *out, const real *w, const void *idx, bool i64, int64_t n, int64_t C) {
#pragma omp parallel for schedule(static) if (n * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t i = 0; i < n; i++) memcpy(out + i * C, w + index_at(idx, i64, i) * C, sizeof(real) * (size_t)C);
}

void R(trit_kernel_embedding_bwd_ref)(real *gw, const real *go, const void *idx, bool i64, int64_t n, int64_t C) {
    const int64_t nblocks = (C + TRIT_ROWOPS_COL_BLOCK - 1) / TRIT_ROWOPS_COL_BLOCK;
#pragma omp parallel for schedule(static) if (n * C >= TRIT_ROWOPS_PAR_MIN)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * TRIT_ROWOPS_COL_BLOCK, c1 = min64(C, c0 + TRIT_ROWOPS_COL_BLOCK);
        for (int64_t i = 0; i < n; i++) {
            real *dst = gw + index_at(idx, i64, i) * C;
            const real *src = go + i * C;
            for (int64_t j = c0; j < c1; j++) dst[j] += src[j];
        }
    }
}

// ---- Adam / AdamW ------------------------------------------------------------------------------

static void adam_chunk(real *restrict p, const real *restrict g, real *restrict m, real *restrict v, int64_t lo,
                       int64_t hi, const trit_adam_scalars *s, bool decoupled) {
    const real step = s->step, wd = s->weight_decay, decay_mul = s->decay_mul;
    const real b1 = s->b1, omb1 = s->omb1, b2 = s->b2, omb2 = s->omb2, bc2_sqrt = s->bc2_sqrt, eps = s->eps;
    if (decoupled) {
        for (int64_t i = lo; i < hi; i++) {
            const real x = p[i] * decay_mul, d = g[i];
            const real mi = m[i] * b1 + omb1 * d, vi = v[i] * b2 + omb2 * d * d;
            m[i] = mi;
            v[i] = vi;
            p[i] = x + step * mi / (REAL_SQRT(vi) / bc2_sqrt + eps);
        }
    } else {
        for (int64_t i = lo; i < hi; i++) {
            const real d = g[i] + wd * p[i];
            const real mi = m[i] * b1 + omb1 * d, vi = v[i] * b2 + omb2 * d * d;
            m[i] = mi;
            v[i] = vi;
            p[i] = p[i] + step * mi / (REAL_SQRT(vi) / bc2_sqrt + eps);
        }
    }
}

void R(trit_kernel_adam_ref)(real *p, const real *g, real *m, real *v, int64_t n, const trit_adam_scalars *s,
                             bool decoupled) {
    const int64_t nchunks = (n + TRIT_ROWOPS_CHUNK - 1) / TRIT_ROWOPS_CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * TRIT_ROWOPS_CHUNK)
    for (int64_t k = 0; k < nchunks; k++)
        adam_chunk(p, g, m, v, k * TRIT_ROWOPS_CHUNK, min64(n, (k + 1) * TRIT_ROWOPS_CHUNK), s, decoupled);
}
