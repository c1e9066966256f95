// AVX2 (+FMA) flash-attention tile kernels (contracts in kernels/flash.h).
//
// A tile's 64 query lanes are eight ymm vectors. With 16 ymm registers the two product kernels
// use the register tile of gemm_avx2.c, 6 rows x 2 vectors: 12 accumulators, two vectors of the
// streamed operand and one broadcast, so each step is 2 loads and 6 broadcasts for 12 FMAs.
// scores covers the 64 lanes as four 16-lane quarters, each a pass over the head; accum covers
// the head in 16-column chunks of the (key, query or output-gradient) rows read in place, the
// ragged last columns through vmaskmov (which never touches the columns it leaves out).
// Softmax steps are element-wise across lanes with the vector exp of flash_avx512.c; AVX2 has no
// vscalefps, so 2^n is added to the exponent field instead, which is exact here (the result is
// a normal float), so both widths give the same bits. With no mask registers either, visibility
// is an integer compare of the row index against each lane's end row, and the exp passes walk
// down 8-lane columns so that their constants stay in registers.
#include "kernels/flash.h"
#include "kernels/x86/tile_rows.h"

#include <immintrin.h>
#include <stdint.h>

#define W TRIT_FLASH_W
#define MR 6
#define R6(X) X(0) X(1) X(2) X(3) X(4) X(5)

