// Quantization of f32 buffers and tensors: choose each group's scale (and zero point), optionally
// double-quantize the scales, then encode with the dtype table's row converters, which use the
// scales exactly as decoding will (so the codes fit the scales actually stored).
#include "trit/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// Elements per parallel encode chunk: a multiple of every block size (1, 2, 4), so no two chunks
// share a packed byte.
enum { ENCODE_CHUNK = 16384 };

static bool quant_dtype(trit_dtype dt) {
    return dt == TRIT_QINT8 || dt == TRIT_QINT4 || dt == TRIT_QINT2 || dt == TRIT_NF4 || dt == TRIT_F8_E4M3 ||
           dt == TRIT_F8_E5M2 || dt == TRIT_TERNARY || dt == TRIT_TERNARY_B3;
}

static bool ternary(trit_dtype dt) { return dt == TRIT_TERNARY || dt == TRIT_TERNARY_B3; }

static int code_bits(trit_dtype dt) { return dt == TRIT_QINT4 || dt == TRIT_NF4 ? 4 : dt == TRIT_QINT2 ? 2 : 8; }

static const struct {
    const char *name;
    trit_dtype dt;
} formats[] = {{"int8", TRIT_QINT8}, {"int4", TRIT_QINT4},   {"int2", TRIT_QINT2},
               {"nf4", TRIT_NF4},    {"fp8", TRIT_F8_E4M3}, {"fp8-e5m2", TRIT_F8_E5M2},
               {"ternary", TRIT_TERNARY}, {"ternary-b3", TRIT_TERNARY_B3}};

trit_dtype trit_quant_format_dtype(const char *name) {
    for (size_t i = 0; name && i < sizeof formats / sizeof formats[0]; i++)
        if (strcmp(name, formats[i].name) == 0) return formats[i].dt;
    trit_error(TRIT_ERR_INVALID, "unknown quantization format '%s' (int8, int4, int2, nf4, fp8, fp8-e5m2, ternary "
               "or ternary-b3)",
               name ? name : "");
    return TRIT_DTYPE_COUNT;
}

const char *trit_quant_format_name(trit_dtype dt) {
    for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
        if (formats[i].dt == dt) return formats[i].name;
    return NULL;
}

trit_quant_spec trit_quant_spec_default(trit_dtype dt) {
    trit_quant_spec s = {.dtype = dt, .group_size = TRIT_QGROUP_CHANNEL, .scheme = TRIT_QSCHEME_SYMMETRIC};
    if (dt == TRIT_QINT4) s.group_size = 128;
    if (dt == TRIT_QINT2 || dt == TRIT_NF4) s.group_size = 64;
    if (ternary(dt)) s.group_size = TRIT_QGROUP_TENSOR;  // BitNet b1.58: one absmean scale per matrix
    return s;
}

int64_t trit_quant_group_elems(const trit_quant_spec *s, int64_t numel, int64_t row_len) {
    return s->group_size == TRIT_QGROUP_TENSOR ? numel : s->group_size == TRIT_QGROUP_CHANNEL ? row_len : s->group_size;
}

trit_status trit_quant_spec_check(const trit_quant_spec *s, int64_t numel, int64_t row_len) {
    if (!s) return trit_error(TRIT_ERR_INVALID, "quantize: NULL spec");
    if (!quant_dtype(s->dtype))
        return trit_error(TRIT_ERR_DTYPE, "quantize: %s is not a quantized dtype (use qint8, qint4, qint2, nf4, "
                          "f8_e4m3 or f8_e5m2)", trit_dtype_name(s->dtype));
    if (numel <= 0 || row_len <= 0 || numel % row_len != 0)
        return trit_error(TRIT_ERR_SHAPE, "quantize: %lld values do not form rows of %lld", (long long)numel,
                          (long long)row_len);
    const int64_t blk = trit_dtype_block(s->dtype), g = trit_quant_group_elems(s, numel, row_len);
    if (row_len % blk != 0)
        return trit_error(TRIT_ERR_SHAPE, "quantize: %s packs %lld codes per byte, so rows of %lld cannot be stored "
                          "(the last dim must be a multiple of %lld)", trit_dtype_name(s->dtype), (long long)blk,
                          (long long)row_len, (long long)blk);
    if (s->group_size < TRIT_QGROUP_CHANNEL || (s->group_size > 0 && (row_len % g != 0 || g % blk != 0)) ||
        (s->group_size == TRIT_QGROUP_CHANNEL && row_len % blk != 0))
        return trit_error(TRIT_ERR_SHAPE, "quantize: group size %lld must divide the rows of %lld and be a multiple "
                          "of %lld (or be 0 for per tensor, -1 for per channel)", (long long)s->group_size,
                          (long long)row_len, (long long)blk);
    if (s->scheme == TRIT_QSCHEME_AFFINE && (s->dtype == TRIT_NF4 || s->dtype == TRIT_F8_E4M3 || s->dtype == TRIT_F8_E5M2 ||
                                             ternary(s->dtype)))
        return trit_error(TRIT_ERR_INVALID, "quantize: affine applies to integer codes only, not %s",
                          trit_dtype_name(s->dtype));
    if (s->scheme != TRIT_QSCHEME_SYMMETRIC && s->scheme != TRIT_QSCHEME_AFFINE)
        return trit_error(TRIT_ERR_INVALID, "quantize: unknown scheme %d", (int)s->scheme);
    if (s->double_quant_block < 0 || s->double_quant_block > (1 << 20))
        return trit_error(TRIT_ERR_RANGE, "quantize: double-quantization block %lld outside [0, 1048576]",
                          (long long)s->double_quant_block);
    return TRIT_OK;
}

