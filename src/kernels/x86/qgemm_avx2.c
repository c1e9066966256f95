// Integer matmuls on AVX2 (see qgemm.h). qint8: vpmaddubsw on |w| and x with w's sign (both
// within 127, so the pair sums cannot saturate), exact in int32. qint4: the biased nibbles
// (c + 8, 0..15) are the unsigned operand, so sum (c + 8) x = sum c x + 8 sum x and the group
// sums of x take the 8 back out. Four rows of W at a time share each activation load.
#include "kernels/x86/qgemm_driver.h"

#include <immintrin.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __m256i dot_q8(__m256i w, __m256i x) {
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// 64 codes: 32 bytes of nibbles against the 64 de-interleaved activations at x.
static inline __m256i dot_q4(const uint8_t *w, const int8_t *x) {
    const __m256i b = _mm256_loadu_si256((const __m256i *)w), m = _mm256_set1_epi8(15);
    const __m256i lo = _mm256_and_si256(b, m), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m);
    const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)x)),
                                       _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(x + 32))));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// 128 ternary codes: 32 bytes of 2-bit codes (c + 1, 0..2) against the 128 activations at x in
// four runs of 32 (elements 4j, 4j + 1, 4j + 2, 4j + 3).
static inline __m256i dot_t2(const uint8_t *w, const int8_t *x) {
    const __m256i b = _mm256_loadu_si256((const __m256i *)w), m = _mm256_set1_epi8(3);
    __m256i p = _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        const __m256i u = _mm256_and_si256(_mm256_srli_epi16(b, 2 * j), m);
        p = _mm256_add_epi16(p, _mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)(x + 32 * j))));
    }
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

// R rows n.. of W against activation row m; the biased kinds (qint4 + 8, ternary + 1) take
// bias x group sum back out.

// 64 unpacked biased codes (0..15 or 0..2: no pair sum can saturate) against 64 activations.
static inline __m256i dot_u8(const uint8_t *w, const int8_t *x) {
    const __m256i p = _mm256_add_epi16(
        _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)w), _mm256_loadu_si256((const __m256i *)x)),
        _mm256_maddubs_epi16(_mm256_loadu_si256((const __m256i *)(w + 32)), _mm256_loadu_si256((const __m256i *)(x + 32))));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

static inline void rows(int R, wkind kind, int64_t K, int64_t G, const int8_t *q, const int32_t *gsum, float xs,
                        const uint8_t *w, size_t row_bytes, const float *ws, float *y) {
    __m256 facc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    float corr[4] = {0, 0, 0, 0};
    const int64_t NG = K / G;
    for (int64_t g = 0; g < NG; g++) {
        __m256i iacc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
        for (int64_t k = g * G; k < (g + 1) * G; k += kind == W_T2 || kind == W_U2 ? 128 : 64) {
            if (kind == W_U4 || kind == W_U2) {
                for (int r = 0; r < R; r++) {
                    iacc[r] = _mm256_add_epi32(iacc[r], dot_u8(w + r * row_bytes + k, q + k));
                    if (kind == W_U2) iacc[r] = _mm256_add_epi32(iacc[r], dot_u8(w + r * row_bytes + k + 64, q + k + 64));
                }
            } else if (kind == W_T2) {
                for (int r = 0; r < R; r++)
                    iacc[r] = _mm256_add_epi32(iacc[r], dot_t2(w + r * row_bytes + k / 4, q + k));
            } else if (kind == W_Q4) {
                for (int r = 0; r < R; r++)
                    iacc[r] = _mm256_add_epi32(iacc[r], dot_q4(w + r * row_bytes + k / 2, q + k));
            } else {
                const __m256i x0 = _mm256_loadu_si256((const __m256i *)(q + k));
                const __m256i x1 = _mm256_loadu_si256((const __m256i *)(q + k + 32));
                for (int r = 0; r < R; r++) {
                    const uint8_t *p = w + r * row_bytes + k;
                    iacc[r] = _mm256_add_epi32(iacc[r], dot_q8(_mm256_loadu_si256((const __m256i *)p), x0));
                    iacc[r] = _mm256_add_epi32(iacc[r], dot_q8(_mm256_loadu_si256((const __m256i *)(p + 32)), x1));
                }
            }
        }
        for (int r = 0; r < R; r++) {
            const float s = ws[r * NG + g];
            facc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r]), _mm256_set1_ps(s), facc[r]);
            if (kind != W_Q8) corr[r] += s * (float)((kind == W_Q4 || kind == W_U4 ? 8 : 1) * gsum[g]);
        }
    }
    for (int r = 0; r < R; r++) y[r] = xs * (hsum8(facc[r]) - corr[r]);
}

// One packed row to K biased bytes in the activations' order (64-blocks: even codes, then odd;
// ternary 128-blocks: four runs of 32).
static void unpack_row(wkind kind, const uint8_t *w, int64_t K, uint8_t *dst) {
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
    for (int64_t k = 0; k < K; k += kind == W_T2 ? 128 : 64) {
        if (kind == W_T2) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(w + k / 4));
            for (int j = 0; j < 4; j++)
                _mm256_storeu_si256((__m256i *)(dst + k + 32 * j), _mm256_and_si256(_mm256_srli_epi16(b, 2 * j), m2));
        } else {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(w + k / 2));
            _mm256_storeu_si256((__m256i *)(dst + k), _mm256_and_si256(b, m4));
            _mm256_storeu_si256((__m256i *)(dst + k + 32), _mm256_and_si256(_mm256_srli_epi16(b, 4), m4));
        }
    }
}

QGEMM_ENTRY_POINTS(avx2)
