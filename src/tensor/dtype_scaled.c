// Rows of the dtypes with side scales (see dtype_scaled.h). Element k of a tensor (row-major,
// counted from the start of its storage) belongs to group k / group_size and decodes to
//   integer codes: (c - zero_point) * scale   (c signed; zero_point 0 when symmetric)
//   NF4:           trit_nf4_values[c] * scale (scale = the group's absmax)
//   FP8:           fp8(c) * scale
// A NULL quant info means scale 1 and no zero point. Storage: int8 codes as two's complement
// bytes; 4- and 2-bit codes biased by 8 and 2 (so unsigned), packed from the low bits up, element
// 0 first, as ggml packs q4_0 nibbles; NF4 indices packed like 4-bit codes; FP8 one byte each;
// ternary codes c + 1 in 2 bits like the 2-bit codes, or in base 3 (five to a byte).
#include "tensor/dtype_scaled.h"

#include <math.h>

typedef enum code_kind { CODE_INT, CODE_NF4, CODE_E4M3, CODE_E5M2, CODE_TERNARY, CODE_TERNARY_B3 } code_kind;

typedef struct code_format {
    code_kind kind;
    int bits;  // per element: 8, 4 or 2
} code_format;

static const code_format QINT8 = {CODE_INT, 8}, QINT4 = {CODE_INT, 4}, QINT2 = {CODE_INT, 2},
                         NF4 = {CODE_NF4, 4}, E4M3 = {CODE_E4M3, 8}, E5M2 = {CODE_E5M2, 8},
                         TERNARY = {CODE_TERNARY, 2}, TERNARY_B3 = {CODE_TERNARY_B3, 0};

// Base 3: element k of a block of 64 is digit k % 5 of byte k / 5 (the last byte holds 4).
enum { B3_BLOCK = 64, B3_BYTES = 13 };
static const uint8_t pow3[5] = {1, 3, 9, 27, 81};

static inline unsigned b3_get(const uint8_t *p, int64_t k) {
    const uint8_t *blk = p + (k / B3_BLOCK) * B3_BYTES;
    const int64_t j = k % B3_BLOCK;
    return (unsigned)(blk[j / 5] / pow3[j % 5] % 3);
}

// Writes digit t of element k; the byte's other digits are kept.
static inline void b3_put(uint8_t *p, int64_t k, unsigned t) {
    uint8_t *b = p + (k / B3_BLOCK) * B3_BYTES + (k % B3_BLOCK) / 5;
    const unsigned w = pow3[(k % B3_BLOCK) % 5], old = *b / w % 3;
    *b = (uint8_t)(*b - old * w + t * w);
}

static inline unsigned stored_get(const uint8_t *p, int bits, int64_t k) {
    switch (bits) {
    case 0: return b3_get(p, k);
    case 8: return p[k];
    case 4: return (p[k >> 1] >> ((k & 1) * 4)) & 15u;
    default: return (p[k >> 2] >> ((k & 3) * 2)) & 3u;
    }
}

static inline void stored_put(uint8_t *p, int bits, int64_t k, unsigned v) {
    switch (bits) {
    case 0: b3_put(p, k, v); return;
    case 8: p[k] = (uint8_t)v; return;
    case 4: {
        const int sh = (int)(k & 1) * 4;
        p[k >> 1] = (uint8_t)((p[k >> 1] & ~(15u << sh)) | (v << sh));
        return;
    }
    default: {
        const int sh = (int)(k & 3) * 2;
        p[k >> 2] = (uint8_t)((p[k >> 2] & ~(3u << sh)) | (v << sh));
        return;
    }
    }
}

// The signed integer code from its stored form, and back.
static inline int int_code(unsigned stored, int bits) {
    return bits == 8 ? (int)(int8_t)(uint8_t)stored : (int)stored - (1 << (bits - 1));
}
static inline unsigned int_stored(int c, int bits) {
    return bits == 8 ? (unsigned)(uint8_t)(int8_t)c : (unsigned)(c + (1 << (bits - 1)));
}

// Scale and zero point of the group holding element k, and the end (exclusive, as an element
// index) of that group.
static inline void group_at(const trit_quant_info *q, int64_t k, float *s, float *zp, int64_t *end) {
    if (!q) {
        *s = 1.0f, *zp = 0.0f, *end = INT64_MAX;
        return;
    }
    const int64_t g = k / q->group_size;
    *s = trit_quant_info_scale(q, g);
    *zp = q->zero_points ? q->zero_points[g] : 0.0f;
    *end = (g + 1) * q->group_size;
}

