// Weight-only FP8 matmul on AVX-512 (see kernels/qgemm.h). Each code becomes an f16 by bit
// moves and vcvtph2ps widens 16 of them at once: e5m2 is the high byte of an f16 (Inf and NaN
// included), and e4m3fn's magnitude bits fall under the f16 fields with an exponent 8 below its
// own, so the value arrives times 2^-8 (exact: f16 holds e4m3fn's subnormals as normal or
// subnormal halves), which each group's scale takes back (times 2^8, a power of two: the same
// sum and product as the unscaled values); its NaN code 0x7F is set apart by a compare. Two
// FMA chains with the f32 activations per group, then the group's scale.
#include "kernels/qgemm.h"

#include <immintrin.h>

// The 16 codes b as floats: e5m2 exactly, e4m3fn times 2^-8.
static inline __m512 fp8_half(__m128i b, bool e5m2) {
    if (e5m2) return _mm512_cvtph_ps(_mm256_slli_epi16(_mm256_cvtepu8_epi16(b), 8));
    // Sign-extended and shifted by 7, a code's sign lands in bits 15 and 14 and its exponent and
    // mantissa in 13..7; the mask clears bit 14.
    __m256i h = _mm256_and_si256(_mm256_slli_epi16(_mm256_cvtepi8_epi16(b), 7), _mm256_set1_epi16((short)0xBF80));
    const __mmask16 nan = _mm_cmpeq_epi8_mask(_mm_or_si128(b, _mm_set1_epi8((char)0x80)), _mm_set1_epi8((char)0xFF));
    return _mm512_cvtph_ps(_mm256_mask_mov_epi16(h, nan, _mm256_set1_epi16(0x7E00)));
}

static void fp8(bool e5m2, int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x, const uint8_t *w,
                const float *ws, float *y, int64_t ldy) {
    const int64_t NG = K / G;
    const float unscale = e5m2 ? 1.0f : 0x1p8f;
    for (int64_t mi = 0; mi < M; mi++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * (size_t)K;
            const float *xr = x + mi * K;
            __m512 total = _mm512_setzero_ps();
            for (int64_t g = 0; g < NG; g++) {
                __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
                int64_t k = g * G;
                for (; k + 32 <= (g + 1) * G; k += 32) {
                    a0 = _mm512_fmadd_ps(fp8_half(_mm_loadu_si128((const __m128i *)(row + k)), e5m2),
                                         _mm512_loadu_ps(xr + k), a0);
                    a1 = _mm512_fmadd_ps(fp8_half(_mm_loadu_si128((const __m128i *)(row + k + 16)), e5m2),
                                         _mm512_loadu_ps(xr + k + 16), a1);
                }
                if (k < (g + 1) * G)
                    a0 = _mm512_fmadd_ps(fp8_half(_mm_loadu_si128((const __m128i *)(row + k)), e5m2),
                                         _mm512_loadu_ps(xr + k), a0);
                total = _mm512_fmadd_ps(_mm512_add_ps(a0, a1), _mm512_set1_ps(ws[n * NG + g] * unscale), total);
            }
            y[mi * ldy + n] = _mm512_reduce_add_ps(total);
        }
}

void trit_kernel_fp8_e4m3_avx512(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                                 const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    fp8(false, M, n0, n1, K, G, x, w, ws, y, ldy);
}

void trit_kernel_fp8_e5m2_avx512(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                                 const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    fp8(true, M, n0, n1, K, G, x, w, ws, y, ldy);
}
