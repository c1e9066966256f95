// Tile kernels of flash attention (ops/flash_attention.c has the algorithm).
//
// A tile holds up to TRIT_FLASH_W queries as its lanes. Score tiles are stored transposed:
// st (nr, W) holds key r against query i at st[r * W + i], so the softmax over the keys of one
// query runs down a column and every step of it is element-wise across lanes (no horizontal
// reductions). A key tile row r (absolute key j0 + r) is visible to lane i (absolute query
// i0 + i) when r + kofs <= i with kofs = j0 - i0, and lanes i >= nq are padding.
//
// Each kernel has a portable version (kernels/ref/flash.c, compiled for float and double; the
// oracle) and for f32 AVX-512 and AVX2 (+FMA) ones; the unsuffixed f32 names take the kernel
// table's choice.
// Results do not depend on the thread count (kernels are single-threaded; callers split work).
#ifndef TRIT_KERNELS_FLASH_H
#define TRIT_KERNELS_FLASH_H

#include <stdbool.h>
#include <stdint.h>

#define TRIT_FLASH_W 64

// st (nr, W) = x (nr, hs) @ yt (hs, W); x's rows are ldx apart, yt is packed (rows W apart).
#define TRIT_FLASH_SCORES_ARGS(T) int64_t nr, int64_t hs, const T *x, int64_t ldx, const T *yt, T *st
// acc (nr, hs) = acc * rowscale[r] (rowscale NULL: acc; !accumulate: 0)
//             + sum_k coef[r * rs + k * ks] * y[k]            for k < nk;
// acc's rows are ldacc apart, y (nk, hs) rows ldy apart.
#define TRIT_FLASH_ACCUM_ARGS(T)                                                                   \
    int64_t nr, int64_t nk, int64_t hs, const T *coef, int64_t rs, int64_t ks, const T *y, int64_t ldy, \
        T *acc, int64_t ldacc, const T *rowscale, bool accumulate
// Online softmax step on a raw score tile st (nr, W) (visibility as above): per lane i,
// m_new = max(m, scale * max visible st), alpha[i] = exp(m - m_new) (0 when m = -inf),
// st = exp(scale * st - m_new) where visible and 0 elsewhere, l = l * alpha + column sum,
// m = m_new. m, alpha: (W); l: (W) doubles.
#define TRIT_FLASH_SOFTMAX_ARGS(T) T *st, int64_t nr, int64_t nq, int64_t kofs, T scale, T *m, double *l, T *alpha
// Backward: st (nr, W) raw scores become P = exp(scale * st - lse[i]) where visible, else 0.
#define TRIT_FLASH_PROBS_ARGS(T) T *st, int64_t nr, int64_t nq, int64_t kofs, T scale, const T *lse
// Backward: dp (nr, W) = p * (dp - d[i]) * scale, the score gradient (0 where p is 0).
#define TRIT_FLASH_DSCORES_ARGS(T) T *dp, const T *p, int64_t nr, const T *d, T scale

// One signature per tile kernel: the table's entry point (_f32), the portable oracle (_ref_f32,
// _ref_f64) and the AVX-512 and AVX2 versions.
#define TRIT_FLASH_DECLARE(name, ARGS)                                                          \
    typedef void trit_kernel_flash_##name##_fn(ARGS(float));                                    \
    trit_kernel_flash_##name##_fn trit_kernel_flash_##name##_f32, trit_kernel_flash_##name##_ref_f32, \
        trit_kernel_flash_##name##_avx512_f32, trit_kernel_flash_##name##_avx2_f32;             \
    void trit_kernel_flash_##name##_ref_f64(ARGS(double));

TRIT_FLASH_DECLARE(scores, TRIT_FLASH_SCORES_ARGS)
TRIT_FLASH_DECLARE(accum, TRIT_FLASH_ACCUM_ARGS)
TRIT_FLASH_DECLARE(softmax, TRIT_FLASH_SOFTMAX_ARGS)
TRIT_FLASH_DECLARE(probs, TRIT_FLASH_PROBS_ARGS)
TRIT_FLASH_DECLARE(dscores, TRIT_FLASH_DSCORES_ARGS)

// f64 has only the portable path; these names let `real` code call R(trit_kernel_flash_...).
#define trit_kernel_flash_scores_f64 trit_kernel_flash_scores_ref_f64
#define trit_kernel_flash_accum_f64 trit_kernel_flash_accum_ref_f64
#define trit_kernel_flash_softmax_f64 trit_kernel_flash_softmax_ref_f64
#define trit_kernel_flash_probs_f64 trit_kernel_flash_probs_ref_f64
#define trit_kernel_flash_dscores_f64 trit_kernel_flash_dscores_ref_f64

#endif
