// The dtype table: one row per element type with its block geometry and row converters to and
// from f32. Everything that sizes, views, copies or converts a tensor asks this table, so a new
// storage type (a quantized block format, say) is a row here plus its kernels.
#include "tensor/dtype_scaled.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

// ---- plain floats ----------------------------------------------------------------------------

static void f32_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    memcpy(out, in, sizeof(float) * (size_t)n);
}
static void f32_from_f32(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    memcpy(out, in, sizeof(float) * (size_t)n);
}
static void f32_from_f32_sr(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first,
                            uint64_t seed, uint64_t stream) {
    (void)seed, (void)stream;
    f32_from_f32(out, in, n, q, first);
}

static void f64_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    const double *x = in;
    for (int64_t i = 0; i < n; i++) out[i] = (float)x[i];
}
static void f64_from_f32(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    double *y = out;
    for (int64_t i = 0; i < n; i++) y[i] = in[i];
}
// Widening is exact: there is nothing to round.
static void f64_from_f32_sr(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first,
                            uint64_t seed, uint64_t stream) {
    (void)seed, (void)stream;
    f64_from_f32(out, in, n, q, first);
}

static void bf16_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    trit_bf16_to_f32_n(out, in, n);
}
static void bf16_from_f32(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    trit_f32_to_bf16_n(out, in, n);
}
static void bf16_from_f32_sr(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first,
                             uint64_t seed, uint64_t stream) {
    (void)q;
    trit_f32_to_bf16_sr_n(out, in, n, seed, stream, (uint64_t)first);
}
static void f16_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    trit_f16_to_f32_n(out, in, n);
}
static void f16_from_f32(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    trit_f32_to_f16_n(out, in, n);
}

static void f16_from_f32_sr(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first,
                            uint64_t seed, uint64_t stream) {
    (void)q;
    trit_f32_to_f16_sr_n(out, in, n, seed, stream, (uint64_t)first);
}

// ---- integers: round to nearest even, saturate, NaN to 0 ------------------------------------

// x rounded to nearest (ties to even) and clamped to [lo, hi]; NaN gives 0. The comparisons come
// first because converting an out-of-range or NaN float to an integer is undefined behaviour.
static inline int64_t round_sat(double x, double lo, double hi) {
    if (!(x == x)) return 0;
    double r = nearbyint(x);
    if (r <= lo) return (int64_t)lo;
    if (r >= hi) return (int64_t)hi;
    return (int64_t)r;
}

#define INT_ROWS(name, T, LO, HI)                                                                       \
    static void name##_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q,          \
                              int64_t first) {                                                          \
        (void)q, (void)first;                                                                           \
        const T *x = in;                                                                                \
        for (int64_t i = 0; i < n; i++) out[i] = (float)x[i];                                           \
    }                                                                                                   \
    static void name##_from_f32(void *out, const float *in, int64_t n, trit_quant_info *q,              \
                                int64_t first) {                                                        \
        (void)q, (void)first;                                                                           \
        T *y = out;                                                                                     \
        for (int64_t i = 0; i < n; i++) y[i] = (T)round_sat(in[i], LO, HI);                             \
    }
INT_ROWS(i32, int32_t, -2147483648.0, 2147483647.0)
// The largest double below 2^63, so the saturated value converts without overflow.
INT_ROWS(i64, int64_t, -9223372036854775808.0, 9223372036854774784.0)
INT_ROWS(i8, int8_t, -128.0, 127.0)
INT_ROWS(u8, uint8_t, 0.0, 255.0)

// ---- blocked formats with the scale inside each block ----------------------------------------

typedef void block_encode_fn(uint8_t *b, const float *x /* (block) */, const float *u /* (block) or NULL */);

// Encodes n values (whole blocks) block by block: to nearest when seed_stream is NULL, else
// stochastically with the bits of element first + i of Philox (seed_stream[0], seed_stream[1]).
static void encode_blocks(block_encode_fn *enc, int64_t blk, size_t bytes, void *out, const float *in, int64_t n,
                          int64_t first, const uint64_t *seed_stream) {
    float u[256];  // the largest block
    for (int64_t b = 0; b < n / blk; b++) {
        for (int64_t i = 0; seed_stream && i < blk; i++)
            u[i] = trit_rng_uniform(seed_stream[0], seed_stream[1], (uint64_t)(first + b * blk + i));
        enc((uint8_t *)out + b * (int64_t)bytes, in + b * blk, seed_stream ? u : NULL);
    }
}

