// Integer matmuls for quantized inference: y (M, N) = x (M, K) W^T with W (N, K) symmetric
// integer codes (qint8 in [-127, 127], qint4 in [-7, 7] stored biased by 8, two per byte, or
// ternary {-1, 0, 1} stored biased by 1, four per byte) and
// one f32 scale per group of G consecutive codes of a row (G = K: per output channel), and x
// quantized per row (token) to int8 codes with one scale (absmax / 127):
//   y[m, n] = xs[m] * sum_g ws[n, g] * sum_{k in g} c[n, k] * xq[m, k]
// The inner sums are exact integers (int32), so implementations differ only in the order the
// scaled group sums are added. Every output is computed by one thread: results do not depend on
// the thread count.
#ifndef TRIT_KERNELS_QGEMM_H
#define TRIT_KERNELS_QGEMM_H

#include "trit/tensor.h"

// Activations quantized for a weight dtype. For qint4 weights each block of 64 codes is stored
// de-interleaved (the 32 even elements, then the 32 odd ones), the order in which a 32-byte load
// of nibbles unpacks (low nibbles = even elements); for ternary weights each block of 128 in
// four runs of 32 (elements 4j, then 4j + 1, 4j + 2, 4j + 3), as a 32-byte load of 2-bit codes
// unpacks; for qint8 the order is natural.
typedef struct trit_qact {
    int8_t *q;      // (M, K)
    float *scale;   // (M)
    int32_t *gsum;  // (M, K / G): sum of the codes of each group (for kernels that bias weights)
} trit_qact;

// Position of element k of a row in wdt's activation order.
static inline int64_t trit_qact_pos(trit_dtype wdt, int64_t k) {
    if (wdt == TRIT_QINT4) {
        const int64_t j = k & 63;
        return (k - j) + (j & 1 ? 32 + (j >> 1) : j >> 1);
    }
    if (wdt == TRIT_TERNARY) {
        const int64_t j = k & 127;
        return (k - j) + (j & 3) * 32 + (j >> 2);
    }
    return k;
}

// Whether the integer kernels take (dtype, K, G): qint8/qint4 with G a multiple of 64 dividing K
// (ternary: of 128), and G <= 131072 so an int32 group sum cannot overflow.
bool trit_qgemm_supported(trit_dtype wdt, int64_t K, int64_t G);

// Quantizes x (M, K) row by row into a (buffers sized by the caller), in wdt's order; G as
// trit_qgemm_supported allows (whole reordering blocks per group).
void trit_qact_quantize(const float *x /* (M, K) */, int64_t M, int64_t K, int64_t G, trit_dtype wdt,
                        const trit_qact *a);

// One row x (K) in natural order: q (K) the codes, *scale, gsum (K / G) the group sums. Every
// implementation gives the same bits (qgemm_ref.c's rounding rule).
typedef void trit_kernel_qact_fn(const float *x, int64_t K, int64_t G, int8_t *q, float *scale, int32_t *gsum);
trit_kernel_qact_fn trit_kernel_qact_ref, trit_kernel_qact_avx2, trit_kernel_qact_avx512;

// Fake quantization's per-token rule (ops/fake_quant.c, TRIT_FQ_TOKEN): the code of x is the
// nearest even integer of x / s (a division, where the kernels above multiply by 1 / s; the two
// can differ by one code near a tie), and a row holding a NaN or Inf, whose fake quantization is
// NaN, gets scale NaN (codes 0), so its products are NaN too. G = K (one group sum per row).
// Quantization-aware training quantizes with it, so its integer products see fake_quant's codes.
trit_kernel_qact_fn trit_kernel_qact_div_ref, trit_kernel_qact_div_avx2, trit_kernel_qact_div_avx512;
// x (M, K) row by row with that rule, rows split among threads; a->gsum (M).
void trit_qact_quantize_div(const float *x /* (M, K) */, int64_t M, int64_t K, const trit_qact *a);

