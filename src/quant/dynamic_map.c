// bitsandbytes' dynamic 8-bit maps and block-wise quantization with them (the storage of 8-bit
// optimizer states): a code is an index into a sorted table of 256 values, a block of values is
// stored as codes of value / absmax plus the block's f32 absmax.
#include "trit/quant.h"

#include <math.h>
#include <stdlib.h>

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

// Binary search for the last map value <= x (the first when x is below them all), then one step
// right when that neighbour is strictly nearer. A NaN compares false everywhere: code 0.
uint8_t trit_quant_dynamic_nearest(const float map[TRIT_DYNAMIC_MAP_SIZE], float x) {
    int c = 0;
    for (int step = TRIT_DYNAMIC_MAP_SIZE / 2; step > 0; step >>= 1)
        if (map[c + step] <= x) c += step;
    if (c < TRIT_DYNAMIC_MAP_SIZE - 1 && map[c + 1] - x < x - map[c]) c++;
    return (uint8_t)c;
}

void trit_quant_dynamic_encode_block(const float map[TRIT_DYNAMIC_MAP_SIZE], const float *x, int64_t len,
                                     uint8_t *codes, float *absmax) {
    // A NaN makes the block's absmax NaN (and so every value it decodes to): not hidden.
    float mx = 0.0f;
    for (int64_t i = 0; i < len; i++) {
        const float a = fabsf(x[i]);
        if (a > mx || isnan(a)) mx = a;
        if (isnan(mx)) break;
    }
    *absmax = mx;
    if (mx == 0.0f || !isfinite(mx)) {
        // Zeros (or a block that no scale represents): the code nearest 0 throughout.
        const uint8_t z = trit_quant_dynamic_nearest(map, 0.0f);
        for (int64_t i = 0; i < len; i++) codes[i] = z;
        return;
    }
    for (int64_t i = 0; i < len; i++) codes[i] = trit_quant_dynamic_nearest(map, x[i] / mx);
}

void trit_quant_dynamic_decode_block(const float map[TRIT_DYNAMIC_MAP_SIZE], const uint8_t *codes, float absmax,
                                     int64_t len, float *out) {
    for (int64_t i = 0; i < len; i++) out[i] = map[codes[i]] * absmax;
}

static trit_status check_args(const char *who, const void *map, const void *a, const void *b, const void *c,
                              int64_t n, int64_t block) {
    if (!map || (n > 0 && (!a || !b || !c)))
        return trit_error(TRIT_ERR_INVALID, "%s: NULL map or buffer", who);
    if (n < 0 || block < 1)
        return trit_error(TRIT_ERR_INVALID, "%s: need n >= 0 and block >= 1, got n %lld, block %lld (256 is "
                          "bitsandbytes' block)", who, (long long)n, (long long)block);
    return TRIT_OK;
}

// Blocks are independent, so any split among threads gives the same codes and scales.
enum { PAR_MIN_BLOCKS = 64 };

trit_status trit_quant_dynamic_encode(const float map[TRIT_DYNAMIC_MAP_SIZE], const float *x, int64_t n,
                                      int64_t block, uint8_t *codes, float *absmax) {
    trit_status s = check_args("dynamic encode", map, x, codes, absmax, n, block);
    if (s != TRIT_OK) return s;
    const int64_t nb = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = b * block, len = n - lo < block ? n - lo : block;
        trit_quant_dynamic_encode_block(map, x + lo, len, codes + lo, absmax + b);
    }
    return TRIT_OK;
}

trit_status trit_quant_dynamic_decode(const float map[TRIT_DYNAMIC_MAP_SIZE], const uint8_t *codes,
                                      const float *absmax, int64_t n, int64_t block, float *out) {
    trit_status s = check_args("dynamic decode", map, codes, absmax, out, n, block);
    if (s != TRIT_OK) return s;
    const int64_t nb = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (nb >= PAR_MIN_BLOCKS)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = b * block, len = n - lo < block ? n - lo : block;
        trit_quant_dynamic_decode_block(map, codes + lo, absmax[b], len, out + lo);
    }
    return TRIT_OK;
}
