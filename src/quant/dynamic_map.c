// bitsandbytes' dynamic 8-bit maps and block-wise quantization with them (the storage of 8-bit
// optimizer states): a code is an index into a sorted table of 256 values, a block of values is
// stored as codes of value / absmax plus the block's f32 absmax.
#include "trit/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// torch.linspace(0.1, 1, n) in float32 as PyTorch 2's CPU kernel computes it: the first half
// counted up from the start, the second half down from the end, each a fused multiply-add (the
// kernel is compiled with FMA contraction). torch 1.13's vectorized kernel rounded some
// values differently, which is why bitsandbytes' map differs there in the last bit.
static void linspace_f32(float *b, int n) {
    const float start = 0.1f, end = 1.0f, step = (end - start) / (float)(n - 1);
    const int half = n / 2;
    for (int i = 0; i < n; i++)
        b[i] = i < half ? fmaf(step, (float)i, start) : fmaf(-step, (float)(n - 1 - i), end);
}

static int cmp_float(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

// create_dynamic_map(signed, max_exponent_bits = 7, total_bits = 8): for each exponent
// e = 0..6 the midpoints of linspace(0.1, 1, k + 1) times 10^(e - 6), k = 2^e fractions when
// signed (each also negated), 2^(e + 1) when not; then 0 and 1; sorted. 2 (2^7 - 1) + 2 = 256
// values either way. The arithmetic is float32 as in PyTorch (scale rounded to float first).
void trit_quant_dynamic_map(bool is_signed, float map[TRIT_DYNAMIC_MAP_SIZE]) {
    static const double scale[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
    float b[130];
    int k = 0;
    for (int e = 0; e < 7; e++) {
        const int items = (is_signed ? 1 << e : 1 << (e + 1)) + 1;
        const float s = (float)scale[e];
        linspace_f32(b, items);
        for (int j = 0; j + 1 < items; j++) {
            const float mean = (b[j] + b[j + 1]) / 2.0f;
            map[k++] = s * mean;
            if (is_signed) map[k++] = -s * mean;
        }
    }
    map[k++] = 0.0f;
    map[k++] = 1.0f;
    qsort(map, TRIT_DYNAMIC_MAP_SIZE, sizeof(float), cmp_float);
}

// The count of thresholds <= v: a branch-free binary search over the 255 sorted thresholds
// (8 halvings of 2^8 - 1). A NaN compares false everywhere: code 0.
static int search(const trit_dynamic_code *c, float v) {
    int k = 0;
    for (int step = TRIT_DYNAMIC_MAP_SIZE / 2; step > 0; step >>= 1) k += step * (c->above[k + step - 1] <= v);
    return k;
}

// Buckets of floats by their bits: sign, exponent and the top 8 bits of the mantissa, each
// exponent from 2^-24 to 2^0 (|v| < 2 for a value divided by its block's absmax), bucket 0 of a
// sign for everything smaller. A bucket spans 2^-8 of its value, less than any relative gap of
// the maps (0.7% at least), so at most one threshold falls inside it.
enum { LUT_EXP_MIN = 103, LUT_EXP_MAX = 127, LUT_MANT_SHIFT = 15 };

static int bucket_of(uint32_t bits) {
    const int e = (int)((bits >> 23) & 0xff);
    if (e < LUT_EXP_MIN) return 0;
    const int ec = e > LUT_EXP_MAX ? LUT_EXP_MAX : e, m = e > LUT_EXP_MAX ? 255 : (int)((bits >> LUT_MANT_SHIFT) & 0xff);
    return (ec - LUT_EXP_MIN + 1) * 256 + m;
}

static uint32_t bits_of(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

static float float_of(uint32_t u) {
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

// lut[sign][bucket] = the code of the bucket's lowest value; the code of its highest is that or
// the next. Returns false if some bucket spans two thresholds (not so for bitsandbytes' maps).
static bool build_lut(trit_dynamic_code *c) {
    for (int sg = 0; sg < 2; sg++) {
        for (int b = 0; b < TRIT_DYNAMIC_LUT_SIZE; b++) c->lut[sg][b] = 0;
        for (int e = LUT_EXP_MIN - 1; e <= LUT_EXP_MAX; e++) {
            for (int m = 0; m < 256; m++) {
                if (e < LUT_EXP_MIN && m > 0) break;
                // Magnitudes [lo, hi] of the bucket: all mantissas under its top 8 bits.
                const uint32_t lo = e < LUT_EXP_MIN ? 0 : (uint32_t)e << 23 | (uint32_t)m << LUT_MANT_SHIFT;
                const uint32_t hi = e < LUT_EXP_MIN ? ((uint32_t)LUT_EXP_MIN << 23) - 1 : lo | ((1u << LUT_MANT_SHIFT) - 1);
                const float vmin = sg ? -float_of(hi) : float_of(lo), vmax = sg ? -float_of(lo) : float_of(hi);
                const int base = search(c, vmin);
                if (search(c, vmax) > base + 1) return false;
                c->lut[sg][bucket_of(lo)] = (uint8_t)base;
            }
        }
    }
    return true;
}

// above[k]: the least float above the exact midpoint of values[k] and values[k + 1] (the sum of
// two floats is exact in double), so a float v is nearer to values[k + 1] iff v >= above[k].
void trit_quant_dynamic_code_init(trit_dynamic_code *c, bool is_signed) {
    trit_quant_dynamic_map(is_signed, c->values);
    for (int k = 0; k + 1 < TRIT_DYNAMIC_MAP_SIZE; k++) {
        const double mid = ((double)c->values[k] + c->values[k + 1]) / 2;
        float f = (float)mid;
        if ((double)f <= mid) f = nextafterf(f, INFINITY);
        c->above[k] = f;
    }
    c->above[TRIT_DYNAMIC_MAP_SIZE - 1] = NAN;  // no code above the last: never >=
    c->has_lut = build_lut(c);
}

// One table read gives the bucket's lowest code, one comparison the threshold inside it.
uint8_t trit_quant_dynamic_nearest(const trit_dynamic_code *c, float v) {
    if (!c->has_lut) return (uint8_t)search(c, v);
    const uint32_t u = bits_of(v);
    const int base = c->lut[u >> 31][bucket_of(u)];
    return (uint8_t)(base + (v >= c->above[base]));
}

// max |x|, NaN if x holds a NaN (so every value of the block decodes to NaN: not hidden). Eight
// running maxima and a NaN flag without branches, so the loop vectorizes.
static float block_absmax(const float *x, int64_t len) {
    float m[8] = {0};
    int nan = 0;
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
        for (int j = 0; j < 8; j++) {
            const float a = fabsf(x[i + j]);
            m[j] = a > m[j] ? a : m[j];
            nan |= a != a;
        }
    for (; i < len; i++) {
        const float a = fabsf(x[i]);
        m[0] = a > m[0] ? a : m[0];
        nan |= a != a;
    }
    float mx = m[0];
    for (int j = 1; j < 8; j++) mx = m[j] > mx ? m[j] : mx;
    return nan ? NAN : mx;
}

void trit_quant_dynamic_encode_block(const trit_dynamic_code *c, const float *x, int64_t len, uint8_t *codes,
                                     float *absmax) {
    const float mx = block_absmax(x, len);
    *absmax = mx;
    if (mx == 0.0f || !isfinite(mx)) {
        // Zeros (or a block that no scale represents): the code nearest 0 throughout.
        const uint8_t z = trit_quant_dynamic_nearest(c, 0.0f);
        for (int64_t i = 0; i < len; i++) codes[i] = z;
        return;
    }
    for (int64_t i = 0; i < len; i++) codes[i] = trit_quant_dynamic_nearest(c, x[i] / mx);
}

void trit_quant_dynamic_decode_block(const trit_dynamic_code *c, const uint8_t *codes, float absmax, int64_t len,
                                     float *out) {
    for (int64_t i = 0; i < len; i++) out[i] = c->values[codes[i]] * absmax;
}

static trit_status check_args(const char *who, const void *code, const void *a, const void *b, const void *c,
                              int64_t n, int64_t block) {
    if (!code || (n > 0 && (!a || !b || !c)))
        return trit_error(TRIT_ERR_INVALID, "%s: NULL code or buffer", who);
    if (n < 0 || block < 1)
        return trit_error(TRIT_ERR_INVALID, "%s: need n >= 0 and block >= 1, got n %lld, block %lld (256 is "
                          "bitsandbytes' block)", who, (long long)n, (long long)block);
    return TRIT_OK;
}

// Blocks are independent, so any split among threads gives the same codes and scales.
enum { PAR_MIN_BLOCKS = 64 };

trit_status trit_quant_dynamic_encode(const trit_dynamic_code *c, const float *x, int64_t n, int64_t block,
                                      uint8_t *codes, float *absmax) {
    trit_status s = check_args("dynamic encode", c, x, codes, absmax, n, block);
    if (s != TRIT_OK) return s;
    const int64_t nb = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = b * block, len = n - lo < block ? n - lo : block;
        trit_quant_dynamic_encode_block(c, x + lo, len, codes + lo, absmax + b);
    }
    return TRIT_OK;
}

trit_status trit_quant_dynamic_decode(const trit_dynamic_code *c, const uint8_t *codes, const float *absmax,
                                      int64_t n, int64_t block, float *out) {
    trit_status s = check_args("dynamic decode", c, codes, absmax, out, n, block);
    if (s != TRIT_OK) return s;
    const int64_t nb = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = b * block, len = n - lo < block ? n - lo : block;
        trit_quant_dynamic_decode_block(c, codes + lo, absmax[b], len, out + lo);
    }
    return TRIT_OK;
}