#define BLOCK_ROWS(name, BLK, BYTES)                                                                    \
    static void name##_from_f32(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first) { \
        (void)q;                                                                                        \
        encode_blocks(name##_block, BLK, BYTES, out, in, n, first, NULL);                               \
    }                                                                                                   \
    static void name##_from_f32_sr(void *out, const float *in, int64_t n, trit_quant_info *q, int64_t first, \
                                   uint64_t seed, uint64_t stream) {                                    \
        (void)q;                                                                                        \
        const uint64_t ss[2] = {seed, stream};                                                          \
        encode_blocks(name##_block, BLK, BYTES, out, in, n, first, ss);                                 \
    }

// ---- q8_0: blocks of 32 int8 codes with one f16 scale ----------------------------------------

enum { Q8_0_BLOCK = 32, Q8_0_BYTES = 2 + Q8_0_BLOCK };

static void q8_0_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    const uint8_t *b = in;
    for (int64_t blk = 0; blk < n / Q8_0_BLOCK; blk++, b += Q8_0_BYTES) {
        uint16_t h;
        memcpy(&h, b, 2);
        const float d = trit_f16_to_f32(h);
        const int8_t *qs = (const int8_t *)(b + 2);
        for (int i = 0; i < Q8_0_BLOCK; i++) out[blk * Q8_0_BLOCK + i] = d * (float)qs[i];
    }
}

// One block: d = absmax / 127 stored as f16; codes are x / d rounded by `round_code` (nearest,
// or stochastic with u in [0, 1)). An all-zero block gets d = 0 and zero codes.
static void q8_0_block(uint8_t *b, const float *x, const float *u) {
    float amax = 0;
    for (int i = 0; i < Q8_0_BLOCK; i++) amax = fmaxf(amax, fabsf(x[i]));
    const uint16_t h = trit_f32_to_f16(amax / 127.0f);
    memcpy(b, &h, 2);
    const float d = trit_f16_to_f32(h);
    int8_t *qs = (int8_t *)(b + 2);
    for (int i = 0; i < Q8_0_BLOCK; i++) {
        double v = d > 0 ? (double)x[i] / d : 0.0;
        v = u ? floor(v + u[i]) : v;
        qs[i] = (int8_t)round_sat(v, -127.0, 127.0);
    }
}

BLOCK_ROWS(q8_0, Q8_0_BLOCK, Q8_0_BYTES)

// ---- q4_0: blocks of 32 4-bit codes with one f16 scale (ggml's layout) ------------------------
// Byte j holds element j in its low nibble and element j + 16 in its high one; x = (q - 8) d.

enum { Q4_0_BLOCK = 32, Q4_0_BYTES = 2 + Q4_0_BLOCK / 2 };

static void q4_0_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    const uint8_t *b = in;
    for (int64_t blk = 0; blk < n / Q4_0_BLOCK; blk++, b += Q4_0_BYTES) {
        uint16_t h;
        memcpy(&h, b, 2);
        const float d = trit_f16_to_f32(h);
        for (int j = 0; j < Q4_0_BLOCK / 2; j++) {
            out[blk * Q4_0_BLOCK + j] = d * (float)((b[2 + j] & 15) - 8);
            out[blk * Q4_0_BLOCK + j + 16] = d * (float)((b[2 + j] >> 4) - 8);
        }
    }
}

// d = (the value of largest magnitude) / -8, so that value is code 0 exactly and the codes
// span [-8, 7] around it; u as in q8_0_block.
static void q4_0_block(uint8_t *b, const float *x, const float *u) {
    float big = 0;
    for (int i = 0; i < Q4_0_BLOCK; i++)
        if (fabsf(x[i]) > fabsf(big)) big = x[i];
    const uint16_t h = trit_f32_to_f16(big / -8.0f);
    memcpy(b, &h, 2);
    const float d = trit_f16_to_f32(h);
    uint8_t c[Q4_0_BLOCK];
    for (int i = 0; i < Q4_0_BLOCK; i++) {
        double v = d != 0 ? (double)x[i] / d : 0.0;
        v = u ? floor(v + u[i]) : v;
        c[i] = (uint8_t)(round_sat(v, -8.0, 7.0) + 8);
    }
    for (int j = 0; j < Q4_0_BLOCK / 2; j++) b[2 + j] = (uint8_t)(c[j] | c[j + 16] << 4);
}

BLOCK_ROWS(q4_0, Q4_0_BLOCK, Q4_0_BYTES)

// ---- tq2_0: ggml's ternary blocks of 256 (2 bits a code, then an f16 scale) --------------------
// Per 128 elements, byte m (of 32) holds elements m, m + 32, m + 64, m + 96 in bit pairs 0, 2, 4,
// 6, each code c + 1 in {0, 1, 2}; x = (q - 1) d, d = the block's absmax (a ternary-trained
// matrix's {-s, 0, s} are stored exactly).

