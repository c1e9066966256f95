// Integer matmuls on AVX2 (see qgemm.h). qint8 for one token: vpmaddubsw on |w| and x with w's
// sign (both within 127, so the pair sums cannot saturate), exact in int32; for several, int16
// tiles (below). qint4: the biased nibbles (c + 8, 0..15) are the unsigned operand, so
// sum (c + 8) x = sum c x + 8 sum x and the group sums of x take the 8 back out. Four rows of W
// at a time share each activation load.
#include "kernels/x86/qgemm_driver.h"
#include "kernels/x86/int_avx2.h"

#include <immintrin.h>
#include <math.h>

// Every path (one token, several, unpacked rows, the qint8 tiles) finishes a group the same
// way, so a token's outputs have the same bits alone or in a prompt: the lanes of each of the
// four rows' vectors are added (rows past R are zero vectors), the weight bias times the
// activations' group sum comes out in int32, and one multiply-add scales the four sums.
// bias * gsum fits int32 for any group trit_qgemm_supported allows.
static inline __m128 group_sums4(__m256i a0, __m256i a1, __m256i a2, __m256i a3, int32_t unbias) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    return _mm_cvtepi32_ps(_mm_sub_epi32(s, _mm_set1_epi32(unbias)));
}

// One row's group sum, as group_sums4 gives it (an exact integer, so in any order).
static inline float group_sum1(__m256i a, int32_t unbias) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return (float)(_mm_cvtsi128_si32(s) - unbias);
}

// f + the group sums times the scales of rows r < R of group g (ws: (R, NG)).
static inline __m128 scale_group(__m128 f, __m128 sums, int R, const float *ws, int64_t NG, int64_t g) {
    float sc[4] = {0, 0, 0, 0};
    for (int r = 0; r < R; r++) sc[r] = ws[r * NG + g];
    return _mm_fmadd_ps(sums, _mm_loadu_ps(sc), f);
}

// y[r] = xs * f[r] for r < R.
static inline void store_rows(int R, float xs, __m128 f, float *y) {
    float out[4];
    _mm_storeu_ps(out, _mm_mul_ps(f, _mm_set1_ps(xs)));
    for (int r = 0; r < R; r++) y[r] = out[r];
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
    __m128 f = _mm_setzero_ps();
    float f1 = 0;
    const int64_t NG = K / G;
    const int32_t bias = kind == W_Q4 || kind == W_U4 ? 8 : kind == W_T2 || kind == W_U2 ? 1 : 0;
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
        if (R == 1)  // one row's epilogue, the bits of the four-row one
            f1 = fmaf(group_sum1(iacc[0], bias * gsum[g]), ws[g], f1);
        else
            f = scale_group(f, group_sums4(iacc[0], iacc[1], iacc[2], iacc[3], bias * gsum[g]), R, ws, NG, g);
    }
    if (R == 1)
        y[0] = f1 * xs;
    else
        store_rows(R, xs, f, y);
}

// ---- qint8 against several tokens ---------------------------------------------------------
// The sign trick costs two multiplies (vpmaddubsw, then vpmaddwd to widen) per 32 products,
// and on the CPUs measured the integer multiplies issue on the same two ports as the FMAs, so
// it is no faster than f32. Widened to int16 both ways, one vpmaddwd makes 16 exact products
// in int32 pairs with nothing else to fix. The block's weight rows are widened once per call;
// the activations as they are loaded. A tile is 3 tokens x 4 rows (12 accumulators).
enum { TILE_M = 3, TILE_N = 4, TOKEN_BLOCK = 48 };

static _Thread_local float *wide_mem;
static _Thread_local size_t wide_floats;

// y rows m.. (mt <= 3 valid) x columns n.. (nt <= 4 valid) from int8 tokens x (stride K) and
// int16 weight rows w (stride K); missing tokens and rows repeat the first ones (not stored).
static void q8_tile(int mt, int nt, int64_t K, int64_t G, const int8_t *x /* (mt, K) */,
                    const float *xs /* (mt) */, const int16_t *w /* (nt, K) */, const float *ws /* (nt, K / G) */,
                    float *y /* (mt, ldy) */, int64_t ldy) {
    const int64_t NG = K / G;
    const int8_t *xr[TILE_M];
    const int16_t *wr[TILE_N];
    for (int i = 0; i < TILE_M; i++) xr[i] = x + (i < mt ? i : 0) * K;
    for (int j = 0; j < TILE_N; j++) wr[j] = w + (j < nt ? j : 0) * K;
    __m128 f[TILE_M] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t g = 0; g < NG; g++) {
        __m256i a[TILE_M][TILE_N];
        for (int i = 0; i < TILE_M; i++)
            for (int j = 0; j < TILE_N; j++) a[i][j] = _mm256_setzero_si256();
        for (int64_t k = g * G; k < (g + 1) * G; k += 16)
            for (int i = 0; i < TILE_M; i++) {
                const __m256i xv = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(xr[i] + k)));
                for (int j = 0; j < TILE_N; j++) {
                    const __m256i wv = _mm256_loadu_si256((const __m256i *)(wr[j] + k));
                    a[i][j] = trit_avx2_add_epi32_in_place(a[i][j], _mm256_madd_epi16(xv, wv));
                }
            }
        for (int i = 0; i < TILE_M; i++)
            f[i] = scale_group(f[i], group_sums4(a[i][0], a[i][1], a[i][2], a[i][3], 0), nt, ws, NG, g);
    }
    for (int i = 0; i < mt; i++) store_rows(nt, xs[i], f[i], y + i * ldy);
}

// Rows [n0, n1) of qint8 W against all M tokens by tiles; false when out of memory.
static bool q8_tiles(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x,
                     const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    const int64_t rows = n1 - n0;
    int16_t *wide = (int16_t *)trit_thread_buffer(&wide_mem, &wide_floats, (size_t)((rows * K + 1) / 2));
    if (!wide) return false;
    const int8_t *src = (const int8_t *)(w + n0 * K);
    for (int64_t i = 0; i < rows * K; i += 16)
        _mm256_storeu_si256((__m256i *)(wide + i), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(src + i))));
    const int64_t NG = K / G;
    // A block of tokens (48 KB at K = 1024) is read once from memory, then from cache by every
    // tile of the weight rows.
    for (int64_t mb = 0; mb < M; mb += TOKEN_BLOCK)
        for (int64_t n = n0; n < n1; n += TILE_N)
            for (int64_t m = mb; m < M && m < mb + TOKEN_BLOCK; m += TILE_M) {
                const int mt = M - m < TILE_M ? (int)(M - m) : TILE_M, nt = n1 - n < TILE_N ? (int)(n1 - n) : TILE_N;
                q8_tile(mt, nt, K, G, x->q + m * K, x->scale + m, wide + (n - n0) * K, ws + n * NG, y + m * ldy + n,
                        ldy);
            }
    return true;
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

QGEMM_ENTRY(trit_kernel_qgemm_q4_avx2, W_Q4)
QGEMM_ENTRY(trit_kernel_qgemm_t2_avx2, W_T2)

// Several tokens take the int16 tiles (K is a multiple of 64: whole vectors of 16).
void trit_kernel_qgemm_q8_avx2(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x,
                               const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    if (M < 2 || !q8_tiles(M, n0, n1, K, G, x, w, ws, y, ldy)) qgemm(W_Q8, M, n0, n1, K, G, x, w, ws, y, ldy);
}
