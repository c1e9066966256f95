// Decoding runs of NF4 and FP8 codes on AVX-512 (kernels/dequant.h): NF4 looks its 16 scaled
// values up with one permute per 16 codes, FP8 widens 16 codes at a time as its matmul does; each
// value then is the portable loop's (the same table entry, or the exact code value, times s).
#include "kernels/dequant.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/x86/fp8_widen_avx512.h"

static void nf4_run(float *out, const uint8_t *p, int64_t n, const float *tab) {
    const __m512 t = _mm512_loadu_ps(tab);
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        // 32 codes, element 2j in byte j's low nibble
        const __m128i b = _mm_loadu_si128((const __m128i *)(p + i / 2));
        const __m128i lo = _mm_and_si128(b, _mm_set1_epi8(15)), hi = _mm_and_si128(_mm_srli_epi16(b, 4), _mm_set1_epi8(15));
        const __m512i c0 = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi));  // elements 0..15
        const __m512i c1 = _mm512_cvtepu8_epi32(_mm_unpackhi_epi8(lo, hi));  // 16..31
        _mm512_storeu_ps(out + i, _mm512_permutexvar_ps(c0, t));
        _mm512_storeu_ps(out + i + 16, _mm512_permutexvar_ps(c1, t));
    }
    for (; i < n; i++) out[i] = tab[(p[i / 2] >> (i % 2 * 4)) & 15];
}

static void fp8_run(bool e5m2, float *out, const uint8_t *p, int64_t n, float s, const float *table) {
    const __m512 vs = _mm512_set1_ps(s);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_mul_ps(fp8_widen(_mm_loadu_si128((const __m128i *)(p + i)), e5m2), vs);
        // The table's NaN has no sign (the widening keeps a negative code's).
        _mm512_storeu_ps(out + i, _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), _mm512_set1_ps(NAN)));
    }
    for (; i < n; i++) out[i] = table[p[i]] * s;
}

void trit_kernel_dequant_avx512(trit_dtype dt, float *out, const uint8_t *codes, int64_t n, float s, const float *tab) {
    if (dt == TRIT_NF4) nf4_run(out, codes, n, tab);
    else fp8_run(dt == TRIT_F8_E5M2, out, codes, n, s, tab);
}
