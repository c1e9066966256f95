// AVX512-BF16 flash-attention tile kernels (contracts in kernels/flash_bf16.h).
//
// The two products have the register tiles of the f32 kernels (x86/flash_avx512.c), 6 rows x 4
// vectors, with vdpbf16ps in place of the FMA: each step takes one word (a pair along the summed
// dimension) instead of one value, so a tile does twice the multiply-adds per instruction.
// scores broadcasts a word of a key (or value) row against four vectors of the packed,
// transposed query words; accum broadcasts a coefficient word against up to four vectors of a
// row of packed pairs, in 64-column chunks of the head.
#include "kernels/flash_bf16.h"
#include "kernels/x86/flash_avx512_parts.h"
#include "kernels/x86/gemm_avx512_parts.h"
#include "kernels/x86/tile_rows.h"

#include <immintrin.h>

#define W TRIT_FLASH_W
#define MR 6
#define R6(X) X(0) X(1) X(2) X(3) X(4) X(5)

static inline __m512bh words(__m512i x) { return (__m512bh)x; }

// ---- scores: st (nr, W) = x (nr, hp) . yt (hp, W) -------------------------------------------

static inline __attribute__((always_inline)) void scores_rows(const int mr, int64_t hp, const uint32_t *x,
                                                              int64_t ldx, const uint32_t *yt, float *st) {
    R6(TRIT_FLASH_TILE_DECL)
    for (int64_t p = 0; p < hp; p++) {
        const uint32_t *y = yt + p * W;
        const __m512bh y0 = words(_mm512_loadu_si512(y)), y1 = words(_mm512_loadu_si512(y + 16)),
                       y2 = words(_mm512_loadu_si512(y + 32)), y3 = words(_mm512_loadu_si512(y + 48));
#define DOT(i)                                                            \
    if (i < mr) {                                                         \
        const __m512bh b = words(_mm512_set1_epi32((int)x[(i) * ldx + p])); \
        a##i##_0 = _mm512_dpbf16_ps(a##i##_0, b, y0);                     \
        a##i##_1 = _mm512_dpbf16_ps(a##i##_1, b, y1);                     \
        a##i##_2 = _mm512_dpbf16_ps(a##i##_2, b, y2);                     \
        a##i##_3 = _mm512_dpbf16_ps(a##i##_3, b, y3);                     \
    }
        R6(DOT)
#undef DOT
    }
    R6(TRIT_FLASH_SCORES_STORE)
}

static void scores(int64_t nr, int64_t hp, const uint32_t *x, int64_t ldx, const uint32_t *yt, float *st) {
    int64_t r = 0;
    for (; r + MR <= nr; r += MR) scores_rows(MR, hp, x + r * ldx, ldx, yt, st + r * W);
    const uint32_t *xr = x + r * ldx;
    float *sr = st + r * W;
#define LEFT(m) scores_rows(m, hp, xr, ldx, yt, sr)
    TRIT_TILE_ROWS_LEFT(nr - r, LEFT)
#undef LEFT
}

// ---- accum: acc (nr, hs) = acc * rowscale + coef . y ------------------------------------------

// Rows [0, mr) and columns [0, 16 (nv - 1) + popcount(last)) of one 64-column chunk.
static inline __attribute__((always_inline)) void
accum_rows(const int mr, const int nv, __mmask16 last, int64_t np, const uint32_t *coef, int64_t rs, int64_t ks,
           const uint32_t *y, int64_t ldy, float *acc, int64_t ldacc, const float *rowscale, bool accumulate) {
    R6(TRIT_FLASH_TILE_DECL)
    const __mmask16 m0 = nv == 1 ? last : 0xFFFF, m1 = nv == 2 ? last : 0xFFFF, m2 = nv == 3 ? last : 0xFFFF,
                    m3 = last;
    for (int64_t p = 0; p < np; p++) {
        const uint32_t *yp = y + p * ldy, *cp = coef + p * ks;
        const __m512bh y0 = words(_mm512_maskz_loadu_epi32(m0, yp));
        const __m512bh y1 = nv > 1 ? words(_mm512_maskz_loadu_epi32(m1, yp + 16)) : y0;
        const __m512bh y2 = nv > 2 ? words(_mm512_maskz_loadu_epi32(m2, yp + 32)) : y0;
        const __m512bh y3 = nv > 3 ? words(_mm512_maskz_loadu_epi32(m3, yp + 48)) : y0;
#define DOT(i)                                                                \
    if (i < mr) {                                                             \
        const __m512bh b = words(_mm512_set1_epi32((int)cp[(i) * rs]));        \
        a##i##_0 = _mm512_dpbf16_ps(a##i##_0, b, y0);                         \
        if (nv > 1) a##i##_1 = _mm512_dpbf16_ps(a##i##_1, b, y1);             \
        if (nv > 2) a##i##_2 = _mm512_dpbf16_ps(a##i##_2, b, y2);             \
        if (nv > 3) a##i##_3 = _mm512_dpbf16_ps(a##i##_3, b, y3);             \
    }
        R6(DOT)
#undef DOT
    }
    R6(TRIT_FLASH_ACCUM_STORE)
}