// For the 8 lanes [8 v, 8 v + 8) of a tile: one past the last key row each lane sees
// (r + kofs <= i), or 0 for padding lanes (i >= nq), so row r is visible where end > r. kofs is
// clamped to [-2^30, W], which changes no row's visibility (a tile has far fewer than 2^30 rows).
static inline __m256i visible_end(int v, int64_t nq, int64_t kofs) {
    const int32_t k = (int32_t)(kofs < -(INT64_C(1) << 30) ? -(INT64_C(1) << 30) : kofs > W ? W : kofs);
    const int32_t q = (int32_t)(nq < 0 ? 0 : nq > W ? W : nq);
    const __m256i i = _mm256_add_epi32(_mm256_set1_epi32(8 * v), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    const __m256i pad = _mm256_cmpgt_epi32(i, _mm256_set1_epi32(q - 1));
    return _mm256_andnot_si256(pad, _mm256_sub_epi32(i, _mm256_set1_epi32(k - 1)));
}

// exp(x) on [-87, 0] (x is clamped into it; max and min return their second operand when either
// is NaN, so a NaN stays NaN). There n = round(x / ln2) is in [-126, 0] and p * 2^n is normal
// (n = -126 only for x < -86.99, where p > 1), so adding n to p's exponent bits is exact. A NaN
// converts to 0x80000000, whose shift by 23 adds nothing.
static inline __m256 exp256(__m256 x) {
    x = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
    x = _mm256_min_ps(_mm256_setzero_ps(), x);
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    const __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
}

// ---- scores: st (nr, W) = x (nr, hs) @ yt (hs, W) ------------------------------------------

// Rows [0, mr) of st, one 16-lane quarter at a time.
static inline __attribute__((always_inline)) void scores_rows(const int mr, int64_t hs, const float *x, int64_t ldx,
                                                              const float *yt, float *st) {
    for (int q = 0; q < W; q += 16) {
#define DECL(i) __m256 a##i##_0 = _mm256_setzero_ps(), a##i##_1 = a##i##_0;
        R6(DECL)
#undef DECL
        for (int64_t c = 0; c < hs; c++) {
            const float *y = yt + c * W + q;
            const __m256 y0 = _mm256_loadu_ps(y), y1 = _mm256_loadu_ps(y + 8);
#define FMA(i)                                                \
    if (i < mr) {                                             \
        const __m256 b = _mm256_broadcast_ss(x + (i) * ldx + c); \
        a##i##_0 = _mm256_fmadd_ps(b, y0, a##i##_0);          \
        a##i##_1 = _mm256_fmadd_ps(b, y1, a##i##_1);          \
    }
            R6(FMA)
#undef FMA
        }
#define STORE(i)                                    \
    if (i < mr) {                                   \
        _mm256_storeu_ps(st + (i) * W + q, a##i##_0);     \
        _mm256_storeu_ps(st + (i) * W + q + 8, a##i##_1); \
    }
        R6(STORE)
#undef STORE
    }
}

void trit_kernel_flash_scores_avx2_f32(TRIT_FLASH_SCORES_ARGS(float)) {
    int64_t r = 0;
    for (; r + MR <= nr; r += MR) scores_rows(MR, hs, x + r * ldx, ldx, yt, st + r * W);
    const float *xr = x + r * ldx;
    float *sr = st + r * W;
#define LEFT(m) scores_rows(m, hs, xr, ldx, yt, sr)
    TRIT_TILE_ROWS_LEFT(nr - r, LEFT)
#undef LEFT
}

// ---- accum: acc (nr, hs) = acc * rowscale + coef @ y ---------------------------------------

// The chunk's last vector: whole, or (ragged) only the lanes of `tail`.
static inline __attribute__((always_inline)) __m256 load_last(const bool ragged, __m256i tail, const float *p) {
    return ragged ? _mm256_maskload_ps(p, tail) : _mm256_loadu_ps(p);
}

static inline __attribute__((always_inline)) void store_last(const bool ragged, __m256i tail, float *p, __m256 v) {
    if (ragged)
        _mm256_maskstore_ps(p, tail, v);
    else
        _mm256_storeu_ps(p, v);
}

// p (8 floats of acc, the chunk's last vector if `last`) = p * scale (or p, or 0) + s.
static inline __attribute__((always_inline)) void
update(const bool last, const bool ragged, __m256i tail, float *p, __m256 s, const float *scale, bool accumulate) {
    if (accumulate) {
        const __m256 old = last ? load_last(ragged, tail, p) : _mm256_loadu_ps(p);
        s = scale ? _mm256_fmadd_ps(old, _mm256_broadcast_ss(scale), s) : _mm256_add_ps(old, s);
    }
    if (last)
        store_last(ragged, tail, p, s);
    else
        _mm256_storeu_ps(p, s);
}

// Rows [0, mr) and the nv vectors of one 16-column chunk.
static inline __attribute__((always_inline)) void
accum_rows(const int mr, const int nv, const bool ragged, __m256i tail, int64_t nk, const float *coef, int64_t rs,
           int64_t ks, const float *y, int64_t ldy, float *acc, int64_t ldacc, const float *rowscale, bool accumulate) {
#define DECL(i) __m256 a##i##_0 = _mm256_setzero_ps(), a##i##_1 = a##i##_0;
    R6(DECL)
#undef DECL
    for (int64_t k = 0; k < nk; k++) {
        const float *yk = y + k * ldy, *ck = coef + k * ks;
        const __m256 y0 = nv == 1 ? load_last(ragged, tail, yk) : _mm256_loadu_ps(yk);
        const __m256 y1 = nv == 2 ? load_last(ragged, tail, yk + 8) : y0;
#define FMA(i)                                                   \
    if (i < mr) {                                                \
        const __m256 b = _mm256_broadcast_ss(ck + (i) * rs);     \
        a##i##_0 = _mm256_fmadd_ps(b, y0, a##i##_0);             \
        if (nv > 1) a##i##_1 = _mm256_fmadd_ps(b, y1, a##i##_1); \
    }
        R6(FMA)
#undef FMA
    }
#define STORE(i)                                                                                              \
    if (i < mr) {                                                                                             \
        float *p = acc + (i) * ldacc;                                                                         \
        const float *s = rowscale ? rowscale + (i) : NULL;                                                    \
        update(nv == 1, ragged, tail, p, a##i##_0, s, accumulate);                                            \
        if (nv > 1) update(true, ragged, tail, p + 8, a##i##_1, s, accumulate);                               \
    }
    R6(STORE)
#undef STORE
}

// All rows of one chunk (nv and ragged are compile-time constants after inlining).
static inline __attribute__((always_inline)) void
accum_chunk(const int nv, const bool ragged, __m256i tail, int64_t nr, int64_t nk, const float *coef, int64_t rs,
            int64_t ks, const float *y, int64_t ldy, float *acc, int64_t ldacc, const float *rowscale,
            bool accumulate) {
    int64_t r = 0;
    for (; r + MR <= nr; r += MR)
        accum_rows(MR, nv, ragged, tail, nk, coef + r * rs, rs, ks, y, ldy, acc + r * ldacc, ldacc,
                   rowscale ? rowscale + r : NULL, accumulate);
    const float *cr = coef + r * rs, *sr = rowscale ? rowscale + r : NULL;
    float *ar = acc + r * ldacc;
#define LEFT(m) accum_rows(m, nv, ragged, tail, nk, cr, rs, ks, y, ldy, ar, ldacc, sr, accumulate)
    TRIT_TILE_ROWS_LEFT(nr - r, LEFT)
#undef LEFT
}

void trit_kernel_flash_accum_avx2_f32(TRIT_FLASH_ACCUM_ARGS(float)) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t c0 = 0;
    for (; c0 + 16 <= hs; c0 += 16)
        accum_chunk(2, false, iota, nr, nk, coef, rs, ks, y + c0, ldy, acc + c0, ldacc, rowscale, accumulate);
    const int64_t w = hs - c0;  // 0 to 15 columns left: one or two vectors, the last one maybe partial
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(w > 8 ? w - 8 : w)), iota);
    const float *yc = y + c0;
    float *ac = acc + c0;
    if (w > 8)
        accum_chunk(2, true, tail, nr, nk, coef, rs, ks, yc, ldy, ac, ldacc, rowscale, accumulate);
    else if (w == 8)
        accum_chunk(1, false, tail, nr, nk, coef, rs, ks, yc, ldy, ac, ldacc, rowscale, accumulate);
    else if (w > 0)
        accum_chunk(1, true, tail, nr, nk, coef, rs, ks, yc, ldy, ac, ldacc, rowscale, accumulate);
}

// ---- element-wise softmax steps ------------------------------------------------------------

// One 8-lane column of a tile, s (nr, 8) rows W apart: s = exp(s * scale - sub) where visible,
// 0 elsewhere; returns the column sums. Walking down a column keeps sub, the sum and the exp's
// constants in registers.
static inline __m256 exp_column(float *s, int64_t nr, __m256i end, __m256 vscale, __m256 sub) {
    __m256 sum = _mm256_setzero_ps();
    __m256i row = _mm256_setzero_si256();
    for (int64_t r = 0; r < nr; r++, s += W) {
        const __m256 vis = _mm256_castsi256_ps(_mm256_cmpgt_epi32(end, row));
        const __m256 p = _mm256_and_ps(vis, exp256(_mm256_fmsub_ps(_mm256_loadu_ps(s), vscale, sub)));
        _mm256_storeu_ps(s, p);
        sum = _mm256_add_ps(sum, p);
        row = _mm256_add_epi32(row, _mm256_set1_epi32(1));
    }
    return sum;
}

// l (W doubles) = l * alpha + sum, widened 4 lanes at a time.
static void update_l(double *l, const float *alpha, const __m256 sum[8]) {
    for (int v = 0; v < 8; v++) {
        const __m256 a = _mm256_loadu_ps(alpha + 8 * v);
        double *lv = l + 8 * v;
        const __m256d a_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(a)),
                      a_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(a, 1));
        const __m256d s_lo = _mm256_cvtps_pd(_mm256_castps256_ps128(sum[v])),
                      s_hi = _mm256_cvtps_pd(_mm256_extractf128_ps(sum[v], 1));
        _mm256_storeu_pd(lv, _mm256_fmadd_pd(_mm256_loadu_pd(lv), a_lo, s_lo));
        _mm256_storeu_pd(lv + 4, _mm256_fmadd_pd(_mm256_loadu_pd(lv + 4), a_hi, s_hi));
    }
}