enum { TQ2_BLOCK = 256, TQ2_BYTES = TQ2_BLOCK / 4 + 2 };

static void tq2_0_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    const uint8_t *b = in;
    for (int64_t blk = 0; blk < n / TQ2_BLOCK; blk++, b += TQ2_BYTES, out += TQ2_BLOCK) {
        uint16_t h;
        memcpy(&h, b + TQ2_BLOCK / 4, 2);
        const float d = trit_f16_to_f32(h);
        for (int j = 0; j < TQ2_BLOCK; j++) {
            const int chunk = j / 128, e = j % 128;
            out[j] = d * (float)((int)((b[chunk * 32 + e % 32] >> (2 * (e / 32))) & 3) - 1);
        }
    }
}

static void tq2_0_block(uint8_t *b, const float *x, const float *u) {
    float amax = 0;
    for (int i = 0; i < TQ2_BLOCK; i++) amax = fmaxf(amax, fabsf(x[i]));
    const uint16_t h = trit_f32_to_f16(amax);
    memcpy(b + TQ2_BLOCK / 4, &h, 2);
    const float d = trit_f16_to_f32(h);
    memset(b, 0, TQ2_BLOCK / 4);
    for (int j = 0; j < TQ2_BLOCK; j++) {
        double v = d > 0 ? (double)x[j] / d : 0.0;
        v = u ? floor(v + u[j]) : v;
        const int c = (int)round_sat(v, -1.0, 1.0) + 1, chunk = j / 128, e = j % 128;
        b[chunk * 32 + e % 32] |= (uint8_t)(c << (2 * (e / 32)));
    }
}

BLOCK_ROWS(tq2_0, TQ2_BLOCK, TQ2_BYTES)

// ---- tq1_0: ggml's base-3 ternary blocks of 256 (1.6875 bits a code) ------------------------------
// 48 bytes of five codes, 4 bytes of four, then the f16 absmax d; x = (c - 1) d, c in {0, 1, 2}.
// Byte m of the first 32 holds elements m + 32 n (n = 0..4), of the next 16 elements 160 + m + 16 n,
// and byte j of the last 4 elements 240 + j + 4 n (n = 0..3). A byte's codes form the base-3
// number c_0 c_1 c_2 c_3 c_4 (c_0 most significant; the fifth is 0 in the last 4 bytes), stored as
// ceil(number * 256 / 243), so code n is the top two bits' worth of (byte * 3^n mod 256) * 3 / 256:
// a multiply and a shift per code, no division, which is why the byte is scaled.

enum { TQ1_BLOCK = 256, TQ1_BYTES = 48 + 4 + 2 };

// Element of block position (byte index i, code n) in the layout above.
static int tq1_elem(int i, int n) {
    if (i < 32) return i + 32 * n;
    if (i < 48) return 160 + (i - 32) + 16 * n;
    return 240 + (i - 48) + 4 * n;
}

static void tq1_0_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q, int64_t first) {
    (void)q, (void)first;
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const uint8_t *b = in;
    for (int64_t blk = 0; blk < n / TQ1_BLOCK; blk++, b += TQ1_BYTES, out += TQ1_BLOCK) {
        uint16_t h;
        memcpy(&h, b + 52, 2);
        const float d = trit_f16_to_f32(h);
        for (int i = 0; i < 52; i++)
            for (int k = 0; k < (i < 48 ? 5 : 4); k++) {
                const uint8_t v = (uint8_t)(b[i] * pow3[k]);
                out[tq1_elem(i, k)] = d * (float)(((v * 3) >> 8) - 1);
            }
    }
}

static void tq1_0_block(uint8_t *b, const float *x, const float *u) {
    float amax = 0;
    for (int i = 0; i < TQ1_BLOCK; i++) amax = fmaxf(amax, fabsf(x[i]));
    const uint16_t h = trit_f32_to_f16(amax);
    memcpy(b + 52, &h, 2);
    const float d = trit_f16_to_f32(h);
    for (int i = 0; i < 52; i++) {
        int num = 0;
        for (int k = 0; k < 5; k++) {
            int c = 0;  // the last 4 bytes hold four codes: their fifth digit is 0
            if (i < 48 || k < 4) {
                const int e = tq1_elem(i, k);
                double v = d > 0 ? (double)x[e] / d : 0.0;
                v = u ? floor(v + u[e]) : v;
                c = (int)round_sat(v, -1.0, 1.0) + 1;
            }
            num = 3 * num + c;
        }
        b[i] = (uint8_t)((num * 256 + 242) / 243);
    }
}

BLOCK_ROWS(tq1_0, TQ1_BLOCK, TQ1_BYTES)

// ---- the table ---------------------------------------------------------------------------------

