// FP8 codes widened to floats in 16 lanes: the magnitude bits placed under the f32 exponent and
// mantissa fields and multiplied by 2^(127 - bias), exact for normal and subnormal codes alike;
// NaN codes (and e5m2's Inf) set apart by compares; the sign or-ed in last. Shared by the FP8
// matmul and the decoding runs of this ISA.
#ifndef TRIT_KERNELS_X86_FP8_WIDEN_AVX512_H
#define TRIT_KERNELS_X86_FP8_WIDEN_AVX512_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>

// The 16 bytes b as floats: e4m3fn (e5m2 false) or e5m2.
static inline __m512 fp8_widen(__m128i b, bool e5m2) {
    const __m512i c = _mm512_cvtepu8_epi32(b), mag = _mm512_and_si512(c, _mm512_set1_epi32(0x7F));
    __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(mag, e5m2 ? 21 : 20)),
                             _mm512_set1_ps(e5m2 ? 0x1p112f : 0x1p120f));
    if (e5m2) {  // exponent field all ones: Inf (mantissa 0) or NaN
        const __mmask16 special = _mm512_cmpge_epu32_mask(mag, _mm512_set1_epi32(0x7C));
        const __mmask16 inf = _mm512_cmpeq_epu32_mask(mag, _mm512_set1_epi32(0x7C));
        v = _mm512_mask_mov_ps(v, special, _mm512_set1_ps(NAN));
        v = _mm512_mask_mov_ps(v, inf, _mm512_set1_ps(INFINITY));
    } else {  // 0x7F: NaN
        v = _mm512_mask_mov_ps(v, _mm512_cmpeq_epu32_mask(mag, _mm512_set1_epi32(0x7F)), _mm512_set1_ps(NAN));
    }
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(c, _mm512_set1_epi32(0x80)), 24);
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(v), sign));
}

#endif
