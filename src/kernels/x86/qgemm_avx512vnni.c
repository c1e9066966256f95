// Integer matmuls on AVX512-VNNI (see qgemm.h): vpdpbusd multiplies unsigned by signed bytes
// and adds groups of four into int32 lanes. The weights are made the unsigned operand by a bias
// (qint8: w xor 0x80 = w + 128; qint4: the stored nibble c + 8), and the activation group sums
// take the bias back out: sum (c + b) x = sum c x + b sum x. Four rows of W at a time.
#include "kernels/x86/qgemm_driver.h"

#include <immintrin.h>

static inline __m512i load_q8(const uint8_t *w) {
    return _mm512_xor_si512(_mm512_loadu_si512(w), _mm512_set1_epi8((char)0x80));
}

// 64 codes from 32 bytes of nibbles: the low nibbles (even elements) then the high ones.
static inline __m512i load_q4(const uint8_t *w) {
    const __m256i b = _mm256_loadu_si256((const __m256i *)w), m = _mm256_set1_epi8(15);
    const __m256i lo = _mm256_and_si256(b, m), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m);
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}


// 128 ternary codes from 32 bytes: two vectors of 64 (runs of codes 4j, 4j + 1 | 4j + 2, 4j + 3).
static inline void load_t2(const uint8_t *w, __m512i *u01, __m512i *u23) {
    const __m256i b = _mm256_loadu_si256((const __m256i *)w), m = _mm256_set1_epi8(3);
    const __m256i u0 = _mm256_and_si256(b, m), u1 = _mm256_and_si256(_mm256_srli_epi16(b, 2), m);
    const __m256i u2 = _mm256_and_si256(_mm256_srli_epi16(b, 4), m), u3 = _mm256_and_si256(_mm256_srli_epi16(b, 6), m);
    *u01 = _mm512_inserti64x4(_mm512_castsi256_si512(u0), u1, 1);
    *u23 = _mm512_inserti64x4(_mm512_castsi256_si512(u2), u3, 1);
}

static inline void rows(int R, wkind kind, int64_t K, int64_t G, const int8_t *q, const int32_t *gsum, float xs,
                        const uint8_t *w, size_t row_bytes, const float *ws, float *y) {
    __m512 facc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    float corr[4] = {0, 0, 0, 0};
    const int64_t NG = K / G;
    const float bias = kind == W_Q4 || kind == W_U4 ? 8.0f : kind == W_T2 || kind == W_U2 ? 1.0f : 128.0f;
    for (int64_t g = 0; g < NG; g++) {
        __m512i iacc[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
        if (kind == W_T2) {
            for (int64_t k = g * G; k < (g + 1) * G; k += 128) {
                const __m512i x0 = _mm512_loadu_si512(q + k), x1 = _mm512_loadu_si512(q + k + 64);
                for (int r = 0; r < R; r++) {
                    __m512i u01, u23;
                    load_t2(w + r * row_bytes + k / 4, &u01, &u23);
                    iacc[r] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(iacc[r], u01, x0), u23, x1);
                }
            }
        } else {
            for (int64_t k = g * G; k < (g + 1) * G; k += 64) {
                const __m512i xv = _mm512_loadu_si512(q + k);
                for (int r = 0; r < R; r++) {
                    const __m512i u = kind == W_Q4   ? load_q4(w + r * row_bytes + k / 2)
                                      : kind == W_Q8 ? load_q8(w + r * row_bytes + k)
                                                     : _mm512_loadu_si512(w + r * row_bytes + k);
                    iacc[r] = _mm512_dpbusd_epi32(iacc[r], u, xv);
                }
            }
        }
        for (int r = 0; r < R; r++) {
            const float s = ws[r * NG + g];
            facc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(iacc[r]), _mm512_set1_ps(s), facc[r]);
            corr[r] += s * bias * (float)gsum[g];
        }
    }
    for (int r = 0; r < R; r++) y[r] = xs * (_mm512_reduce_add_ps(facc[r]) - corr[r]);
}

// One packed row to K biased bytes in the activations' order.
static void unpack_row(wkind kind, const uint8_t *w, int64_t K, uint8_t *dst) {
    for (int64_t k = 0; k < K; k += kind == W_T2 ? 128 : 64) {
        if (kind == W_T2) {
            __m512i u01, u23;
            load_t2(w + k / 4, &u01, &u23);
            _mm512_storeu_si512(dst + k, u01);
            _mm512_storeu_si512(dst + k + 64, u23);
        } else {
            _mm512_storeu_si512(dst + k, load_q4(w + k / 2));
        }
    }
}

QGEMM_ENTRY_POINTS(avx512vnni)
