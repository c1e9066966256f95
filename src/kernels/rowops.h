// Row kernels of the training path: layernorm/rmsnorm, GELU, softmax, log-softmax,
// cross-entropy, embedding (forward and backward of each) and the Adam(W) update.
//
// Each kernel has a portable reference, written against `real` in kernels/ref/rowops.c and
// compiled for float and double (name_ref_f32, name_ref_f64), AVX-512 and AVX2 versions
// (name_avx512, name_avx2: one body, x86/rowops_simd.h), and for f32 a dispatching entry point
// (name_f32) that takes the kernel table's choice for the usable CPU features. The f64 entry
// points are the references, so `real` code calls R(trit_kernel_<name>).
//
// Threads: every kernel splits its work with a static OpenMP schedule over independent rows,
// columns or fixed element chunks, and every sum is taken in an order fixed by the data alone,
// so results are bit-identical for any thread count. Small calls run on the calling thread.
//
// Numerics (both versions): statistics and sums (norm mean/variance, softmax and cross-entropy
// sums of exponentials, dot products, column sums for weight and bias gradients) are accumulated
// in double; element values are computed in `real`. The x86 versions use a vectorized exp with
// relative error below 2e-7 over the normal float range (x86/simd_exp.h, one for both widths) and
// sum in a different (still fixed, per vector width) order, so they agree with the reference to
// about 1e-6 relative; the column sums, embedding and Adam kernels are bit-identical to it.
#ifndef TRIT_KERNELS_ROWOPS_H
#define TRIT_KERNELS_ROWOPS_H

#include <stdbool.h>
#include <stdint.h>

// Below this many elements a kernel runs on the calling thread (thread start-up costs more).
#define TRIT_ROWOPS_PAR_MIN ((int64_t)1 << 14)
// Columns per work item of the reference column sums (norm weight/bias, GELU bias, embedding
// scatter); the x86 versions give each thread one wider block. Each column is summed over
// rows in order either way, so the split never changes a result.
#define TRIT_ROWOPS_COL_BLOCK 64
// Elements per work item of purely element-wise kernels (GELU without bias, Adam).
#define TRIT_ROWOPS_CHUNK 8192

// Scalars of one Adam(W) update, already rounded to float as torch.optim rounds them.
typedef struct trit_adam_scalars {
    float step;          // -lr / (1 - beta1^t)
    float weight_decay;  // Adam: L2 coefficient added to the gradient (unused by AdamW)
    float decay_mul;     // AdamW: 1 - lr * wd, multiplies p first (unused by Adam)
    float b1, omb1;      // beta1, 1 - beta1
    float b2, omb2;      // beta2, 1 - beta2
    float bc2_sqrt;      // sqrt(1 - beta2^t)
    float eps;
} trit_adam_scalars;

// ---- layernorm / rmsnorm over the last dim C -----------------------------------------------
// Forward. x, r: (rows, C), r may be NULL; with r, s: (rows, C) receives x + r and the norm is
// taken of s (the residual add + layernorm of a transformer block); without r, s is unused.
// w, b: (C) or NULL. y: (rows, C) = (v - mean) * rstd * w + b, v = x or s.
// stats: (rows, 2) receives (mean, rstd), rstd = 1 / sqrt(biased variance + eps); center false
// is rmsnorm (mean taken as 0).
typedef void trit_kernel_norm_fwd_fn(float *y, double *stats, float *s, const float *x, const float *r,
                                  const float *w, const float *b, int64_t rows, int64_t C, double eps,
                                  bool center);
trit_kernel_norm_fwd_fn trit_kernel_norm_fwd_f32, trit_kernel_norm_fwd_ref_f32,
    trit_kernel_norm_fwd_avx512, trit_kernel_norm_fwd_avx2;
void trit_kernel_norm_fwd_ref_f64(double *y, double *stats, double *s, const double *x, const double *r,
                                  const double *w, const double *b, int64_t rows, int64_t C, double eps,
                                  bool center);

// Backward to the input. x: (rows, C) the normalized input (s for the residual form), dy: (rows, C),
// w: (C) or NULL, stats from forward, gres: (rows, C) or NULL, a gradient added as is (the
// residual stream's own gradient). With xhat = (x - mean) * rstd and g = dy * w:
//   d = gres + rstd * (g - mean(g) - xhat * mean(g * xhat))   (mean(g) taken as 0 without center)
// then dx += d and dx2 += d (dx = d and dx2 = d when store), each skipped when NULL.
typedef void trit_kernel_norm_bwd_x_fn(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                                    const float *w, const double *stats, int64_t rows, int64_t C, bool center,
                                    bool store);
trit_kernel_norm_bwd_x_fn trit_kernel_norm_bwd_x_f32, trit_kernel_norm_bwd_x_ref_f32,
    trit_kernel_norm_bwd_x_avx512, trit_kernel_norm_bwd_x_avx2;
