// exp for 16 floats at once, for kernels compiled with AVX-512F (include only from *_avx512.c).
//
// Method: Cody-Waite range reduction x = n ln2 + r, n = round(x / ln2), |r| <= ln2 / 2, with ln2
// split into a float part and a remainder; with fused multiply-add, x - n * ln2_hi is exact
// (W. J. Cody and W. Waite, Software Manual for the Elementary Functions, 1980). Then
// exp(r) = 1 + r + r^2 q(r), q of degree 4, whose coefficients minimize the relative error on
// [-ln2/2, ln2/2] (a Remez exchange: maximum relative error 3.1e-9, far below float rounding);
// Horner with FMA; finally 2^n by vscalefps, which rounds correctly into the subnormal range and
// gives 0 or Inf past it. Measured against double exp over every float x in [-87.3, 88.7] (the
// results are normal floats): maximum relative error 8.5e-8, under one float ulp.
//
// Special values: exp(-Inf) = 0, exp(+Inf) = +Inf, exp(NaN) = NaN; x is clamped to [-104, 89]
// first (beyond which float results are 0 or Inf anyway) so n stays finite.
#ifndef TRIT_KERNELS_X86_EXP_AVX512_H
#define TRIT_KERNELS_X86_EXP_AVX512_H

#include <immintrin.h>

static inline __m512 trit_exp_avx512(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
    const __m512 ln2_hi = _mm512_set1_ps(0.693145751953125f);        // 15 bits: n * ln2_hi is exact
    const __m512 ln2_lo = _mm512_set1_ps(1.42860682030941723212e-6f);  // ln2 - ln2_hi
    // max/min return their second operand when either is NaN, so NaN passes through.
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), _mm512_max_ps(_mm512_set1_ps(-104.0f), x));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
    r = _mm512_fnmadd_ps(n, ln2_lo, r);
    __m512 q = _mm512_set1_ps(1.381459955e-03f);
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(8.368716875e-03f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.166838803e-02f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(1.666652063e-01f));
    q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(4.999999345e-01f));
    const __m512 p = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(r, r), q, r), _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}

#endif