static inline __attribute__((always_inline)) void
accum_chunk(const int nv, __mmask16 last, int64_t nr, int64_t np, const uint32_t *coef, int64_t rs, int64_t ks,
            const uint32_t *y, int64_t ldy, float *acc, int64_t ldacc, const float *rowscale, bool accumulate) {
    int64_t r = 0;
    for (; r + MR <= nr; r += MR)
        accum_rows(MR, nv, last, np, coef + r * rs, rs, ks, y, ldy, acc + r * ldacc, ldacc,
                   rowscale ? rowscale + r : NULL, accumulate);
    const uint32_t *cr = coef + r * rs;
    const float *sr = rowscale ? rowscale + r : NULL;
    float *ar = acc + r * ldacc;
#define LEFT(m) accum_rows(m, nv, last, np, cr, rs, ks, y, ldy, ar, ldacc, sr, accumulate)
    TRIT_TILE_ROWS_LEFT(nr - r, LEFT)
#undef LEFT
}

static void accum(int64_t nr, int64_t np, int64_t hs, const uint32_t *coef, int64_t rs, int64_t ks, const uint32_t *y,
                  int64_t ldy, float *acc, int64_t ldacc, const float *rowscale, bool accumulate) {
#define CHUNK(nv, last, c0) accum_chunk(nv, last, nr, np, coef, rs, ks, y + (c0), ldy, acc + (c0), ldacc, rowscale, accumulate)
    TRIT_FLASH_CHUNKS64(hs, CHUNK)
#undef CHUNK
}

// ---- packing ----------------------------------------------------------------------------------

// n (<= 16) values of a row from element i as bf16 bits in 32-bit lanes (zeros after n).
static inline __m512i bf16_lanes(const void *src, trit_dtype dt, int64_t i, int64_t n) {
    const __mmask16 m = trit_flash_lanes16(n);
    if (dt == TRIT_BF16) return _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, (const uint16_t *)src + i));
    return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, (const float *)src + i)));
}

static void pair_rows(uint32_t *dst, const void *src, trit_dtype dt, int64_t ld, int64_t n, int64_t w) {
    for (int64_t p = 0; 2 * p < n; p++, dst += w) {
        const int64_t r = 2 * p;
        for (int64_t c = 0; c < w; c += 16) {
            const int64_t k = w - c < 16 ? w - c : 16;
            __m512i x = bf16_lanes(src, dt, r * ld + c, k);
            if (r + 1 < n) x = _mm512_or_si512(x, _mm512_slli_epi32(bf16_lanes(src, dt, (r + 1) * ld + c, k), 16));
            _mm512_mask_storeu_epi32(dst + c, trit_flash_lanes16(k), x);
        }
    }
}

static void transpose(uint32_t *dst, const uint32_t *src, int64_t ldw, int64_t n, int64_t hp) {
    for (int64_t i0 = 0; i0 < W; i0 += 16)
        for (int64_t c0 = 0; c0 < hp; c0 += 16) {
            const int64_t k = hp - c0 < 16 ? hp - c0 : 16;
            __m512 r[16];
            for (int64_t i = 0; i < 16; i++)
                r[i] = i0 + i < n ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(trit_flash_lanes16(k), src + (i0 + i) * ldw + c0))
                                  : _mm512_setzero_ps();
            trit_transpose16(r);
            for (int64_t q = 0; q < k; q++) _mm512_storeu_ps((float *)dst + (c0 + q) * W + i0, r[q]);
        }
}

static void round_bf16(uint16_t *dst, const float *src, int64_t n) {
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = trit_flash_lanes16(n - i);
        _mm256_mask_storeu_epi16(dst + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i)));
    }
}

const trit_flash_bf16_kernels trit_kernel_flash_bf16_avx512bf16 = {scores, accum, pair_rows, transpose, round_bf16};
