// exp for 8 floats at once, for kernels compiled with AVX2 + FMA (include only from *_avx2.c).
//
// The method and polynomial of x86/exp_avx512.h (Cody-Waite reduction, degree-4 minimax q with
// FMA), so both widths give the same values. AVX2 has no vscalefps: 2^n is applied as two
// exact powers of two built in the exponent field, 2^(n - n/2) and 2^(n/2), each a normal
// float for every n the clamp allows; p * 2^(n/2) is exact and the second product rounds once,
// so subnormal and overflowing results round as scalef rounds them.
//
// Special values: exp(-Inf) = 0, exp(+Inf) = +Inf, exp(NaN) = NaN (x is clamped to [-104, 89]
// first; the clamp keeps a NaN, and a NaN times any power of two stays NaN).
#ifndef TRIT_KERNELS_X86_EXP_AVX2_H
#define TRIT_KERNELS_X86_EXP_AVX2_H

#include <immintrin.h>

static inline __m256 trit_pow2i_avx2(__m256i n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}

static inline __m256 trit_exp_avx2(__m256 x) {
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693145751953125f);
    const __m256 ln2_lo = _mm256_set1_ps(1.42860682030941723212e-6f);
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), _mm256_max_ps(_mm256_set1_ps(-104.0f), x));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
    r = _mm256_fnmadd_ps(n, ln2_lo, r);
    __m256 q = _mm256_set1_ps(1.381459955e-03f);
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(8.368716875e-03f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(4.166838803e-02f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(1.666652063e-01f));
    q = _mm256_fmadd_ps(q, r, _mm256_set1_ps(4.999999345e-01f));
    const __m256 p = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(r, r), q, r), _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1);
    return _mm256_mul_ps(_mm256_mul_ps(p, trit_pow2i_avx2(half)), trit_pow2i_avx2(_mm256_sub_epi32(ni, half)));
}

#endif
