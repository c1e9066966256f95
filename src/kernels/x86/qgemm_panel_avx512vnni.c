// The panel integer matmul (qgemm_panel.h) on AVX512-VNNI. A step's 64 bytes hold 4 biased
// codes of each of 16 rows; vpdpbusd against one token's dword, broadcast, adds each row's 4
// products into that row's lane. A prompt runs in tiles of T tokens x P panels (up to 4 x 2),
// which share each step's weights among the T tokens and each broadcast among the P panels; one
// token streams through one panel at a time (gemv). The group finish (remove the bias, convert,
// scale, add) is four operations per 16 outputs.
#include "kernels/qgemm_panel.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE __m512i broadcast_dword(const int8_t *q) {
    int32_t v;
    memcpy(&v, q, sizeof v);
    return _mm512_set1_epi32(v);
}

// The biased codes of dword i of a step v, one per byte.
INLINE __m512i codes_of(trit_dtype wdt, __m512i v, int i) {
    if (wdt == TRIT_QINT8) return v;
    const int bits = wdt == TRIT_QINT4 ? 4 : 2;
    const __m512i mask = _mm512_set1_epi8((char)((1 << bits) - 1));
    return _mm512_and_si512(i ? _mm512_srli_epi16(v, (unsigned)(bits * i)) : v, mask);
}

// Tokens m0 .. m0 + T - 1 (T <= 4) against panels p .. p + P - 1 (P <= 2).
INLINE void tile(trit_dtype wdt, int T, int P, const trit_qpanels *w, int64_t p, const trit_qact *x, int64_t m0,
                 float *y, int64_t ldy, bool acc) {
    const int64_t K = w->K, G = w->G, NG = K / G;
    const int S = wdt == TRIT_QINT8 ? 1 : wdt == TRIT_QINT4 ? 2 : 4;
    const int32_t bias = wdt == TRIT_QINT8 ? 128 : wdt == TRIT_QINT4 ? 8 : 1;
    const uint8_t *codes = w->codes + (size_t)p * w->panel_bytes;
    __m512 f[4][2];
    for (int t = 0; t < T; t++)
        for (int j = 0; j < P; j++) f[t][j] = _mm512_setzero_ps();
    for (int64_t g = 0; g < NG; g++) {
        __m512i a[4][2];
        for (int t = 0; t < T; t++)
            for (int j = 0; j < P; j++) a[t][j] = _mm512_setzero_si512();
        for (int64_t d = g * G / 4; d < (g + 1) * G / 4; d += S) {  // d: the step's first dword
            const uint8_t *step = codes + (size_t)(d / S) * TRIT_QPANEL_STEP;
            __m512i v[2];
            for (int j = 0; j < P; j++) v[j] = _mm512_load_si512(step + (size_t)j * w->panel_bytes);
            for (int i = 0; i < S; i++) {
                __m512i u[2];
                for (int j = 0; j < P; j++) u[j] = codes_of(wdt, v[j], i);
                for (int t = 0; t < T; t++) {
                    const __m512i xb = broadcast_dword(x->q + (m0 + t) * K + 4 * (d + i));
                    for (int j = 0; j < P; j++) a[t][j] = _mm512_dpbusd_epi32(a[t][j], u[j], xb);
                }
            }
        }
        for (int t = 0; t < T; t++) {
            const __m512i unbias = _mm512_set1_epi32(bias * x->gsum[(m0 + t) * NG + g]);
            for (int j = 0; j < P; j++) {
                const __m512 s = _mm512_load_ps(w->scales + ((p + j) * NG + g) * TRIT_QPANEL_ROWS);
                const __m512 part = _mm512_mul_ps(s, _mm512_cvtepi32_ps(_mm512_sub_epi32(a[t][j], unbias)));
                f[t][j] = _mm512_add_ps(f[t][j], part);
            }
        }
    }
    for (int t = 0; t < T; t++) {
        const __m512 xs = _mm512_set1_ps(x->scale[m0 + t]);
        for (int j = 0; j < P; j++) {
            const int64_t n = (p + j) * TRIT_QPANEL_ROWS, cols = w->N - n < 16 ? w->N - n : 16;
            const __mmask16 k = (__mmask16)((1u << cols) - 1);
            float *yt = y + (m0 + t) * ldy + n;
            const __m512 v = _mm512_mul_ps(f[t][j], xs);
            _mm512_mask_storeu_ps(yt, k, acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(k, yt), v) : v);
        }
    }
}

