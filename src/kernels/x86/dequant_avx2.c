// Decoding runs of NF4 and FP8 codes on AVX2 (kernels/dequant.h): NF4 looks its 16 scaled values
// up in two 8-entry permutes chosen by the code's top bit, FP8 widens 8 codes at a time as its
// matmul does; each value then is the portable loop's (the same table entry, or the exact code
// value, times s).
#include "kernels/dequant.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/x86/fp8_widen_avx2.h"

static inline __m256 nf4_lookup(__m128i codes8, __m256 t_lo, __m256 t_hi) {  // the 8 low bytes' codes
    const __m256i c = _mm256_cvtepu8_epi32(codes8);
    const __m256 hi = _mm256_castsi256_ps(_mm256_slli_epi32(c, 28));  // bit 3 into the sign: the blend's choice
    return _mm256_blendv_ps(_mm256_permutevar8x32_ps(t_lo, c), _mm256_permutevar8x32_ps(t_hi, c), hi);
}

static void nf4_run(float *out, const uint8_t *p, int64_t n, const float *tab) {
    const __m256 t_lo = _mm256_loadu_ps(tab), t_hi = _mm256_loadu_ps(tab + 8);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        // 32 codes, element 2j in byte j's low nibble
        const __m128i b = _mm_loadu_si128((const __m128i *)(p + i / 2));
        const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(15)), hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(15));
        const __m128i e0 = _mm_unpacklo_epi8(lo, hi), e1 = _mm_unpackhi_epi8(lo, hi);  // elements 0..15, 16..31
        _mm256_storeu_ps(out + i, nf4_lookup(e0, t_lo, t_hi));
        _mm256_storeu_ps(out + i + 8, nf4_lookup(_mm_srli_si128(e0, 8), t_lo, t_hi));
        _mm256_storeu_ps(out + i + 16, nf4_lookup(e1, t_lo, t_hi));
        _mm256_storeu_ps(out + i + 24, nf4_lookup(_mm_srli_si128(e1, 8), t_lo, t_hi));
    }
    for (; i < n; i++) out[i] = tab[(p[i / 2] >> (i % 2 * 4)) & 15];
}

static void fp8_run(bool e5m2, float *out, const uint8_t *p, int64_t n, float s, const float *table) {
    const __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(fp8_widen(_mm_loadl_epi64((const __m128i *)(p + i)), e5m2), vs);
        // The table's NaN has no sign (the widening keeps a negative code's).
        _mm256_storeu_ps(out + i, _mm256_blendv_ps(v, _mm256_set1_ps(NAN), _mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    }
    for (; i < n; i++) out[i] = table[p[i]] * s;
}

void trit_kernel_dequant_avx2(trit_dtype dt, float *out, const uint8_t *codes, int64_t n, float s, const float *tab) {
    if (dt == TRIT_NF4) nf4_run(out, codes, n, tab);
    else fp8_run(dt == TRIT_F8_E5M2, out, codes, n, s, tab);
}
