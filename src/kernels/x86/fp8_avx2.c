// Weight-only FP8 matmul on AVX2 (see kernels/qgemm.h): the method of x86/fp8_avx512.c in
// eight lanes (magnitude bits under the f32 fields times 2^(127 - bias), specials by compares,
// the sign or-ed in), an FMA with the f32 activations, each group's sum scaled.
#include "kernels/qgemm.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/x86/fp8_widen_avx2.h"

#include "kernels/x86/simd_avx2.h"

static void fp8(bool e5m2, int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x, const uint8_t *w,
                const float *ws, float *y, int64_t ldy) {
    const int64_t NG = K / G;
    for (int64_t mi = 0; mi < M; mi++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * (size_t)K;
            const float *xr = x + mi * K;
            __m256 total = _mm256_setzero_ps();
            for (int64_t g = 0; g < NG; g++) {
                __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
                for (int64_t k = g * G; k < (g + 1) * G; k += 16) {
                    const __m128i b = _mm_loadu_si128((const __m128i *)(row + k));
                    a0 = _mm256_fmadd_ps(fp8_widen(b, e5m2), _mm256_loadu_ps(xr + k), a0);
                    a1 = _mm256_fmadd_ps(fp8_widen(_mm_srli_si128(b, 8), e5m2), _mm256_loadu_ps(xr + k + 8), a1);
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