void trit_kernel_norm_bwd_x_ref_f64(double *dx, double *dx2, const double *x, const double *dy,
                                    const double *gres, const double *w, const double *stats, int64_t rows,
                                    int64_t C, bool center, bool store);

// Weight and bias gradients: dw += sum over rows of dy * xhat, db += sum over rows of dy (each
// skipped when NULL). x, dy: (rows, C); dw, db: (C). Sums in double, rows in order.
typedef void trit_kernel_norm_bwd_params_fn(float *dw, float *db, const float *x, const float *dy,
                                         const double *stats, int64_t rows, int64_t C);
trit_kernel_norm_bwd_params_fn trit_kernel_norm_bwd_params_f32, trit_kernel_norm_bwd_params_ref_f32,
    trit_kernel_norm_bwd_params_avx512, trit_kernel_norm_bwd_params_avx2;
void trit_kernel_norm_bwd_params_ref_f64(double *dw, double *db, const double *x, const double *dy,
                                         const double *stats, int64_t rows, int64_t C);

// ---- GELU, tanh form: gelu(v) = 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))) ------------
// y = gelu(x + b). x, y: (rows, N); b: (N) or NULL.
typedef void trit_kernel_gelu_fwd_fn(float *y, const float *x, const float *b, int64_t rows, int64_t N);
trit_kernel_gelu_fwd_fn trit_kernel_gelu_fwd_f32, trit_kernel_gelu_fwd_ref_f32,
    trit_kernel_gelu_fwd_avx512, trit_kernel_gelu_fwd_avx2;
void trit_kernel_gelu_fwd_ref_f64(double *y, const double *x, const double *b, int64_t rows, int64_t N);
// With d = g * gelu'(x + b) (the exact slope): dx += d (dx may be NULL; dx == g: dx = d in place)
// and db += the column sums of d (db may be NULL; summed in double, rows in order).
// x, g, dx: (rows, N); b, db: (N) or NULL.
typedef void trit_kernel_gelu_bwd_fn(float *dx, float *db, const float *x, const float *b, const float *g,
                                  int64_t rows, int64_t N);
trit_kernel_gelu_bwd_fn trit_kernel_gelu_bwd_f32, trit_kernel_gelu_bwd_ref_f32,
    trit_kernel_gelu_bwd_avx512, trit_kernel_gelu_bwd_avx2;
void trit_kernel_gelu_bwd_ref_f64(double *dx, double *db, const double *x, const double *b, const double *g,
                                  int64_t rows, int64_t N);

// ---- softmax and log-softmax over rows of C -------------------------------------------------
// y = exp(x - max) / sum(exp(x - max)). x, y: (rows, C).
typedef void trit_kernel_softmax_fwd_fn(float *y, const float *x, int64_t rows, int64_t C);
trit_kernel_softmax_fwd_fn trit_kernel_softmax_fwd_f32, trit_kernel_softmax_fwd_ref_f32,
    trit_kernel_softmax_fwd_avx512, trit_kernel_softmax_fwd_avx2;
void trit_kernel_softmax_fwd_ref_f64(double *y, const double *x, int64_t rows, int64_t C);
// dx += y * (dy - sum(dy * y)), y the forward output. All (rows, C).
typedef void trit_kernel_softmax_bwd_fn(float *dx, const float *y, const float *dy, int64_t rows, int64_t C);
trit_kernel_softmax_bwd_fn trit_kernel_softmax_bwd_f32, trit_kernel_softmax_bwd_ref_f32,
    trit_kernel_softmax_bwd_avx512, trit_kernel_softmax_bwd_avx2;
void trit_kernel_softmax_bwd_ref_f64(double *dx, const double *y, const double *dy, int64_t rows, int64_t C);
// y = (x - max) - log(sum(exp(x - max))). x, y: (rows, C).
typedef void trit_kernel_log_softmax_fwd_fn(float *y, const float *x, int64_t rows, int64_t C);
trit_kernel_log_softmax_fwd_fn trit_kernel_log_softmax_fwd_f32, trit_kernel_log_softmax_fwd_ref_f32,
    trit_kernel_log_softmax_fwd_avx512, trit_kernel_log_softmax_fwd_avx2;
void trit_kernel_log_softmax_fwd_ref_f64(double *y, const double *x, int64_t rows, int64_t C);
// dx += dy - exp(y) * sum(dy), y the forward output. All (rows, C).
typedef void trit_kernel_log_softmax_bwd_fn(float *dx, const float *y, const float *dy, int64_t rows, int64_t C);
trit_kernel_log_softmax_bwd_fn trit_kernel_log_softmax_bwd_f32, trit_kernel_log_softmax_bwd_ref_f32,
    trit_kernel_log_softmax_bwd_avx512, trit_kernel_log_softmax_bwd_avx2;