void trit_kernel_flash_softmax_avx2_f32(TRIT_FLASH_SOFTMAX_ARGS(float)) {
    const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff()), vscale = _mm256_set1_ps(scale);
    __m256 mx[8], sub[8], sum[8];
    __m256i end[8], row = _mm256_setzero_si256();
    for (int v = 0; v < 8; v++) {
        mx[v] = neg_inf;
        end[v] = visible_end(v, nq, kofs);
    }
    for (int64_t r = 0; r < nr; r++, row = _mm256_add_epi32(row, _mm256_set1_epi32(1)))
        for (int v = 0; v < 8; v++) {  // max(mx, s), which is NaN for a NaN score, as in the AVX-512 kernel
            const __m256 vis = _mm256_castsi256_ps(_mm256_cmpgt_epi32(end[v], row));
            mx[v] = _mm256_blendv_ps(mx[v], _mm256_max_ps(mx[v], _mm256_loadu_ps(st + r * W + 8 * v)), vis);
        }
    // Rounding is monotonic and scale > 0, so the max of the scaled scores is the scaled max.
    // Lanes that have seen no key keep m = -inf and subtract 0 instead (they stay unused).
    for (int v = 0; v < 8; v++) {
        const __m256 mold = _mm256_loadu_ps(m + 8 * v);
        const __m256 mnew = _mm256_max_ps(_mm256_mul_ps(mx[v], vscale), mold);
        const __m256 none = _mm256_cmp_ps(mnew, neg_inf, _CMP_EQ_OQ), first = _mm256_cmp_ps(mold, neg_inf, _CMP_EQ_OQ);
        sub[v] = _mm256_andnot_ps(none, mnew);
        _mm256_storeu_ps(alpha + 8 * v, _mm256_andnot_ps(first, exp256(_mm256_sub_ps(mold, sub[v]))));
        _mm256_storeu_ps(m + 8 * v, mnew);
    }
    for (int v = 0; v < 8; v++) sum[v] = exp_column(st + 8 * v, nr, end[v], vscale, sub[v]);
    update_l(l, alpha, sum);
}

void trit_kernel_flash_probs_avx2_f32(TRIT_FLASH_PROBS_ARGS(float)) {
    const __m256 vscale = _mm256_set1_ps(scale);
    for (int v = 0; v < 8; v++)
        exp_column(st + 8 * v, nr, visible_end(v, nq, kofs), vscale, _mm256_loadu_ps(lse + 8 * v));
}

void trit_kernel_flash_dscores_avx2_f32(TRIT_FLASH_DSCORES_ARGS(float)) {
    const __m256 vscale = _mm256_set1_ps(scale);
    for (int64_t r = 0; r < nr; r++)
        for (int v = 0; v < 8; v++) {
            float *g = dp + r * W + 8 * v;
            const __m256 pv = _mm256_mul_ps(_mm256_loadu_ps(p + r * W + 8 * v), vscale);
            _mm256_storeu_ps(g, _mm256_mul_ps(pv, _mm256_sub_ps(_mm256_loadu_ps(g), _mm256_loadu_ps(d + 8 * v))));
        }
}
