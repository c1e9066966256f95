// Weight-only NF4 matmul on AVX512-BF16 (see kernels/qgemm.h), computing in bf16 as
// bitsandbytes does with a bf16 compute dtype: the codebook and the activations are rounded to
// bf16 (nearest even), products summed in f32, each 64-code block's sum scaled by its absmax
// in f32.
//
// 128 codes (two blocks, 64 bytes) are loaded as 32 16-bit words of four nibbles each. vpermw
// looks up a word's low 5 bits in a 32-entry table, so with the codebook written twice the
// nibbles are looked up in place, shifted down by 0, 4, 8 and 12 bits, with no widening or
// masking; vdpbf16ps then makes 32 products per instruction. The activations are rearranged
// once per call to match (lane j of look-up q takes the code in nibble q of word j), and
// because words 0-15 come from the first block and 16-31 from the second, the f32 lanes 0-7
// and 8-15 hold the two blocks' sums, scaled together by one vector. This runs about twice as
// fast as widening codes and looking up f32 values with vpermps, which bounded a decoded token
// (one thread, codes in cache: 39.5 against 20.8 G codes/s, AMD EPYC Zen 4).
#include "kernels/qgemm.h"

#include <immintrin.h>
#include <string.h>

#include "trit/base.h"

// Activations are rearranged TILE_M tokens by CHUNK_K positions at a time (stack buffers), and
// each 128 codes are looked up once for the tile's tokens. Codes are prefetched PF_BYTES ahead:
// rows of a few hundred bytes, streamed from memory while a token decodes, otherwise left the
// kernel waiting (NF4 decoding 251 -> 270 tokens/s, means of four alternating runs, AMD EPYC
// Zen 4, 2 threads).
enum { TILE_M = 4, CHUNK_K = 2048, SPAN = 128, PF_BYTES = 4096 };

typedef struct {
    const uint16_t *x;   // (mt, stride) bf16 activations, rearranged per span
    int64_t kc, stride;  // chunk length; x's row stride, kc rounded up to SPAN
} nf4_chunk;

// Where position p (0..127, act order) of a span goes: nibble q = p's place in its byte pair
// (low/high nibble of the even byte, then of the odd byte), lane j = the byte pair's index, the
// second block's pairs at lanes 16-31.
static int span_slot(int p) {
    const int h = p / 64, b = p % 64 < 32 ? p % 64 : p % 64 - 32;
    const int q = (b & 1) * 2 + (p % 64 >= 32);
    return q * 32 + h * 16 + b / 2;
}

// Rows of x (mt, K) at chunk k0 .. k0 + kc into bf16, rearranged; a half span at the end is
// padded with zeros (its codes then meet zero activations).
static void rearrange(const float *x, int64_t K, int64_t mt, int64_t k0, int64_t kc, int64_t stride, uint16_t *out) {
    uint8_t slot[SPAN];
    for (int p = 0; p < SPAN; p++) slot[p] = (uint8_t)span_slot(p);
    uint16_t b[CHUNK_K];
    for (int64_t i = 0; i < mt; i++) {
        trit_f32_to_bf16_n(b, x + i * K + k0, kc);
        uint16_t *o = out + i * stride;
        memset(o, 0, sizeof(uint16_t) * (size_t)stride);
        for (int64_t s = 0; s < kc; s += SPAN)
            for (int p = 0; p < SPAN && s + p < kc; p++) o[s + slot[p]] = b[s + p];
    }
}

// Partial dots of one row's codes over the chunk with the tile's mt tokens, into out[0 .. mt);
// the absmax of block b of the chunk is scales[groups[b]].
// Inlined for each constant mt so the accumulators stay in registers.
static inline __attribute__((always_inline)) void row_chunk(const nf4_chunk *c, int mt, __m512i table,
                                                            const uint8_t *codes, const float *scales,
                                                            const int32_t *groups, float *out) {
    __m512 total[TILE_M];
    for (int i = 0; i < TILE_M; i++) total[i] = _mm512_setzero_ps();
    for (int64_t s = 0; s < c->kc; s += SPAN) {
        _mm_prefetch((const char *)(codes + s / 2) + PF_BYTES, _MM_HINT_T0);
        const __m512i w = s + SPAN <= c->kc ? _mm512_loadu_si512(codes + s / 2)
                                            : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(codes + s / 2)));
        const __m512bh w0 = (__m512bh)_mm512_permutexvar_epi16(w, table);
        const __m512bh w1 = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(w, 4), table);
        const __m512bh w2 = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(w, 8), table);
        const __m512bh w3 = (__m512bh)_mm512_permutexvar_epi16(_mm512_srli_epi16(w, 12), table);
        const float second = s + SPAN <= c->kc ? scales[groups[s / 64 + 1]] : 0;  // 0: half a span
        const __m512 scale = _mm512_insertf32x8(_mm512_set1_ps(scales[groups[s / 64]]), _mm256_set1_ps(second), 1);
        for (int i = 0; i < mt; i++) {
            const uint16_t *x = c->x + i * c->stride + s;
            __m512 acc = _mm512_dpbf16_ps(_mm512_setzero_ps(), w0, (__m512bh)_mm512_loadu_si512(x));
            acc = _mm512_dpbf16_ps(acc, w1, (__m512bh)_mm512_loadu_si512(x + 32));
            acc = _mm512_dpbf16_ps(acc, w2, (__m512bh)_mm512_loadu_si512(x + 64));
            acc = _mm512_dpbf16_ps(acc, w3, (__m512bh)_mm512_loadu_si512(x + 96));
            total[i] = _mm512_fmadd_ps(acc, scale, total[i]);
        }
    }
    for (int i = 0; i < mt; i++) out[i] = _mm512_reduce_add_ps(total[i]);
}

void trit_kernel_nf4_avx512bf16(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                                const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    uint16_t codebook[32];
    for (int i = 0; i < 32; i++) codebook[i] = trit_f32_to_bf16(trit_nf4_values[i % 16]);
    const __m512i table = _mm512_loadu_si512(codebook);
    uint16_t xb[TILE_M * CHUNK_K];
    int32_t groups[CHUNK_K / 64];
    for (int64_t m0 = 0; m0 < M; m0 += TILE_M) {
        const int mt = M - m0 < TILE_M ? (int)(M - m0) : TILE_M;
        for (int64_t k0 = 0; k0 < K; k0 += CHUNK_K) {
            const int64_t kc = K - k0 < CHUNK_K ? K - k0 : CHUNK_K;
            const nf4_chunk c = {.x = xb, .kc = kc, .stride = (kc + SPAN - 1) / SPAN * SPAN};
            rearrange(x + m0 * K, K, mt, k0, kc, c.stride, xb);
            trit_nf4_block_groups(G, k0, kc, groups);
            for (int64_t n = n0; n < n1; n++) {
                const uint8_t *codes = w + (size_t)n * (size_t)(K / 2) + k0 / 2;
                const float *sc = ws + n * (K / G);
                float part[TILE_M];
                switch (mt) {
                case 1: row_chunk(&c, 1, table, codes, sc, groups, part); break;
                case 2: row_chunk(&c, 2, table, codes, sc, groups, part); break;
                case 3: row_chunk(&c, 3, table, codes, sc, groups, part); break;
                default: row_chunk(&c, 4, table, codes, sc, groups, part); break;
                }
                for (int i = 0; i < mt; i++) {
                    float *o = y + (m0 + i) * ldy + n;
                    *o = k0 ? *o + part[i] : part[i];
                }
            }
        }
    }
}
