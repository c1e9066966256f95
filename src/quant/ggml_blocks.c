// ggml's self-scaled blocks (q8_0, q4_0, tq2_0, tq1_0) and trit's codes with side scales, moved
// into each other without rounding (trit/quant.h). A block is read into its natural-order codes
// and its f16 scale, and written from them; the layouts are those of the dtype table's rows
// (tensor/dtype.c), which decode them as ggml's dequantize_row_* does.
#include "trit/quant.h"

#include <math.h>
#include <string.h>

enum { GGML_MAX_BLOCK = 256 };

typedef struct ggml_layout {
    trit_dtype blocked, side;
    int64_t block;  // elements per block, the side tensor's group
    size_t bytes;   // bytes per block
} ggml_layout;

static const ggml_layout layouts[] = {
    {TRIT_Q8_0, TRIT_QINT8, 32, 34},
    {TRIT_Q4_0, TRIT_QINT4, 32, 18},
    {TRIT_TQ2_0, TRIT_TERNARY, 256, 66},
    {TRIT_TQ1_0, TRIT_TERNARY, 256, 54},
};

static const ggml_layout *layout_of(trit_dtype blocked) {
    for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++)
        if (layouts[i].blocked == blocked) return &layouts[i];
    return NULL;
}

trit_dtype trit_quant_ggml_side_dtype(trit_dtype blocked) {
    const ggml_layout *l = layout_of(blocked);
    return l ? l->side : TRIT_DTYPE_COUNT;
}

// tq1_0: byte i of the first 48 holds five codes, of the last 4 four; code n of byte i is element
// tq1_elem(i, n), and a byte stores its codes' base-3 number (code 0 most significant) scaled by
// 256 / 243 and rounded up, so code n is ((byte * 3^n mod 256) * 3) >> 8.
static int tq1_elem(int i, int n) {
    if (i < 32) return i + 32 * n;
    if (i < 48) return 160 + (i - 32) + 16 * n;
    return 240 + (i - 48) + 4 * n;
}

static const uint8_t pow3[5] = {1, 3, 9, 27, 81};

// Block b's codes, natural order, into c (ternary as stored: c + 1 in {0, 1, 2, 3}), its scale's
// f16 bits into *h.
static void block_read(trit_dtype bt, const uint8_t *b, int *c, uint16_t *h) {
    switch (bt) {
    case TRIT_Q8_0:
        memcpy(h, b, 2);
        for (int k = 0; k < 32; k++) c[k] = (int8_t)b[2 + k];
        return;
    case TRIT_Q4_0:  // byte j: element j low, j + 16 high, stored + 8
        memcpy(h, b, 2);
        for (int j = 0; j < 16; j++) c[j] = (b[2 + j] & 15) - 8, c[j + 16] = (b[2 + j] >> 4) - 8;
        return;
    case TRIT_TQ2_0:  // per 128 elements, byte m holds m, m + 32, m + 64, m + 96 in bit pairs 0, 2, 4, 6
        memcpy(h, b + 64, 2);
        for (int k = 0; k < 256; k++) c[k] = (b[(k / 128) * 32 + k % 32] >> (2 * ((k % 128) / 32))) & 3;
        return;
    default:  // TRIT_TQ1_0
        memcpy(h, b + 52, 2);
        for (int i = 0; i < 52; i++)
            for (int n = 0; n < (i < 48 ? 5 : 4); n++) c[tq1_elem(i, n)] = ((uint8_t)(b[i] * pow3[n]) * 3) >> 8;
        return;
    }
}

static void block_write(trit_dtype bt, uint8_t *b, const int *c, uint16_t h) {
    switch (bt) {
    case TRIT_Q8_0:
        memcpy(b, &h, 2);
        for (int k = 0; k < 32; k++) b[2 + k] = (uint8_t)(int8_t)c[k];
        return;
    case TRIT_Q4_0:
        memcpy(b, &h, 2);
        for (int j = 0; j < 16; j++) b[2 + j] = (uint8_t)((c[j] + 8) | (c[j + 16] + 8) << 4);
        return;
    case TRIT_TQ2_0:
        memset(b, 0, 64);
        for (int k = 0; k < 256; k++) b[(k / 128) * 32 + k % 32] |= (uint8_t)(c[k] << (2 * ((k % 128) / 32)));
        memcpy(b + 64, &h, 2);
        return;
    default:  // TRIT_TQ1_0 (the rounding up is what ggml's quantizer writes)
        for (int i = 0; i < 52; i++) {
            int num = 0;
            for (int n = 0; n < 5; n++) num = 3 * num + (i < 48 || n < 4 ? c[tq1_elem(i, n)] : 0);
            b[i] = (uint8_t)((num * 256 + 242) / 243);
        }
        memcpy(b + 52, &h, 2);
        return;
    }
}

// Side-scaled storage of element k: int8 bytes, 4-bit codes + 8 and 2-bit ternary codes + 1 from
// the low bits up (tensor/dtype_scaled.c). `v` is the stored form (ternary: c + 1).
static void side_put(trit_dtype side, uint8_t *p, int64_t k, int v) {
    if (side == TRIT_QINT8) p[k] = (uint8_t)(int8_t)v;
    else if (side == TRIT_QINT4) p[k >> 1] |= (uint8_t)((v + 8) << ((k & 1) * 4));
    else p[k >> 2] |= (uint8_t)(v << ((k & 3) * 2));
}

