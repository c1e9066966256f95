// Weight-only NF4 matmul on AVX2 (see kernels/qgemm.h): eight codes widen to 32-bit indices
// and look up the 16-value codebook as two 8-entry vpermps, blended on the index's top bit;
// an FMA with the f32 activations accumulates; each group's sum is scaled by its absmax.
#include "kernels/qgemm.h"

#include <immintrin.h>

static inline __m256 lookup_fma(__m128i b8, __m256 lo, __m256 hi, const float *x, __m256 acc) {
    const __m256i idx = _mm256_cvtepu8_epi32(b8);
    const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                                      _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
    return _mm256_fmadd_ps(v, _mm256_loadu_ps(x), acc);
}

void trit_kernel_nf4_avx2(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x, const uint8_t *w,
                          const float *ws, float *y, int64_t ldy) {
    const __m256 lo = _mm256_loadu_ps(trit_nf4_values), hi = _mm256_loadu_ps(trit_nf4_values + 8);
    const __m128i m = _mm_set1_epi8(15);
    const int64_t NG = K / G;
    for (int64_t mi = 0; mi < M; mi++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * (size_t)(K / 2);
            const float *xr = x + mi * K;
            __m256 total = _mm256_setzero_ps();
            for (int64_t g = 0; g < NG; g++) {
                __m256 acc = _mm256_setzero_ps();
                for (int64_t k = g * G; k < (g + 1) * G; k += 64) {
                    const __m128i b0 = _mm_loadu_si128((const __m128i *)(row + k / 2));
                    const __m128i b1 = _mm_loadu_si128((const __m128i *)(row + k / 2 + 16));
                    const __m128i q[4] = {_mm_and_si128(b0, m), _mm_and_si128(b1, m),
                                          _mm_and_si128(_mm_srli_epi16(b0, 4), m), _mm_and_si128(_mm_srli_epi16(b1, 4), m)};
                    for (int j = 0; j < 4; j++) {
                        acc = lookup_fma(q[j], lo, hi, xr + k + 16 * j, acc);
                        acc = lookup_fma(_mm_srli_si128(q[j], 8), lo, hi, xr + k + 16 * j + 8, acc);
                    }
                }
                total = _mm256_fmadd_ps(acc, _mm256_set1_ps(ws[n * NG + g]), total);
            }
            __m128 s = _mm_add_ps(_mm256_castps256_ps128(total), _mm256_extractf128_ps(total, 1));
            s = _mm_add_ps(s, _mm_movehl_ps(s, s));
            s = _mm_add_ss(s, _mm_movehdup_ps(s));
            y[mi * ldy + n] = _mm_cvtss_f32(s);
        }
}