static const trit_dtype_traits table[TRIT_DTYPE_COUNT] = {
    [TRIT_F32] = {"f32", 1, 4, true, false, f32_to_f32, f32_from_f32, f32_from_f32_sr},
    [TRIT_F64] = {"f64", 1, 8, true, false, f64_to_f32, f64_from_f32, f64_from_f32_sr},
    [TRIT_BF16] = {"bf16", 1, 2, true, false, bf16_to_f32, bf16_from_f32, bf16_from_f32_sr},
    [TRIT_F16] = {"f16", 1, 2, true, false, f16_to_f32, f16_from_f32, f16_from_f32_sr},
    [TRIT_I32] = {"i32", 1, 4, false, false, i32_to_f32, i32_from_f32, NULL},
    [TRIT_I64] = {"i64", 1, 8, false, false, i64_to_f32, i64_from_f32, NULL},
    [TRIT_I8] = {"i8", 1, 1, false, false, i8_to_f32, i8_from_f32, NULL},
    [TRIT_U8] = {"u8", 1, 1, false, false, u8_to_f32, u8_from_f32, NULL},
    [TRIT_Q8_0] = {"q8_0", Q8_0_BLOCK, Q8_0_BYTES, false, true, q8_0_to_f32, q8_0_from_f32, q8_0_from_f32_sr},
    [TRIT_Q4_0] = {"q4_0", Q4_0_BLOCK, Q4_0_BYTES, false, true, q4_0_to_f32, q4_0_from_f32, q4_0_from_f32_sr},
    [TRIT_TQ2_0] = {"tq2_0", TQ2_BLOCK, TQ2_BYTES, false, true, tq2_0_to_f32, tq2_0_from_f32, tq2_0_from_f32_sr},
    [TRIT_TQ1_0] = {"tq1_0", TQ1_BLOCK, TQ1_BYTES, false, true, tq1_0_to_f32, tq1_0_from_f32, tq1_0_from_f32_sr},
#define SCALED(name, blk) #name, blk, 1, false, true, trit_row_##name##_to_f32, trit_row_##name##_from_f32, \
                          trit_row_##name##_from_f32_sr
    [TRIT_QINT8] = {SCALED(qint8, 1)},
    [TRIT_QINT4] = {SCALED(qint4, 2)},
    [TRIT_QINT2] = {SCALED(qint2, 4)},
    [TRIT_NF4] = {SCALED(nf4, 2)},
    [TRIT_F8_E4M3] = {SCALED(f8_e4m3, 1)},
    [TRIT_F8_E5M2] = {SCALED(f8_e5m2, 1)},
    [TRIT_TERNARY] = {SCALED(ternary, 4)},
    [TRIT_TERNARY_B3] = {"ternary_b3", 64, 13, false, true, trit_row_ternary_b3_to_f32, trit_row_ternary_b3_from_f32,
                         trit_row_ternary_b3_from_f32_sr},
#undef SCALED
};

const trit_dtype_traits *trit_dtype_traits_of(trit_dtype dt) {
    if ((unsigned)dt < TRIT_DTYPE_COUNT) return &table[dt];
    trit_error(TRIT_ERR_DTYPE, "unknown dtype %d (valid: 0 to %d)", (int)dt, TRIT_DTYPE_COUNT - 1);
    return NULL;
}

size_t trit_dtype_size(trit_dtype dt) {
    return (unsigned)dt < TRIT_DTYPE_COUNT && table[dt].block_elems == 1 ? table[dt].block_bytes : 0;
}

const char *trit_dtype_name(trit_dtype dt) { return (unsigned)dt < TRIT_DTYPE_COUNT ? table[dt].name : "invalid"; }

bool trit_dtype_is_float(trit_dtype dt) { return (unsigned)dt < TRIT_DTYPE_COUNT && table[dt].is_float; }

bool trit_dtype_is_quantized(trit_dtype dt) { return (unsigned)dt < TRIT_DTYPE_COUNT && table[dt].is_quantized; }

int64_t trit_dtype_block(trit_dtype dt) { return (unsigned)dt < TRIT_DTYPE_COUNT ? table[dt].block_elems : 0; }

size_t trit_dtype_nbytes(trit_dtype dt, int64_t n) {
    if ((unsigned)dt >= TRIT_DTYPE_COUNT || n <= 0) return 0;
    return (size_t)(n / table[dt].block_elems) * table[dt].block_bytes;
}

const char *trit_matmul_precision_name(trit_matmul_precision p) {
    switch (p) {
    case TRIT_MATMUL_HIGHEST: return "highest";
    case TRIT_MATMUL_HIGH: return "high";
    case TRIT_MATMUL_MEDIUM: return "medium";
    }
    return "invalid";
}
