// AVX-512 flash-attention tile kernels (contracts in kernels/flash.h).
//
// A tile's 64 query lanes are four zmm vectors. The two product kernels are small GEMMs with
// register tiles of 6 rows x 4 vectors (24 accumulators): scores broadcasts one element of a
// key (or value) row against four vectors of the packed, transposed queries; accum broadcasts
// one coefficient against up to four vectors of a (key, query or output-gradient) row read in
// place, in 64-column chunks of the head. Softmax steps are element-wise across lanes with a
// vector exp (the polynomial of the portable kernels, scaled by 2^n with scalef).
#include "kernels/flash.h"
#include "kernels/x86/flash_avx512_parts.h"
#include "kernels/x86/tile_rows.h"

#include <immintrin.h>
#include <stdint.h>

#define W TRIT_FLASH_W
#define MR 6
#define R6(X) X(0) X(1) X(2) X(3) X(4) X(5)

// Bits [lo, hi) of a 64-lane mask, both clamped to [0, 64].
static inline uint64_t lanes64(int64_t lo, int64_t hi) {
    lo = lo < 0 ? 0 : lo > 64 ? 64 : lo;
    hi = hi < 0 ? 0 : hi > 64 ? 64 : hi;
    if (hi <= lo) return 0;
    uint64_t below_hi = hi == 64 ? ~UINT64_C(0) : (UINT64_C(1) << hi) - 1;
    uint64_t below_lo = lo == 64 ? ~UINT64_C(0) : (UINT64_C(1) << lo) - 1;
    return below_hi & ~below_lo;
}

// exp(x) on [-87, 0] (x is clamped into it; a NaN stays NaN).
static inline __m512 exp512(__m512 x) {
    x = _mm512_max_ps(_mm512_set1_ps(-87.0f), x);
    x = _mm512_min_ps(_mm512_setzero_ps(), x);
    __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_scalef_ps(p, n);
}

// ---- scores: st (nr, W) = x (nr, hs) @ yt (hs, W) ------------------------------------------

static inline __attribute__((always_inline)) void scores_rows(const int mr, int64_t hs, const float *x, int64_t ldx,
                                                              const float *yt, float *st) {
    R6(TRIT_FLASH_TILE_DECL)
    for (int64_t c = 0; c < hs; c++) {
        const float *y = yt + c * W;
        const __m512 y0 = _mm512_loadu_ps(y), y1 = _mm512_loadu_ps(y + 16), y2 = _mm512_loadu_ps(y + 32),
                     y3 = _mm512_loadu_ps(y + 48);
#define FMA(i)                                                \
    if (i < mr) {                                             \
        const __m512 b = _mm512_set1_ps(x[(i) * ldx + c]);    \
        a##i##_0 = _mm512_fmadd_ps(b, y0, a##i##_0);          \
        a##i##_1 = _mm512_fmadd_ps(b, y1, a##i##_1);          \
        a##i##_2 = _mm512_fmadd_ps(b, y2, a##i##_2);          \
        a##i##_3 = _mm512_fmadd_ps(b, y3, a##i##_3);          \
    }
        R6(FMA)
#undef FMA
    }
    R6(TRIT_FLASH_SCORES_STORE)
}

void trit_kernel_flash_scores_avx512_f32(TRIT_FLASH_SCORES_ARGS(float)) {
    int64_t r = 0;
    for (; r + MR <= nr; r += MR) scores_rows(MR, hs, x + r * ldx, ldx, yt, st + r * W);
    const float *xr = x + r * ldx;
    float *sr = st + r * W;
#define LEFT(m) scores_rows(m, hs, xr, ldx, yt, sr)
    TRIT_TILE_ROWS_LEFT(nr - r, LEFT)
#undef LEFT
}

// ---- accum: acc (nr, hs) = acc * rowscale + coef @ y ---------------------------------------