// One implementation over outputs n0 <= n < n1 (all M rows). w: codes of W (N, K) as stored
// (trit_dtype_nbytes(wdt, K) bytes per row); ws: (N, K / G); y: (M, ldy).
typedef void trit_kernel_qgemm_fn(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x,
                                  const uint8_t *w, const float *ws, float *y, int64_t ldy);

trit_kernel_qgemm_fn trit_kernel_qgemm_q8_ref, trit_kernel_qgemm_q4_ref, trit_kernel_qgemm_t2_ref;
trit_kernel_qgemm_fn trit_kernel_qgemm_q8_avx2, trit_kernel_qgemm_q4_avx2, trit_kernel_qgemm_t2_avx2;
trit_kernel_qgemm_fn trit_kernel_qgemm_q8_avx512vnni, trit_kernel_qgemm_q4_avx512vnni, trit_kernel_qgemm_t2_avx512vnni;

// Weight-only NF4: y (M, N) = x (M, K) W^T with W's codes (indices into trit_nf4_values, two
// per byte, low nibble = even element) times each group's absmax ws (N, K / G), x in f32. x is
// given with each block of 64 de-interleaved as for qint4 (trit_nf4_act_order). G a multiple
// of 64 dividing K. The AVX512-BF16 kernel computes as with a bf16 compute dtype (codebook and x
// rounded to bf16, f32 sums); the others in f32.
typedef void trit_kernel_nf4_fn(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                                const uint8_t *w, const float *ws, float *y, int64_t ldy);
trit_kernel_nf4_fn trit_kernel_nf4_ref, trit_kernel_nf4_avx2, trit_kernel_nf4_avx512bf16;
// The group (of G) of each 64 positions k0, k0 + 64, .. of [k0, k0 + kc): once per chunk, so
// the kernels index a row's scales without dividing.
static inline void trit_nf4_block_groups(int64_t G, int64_t k0, int64_t kc, int32_t *out) {
    for (int64_t b = 0; b < kc / 64; b++) out[b] = (int32_t)((k0 + 64 * b) / G);
}
// x (M, K) into out (M, K) in the NF4 kernels' order.
void trit_nf4_act_order(const float *x, int64_t M, int64_t K, float *out);
void trit_kernel_nf4_gemm(int64_t M, int64_t N, int64_t K, int64_t G, const float *x, const uint8_t *w, const float *ws,
                          float *y, int64_t ldy);

// Weight-only FP8: y (M, N) = x (M, K) W^T with W's bytes (OCP e4m3fn or e5m2, the values of
// trit_fp8_to_f32, NaN and Inf codes included) times each group's scale ws (N, K / G), x in f32
// in natural order. G a multiple of 16 dividing K. Same signature as the NF4 kernels.
typedef trit_kernel_nf4_fn trit_kernel_fp8_fn;
trit_kernel_fp8_fn trit_kernel_fp8_e4m3_ref, trit_kernel_fp8_e5m2_ref, trit_kernel_fp8_e4m3_avx2,
    trit_kernel_fp8_e5m2_avx2, trit_kernel_fp8_e4m3_avx512, trit_kernel_fp8_e5m2_avx512;
// Whether the FP8 kernels take (wdt, K, G).
bool trit_fp8_gemm_supported(trit_dtype wdt, int64_t K, int64_t G);
// The kernel table's choice for wdt (TRIT_F8_E4M3 or TRIT_F8_E5M2), outputs split among threads;
// TRIT_ERR_UNSUPPORTED (nothing written) for another dtype.
trit_status trit_kernel_fp8_gemm(trit_dtype wdt, int64_t M, int64_t N, int64_t K, int64_t G, const float *x,
                                 const uint8_t *w, const float *ws, float *y, int64_t ldy);

// The kernel table's choice for wdt (qint8, qint4, ternary), run over N split among threads;
// TRIT_ERR_UNSUPPORTED (nothing written) for another dtype.
trit_status trit_kernel_qgemm(trit_dtype wdt, int64_t M, int64_t N, int64_t K, int64_t G, const trit_qact *x,
                              const uint8_t *w, const float *ws, float *y, int64_t ldy);

#endif
