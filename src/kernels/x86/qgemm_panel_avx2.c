// The panel integer matmul (qgemm_panel.h) on AVX2: each 64-byte step is two halves of 8 rows,
// one 256-bit vector each. For qint4 and ternary, vpmaddubsw multiplies a half's biased codes by
// one token's broadcast dword and adds pairs into int16; the S dwords of a step (qint4 2, ternary
// 4) are summed in int16, and one vpmaddwd by ones widens them into each row's int32 lane: qint4
// every step (at most 2 x 2 x 15 x 128), ternary once a run of steps (below). qint8's biased codes
// (up to 255) would saturate those pair sums (2 x 255 x 127), so its codes are unbiased (xor 0x80)
// and the sign moves to them instead: vpmaddubsw(|a|, sign(a) w), pairs at most 2 x 127 x 127,
// with no group-sum correction.
// Tiles of up to 4 tokens x 1 panel: AVX2 has 16 vector registers, so each token's running
// float sums live in a small array, added in group order as in the reference.
#include "kernels/qgemm_panel.h"
#include "kernels/thread_buffer.h"
#include "kernels/x86/int_avx2.h"

#include <immintrin.h>
#include <string.h>

#define INLINE static inline __attribute__((always_inline))

INLINE __m256i broadcast_dword(const int8_t *q) {
    int32_t v;
    memcpy(&v, q, sizeof v);
    return _mm256_set1_epi32(v);
}

// The biased codes of dword i of a half-step v, one per byte.
INLINE __m256i codes_of(trit_dtype wdt, __m256i v, int i) {
    const int bits = wdt == TRIT_QINT4 ? 4 : 2;
    const __m256i mask = _mm256_set1_epi8((char)((1 << bits) - 1));
    return _mm256_and_si256(i ? _mm256_srli_epi16(v, bits * i) : v, mask);
}

// sum (16) += the group's scales sc (16) x (the int32 lanes of both halves - unbias), one rounded
// product and one rounded add per output, in group order as the reference.
INLINE void add_group(float *sum, const __m256i a[2], int32_t unbias, const float *sc) {
    for (int h = 0; h < 2; h++) {
        const __m256 c = _mm256_cvtepi32_ps(_mm256_sub_epi32(a[h], _mm256_set1_epi32(unbias)));
        const __m256 part = _mm256_mul_ps(_mm256_load_ps(sc + 8 * h), c);
        _mm256_storeu_ps(sum + 8 * h, _mm256_add_ps(_mm256_loadu_ps(sum + 8 * h), part));
    }
}

// The T tokens' outputs of panel p: each token's scale times its sums, stored or added into y.
INLINE void store_tile(int T, const float (*sum)[16], const trit_qpanels *w, int64_t p, const trit_qact *x, int64_t m0,
                       float *y, int64_t ldy, bool acc) {
    const int64_t n = p * TRIT_QPANEL_ROWS;
    const int cols = w->N - n < 16 ? (int)(w->N - n) : 16;
    for (int t = 0; t < T; t++) {
        const float xs = x->scale[m0 + t];
        float *yr = y + (m0 + t) * ldy + n;
        for (int l = 0; l < cols; l++) {
            const float v = xs * sum[t][l];
            yr[l] = acc ? yr[l] + v : v;
        }
    }
}