void trit_kernel_log_softmax_bwd_ref_f64(double *dx, const double *y, const double *dy, int64_t rows,
                                         int64_t C);

// ---- attention of one query over cached keys (decoding) --------------------------------------
// y (hs) = sum_j p_j v_j / sum_j p_j with p_j = exp(s_j - max s), s_j = scale * (q . k_j), over the
// n keys before it: the softmax row of the forward with its two products. Keys are stored
// transposed in blocks of TRIT_ATTEND_KEY_BLOCK positions, kt (ceil(n / B), hs, B): dimension d of
// key j at trit_attend_key_at(d, j, hs), so a vector of consecutive keys' scores is one
// multiply-add per head dimension and a block's keys are one contiguous run (a plain transposed
// (hs, n) array made hs short strided streams, which the prefetchers did not follow); a new
// position writes one column of its block. v (n, hs) rows ldv apart. p: (n) scratch, left holding
// exp(s_j - max). The sum is taken in double. n >= 1.
enum { TRIT_ATTEND_KEY_BLOCK = 64 };
static inline int64_t trit_attend_key_at(int64_t d, int64_t j, int64_t hs) {
    return (j / TRIT_ATTEND_KEY_BLOCK) * hs * TRIT_ATTEND_KEY_BLOCK + d * TRIT_ATTEND_KEY_BLOCK +
           j % TRIT_ATTEND_KEY_BLOCK;
}
typedef void trit_kernel_attend_fn(float *y, float *p, const float *q, const float *kt, const float *v, int64_t ldv,
                                   int64_t n, int64_t hs, float scale);
trit_kernel_attend_fn trit_kernel_attend_f32, trit_kernel_attend_ref_f32, trit_kernel_attend_avx512,
    trit_kernel_attend_avx2;
void trit_kernel_attend_ref_f64(double *y, double *p, const double *q, const double *kt, const double *v,
                                int64_t ldv, int64_t n, int64_t hs, double scale);
// The same with keys and values stored in f16 (IEEE binary16), widened to f32 as they are read:
// the decoder's 16-bit KV cache.
typedef void trit_kernel_attend_f16_fn(float *y, float *p, const float *q, const uint16_t *kt, const uint16_t *v,
                                       int64_t ldv, int64_t n, int64_t hs, float scale);
trit_kernel_attend_f16_fn trit_kernel_attend_f16, trit_kernel_attend_f16_ref_f32, trit_kernel_attend_f16_avx512,
    trit_kernel_attend_f16_avx2;

// ---- cross-entropy over rows of V logits ------------------------------------------------------
// targets: (rows) int64 when t64, else int32; every target is in [0, V) or equals ignore_index
// (the caller checks). Forward: stats (rows, 2) = (max, log(sum(exp(x - max)))) for every row and
// loss (rows) = -log_softmax(x)[t] = (max - x[t]) + lse, 0 on ignored rows. x: (rows, V).
typedef void trit_kernel_ce_fwd_fn(double *stats, double *loss, const float *x, const void *targets, bool t64,
                                int64_t ignore_index, int64_t rows, int64_t V);
trit_kernel_ce_fwd_fn trit_kernel_ce_fwd_f32, trit_kernel_ce_fwd_ref_f32,
    trit_kernel_ce_fwd_avx512, trit_kernel_ce_fwd_avx2;
void trit_kernel_ce_fwd_ref_f64(double *stats, double *loss, const double *x, const void *targets, bool t64,
                                int64_t ignore_index, int64_t rows, int64_t V);
// Backward: on rows not ignored, dx += scale * (softmax(x) - onehot(t)). dx, x: (rows, V).
typedef void trit_kernel_ce_bwd_fn(float *dx, const float *x, const double *stats, const void *targets, bool t64,
                                int64_t ignore_index, float scale, int64_t rows, int64_t V);
trit_kernel_ce_bwd_fn trit_kernel_ce_bwd_f32, trit_kernel_ce_bwd_ref_f32,
    trit_kernel_ce_bwd_avx512, trit_kernel_ce_bwd_avx2;
void trit_kernel_ce_bwd_ref_f64(double *dx, const double *x, const double *stats, const void *targets,
                                bool t64, int64_t ignore_index, double scale, int64_t rows, int64_t V);

// In place, for a classifier that computes logits in chunks: L = scale * (softmax(L) - onehot(t))
// on rows not ignored and 0 on ignored rows, with stats from the forward. L: (rows, V). With
// bf16 (f32 kernels only), each row's values are then rounded to bf16 (trit_f32_to_bf16) into
// the first V halves of that row's own storage, for GEMMs that would round them so anyway: the
// row stays in cache, and they read half the bytes (as bf16 with a row stride of 2 V).
typedef void trit_kernel_ce_dlogits_fn(float *L, const double *stats, const void *targets, bool t64,
                                    int64_t ignore_index, float scale, int64_t rows, int64_t V, bool bf16);