// Scale (and zero point) of one group; returns the index of its first non-finite value or -1.
static int64_t group_scale(const trit_quant_spec *s, const float *x, int64_t n, float *scale, float *zp) {
    float lo = 0.0f, hi = 0.0f;
    double abs_sum = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(x[i])) return i;
        lo = fminf(lo, x[i]), hi = fmaxf(hi, x[i]);
        abs_sum += fabsf(x[i]);
    }
    if (ternary(s->dtype)) {  // BitNet b1.58: mean |x|, at least 1e-5 (as the fake_quant op)
        const double m = abs_sum / (double)n;
        *scale = (float)(m > 1e-5 ? m : 1e-5);
        return -1;
    }
    const float amax = fmaxf(-lo, hi);
    const int bits = code_bits(s->dtype);
    switch (s->dtype) {
    case TRIT_NF4: *scale = amax; break;
    case TRIT_F8_E4M3: *scale = amax / trit_fp8_max(TRIT_FP8_E4M3); break;
    case TRIT_F8_E5M2: *scale = amax / trit_fp8_max(TRIT_FP8_E5M2); break;
    default:
        if (s->scheme == TRIT_QSCHEME_SYMMETRIC) {
            *scale = amax / (float)((1 << (bits - 1)) - 1);
        } else {
            // [lo, hi] holds 0, so zero is a code (c = zero point) and decodes exactly.
            const int cmin = -(1 << (bits - 1)), cmax = (1 << (bits - 1)) - 1;
            *scale = (hi - lo) / (float)(cmax - cmin);
            const double z = *scale > 0 ? nearbyint(cmin - (double)lo / *scale) : 0.0;
            *zp = (float)(z < cmin ? cmin : z > cmax ? cmax : z);
        }
    }
    return -1;
}

static trit_status choose_scales(const trit_quant_spec *s, const float *x, trit_quant_info *q) {
    const int64_t G = q->num_groups, gs = q->group_size;
    int64_t bad = INT64_MAX;
#pragma omp parallel for schedule(static) reduction(min : bad) if (G > 1)
    for (int64_t g = 0; g < G; g++) {
        float zp = 0.0f;
        const int64_t b = group_scale(s, x + g * gs, gs, &q->scales[g], &zp);
        if (q->zero_points) q->zero_points[g] = zp;
        if (b >= 0 && g * gs + b < bad) bad = g * gs + b;
    }
    if (bad != INT64_MAX)
        return trit_error(TRIT_ERR_NUMERIC, "quantize: value %lld is %g; quantization needs finite values (check the "
                          "weights for NaN/Inf before quantizing)", (long long)bad, (double)x[bad]);
    return TRIT_OK;
}

trit_status trit_quant_encode(const trit_quant_spec *s, const float *x, int64_t numel, int64_t row_len, void *codes,
                              trit_quant_info **info) {
    trit_status st = trit_quant_spec_check(s, numel, row_len);
    if (st != TRIT_OK) return st;
    if (!x || !codes || !info) return trit_error(TRIT_ERR_INVALID, "quantize: NULL buffer");
    const int64_t gs = trit_quant_group_elems(s, numel, row_len);
    trit_quant_info *q = trit_quant_info_new(numel, gs, s->scheme == TRIT_QSCHEME_AFFINE, 0);
    if (!q) return TRIT_ERR_NOMEM;  // the spec check ruled out bad sizes
    st = choose_scales(s, x, q);
    if (st == TRIT_OK && s->double_quant_block > 0) st = trit_quant_double(q, s->double_quant_block);
    if (st != TRIT_OK) {
        trit_quant_info_free(q);
        return st;
    }
    const trit_dtype_traits *tr = trit_dtype_traits_of(s->dtype);
    const int64_t chunks = (numel + ENCODE_CHUNK - 1) / ENCODE_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t first = c * ENCODE_CHUNK, n = numel - first < ENCODE_CHUNK ? numel - first : ENCODE_CHUNK;
        void *out = (char *)codes + trit_dtype_nbytes(s->dtype, first);
        if (s->stochastic) tr->from_f32_sr(out, x + first, n, q, first, s->seed, s->stream);
        else tr->from_f32(out, x + first, n, q, first);
    }
    *info = q;
    return TRIT_OK;
}

trit_status trit_quant_decode(trit_dtype dt, const void *codes, int64_t numel, const trit_quant_info *q, float *out) {
    if (!quant_dtype(dt)) return trit_error(TRIT_ERR_DTYPE, "dequantize: %s is not a quantized dtype", trit_dtype_name(dt));
    if (!codes || !out || numel <= 0 || numel % trit_dtype_block(dt) != 0)
        return trit_error(TRIT_ERR_INVALID, "dequantize: bad buffer or count %lld", (long long)numel);
    if (!q && dt != TRIT_F8_E4M3 && dt != TRIT_F8_E5M2)
        return trit_error(TRIT_ERR_INVALID, "dequantize: %s codes need their scales", trit_dtype_name(dt));
    if (q && q->num_groups * q->group_size != numel)
        return trit_error(TRIT_ERR_SHAPE, "dequantize: %lld groups of %lld do not cover %lld values",
                          (long long)q->num_groups, (long long)q->group_size, (long long)numel);
    const trit_dtype_traits *tr = trit_dtype_traits_of(dt);
    const int64_t chunks = (numel + ENCODE_CHUNK - 1) / ENCODE_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t first = c * ENCODE_CHUNK, n = numel - first < ENCODE_CHUNK ? numel - first : ENCODE_CHUNK;
        tr->to_f32(out + first, (const char *)codes + trit_dtype_nbytes(dt, first), n, q, first);
    }
    return TRIT_OK;
}