// Tokens m0 .. m0 + T - 1 against qint8 or qint4 panel p; their outputs' running sums in y.
// (Ternary panels take tile_ternary, below.)
INLINE void tile(trit_dtype wdt, int T, const trit_qpanels *w, int64_t p, const trit_qact *x, int64_t m0, float *y,
                 int64_t ldy, bool acc) {
    const int64_t K = w->K, G = w->G, NG = K / G;
    const int S = wdt == TRIT_QINT8 ? 1 : 2;
    const int32_t bias = wdt == TRIT_QINT8 ? 0 : 8;
    const uint8_t *codes = w->codes + (size_t)p * w->panel_bytes;
    const __m256i ones = _mm256_set1_epi16(1);
    float sum[4][16];
    memset(sum, 0, sizeof sum);
    for (int64_t g = 0; g < NG; g++) {
        __m256i a[4][2];
        for (int t = 0; t < T; t++) a[t][0] = a[t][1] = _mm256_setzero_si256();
        for (int64_t d = g * G / 4; d < (g + 1) * G / 4; d += S) {
            const uint8_t *step = codes + (size_t)(d / S) * TRIT_QPANEL_STEP;
            if (wdt == TRIT_QINT8) {
                const __m256i flip = _mm256_set1_epi8((char)0x80);  // biased -> signed codes
                const __m256i c0 = _mm256_xor_si256(_mm256_load_si256((const __m256i *)step), flip);
                const __m256i c1 = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(step + 32)), flip);
                for (int t = 0; t < T; t++) {
                    const __m256i q = broadcast_dword(x->q + (m0 + t) * K + 4 * d), qa = _mm256_sign_epi8(q, q);
                    a[t][0] = _mm256_add_epi32(
                        a[t][0], _mm256_madd_epi16(_mm256_maddubs_epi16(qa, _mm256_sign_epi8(c0, q)), ones));
                    a[t][1] = _mm256_add_epi32(
                        a[t][1], _mm256_madd_epi16(_mm256_maddubs_epi16(qa, _mm256_sign_epi8(c1, q)), ones));
                }
                continue;
            }
            for (int h = 0; h < 2; h++) {
                const __m256i v = _mm256_load_si256((const __m256i *)(step + 32 * h));
                __m256i u[2];
                for (int i = 0; i < S; i++) u[i] = codes_of(wdt, v, i);
                for (int t = 0; t < T; t++) {
                    const int8_t *q = x->q + (m0 + t) * K + 4 * d;
                    __m256i s16 = _mm256_maddubs_epi16(u[0], broadcast_dword(q));
                    for (int i = 1; i < S; i++)
                        s16 = _mm256_add_epi16(s16, _mm256_maddubs_epi16(u[i], broadcast_dword(q + 4 * i)));
                    a[t][h] = _mm256_add_epi32(a[t][h], _mm256_madd_epi16(s16, ones));
                }
            }
        }
        const float *sc = w->scales + (p * NG + g) * TRIT_QPANEL_ROWS;
        for (int t = 0; t < T; t++) add_group(sum[t], a[t], bias * x->gsum[(m0 + t) * NG + g], sc);
    }
    store_tile(T, (const float(*)[16])sum, w, p, x, m0, y, ldy, acc);
}

// ---- ternary: int16 sums over runs of steps ---------------------------------------------------
// A ternary step's four vpmaddubsw of biased codes (0 to 2) against int8 activations sum to at
// most 4 x 2 x 2 x 128 = 2048 in magnitude a lane, so TERNARY_RUN = 16 steps add in int16 (at most
// 32768 in magnitude, where only -32768 can be reached, which int16 holds) before one vpmaddwd
// widens them, where tile() widens every step: a fifth fewer multiply-port instructions and an add
// fewer a step. The integer sums are exact in any order, so the bits are tile()'s. (qint4's steps
// reach 7680, so runs of 4 at most, which measured slower than tile() for one token.)
enum { TERNARY_RUN = 16, TERNARY_TILE = 4 };

// Tokens 0 .. T - 1 of q (rows K apart) against half h (rows 8h .. 8h + 7) of a ternary panel's
// steps [s0, s1): each token's int32 lanes a[t][h] plus the run's sums.
INLINE void ternary_run(int T, const uint8_t *codes, int h, int64_t s0, int64_t s1, const int8_t *q, int64_t K,
                        __m256i a[TERNARY_TILE][2]) {
    __m256i s16[TERNARY_TILE];
    for (int t = 0; t < T; t++) s16[t] = _mm256_setzero_si256();
    for (int64_t st = s0; st < s1; st++) {
        const __m256i v = _mm256_load_si256((const __m256i *)(codes + (size_t)st * TRIT_QPANEL_STEP + 32 * h));
        const __m256i u0 = codes_of(TRIT_TERNARY, v, 0), u1 = codes_of(TRIT_TERNARY, v, 1);
        const __m256i u2 = codes_of(TRIT_TERNARY, v, 2), u3 = codes_of(TRIT_TERNARY, v, 3);
        for (int t = 0; t < T; t++) {
            const int8_t *qt = q + t * K + 16 * st;  // the step's 4 dwords of token t
            const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(u0, broadcast_dword(qt)),
                                                 _mm256_maddubs_epi16(u1, broadcast_dword(qt + 4)));
            const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(u2, broadcast_dword(qt + 8)),
                                                 _mm256_maddubs_epi16(u3, broadcast_dword(qt + 12)));
            s16[t] = _mm256_add_epi16(s16[t], _mm256_add_epi16(p01, p23));
        }
    }
    const __m256i ones = _mm256_set1_epi16(1);
    for (int t = 0; t < T; t++) a[t][h] = _mm256_add_epi32(a[t][h], _mm256_madd_epi16(s16[t], ones));
}