trit_kernel_ce_dlogits_fn trit_kernel_ce_dlogits_f32, trit_kernel_ce_dlogits_ref_f32,
    trit_kernel_ce_dlogits_avx512, trit_kernel_ce_dlogits_avx2;
void trit_kernel_ce_dlogits_ref_f64(double *L, const double *stats, const void *targets, bool t64,
                                    int64_t ignore_index, double scale, int64_t rows, int64_t V, bool bf16);

// Rounds x (n) to bf16 in place: the values land in order in x's first 2 n bytes. Each block is
// rounded into a buffer before it is copied down, so no value is overwritten before it is read.
void trit_row_to_bf16_in_place(float *x, int64_t n);

// ---- embedding --------------------------------------------------------------------------------
// idx: (n) int64 when i64, else int32, each in [0, V) (the caller checks).
// Forward: out[i, :] = w[idx[i], :]. w: (V, C), out: (n, C).
typedef void trit_kernel_embedding_fwd_fn(float *out, const float *w, const void *idx, bool i64, int64_t n,
                                       int64_t C);
trit_kernel_embedding_fwd_fn trit_kernel_embedding_fwd_f32, trit_kernel_embedding_fwd_ref_f32;
void trit_kernel_embedding_fwd_ref_f64(double *out, const double *w, const void *idx, bool i64, int64_t n,
                                       int64_t C);
// Backward: gw[idx[i], :] += go[i, :], tokens added in order (threads split the columns).
// gw: (V, C), go: (n, C).
typedef void trit_kernel_embedding_bwd_fn(float *gw, const float *go, const void *idx, bool i64, int64_t n,
                                       int64_t C);
trit_kernel_embedding_bwd_fn trit_kernel_embedding_bwd_f32, trit_kernel_embedding_bwd_ref_f32,
    trit_kernel_embedding_bwd_avx512, trit_kernel_embedding_bwd_avx2;
void trit_kernel_embedding_bwd_ref_f64(double *gw, const double *go, const void *idx, bool i64, int64_t n,
                                       int64_t C);

// ---- Adam / AdamW update --------------------------------------------------------------------------
// p, g, m, v: (n), not aliased. Operation order of torch.optim (fp32):
//   AdamW (decoupled): x = p * decay_mul, d = g;   Adam: x = p, d = g + weight_decay * p
//   m = m * b1 + omb1 * d,  v = v * b2 + omb2 * d * d,  p = x + step * m / (sqrt(v) / bc2_sqrt + eps)
// The x86 versions do the same operations (no fused multiply-add), so they are bit-identical.
typedef void trit_kernel_adam_fn(float *p, const float *g, float *m, float *v, int64_t n,
                              const trit_adam_scalars *s, bool decoupled);
trit_kernel_adam_fn trit_kernel_adam_f32, trit_kernel_adam_ref_f32,
    trit_kernel_adam_avx512, trit_kernel_adam_avx2;
void trit_kernel_adam_ref_f64(double *p, const double *g, double *m, double *v, int64_t n,
                              const trit_adam_scalars *s, bool decoupled);

// f64 has only the reference path; these names let `real` code call R(trit_kernel_<name>).
#define trit_kernel_norm_fwd_f64 trit_kernel_norm_fwd_ref_f64
#define trit_kernel_norm_bwd_x_f64 trit_kernel_norm_bwd_x_ref_f64
#define trit_kernel_norm_bwd_params_f64 trit_kernel_norm_bwd_params_ref_f64
#define trit_kernel_gelu_fwd_f64 trit_kernel_gelu_fwd_ref_f64
#define trit_kernel_gelu_bwd_f64 trit_kernel_gelu_bwd_ref_f64
#define trit_kernel_softmax_fwd_f64 trit_kernel_softmax_fwd_ref_f64
#define trit_kernel_softmax_bwd_f64 trit_kernel_softmax_bwd_ref_f64
#define trit_kernel_log_softmax_fwd_f64 trit_kernel_log_softmax_fwd_ref_f64
#define trit_kernel_log_softmax_bwd_f64 trit_kernel_log_softmax_bwd_ref_f64
#define trit_kernel_ce_fwd_f64 trit_kernel_ce_fwd_ref_f64
#define trit_kernel_ce_bwd_f64 trit_kernel_ce_bwd_ref_f64
#define trit_kernel_ce_dlogits_f64 trit_kernel_ce_dlogits_ref_f64
#define trit_kernel_embedding_fwd_f64 trit_kernel_embedding_fwd_ref_f64
#define trit_kernel_embedding_bwd_f64 trit_kernel_embedding_bwd_ref_f64
#define trit_kernel_adam_f64 trit_kernel_adam_ref_f64

#endif
