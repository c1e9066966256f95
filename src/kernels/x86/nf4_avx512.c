// Weight-only NF4 matmul on AVX-512 (see kernels/qgemm.h): 16 codes widen to 32-bit indices,
// vpermps looks them up in the 16-value codebook held in one register, and an FMA with the
// f32 activations accumulates; each group's sum is scaled by its absmax.
#include "kernels/qgemm.h"

#include <immintrin.h>

// sum over the 16 codes in bytes b[0..15] (low or high nibbles) times x[0..15].
static inline __m512 lookup_fma(__m128i b, __m512 table, const float *x, __m512 acc) {
    const __m512i idx = _mm512_cvtepu8_epi32(b);
    return _mm512_fmadd_ps(_mm512_permutexvar_ps(idx, table), _mm512_loadu_ps(x), acc);
}

void trit_kernel_nf4_avx512(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x, const uint8_t *w,
                            const float *ws, float *y, int64_t ldy) {
    const __m512 table = _mm512_loadu_ps(trit_nf4_values);
    const __m128i m = _mm_set1_epi8(15);
    const int64_t NG = K / G;
    for (int64_t mi = 0; mi < M; mi++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * (size_t)(K / 2);
            const float *xr = x + mi * K;
            __m512 total = _mm512_setzero_ps();
            for (int64_t g = 0; g < NG; g++) {
                __m512 acc = _mm512_setzero_ps();
                for (int64_t k = g * G; k < (g + 1) * G; k += 64) {
                    const __m128i b0 = _mm_loadu_si128((const __m128i *)(row + k / 2));
                    const __m128i b1 = _mm_loadu_si128((const __m128i *)(row + k / 2 + 16));
                    acc = lookup_fma(_mm_and_si128(b0, m), table, xr + k, acc);
                    acc = lookup_fma(_mm_and_si128(b1, m), table, xr + k + 16, acc);
                    acc = lookup_fma(_mm_and_si128(_mm_srli_epi16(b0, 4), m), table, xr + k + 32, acc);
                    acc = lookup_fma(_mm_and_si128(_mm_srli_epi16(b1, 4), m), table, xr + k + 48, acc);
                }
                total = _mm512_fmadd_ps(acc, _mm512_set1_ps(ws[n * NG + g]), total);
            }
            y[mi * ldy + n] = _mm512_reduce_add_ps(total);
        }
}
