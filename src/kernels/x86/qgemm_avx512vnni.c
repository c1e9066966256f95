// Integer matmuls on AVX512-VNNI (see qgemm.h): vpdpbusd multiplies unsigned by signed bytes
// and adds groups of four into int32 lanes. The weights are made the unsigned operand by a bias
// (qint8: w xor 0x80 = w + 128; qint4: the stored nibble c + 8), and the activation group sums
// take the bias back out: sum (c + b) x = sum c x + b sum x. Four rows of W at a time.
#include "kernels/x86/qgemm_driver.h"

#include <immintrin.h>

static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

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

// 64 codes of row r at element k, as unsigned bytes.
static inline __m512i codes64(wkind kind, const uint8_t *w, int64_t k) {
    return kind == W_Q4 ? load_q4(w + k / 2) : kind == W_Q8 ? load_q8(w + k) : _mm512_loadu_si512(w + k);
}

// The integer sums of R rows of packed ternary codes over [k, end), into a[r]. The code of
// element 4j + i sits in bits 2i of byte j, so masking a byte with 3 << 2i leaves 4^i times
// the (biased) code in place: four masks and no shifts or lane shuffles per 32 bytes, with
// each run's sum kept apart and scaled back (an exact shift: the sums are multiples of 4^i).
// 256-bit operations: the activations' runs of 32 are each one load.
static inline void t2_group(int R, const int8_t *q, const uint8_t *w, size_t row_bytes, int64_t k, int64_t end,
                            __m512i *a) {
    __m256i t[4][4];
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < 4; i++) t[r][i] = _mm256_setzero_si256();
    const __m256i m0 = _mm256_set1_epi8(0x03), m1 = _mm256_set1_epi8(0x0C), m2 = _mm256_set1_epi8(0x30),
                  m3 = _mm256_set1_epi8((char)0xC0);
    for (; k < end; k += 128) {
        const __m256i *x = (const __m256i *)(q + k);  // the four runs of 32
        const __m256i x0 = _mm256_loadu_si256(x), x1 = _mm256_loadu_si256(x + 1);
        const __m256i x2 = _mm256_loadu_si256(x + 2), x3 = _mm256_loadu_si256(x + 3);
        for (int r = 0; r < R; r++) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)(w + r * row_bytes + k / 4));
            t[r][0] = _mm256_dpbusd_epi32(t[r][0], _mm256_and_si256(b, m0), x0);
            t[r][1] = _mm256_dpbusd_epi32(t[r][1], _mm256_and_si256(b, m1), x1);
            t[r][2] = _mm256_dpbusd_epi32(t[r][2], _mm256_and_si256(b, m2), x2);
            t[r][3] = _mm256_dpbusd_epi32(t[r][3], _mm256_and_si256(b, m3), x3);
        }
    }
    for (int r = 0; r < R; r++) {
        const __m256i s01 = _mm256_add_epi32(t[r][0], _mm256_srai_epi32(t[r][1], 2));
        const __m256i s23 = _mm256_add_epi32(_mm256_srai_epi32(t[r][2], 4), _mm256_srai_epi32(t[r][3], 6));
        const __m256i s = _mm256_add_epi32(s01, s23);
        a[r] = _mm512_zextsi256_si512(s);
    }
}

// Each row's integer sums run in two accumulators (even and odd steps), so consecutive vpdpbusd
// of one row need not wait on each other.
static inline void rows(int R, wkind kind, int64_t K, int64_t G, const int8_t *q, const int32_t *gsum, float xs,
                        const uint8_t *w, size_t row_bytes, const float *ws, float *y) {
    __m256 facc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int64_t NG = K / G;
    const int32_t bias = kind == W_Q4 || kind == W_U4 ? 8 : kind == W_T2 || kind == W_U2 ? 1 : 128;
    for (int64_t g = 0; g < NG; g++) {
        __m512i a[4], b[4];
        for (int r = 0; r < 4; r++) a[r] = b[r] = _mm512_setzero_si512();
        int64_t k = g * G;
        const int64_t end = k + G;
        if (kind == W_T2) {
            t2_group(R, q, w, row_bytes, k, end, a);
        } else {
            for (; k + 128 <= end; k += 128) {
                const __m512i x0 = _mm512_loadu_si512(q + k), x1 = _mm512_loadu_si512(q + k + 64);
                for (int r = 0; r < R; r++) {
                    a[r] = _mm512_dpbusd_epi32(a[r], codes64(kind, w + r * row_bytes, k), x0);
                    b[r] = _mm512_dpbusd_epi32(b[r], codes64(kind, w + r * row_bytes, k + 64), x1);
                }
            }
            if (k < end) {  // G an odd multiple of 64
                const __m512i x0 = _mm512_loadu_si512(q + k);
                for (int r = 0; r < R; r++) a[r] = _mm512_dpbusd_epi32(a[r], codes64(kind, w + r * row_bytes, k), x0);
            }
        }
        // The exact sums folded to 8 lanes hold the same integers whichever path made them
        // (packed or unpacked codes, runs of 32 or 64), so the float rounding is the same too.
        const __m256i unbias = _mm256_setr_epi32(bias * gsum[g], 0, 0, 0, 0, 0, 0, 0);
        for (int r = 0; r < R; r++) {
            const __m512i ab = _mm512_add_epi32(a[r], b[r]);
            const __m256i sum = _mm256_add_epi32(_mm512_castsi512_si256(ab), _mm512_extracti64x4_epi64(ab, 1));
            facc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(sum, unbias)), _mm256_set1_ps(ws[r * NG + g]),
                                      facc[r]);
        }
    }
    for (int r = 0; r < R; r++) y[r] = xs * hsum8(facc[r]);
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