// Rows [0, mr) and columns [0, 16 (nv - 1) + popcount(last)) of one 64-column chunk.
static inline __attribute__((always_inline)) void
accum_rows(const int mr, const int nv, __mmask16 last, int64_t nk, const float *coef, int64_t rs, int64_t ks,
           const float *y, int64_t ldy, float *acc, int64_t ldacc, const float *rowscale, bool accumulate) {
    R6(TRIT_FLASH_TILE_DECL)
    const __mmask16 m0 = nv == 1 ? last : 0xFFFF, m1 = nv == 2 ? last : 0xFFFF, m2 = nv == 3 ? last : 0xFFFF,
                    m3 = last;
    for (int64_t k = 0; k < nk; k++) {
        const float *yk = y + k * ldy, *ck = coef + k * ks;
        const __m512 y0 = _mm512_maskz_loadu_ps(m0, yk);
        const __m512 y1 = nv > 1 ? _mm512_maskz_loadu_ps(m1, yk + 16) : y0;
        const __m512 y2 = nv > 2 ? _mm512_maskz_loadu_ps(m2, yk + 32) : y0;
        const __m512 y3 = nv > 3 ? _mm512_maskz_loadu_ps(m3, yk + 48) : y0;
#define FMA(i)                                                         \
    if (i < mr) {                                                      \
        const __m512 b = _mm512_set1_ps(ck[(i) * rs]);                 \
        a##i##_0 = _mm512_fmadd_ps(b, y0, a##i##_0);                   \
        if (nv > 1) a##i##_1 = _mm512_fmadd_ps(b, y1, a##i##_1);       \
        if (nv > 2) a##i##_2 = _mm512_fmadd_ps(b, y2, a##i##_2);       \
        if (nv > 3) a##i##_3 = _mm512_fmadd_ps(b, y3, a##i##_3);       \
    }
        R6(FMA)
#undef FMA
    }
    R6(TRIT_FLASH_ACCUM_STORE)
}

// All rows of one chunk of nv vectors (a compile-time constant after inlining).
static inline __attribute__((always_inline)) void
accum_chunk(const int nv, __mmask16 last, int64_t nr, int64_t nk, const float *coef, int64_t rs, int64_t ks,
            const float *y, int64_t ldy, float *acc, int64_t ldacc, const float *rowscale, bool accumulate) {
    int64_t r = 0;
    for (; r + MR <= nr; r += MR)
        accum_rows(MR, nv, last, nk, coef + r * rs, rs, ks, y, ldy, acc + r * ldacc, ldacc,
                   rowscale ? rowscale + r : NULL, accumulate);
    const float *cr = coef + r * rs, *sr = rowscale ? rowscale + r : NULL;
    float *ar = acc + r * ldacc;
#define LEFT(m) accum_rows(m, nv, last, nk, cr, rs, ks, y, ldy, ar, ldacc, sr, accumulate)
    TRIT_TILE_ROWS_LEFT(nr - r, LEFT)
#undef LEFT
}

void trit_kernel_flash_accum_avx512_f32(TRIT_FLASH_ACCUM_ARGS(float)) {
#define CHUNK(nv, last, c0) accum_chunk(nv, last, nr, nk, coef, rs, ks, y + (c0), ldy, acc + (c0), ldacc, rowscale, accumulate)
    TRIT_FLASH_CHUNKS64(hs, CHUNK)
#undef CHUNK
}

// ---- element-wise softmax steps ------------------------------------------------------------

