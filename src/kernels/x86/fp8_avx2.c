// Weight-only FP8 matmul on AVX2 (see kernels/qgemm.h): e5m2 codes are the high bytes of f16s,
// widened by vcvtph2ps; e4m3fn codes by the f32 exponent placement of x86/fp8_widen_avx2.h (its
// f16 form, which x86/fp8_avx512.c takes, needs a blend per eight codes for the NaN code here
// and measured slower than this on AMD EPYC Zen 4). An FMA with the f32 activations, each
// group's sum scaled.
#include "kernels/qgemm.h"

#include <immintrin.h>

#include "kernels/x86/fp8_widen_avx2.h"
#include "kernels/x86/simd_avx2.h"

// The 16 codes b as two vectors of 8 floats.
static inline void widen16(__m128i b, bool e5m2, __m256 *lo, __m256 *hi) {
    if (e5m2) {
        *lo = _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(b), 8));
        *hi = _mm256_cvtph_ps(_mm_slli_epi16(_mm_cvtepu8_epi16(_mm_srli_si128(b, 8)), 8));
    } else {
        *lo = fp8_widen(b, false);
        *hi = fp8_widen(_mm_srli_si128(b, 8), false);
    }
}

static void fp8(bool e5m2, int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x, const uint8_t *w,
                const float *ws, float *y, int64_t ldy) {
    const int64_t NG = K / G;
    for (int64_t mi = 0; mi < M; mi++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * (size_t)K;
            const float *xr = x + mi * K;
            __m256 total = _mm256_setzero_ps();
            for (int64_t g = 0; g < NG; g++) {
                __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), lo, hi;
                for (int64_t k = g * G; k < (g + 1) * G; k += 16) {
                    widen16(_mm_loadu_si128((const __m128i *)(row + k)), e5m2, &lo, &hi);
                    a0 = _mm256_fmadd_ps(lo, _mm256_loadu_ps(xr + k), a0);
                    a1 = _mm256_fmadd_ps(hi, _mm256_loadu_ps(xr + k + 8), a1);
                }
                total = _mm256_fmadd_ps(_mm256_add_ps(a0, a1), _mm256_set1_ps(ws[n * NG + g]), total);
            }
            y[mi * ldy + n] = vreduce_add(total);
        }
}

void trit_kernel_fp8_e4m3_avx2(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                               const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    fp8(false, M, n0, n1, K, G, x, w, ws, y, ldy);
}

void trit_kernel_fp8_e5m2_avx2(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                               const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    fp8(true, M, n0, n1, K, G, x, w, ws, y, ldy);
}
