// Weight-only NF4 matmul on AVX2 (see kernels/qgemm.h) in 14-bit fixed point: the codebook is
// held as round(v * 16383) and each token's activations as round(x * 16383 / max|x|), so a
// code's value comes from two vpshufb byte look-ups and vpmaddwd multiplies exactly; a block
// of 64 codes sums in int32 (at most 8 products of 16383^2 a lane: below 2^31) and is scaled by
// its absmax in f32. Both roundings are relative errors of about 3e-5 of the largest value,
// below a bf16 compute dtype's 2e-3. Looking up f32 values (two vpermps and a blend per eight
// codes) bounded a decoded token: this decodes about twice as fast (gpt2 shape, 135-141 ->
// 294-310 tokens/s, AMD EPYC Zen 4 with the AVX2 kernels forced, 2 threads). A token with a
// NaN or an Inf takes that f32 path, so they spread as in f32.
#include "kernels/qgemm.h"

#include <immintrin.h>
#include <math.h>

#include "kernels/x86/simd_avx2.h"

// Codes are prefetched PF_BYTES ahead, as in nf4_avx512bf16.c (decoding 286 -> 303 tokens/s,
// means of four alternating runs, AMD EPYC Zen 4 with the AVX2 kernels forced, 2 threads).
enum { CHUNK_K = 4096, ONE = 16383, PF_BYTES = 4096 };

// The f32 path: eight codes widen to 32-bit indices and look up the codebook as two 8-entry
// vpermps blended on the index's top bit; an FMA with the activations accumulates.
static inline __m256 lookup_fma(__m128i b8, __m256 lo, __m256 hi, const float *x, __m256 acc) {
    const __m256i idx = _mm256_cvtepu8_epi32(b8);
    const __m256 v = _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx),
                                      _mm256_castsi256_ps(_mm256_slli_epi32(idx, 28)));
    return _mm256_fmadd_ps(v, _mm256_loadu_ps(x), acc);
}

static float row_f32(const uint8_t *row, const float *ws, int64_t K, int64_t G, const float *x) {
    const __m256 lo = _mm256_loadu_ps(trit_nf4_values), hi = _mm256_loadu_ps(trit_nf4_values + 8);
    const __m128i m = _mm_set1_epi8(15);
    __m256 total = _mm256_setzero_ps();
    for (int64_t g = 0; g < K / G; g++) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t k = g * G; k < (g + 1) * G; k += 64) {
            const __m128i b0 = _mm_loadu_si128((const __m128i *)(row + k / 2));
            const __m128i b1 = _mm_loadu_si128((const __m128i *)(row + k / 2 + 16));
            const __m128i q[4] = {_mm_and_si128(b0, m), _mm_and_si128(b1, m), _mm_and_si128(_mm_srli_epi16(b0, 4), m),
                                  _mm_and_si128(_mm_srli_epi16(b1, 4), m)};
            for (int j = 0; j < 4; j++) {
                acc = lookup_fma(q[j], lo, hi, x + k + 16 * j, acc);
                acc = lookup_fma(_mm_srli_si128(q[j], 8), lo, hi, x + k + 16 * j + 8, acc);
            }
        }
        total = _mm256_fmadd_ps(acc, _mm256_set1_ps(ws[g]), total);
    }
    return vreduce_add(total);
}

// max |x| over K values, or -1 when one is NaN or infinite.
static float absmax_finite(const float *x, int64_t K) {
    const __m256 sign = _mm256_set1_ps(-0.0f), inf = _mm256_set1_ps(INFINITY);
    __m256 m = _mm256_setzero_ps(), bad = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; k += 8) {  // K is a multiple of 64
        const __m256 a = _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k));
        m = _mm256_max_ps(m, a);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));
    }
    return _mm256_movemask_ps(bad) ? -1 : vreduce_max(m);
}