static int side_get(trit_dtype side, const uint8_t *p, int64_t k) {
    if (side == TRIT_QINT8) return (int8_t)p[k];
    if (side == TRIT_QINT4) return ((p[k >> 1] >> ((k & 1) * 4)) & 15) - 8;
    return (p[k >> 2] >> ((k & 3) * 2)) & 3;
}

static trit_tensor *side_tensor(const ggml_layout *l, int ndim, const int64_t *shape, const char *name) {
    trit_tensor *t = trit_tensor_new(l->side, ndim, shape);
    trit_quant_info *q = t ? trit_quant_info_new(trit_tensor_numel(t), l->block, false, 0) : NULL;
    if (!q || trit_tensor_set_quant(t, q) != TRIT_OK || (name[0] && trit_tensor_set_name(t, name) != TRIT_OK)) {
        trit_tensor_free(t);
        return NULL;
    }
    return t;
}

// Why a block (codes c as block_read gives them, scale d) has no side-scaled form, or NULL.
static const char *unrepresentable(const ggml_layout *l, const int *c, float d) {
    if (!isfinite(d)) return "a scale that is not finite";
    for (int64_t k = 0; k < l->block; k++) {
        if (l->side == TRIT_QINT8 && c[k] == -128)
            return "the code -128, which ggml's quantizer never writes and trit's int8 kernels do not take (codes "
                   "-127 to 127)";
        if (l->side == TRIT_TERNARY && c[k] == 3) return "the 2-bit code 3 (the value 2d), which is not ternary";
    }
    return NULL;
}

trit_tensor *trit_quant_from_ggml(const trit_tensor *b) {
    const ggml_layout *l = b ? layout_of(b->dtype) : NULL;
    if (!l || !trit_tensor_is_contiguous(b) || b->ndim < 1 || b->shape[b->ndim - 1] % l->block) {
        trit_error(TRIT_ERR_INVALID, "trit_quant_from_ggml: need a contiguous tensor of q8_0, q4_0, tq2_0 or tq1_0 "
                   "blocks whose rows are whole blocks");
        return NULL;
    }
    trit_tensor *t = side_tensor(l, b->ndim, b->shape, b->name);
    if (!t) return NULL;
    const int64_t blocks = trit_tensor_numel(b) / l->block;
    const uint8_t *src = trit_tensor_ptr(b);
    uint8_t *dst = trit_tensor_ptr(t);
    for (int64_t i = 0; i < blocks; i++) {
        int c[GGML_MAX_BLOCK];
        uint16_t h;
        block_read(l->blocked, src + (size_t)i * l->bytes, c, &h);
        const float d = trit_f16_to_f32(h);
        const char *why = unrepresentable(l, c, d);
        if (why) {
            trit_error(TRIT_ERR_FORMAT, "tensor '%s': %s block %lld (of %lld) holds %s: the file is damaged or was not "
                       "written by ggml's quantizer", b->name, trit_dtype_name(b->dtype), (long long)i,
                       (long long)blocks, why);
            trit_tensor_free(t);
            return NULL;
        }
        t->quant->scales[i] = d;
        for (int64_t k = 0; k < l->block; k++) side_put(l->side, dst, i * l->block + k, c[k]);
    }
    return t;
}

static trit_tensor *refuse(const trit_tensor *q, trit_dtype bt, const char *why) {
    trit_error(TRIT_ERR_UNSUPPORTED, "tensor '%s' (%s) cannot be written as %s blocks as it is: %s", q->name,
               trit_dtype_name(q->dtype), trit_dtype_name(bt), why);
    return NULL;
}

trit_tensor *trit_quant_to_ggml(const trit_tensor *q, trit_dtype bt) {
    const ggml_layout *l = layout_of(bt);
    if (!q || !l) {
        trit_error(TRIT_ERR_INVALID, "trit_quant_to_ggml: need a tensor and one of q8_0, q4_0, tq2_0, tq1_0");
        return NULL;
    }
    const trit_quant_info *qi = q->quant;
    if (q->dtype != l->side) return refuse(q, bt, "its dtype is not the blocks' codes");
    if (!trit_tensor_is_contiguous(q) || q->ndim < 1 || q->shape[q->ndim - 1] % l->block)
        return refuse(q, bt, "its rows are not whole blocks");
    if (!qi || qi->group_size != l->block || qi->zero_points || qi->qscales)
        return refuse(q, bt, "its groups are not the blocks (symmetric, one f32 scale a block)");
    trit_tensor *t = trit_tensor_new(bt, q->ndim, q->shape);
    if (!t) return NULL;
    const uint8_t *src = trit_tensor_ptr(q);
    for (int64_t i = 0; i < qi->num_groups; i++) {
        const float d = qi->scales[i];
        const uint16_t h = trit_f32_to_f16(d);
        const float back = trit_f16_to_f32(h);
        int c[GGML_MAX_BLOCK];
        bool tq1_ok = true;
        for (int64_t k = 0; k < l->block; k++) {
            c[k] = side_get(l->side, src, i * l->block + k);
            tq1_ok &= c[k] < 3;
        }
        const char *why = memcmp(&back, &d, sizeof d) != 0 ? "a scale is not an f16 value"
                          : bt == TRIT_TQ1_0 && !tq1_ok    ? "a 2-bit code is 3, not ternary"
                                                           : NULL;
        if (why) {
            trit_tensor_free(t);
            return refuse(q, bt, why);
        }
        block_write(bt, (uint8_t *)trit_tensor_ptr(t) + (size_t)i * l->bytes, c, h);
    }
    if (q->name[0] && trit_tensor_set_name(t, q->name) != TRIT_OK) {
        trit_tensor_free(t);
        return NULL;
    }
    return t;
}
