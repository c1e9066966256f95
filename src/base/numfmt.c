// bf16 and fp16 <-> fp32 by bit manipulation: round to nearest, ties to even; NaN comes out a
// quiet NaN with its sign and top payload bits (as the F16C and AVX512-BF16 instructions do);
// Inf stays Inf; f16 overflow goes to Inf and f16 subnormals are exact both ways.
#include "trit/base.h"

#include <math.h>
#include <string.h>

static inline uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline float bits_f32(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

// ---- bf16: the top half of an f32 --------------------------------------------------------

uint16_t trit_f32_to_bf16(float x) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u); // quiet NaN
    // Adding 0x7fff plus the kept lsb rounds half to even; a carry into the exponent is right
    // (it may produce Inf, which is the correct rounding of values beyond the largest bf16).
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

float trit_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    if ((h & 0x7fffu) > 0x7f80u) u |= 0x00400000u; // quiet NaN
    return bits_f32(u);
}

// ---- fp16: 1 sign, 5 exponent (bias 15), 10 mantissa bits ---------------------------------

// Rounds m >> s to nearest even (1 <= s <= 31).
static inline uint32_t shift_round_even(uint32_t m, int s) {
    uint32_t q = m >> s;
    uint32_t rem = m & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return q;
}

uint16_t trit_f32_to_f16(float x) {
    uint32_t u = f32_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); // quiet NaN
    int e = (int)(a >> 23) - 127;
    if (e >= 16) return (uint16_t)(sign | 0x7c00u); // |x| >= 2^16 (or Inf)
    uint32_t mant = a & 0x7fffffu;
    if (e >= -14) {
        // Normal range; a rounding carry ripples into the exponent and, from 65520 up, to Inf.
        uint32_t h = ((uint32_t)(e + 15) << 10) + shift_round_even(mant, 13);
        return (uint16_t)(sign | h);
    }
    if (e < -25) return sign; // below half the smallest subnormal (2^-25): rounds to zero
    // Subnormal: count units of 2^-24. value = (mant | 2^23) * 2^(e-23), so shift by -(e+1).
    uint32_t h = shift_round_even(mant | 0x800000u, -(e + 1));
    return (uint16_t)(sign | h); // h == 0x400 is correctly the smallest normal
}

float trit_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t mant = h & 0x3ffu;
    if (e == 0x1f) {
        uint32_t u = sign | 0x7f800000u | (mant << 13);
        if (mant) u |= 0x00400000u; // quiet NaN
        return bits_f32(u);
    }
    if (e == 0) { // zero or subnormal: mant * 2^-24, exact in f32
        float v = (float)mant * 0x1p-24f;
        return bits_f32(f32_bits(v) | sign);
    }
    return bits_f32(sign | ((e + 112u) << 23) | (mant << 13));
}

// ---- arrays ----------------------------------------------------------------------------------

// Rows take x86 bodies where the CPU has them and trit may use them, with the scalar rules' bits.
// F16C converts 8 values per instruction with exactly the rounding, NaN and subnormal rules
// above (MXCSR's default flags, which trit never changes): the KV cache stores every key and
// value through here.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define X86_ROWS 1
__attribute__((target("avx,f16c"))) static int64_t f32_to_f16_f16c(uint16_t *out, const float *in, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    return i;
}
__attribute__((target("avx,f16c"))) static int64_t f16_to_f32_f16c(float *out, const uint16_t *in, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
    return i;
}
// bf16 rows: the scalar converters' integer steps on 8 lanes (mixed-precision training converts
// every 16-bit activation row through here; the scalar loops were about 5% of a bf16 step).
__attribute__((target("avx2"))) static int64_t f32_to_bf16_avx2(uint16_t *out, const float *in, int64_t n) {
    const __m256i magnitude = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i half = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1), quiet = _mm256_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_castps_si256(_mm256_loadu_ps(in + i));
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, magnitude), inf);
        const __m256i hi = _mm256_srli_epi32(u, 16);
        const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(half, _mm256_and_si256(hi, one))), 16);
        const __m256i h = _mm256_blendv_epi8(rounded, _mm256_or_si256(hi, quiet), nan);
        // packus works within 128-bit halves: results 0-3 | 4-7 land in qwords 0 and 2.
        const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(h, h), 0x08);
        _mm_storeu_si128((__m128i *)(out + i), _mm256_castsi256_si128(packed));
    }
    return i;
}
__attribute__((target("avx2"))) static int64_t bf16_to_f32_avx2(float *out, const uint16_t *in, int64_t n) {
    const __m256i magnitude = _mm256_set1_epi32(0x7fff0000), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x00400000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i u = _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(in + i))), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, magnitude), inf);
        _mm256_storeu_si256((__m256i *)(out + i), _mm256_or_si256(u, _mm256_and_si256(nan, quiet)));
    }
    return i;
}
// The same integer steps on 16 lanes, where AVX-512 is usable: the rows of a bf16 step (norms,
// GELU, residual adds, casts) are memory-bound, and half the instructions keep up with it better.
__attribute__((target("avx512f,avx512bw"))) static int64_t f32_to_bf16_avx512(uint16_t *out, const float *in,
                                                                            int64_t n) {
    const __m512i magnitude = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i half = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1), quiet = _mm512_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(in + i));
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, magnitude), inf);
        const __m512i hi = _mm512_srli_epi32(u, 16);
        const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(half, _mm512_and_si512(hi, one))), 16);
        const __m512i h = _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(hi, quiet));
        _mm256_storeu_si256((__m256i *)(out + i), _mm512_cvtepi32_epi16(h));
    }
    return i;
}
__attribute__((target("avx512f,avx512bw"))) static int64_t bf16_to_f32_avx512(float *out, const uint16_t *in, int64_t n) {
    const __m512i magnitude = _mm512_set1_epi32(0x7fff0000), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i quiet = _mm512_set1_epi32(0x00400000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(in + i))), 16);
        const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, magnitude), inf);
        _mm512_storeu_si512(out + i, _mm512_mask_or_epi32(u, nan, u, quiet));
    }
    return i;
}
// The AVX2 feature level includes F16C; TRIT_CPU=ref keeps rows on the portable code.
static bool has_avx2(void) { return (trit_cpu_usable_features() & TRIT_FEAT_AVX2) != 0; }
static bool has_avx512(void) { return (trit_cpu_usable_features() & TRIT_FEAT_AVX512) != 0; }
#else
#define X86_ROWS 0
#endif