void trit_kernel_flash_softmax_avx512_f32(TRIT_FLASH_SOFTMAX_ARGS(float)) {
    const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff()), vscale = _mm512_set1_ps(scale);
    __m512 mx[4], sub[4], sum[4];
    for (int v = 0; v < 4; v++) {
        mx[v] = neg_inf;
        sum[v] = _mm512_setzero_ps();
    }
    for (int64_t r = 0; r < nr; r++) {
        const uint64_t vis = lanes64(r + kofs, nq);
        for (int v = 0; v < 4; v++)
            mx[v] = _mm512_mask_max_ps(mx[v], (__mmask16)(vis >> (16 * v)), mx[v], _mm512_loadu_ps(st + r * W + 16 * v));
    }
    // Rounding is monotonic and scale > 0, so the max of the scaled scores is the scaled max.
    // Lanes that have seen no key keep m = -inf and subtract 0 instead (they stay unused).
    for (int v = 0; v < 4; v++) {
        const __m512 mold = _mm512_loadu_ps(m + 16 * v);
        const __m512 mnew = _mm512_max_ps(_mm512_mul_ps(mx[v], vscale), mold);
        const __mmask16 none = _mm512_cmp_ps_mask(mnew, neg_inf, _CMP_EQ_OQ);
        const __mmask16 first = _mm512_cmp_ps_mask(mold, neg_inf, _CMP_EQ_OQ);
        sub[v] = _mm512_mask_blend_ps(none, mnew, _mm512_setzero_ps());
        const __m512 a = _mm512_maskz_mov_ps((__mmask16)~first, exp512(_mm512_sub_ps(mold, sub[v])));
        _mm512_storeu_ps(alpha + 16 * v, a);
        _mm512_storeu_ps(m + 16 * v, mnew);
    }
    for (int64_t r = 0; r < nr; r++) {
        const uint64_t vis = lanes64(r + kofs, nq);
        for (int v = 0; v < 4; v++) {
            float *s = st + r * W + 16 * v;
            const __m512 p = _mm512_maskz_mov_ps((__mmask16)(vis >> (16 * v)),
                                                 exp512(_mm512_fmsub_ps(_mm512_loadu_ps(s), vscale, sub[v])));
            _mm512_storeu_ps(s, p);
            sum[v] = _mm512_add_ps(sum[v], p);
        }
    }
    for (int v = 0; v < 4; v++) {
        const __m512 a = _mm512_loadu_ps(alpha + 16 * v);
        double *lv = l + 16 * v;
        const __m512d a_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a)), a_hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(a, 1));
        const __m512d s_lo = _mm512_cvtps_pd(_mm512_castps512_ps256(sum[v])),
                      s_hi = _mm512_cvtps_pd(_mm512_extractf32x8_ps(sum[v], 1));
        _mm512_storeu_pd(lv, _mm512_fmadd_pd(_mm512_loadu_pd(lv), a_lo, s_lo));
        _mm512_storeu_pd(lv + 8, _mm512_fmadd_pd(_mm512_loadu_pd(lv + 8), a_hi, s_hi));
    }
}

void trit_kernel_flash_probs_avx512_f32(TRIT_FLASH_PROBS_ARGS(float)) {
    const __m512 vscale = _mm512_set1_ps(scale);
    __m512 off[4];
    for (int v = 0; v < 4; v++) off[v] = _mm512_loadu_ps(lse + 16 * v);
    for (int64_t r = 0; r < nr; r++) {
        const uint64_t vis = lanes64(r + kofs, nq);
        for (int v = 0; v < 4; v++) {
            float *s = st + r * W + 16 * v;
            const __m512 p = _mm512_maskz_mov_ps((__mmask16)(vis >> (16 * v)),
                                                 exp512(_mm512_fmsub_ps(_mm512_loadu_ps(s), vscale, off[v])));
            _mm512_storeu_ps(s, p);
        }
    }
}

void trit_kernel_flash_dscores_avx512_f32(TRIT_FLASH_DSCORES_ARGS(float)) {
    const __m512 vscale = _mm512_set1_ps(scale);
    __m512 dv[4];
    for (int v = 0; v < 4; v++) dv[v] = _mm512_loadu_ps(d + 16 * v);
    for (int64_t r = 0; r < nr; r++)
        for (int v = 0; v < 4; v++) {
            float *g = dp + r * W + 16 * v;
            const __m512 pv = _mm512_mul_ps(_mm512_loadu_ps(p + r * W + 16 * v), vscale);
            _mm512_storeu_ps(g, _mm512_mul_ps(pv, _mm512_sub_ps(_mm512_loadu_ps(g), dv[v])));
        }
}