static float decode_one(const code_format *f, unsigned stored, float s, float zp) {
    switch (f->kind) {
    case CODE_INT: return ((float)int_code(stored, f->bits) - zp) * s;
    case CODE_NF4: return trit_nf4_values[stored] * s;
    case CODE_E4M3: return trit_fp8_table(TRIT_FP8_E4M3)[stored] * s;
    case CODE_E5M2: return trit_fp8_table(TRIT_FP8_E5M2)[stored] * s;
    case CODE_TERNARY:
    case CODE_TERNARY_B3: return (float)((int)stored - 1) * s;
    }
    return 0.0f;
}

// u < 0: round to nearest even; else stochastic with u uniform in [0, 1).
static unsigned encode_one(const code_format *f, float x, float s, float zp, bool affine, float u) {
    const float v = s != 0.0f && !isnan(x) ? x / s : 0.0f;
    switch (f->kind) {
    case CODE_INT: {
        const int half = 1 << (f->bits - 1);
        const double lo = affine ? -half : -(half - 1), hi = half - 1;
        double c = (double)v + zp;
        c = u < 0 ? nearbyint(c) : floor(c + (double)u);
        c = c < lo ? lo : c > hi ? hi : c;
        return int_stored((int)c, f->bits);
    }
    case CODE_NF4: return trit_nf4_encode(v, u);
    case CODE_E4M3: return u < 0 ? trit_f32_to_fp8(v, TRIT_FP8_E4M3) : trit_f32_to_fp8_sr(v, TRIT_FP8_E4M3, u);
    case CODE_E5M2: return u < 0 ? trit_f32_to_fp8(v, TRIT_FP8_E5M2) : trit_f32_to_fp8_sr(v, TRIT_FP8_E5M2, u);
    case CODE_TERNARY:
    case CODE_TERNARY_B3: {
        double c = u < 0 ? nearbyint((double)v) : floor((double)v + (double)u);
        c = c < -1 ? -1 : c > 1 ? 1 : c;
        return (unsigned)((int)c + 1);
    }
    }
    return 0;
}

static void rows_to_f32(const code_format *f, float *out, const void *in, int64_t n, const trit_quant_info *q,
                        int64_t first) {
    const uint8_t *p = in;
    for (int64_t i = 0; i < n;) {
        float s, zp;
        int64_t end;
        group_at(q, first + i, &s, &zp, &end);
        const int64_t stop = end - first < n ? end - first : n;
        for (; i < stop; i++) out[i] = decode_one(f, stored_get(p, f->bits, i), s, zp);
    }
}

// seed_stream NULL: nearest; else (seed, stream) of the stochastic rounding bits.
static void rows_from_f32(const code_format *f, void *out, const float *in, int64_t n, const trit_quant_info *q,
                          int64_t first, const uint64_t *seed_stream) {
    uint8_t *p = out;
    const bool affine = q && q->zero_points;
    for (int64_t i = 0; i < n;) {
        float s, zp;
        int64_t end;
        group_at(q, first + i, &s, &zp, &end);
        const int64_t stop = end - first < n ? end - first : n;
        for (; i < stop; i++) {
            const float u = seed_stream ? trit_rng_uniform(seed_stream[0], seed_stream[1], (uint64_t)(first + i)) : -1.0f;
            stored_put(p, f->bits, i, encode_one(f, in[i], s, zp, affine, u));
        }
    }
}

#define SCALED_ROWS(name, FMT)                                                                          \
    void trit_row_##name##_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q,     \
                                  int64_t first) {                                                      \
        rows_to_f32(&FMT, out, in, n, q, first);                                                        \
    }                                                                                                   \
    void trit_row_##name##_from_f32(void *out, const float *in, int64_t n, trit_quant_info *q,         \
                                    int64_t first) {                                                    \
        rows_from_f32(&FMT, out, in, n, q, first, NULL);                                                \
    }                                                                                                   \
    void trit_row_##name##_from_f32_sr(void *out, const float *in, int64_t n, trit_quant_info *q,      \
                                       int64_t first, uint64_t seed, uint64_t stream) {                 \
        const uint64_t ss[2] = {seed, stream};                                                          \
        rows_from_f32(&FMT, out, in, n, q, first, ss);                                                  \
    }

SCALED_ROWS(qint8, QINT8)
SCALED_ROWS(qint4, QINT4)
SCALED_ROWS(qint2, QINT2)
SCALED_ROWS(nf4, NF4)
SCALED_ROWS(f8_e4m3, E4M3)
SCALED_ROWS(f8_e5m2, E5M2)
SCALED_ROWS(ternary, TERNARY)
SCALED_ROWS(ternary_b3, TERNARY_B3)