// out, in: (n)
void trit_f32_to_bf16_n(uint16_t *out, const float *in, int64_t n) {
    int64_t i = 0;
#if X86_ROWS
    if (has_avx512()) i = f32_to_bf16_avx512(out, in, n);
    if (has_avx2()) i += f32_to_bf16_avx2(out + i, in + i, n - i);
#endif
    for (; i < n; i++) out[i] = trit_f32_to_bf16(in[i]);
}

// out, in: (n)
void trit_bf16_to_f32_n(float *out, const uint16_t *in, int64_t n) {
    int64_t i = 0;
#if X86_ROWS
    if (has_avx512()) i = bf16_to_f32_avx512(out, in, n);
    if (has_avx2()) i += bf16_to_f32_avx2(out + i, in + i, n - i);
#endif
    for (; i < n; i++) out[i] = trit_bf16_to_f32(in[i]);
}

// out, in: (n)
void trit_f32_to_f16_n(uint16_t *out, const float *in, int64_t n) {
    int64_t i = 0;
#if X86_ROWS
    if (has_avx2()) i = f32_to_f16_f16c(out, in, n);
#endif
    for (; i < n; i++) out[i] = trit_f32_to_f16(in[i]);
}

// out, in: (n)
void trit_f16_to_f32_n(float *out, const uint16_t *in, int64_t n) {
    int64_t i = 0;
#if X86_ROWS
    if (has_avx2()) i = f16_to_f32_f16c(out, in, n);
#endif
    for (; i < n; i++) out[i] = trit_f16_to_f32(in[i]);
}

// ---- stochastic rounding ---------------------------------------------------------------------
// Round up (in magnitude) with probability equal to the distance from the value below, so the
// expected result is the exact value: small updates that round-to-nearest would drop entirely
// survive on average.

uint16_t trit_f32_to_bf16_sr(float x, uint32_t r) {
    uint32_t u = f32_bits(x);
    if ((u & 0x7f800000u) == 0x7f800000u) return trit_f32_to_bf16(x);  // Inf, NaN: as nearest
    // The 16 random bits carry into the kept half exactly as often as the dropped half is
    // large; past the largest finite value the carry reaches Inf, as rounding up would.
    u += r & 0xffffu;
    return (uint16_t)(u >> 16);
}

// The f16 whose magnitude is one step away from h (toward zero when down), same sign.
static inline uint16_t f16_step(uint16_t h, bool down) { return (uint16_t)(down ? h - 1u : h + 1u); }

uint16_t trit_f32_to_f16_sr(float x, uint32_t r) {
    const uint16_t h = trit_f32_to_f16(x);
    const float back = trit_f16_to_f32(h);
    if (back == x || x != x || (h & 0x7fffu) == 0x7c00u) return h;  // exact, NaN or overflow to Inf
    // The two f16 values around x: h and its neighbour on x's side.
    const bool above = fabsf(back) > fabsf(x);
    const uint16_t lo = above ? f16_step(h, true) : h, hi = above ? h : f16_step(h, false);
    const double a = fabs((double)trit_f16_to_f32(lo)), b = fabs((double)trit_f16_to_f32(hi));
    if (isinf(b)) return lo;  // above the largest f16: the step up is Inf, never taken
    const double p = (fabs((double)x) - a) / (b - a);  // in (0, 1)
    return (double)r * 0x1p-32 < p ? hi : lo;
}

// out (n): in (n) rounded by `round` with the bits of element offset + i of Philox (seed, stream).
static void sr_row(uint16_t (*round)(float, uint32_t), uint16_t *out, const float *in, int64_t n, uint64_t seed,
                   uint64_t stream, uint64_t offset) {
    uint32_t b[4];
    uint64_t have = UINT64_MAX;
    for (int64_t i = 0; i < n; i++) {
        const uint64_t j = offset + (uint64_t)i;
        if (j / 4 != have) trit_rng_block(seed, stream, have = j / 4, b);
        out[i] = round(in[i], b[j % 4]);
    }
}

void trit_f32_to_bf16_sr_n(uint16_t *out, const float *in, int64_t n, uint64_t seed, uint64_t stream,
                           uint64_t offset) {
    sr_row(trit_f32_to_bf16_sr, out, in, n, seed, stream, offset);
}

void trit_f32_to_f16_sr_n(uint16_t *out, const float *in, int64_t n, uint64_t seed, uint64_t stream,
                          uint64_t offset) {
    sr_row(trit_f32_to_f16_sr, out, in, n, seed, stream, offset);
}
