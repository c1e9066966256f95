// Weight-only FP8 matmul on AVX-512 (see kernels/qgemm.h). 16 codes widen to 32-bit lanes and
// become floats by placing the magnitude bits under the f32 exponent and mantissa fields and
// multiplying by 2^(127 - bias): exact for normal and subnormal codes alike (the f32 operand is
// then a normal or subnormal float, and the product exact). NaN codes (and e5m2's Inf) are
// set apart by compares, the sign is or-ed in last; an FMA with the f32 activations
// accumulates and each group's sum is scaled.
#include "kernels/qgemm.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/x86/fp8_widen_avx512.h"

static void fp8(bool e5m2, int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x, const uint8_t *w,
                const float *ws, float *y, int64_t ldy) {
    const int64_t NG = K / G;
    for (int64_t mi = 0; mi < M; mi++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * (size_t)K;
            const float *xr = x + mi * K;
            __m512 total = _mm512_setzero_ps();
            for (int64_t g = 0; g < NG; g++) {
                __m512 acc = _mm512_setzero_ps();
                for (int64_t k = g * G; k < (g + 1) * G; k += 16)
                    acc = _mm512_fmadd_ps(fp8_widen(_mm_loadu_si128((const __m128i *)(row + k)), e5m2), _mm512_loadu_ps(xr + k),
                                          acc);
                total = _mm512_fmadd_ps(acc, _mm512_set1_ps(ws[n * NG + g]), total);
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