// tile() for ternary panels.
INLINE void tile_ternary(int T, const trit_qpanels *w, int64_t p, const trit_qact *x, int64_t m0, float *y,
                         int64_t ldy, bool acc) {
    const int64_t K = w->K, G = w->G, NG = K / G, steps = G / 16;
    const uint8_t *codes = w->codes + (size_t)p * w->panel_bytes;
    const int8_t *q = x->q + m0 * K;
    float sum[TERNARY_TILE][16];
    memset(sum, 0, sizeof sum);
    for (int64_t g = 0; g < NG; g++) {
        __m256i a[TERNARY_TILE][2];
        for (int t = 0; t < T; t++) a[t][0] = a[t][1] = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++)
            for (int64_t s0 = g * steps; s0 < (g + 1) * steps; s0 += TERNARY_RUN) {
                const int64_t s1 = s0 + TERNARY_RUN < (g + 1) * steps ? s0 + TERNARY_RUN : (g + 1) * steps;
                ternary_run(T, codes, h, s0, s1, q, K, a);
            }
        const float *sc = w->scales + (p * NG + g) * TRIT_QPANEL_ROWS;
        for (int t = 0; t < T; t++) add_group(sum[t], a[t], x->gsum[(m0 + t) * NG + g], sc);  // codes biased by 1
    }
    store_tile(T, (const float(*)[16])sum, w, p, x, m0, y, ldy, acc);
}

// ---- qint8 against several tokens: int16 pairs both ways --------------------------------------
// The sign trick above costs seven multiply-port instructions (three vpsignb, two vpmaddubsw, two
// vpmaddwd) per 64 products a token, and on the CPUs measured vpsignb and the integer multiplies
// issue on the FMAs' two ports, so it ran at about f32's speed. Widened to int16 both ways, one
// vpmaddwd makes 16 exact products in int32 pairs with nothing to fix, and the add goes to another
// port. A panel is widened once per block of tokens into the lanes it fills (one int32 lane per
// row, as the int8 layout), the block's activations once per call of the block.
enum { WIDE_TILE = 6, WIDE_BLOCK_BYTES = 1 << 20 };

static _Thread_local float *wide_mem;
static _Thread_local size_t wide_floats;

// Panel codes (K / 4 steps of 64 biased bytes) to wide (K / 2, 16) int16 pairs: dword l of pair j
// holds row l's codes 2j (low half) and 2j + 1.
static void widen_panel(const uint8_t *codes, int64_t K, int32_t *wide) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t s = 0; s < K / 4; s++)
        for (int h = 0; h < 2; h++) {
            const __m256i v = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(codes + 64 * s + 32 * h)), flip);
            // In dword l: e holds codes 4s and 4s + 2 of row 8h + l, o codes 4s + 1 and 4s + 3.
            const __m256i e = _mm256_srai_epi16(_mm256_slli_epi16(v, 8), 8), o = _mm256_srai_epi16(v, 8);
            _mm256_store_si256((__m256i *)(wide + 32 * s + 8 * h), _mm256_blend_epi16(e, _mm256_slli_epi32(o, 16), 0xAA));
            _mm256_store_si256((__m256i *)(wide + 32 * s + 16 + 8 * h),
                               _mm256_blend_epi16(_mm256_srli_epi32(e, 16), o, 0xAA));
        }
}

// Tokens t < T of the widened block xw (T, K) against widened panel p: the running sums of tile().
INLINE void wide_tile(int T, const trit_qpanels *w, int64_t p, const int32_t *wide, const int16_t *xw,
                      const float *xs /* (T) */, float *y /* (T, ldy) */, int64_t ldy, bool acc) {
    const int64_t K = w->K, G = w->G, NG = K / G, n = p * TRIT_QPANEL_ROWS;
    const int cols = w->N - n < 16 ? (int)(w->N - n) : 16;
    __m256 sum[WIDE_TILE][2];
    for (int t = 0; t < T; t++) sum[t][0] = sum[t][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < NG; g++) {
        __m256i a[WIDE_TILE][2];
        for (int t = 0; t < T; t++) a[t][0] = a[t][1] = _mm256_setzero_si256();
        for (int64_t j = g * G / 2; j < (g + 1) * G / 2; j++) {
            const __m256i w0 = _mm256_load_si256((const __m256i *)(wide + 16 * j));
            const __m256i w1 = _mm256_load_si256((const __m256i *)(wide + 16 * j + 8));
            for (int t = 0; t < T; t++) {
                int32_t pair;
                memcpy(&pair, xw + t * K + 2 * j, sizeof pair);
                const __m256i b = _mm256_set1_epi32(pair);
                a[t][0] = trit_avx2_add_epi32_in_place(a[t][0], _mm256_madd_epi16(b, w0));
                a[t][1] = trit_avx2_add_epi32_in_place(a[t][1], _mm256_madd_epi16(b, w1));
            }
        }
        const float *sc = w->scales + (p * NG + g) * TRIT_QPANEL_ROWS;
        for (int t = 0; t < T; t++)
            for (int h = 0; h < 2; h++)
                sum[t][h] = _mm256_add_ps(sum[t][h], _mm256_mul_ps(_mm256_load_ps(sc + 8 * h), _mm256_cvtepi32_ps(a[t][h])));
    }
    for (int t = 0; t < T; t++) {
        float out[16];
        _mm256_storeu_ps(out, _mm256_mul_ps(_mm256_set1_ps(xs[t]), sum[t][0]));
        _mm256_storeu_ps(out + 8, _mm256_mul_ps(_mm256_set1_ps(xs[t]), sum[t][1]));
        float *yt = y + t * ldy + n;
        for (int l = 0; l < cols; l++) yt[l] = acc ? yt[l] + out[l] : out[l];
    }
}