// All M tokens against panels p, p + P - 1: four tokens at a time, then the rest.
INLINE void tokens(trit_dtype wdt, int P, int64_t M, const trit_qpanels *w, int64_t p, const trit_qact *x, float *y,
                   int64_t ldy, bool acc) {
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) tile(wdt, 4, P, w, p, x, m, y, ldy, acc);
    if (M - m == 3) tile(wdt, 3, P, w, p, x, m, y, ldy, acc);
    else if (M - m == 2) tile(wdt, 2, P, w, p, x, m, y, ldy, acc);
    else if (M - m == 1) tile(wdt, 1, P, w, p, x, m, y, ldy, acc);
}

// One token against panel p, read as one stream: four dwords of codes per pass go to four
// accumulators, so consecutive vpdpbusd do not wait on each other. Ternary masks each field in
// place (4^i times the code, as qgemm_avx512vnni.c does) and shifts the four sums back exactly.
INLINE void gemv(trit_dtype wdt, const trit_qpanels *w, int64_t p, const trit_qact *x, float *y, bool acc) {
    const int64_t K = w->K, G = w->G, NG = K / G, n = p * TRIT_QPANEL_ROWS;
    const int S = wdt == TRIT_QINT8 ? 1 : wdt == TRIT_QINT4 ? 2 : 4;
    const int32_t bias = wdt == TRIT_QINT8 ? 128 : wdt == TRIT_QINT4 ? 8 : 1;
    const uint8_t *codes = w->codes + (size_t)p * w->panel_bytes;
    __m512 f = _mm512_setzero_ps();
    for (int64_t g = 0; g < NG; g++) {
        __m512i a[4] = {_mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()};
        for (int64_t d = g * G / 4; d < (g + 1) * G / 4; d += 4) {  // G / 4 is a multiple of 8
            const uint8_t *step = codes + (size_t)(d / S) * TRIT_QPANEL_STEP;
            for (int j = 0; j < 4; j++) {  // dword d + j
                const __m512i v = _mm512_load_si512(step + (size_t)(j / S) * TRIT_QPANEL_STEP);
                const int i = j % S;
                const __m512i u = wdt == TRIT_TERNARY ? _mm512_and_si512(v, _mm512_set1_epi8((char)(3 << (2 * i))))
                                                      : codes_of(wdt, v, i);
                a[j] = _mm512_dpbusd_epi32(a[j], u, broadcast_dword(x->q + 4 * (d + j)));
            }
        }
        __m512i sum;
        if (wdt == TRIT_TERNARY)
            sum = _mm512_add_epi32(_mm512_add_epi32(a[0], _mm512_srai_epi32(a[1], 2)),
                                   _mm512_add_epi32(_mm512_srai_epi32(a[2], 4), _mm512_srai_epi32(a[3], 6)));
        else
            sum = _mm512_add_epi32(_mm512_add_epi32(a[0], a[1]), _mm512_add_epi32(a[2], a[3]));
        const __m512 s = _mm512_load_ps(w->scales + (p * NG + g) * TRIT_QPANEL_ROWS);
        const __m512i unbias = _mm512_set1_epi32(bias * x->gsum[g]);
        f = _mm512_add_ps(f, _mm512_mul_ps(s, _mm512_cvtepi32_ps(_mm512_sub_epi32(sum, unbias))));
    }
    const int64_t cols = w->N - n < 16 ? w->N - n : 16;
    const __mmask16 k = (__mmask16)((1u << cols) - 1);
    const __m512 v = _mm512_mul_ps(f, _mm512_set1_ps(x->scale[0]));
    _mm512_mask_storeu_ps(y + n, k, acc ? _mm512_add_ps(_mm512_maskz_loadu_ps(k, y + n), v) : v);
}

INLINE void panels(trit_dtype wdt, int64_t M, int64_t p0, int64_t p1, const trit_qpanels *w, const trit_qact *x,
                   float *y, int64_t ldy, bool acc) {
    int64_t p = p0;
    if (M == 1) {  // decoding: one panel after another, a single stream through the codes
        for (; p < p1; p++) gemv(wdt, w, p, x, y, acc);
        return;
    }
    // Two panels' codes (at most 2 x 16 K bytes) stay in L1 while every token passes over them.
    for (; p + 2 <= p1; p += 2) tokens(wdt, 2, M, w, p, x, y, ldy, acc);
    if (p < p1) tokens(wdt, 1, M, w, p, x, y, ldy, acc);
}

void trit_kernel_qpanel_avx512vnni(int64_t M, int64_t p0, int64_t p1, const trit_qpanels *w, const trit_qact *x,
                                   float *y, int64_t ldy, bool acc) {
    if (w->wdt == TRIT_QINT8) panels(TRIT_QINT8, M, p0, p1, w, x, y, ldy, acc);
    else if (w->wdt == TRIT_QINT4) panels(TRIT_QINT4, M, p0, p1, w, x, y, ldy, acc);
    else panels(TRIT_TERNARY, M, p0, p1, w, x, y, ldy, acc);
}