// x[0 .. kc) times inv, rounded, as int16 in the order the code look-ups produce: per 32
// positions, 0-7 and 16-23, then 8-15 and 24-31 (vpunpcklbw / vpunpckhbw work in 128-bit lanes).
static void quantize(const float *x, int64_t kc, float inv, int16_t *out) {
    const __m256 f = _mm256_set1_ps(inv);
    for (int64_t k = 0; k < kc; k += 32) {
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * j), f));
        for (int h = 0; h < 2; h++) {  // packs interleaves 4 lanes of each source per 128-bit lane
            const __m256i a = _mm256_permute2x128_si256(q[h], q[h + 2], 0x20);
            const __m256i b = _mm256_permute2x128_si256(q[h], q[h + 2], 0x31);
            _mm256_storeu_si256((__m256i *)(out + k + 16 * h), _mm256_packs_epi32(a, b));
        }
    }
}

// Sum over the chunk's blocks of (codes . xq) times the block's absmax, scales[groups[block]].
static float row_fixed(const uint8_t *codes, const float *scales, const int32_t *groups, int64_t kc, const int16_t *xq,
                       __m256i tlo, __m256i thi) {
    const __m256i m = _mm256_set1_epi8(15);
    __m256 total = _mm256_setzero_ps();
    for (int64_t k = 0; k < kc; k += 64) {
        _mm_prefetch((const char *)(codes + k / 2) + PF_BYTES, _MM_HINT_T0);
        const __m256i v = _mm256_loadu_si256((const __m256i *)(codes + k / 2));
        const __m256i n[2] = {_mm256_and_si256(v, m), _mm256_and_si256(_mm256_srli_epi16(v, 4), m)};
        __m256i sum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {  // low nibbles: positions 0-31, high: 32-63
            const __m256i l = _mm256_shuffle_epi8(tlo, n[h]), u = _mm256_shuffle_epi8(thi, n[h]);
            const int16_t *x = xq + k + 32 * h;
            sum = _mm256_add_epi32(sum, _mm256_madd_epi16(_mm256_unpacklo_epi8(l, u), _mm256_loadu_si256((const __m256i *)x)));
            sum = _mm256_add_epi32(sum,
                                   _mm256_madd_epi16(_mm256_unpackhi_epi8(l, u), _mm256_loadu_si256((const __m256i *)(x + 16))));
        }
        total = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(scales[groups[k / 64]]), total);
    }
    return vreduce_add(total);
}

void trit_kernel_nf4_avx2(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x, const uint8_t *w,
                          const float *ws, float *y, int64_t ldy) {
    uint8_t lo[32], hi[32];
    for (int i = 0; i < 32; i++) {
        const uint16_t q = (uint16_t)(int16_t)lrintf(trit_nf4_values[i % 16] * ONE);
        lo[i] = (uint8_t)q, hi[i] = (uint8_t)(q >> 8);
    }
    const __m256i tlo = _mm256_loadu_si256((const __m256i *)lo), thi = _mm256_loadu_si256((const __m256i *)hi);
    int16_t xq[CHUNK_K];
    int32_t groups[CHUNK_K / 64];
    for (int64_t mi = 0; mi < M; mi++) {
        const float *xr = x + mi * K, big = absmax_finite(xr, K), unit = big / ((float)ONE * ONE);
        if (big <= 0) {  // non-finite (the f32 path) or all zero
            for (int64_t n = n0; n < n1; n++)
                y[mi * ldy + n] = big < 0 ? row_f32(w + (size_t)n * (size_t)(K / 2), ws + n * (K / G), K, G, xr) : 0;
            continue;
        }
        for (int64_t k0 = 0; k0 < K; k0 += CHUNK_K) {
            const int64_t kc = K - k0 < CHUNK_K ? K - k0 : CHUNK_K;
            quantize(xr + k0, kc, ONE / big, xq);
            trit_nf4_block_groups(G, k0, kc, groups);
            for (int64_t n = n0; n < n1; n++) {
                const uint8_t *codes = w + (size_t)n * (size_t)(K / 2) + k0 / 2;
                const float part = row_fixed(codes, ws + n * (K / G), groups, kc, xq, tlo, thi) * unit;
                y[mi * ldy + n] = k0 ? y[mi * ldy + n] + part : part;
            }
        }
    }
}