// qint8 panels [p0, p1) against all M tokens by blocks of widened tokens; false when out of memory.
static bool wide_panels(int64_t M, int64_t p0, int64_t p1, const trit_qpanels *w, const trit_qact *x, float *y,
                        int64_t ldy, bool acc) {
    const int64_t K = w->K;
    int64_t block = WIDE_BLOCK_BYTES / (2 * K) / WIDE_TILE * WIDE_TILE;
    if (block < WIDE_TILE) block = WIDE_TILE;
    if (block > M) block = M;
    // The panel's (K / 2, 16) pairs, then the block's (block, K) int16 activations.
    float *mem = trit_thread_buffer(&wide_mem, &wide_floats, (size_t)(8 * K + (block * K + 1) / 2));
    if (!mem) return false;
    int32_t *wide = (int32_t *)mem;
    int16_t *xw = (int16_t *)(mem + 8 * K);
    for (int64_t mb = 0; mb < M; mb += block) {
        const int64_t bm = M - mb < block ? M - mb : block;
        for (int64_t i = 0; i < bm * K; i += 16)
            _mm256_storeu_si256((__m256i *)(xw + i),
                                _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(x->q + mb * K + i))));
        for (int64_t p = p0; p < p1; p++) {
            widen_panel(w->codes + (size_t)p * w->panel_bytes, K, wide);
            int64_t m = 0;
            for (; m + WIDE_TILE <= bm; m += WIDE_TILE)
                wide_tile(WIDE_TILE, w, p, wide, xw + m * K, x->scale + mb + m, y + (mb + m) * ldy, ldy, acc);
            switch (bm - m) {
            case 5: wide_tile(5, w, p, wide, xw + m * K, x->scale + mb + m, y + (mb + m) * ldy, ldy, acc); break;
            case 4: wide_tile(4, w, p, wide, xw + m * K, x->scale + mb + m, y + (mb + m) * ldy, ldy, acc); break;
            case 3: wide_tile(3, w, p, wide, xw + m * K, x->scale + mb + m, y + (mb + m) * ldy, ldy, acc); break;
            case 2: wide_tile(2, w, p, wide, xw + m * K, x->scale + mb + m, y + (mb + m) * ldy, ldy, acc); break;
            case 1: wide_tile(1, w, p, wide, xw + m * K, x->scale + mb + m, y + (mb + m) * ldy, ldy, acc); break;
            }
        }
    }
    return true;
}

INLINE void panels(trit_dtype wdt, int64_t M, int64_t p0, int64_t p1, const trit_qpanels *w, const trit_qact *x,
                   float *y, int64_t ldy, bool acc) {
#define TILE(T) (wdt == TRIT_TERNARY ? tile_ternary(T, w, p, x, m, y, ldy, acc) : tile(wdt, T, w, p, x, m, y, ldy, acc))
    for (int64_t p = p0; p < p1; p++) {
        int64_t m = 0;
        for (; m + 4 <= M; m += 4) TILE(4);
        if (M - m == 3) TILE(3);
        else if (M - m == 2) TILE(2);
        else if (M - m == 1) TILE(1);
    }
#undef TILE
}

void trit_kernel_qpanel_avx2(int64_t M, int64_t p0, int64_t p1, const trit_qpanels *w, const trit_qact *x, float *y,
                             int64_t ldy, bool acc) {
    if (w->wdt == TRIT_QINT8) {
        if (M < 4 || !wide_panels(M, p0, p1, w, x, y, ldy, acc)) panels(TRIT_QINT8, M, p0, p1, w, x, y, ldy, acc);
    }
    else if (w->wdt == TRIT_QINT4) panels(TRIT_QINT4, M, p0, p1, w, x, y, ldy, acc);
    else if (w->wdt == TRIT_TERNARY) panels(TRIT_TERNARY, M, p0, p1, w, x, y, ldy, acc);
}
