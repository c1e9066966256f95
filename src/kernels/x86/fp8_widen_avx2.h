// FP8 codes widened to floats in 8 lanes: the magnitude bits placed under the f32 exponent and
// mantissa fields and multiplied by 2^(127 - bias), exact for normal and subnormal codes alike;
// NaN codes (and e5m2's Inf) set apart by compares; the sign or-ed in last. Shared by the FP8
// matmul and the decoding runs of this ISA.
#ifndef TRIT_KERNELS_X86_FP8_WIDEN_AVX2_H
#define TRIT_KERNELS_X86_FP8_WIDEN_AVX2_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

// The 8 low bytes of b as floats: e4m3fn (e5m2 false) or e5m2.
static inline __m256 fp8_widen(__m128i b, bool e5m2) {
    const __m256i c = _mm256_cvtepu8_epi32(b), mag = _mm256_and_si256(c, _mm256_set1_epi32(0x7F));
    __m256 v = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(mag, e5m2 ? 21 : 20)),
                             _mm256_set1_ps(e5m2 ? 0x1p112f : 0x1p120f));
    if (e5m2) {  // exponent field all ones: Inf (mantissa 0) or NaN
        const __m256i special = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7B));
        const __m256i inf = _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7C));
        v = _mm256_blendv_ps(v, _mm256_set1_ps(NAN), _mm256_castsi256_ps(special));
        v = _mm256_blendv_ps(v, _mm256_set1_ps(INFINITY), _mm256_castsi256_ps(inf));
    } else {  // 0x7F: NaN
        const __m256i nan = _mm256_cmpeq_epi32(mag, _mm256_set1_epi32(0x7F));
        v = _mm256_blendv_ps(v, _mm256_set1_ps(NAN), _mm256_castsi256_ps(nan));
    }
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(c, _mm256_set1_epi32(0x80)), 24);
    return _mm256_castsi256_ps(_mm256_or_si256(_mm256_castps_si256(v), sign));
}

#endif
