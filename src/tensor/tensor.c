// Tensor lifetime, layout queries and element access.
#define _DEFAULT_SOURCE  // madvise
#include "trit/tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

trit_status trit_tensor_init_layout(trit_tensor *t, trit_dtype dt, int ndim, const int64_t *shape) {
    if (!t) return trit_error(TRIT_ERR_INVALID, "tensor is NULL");
    if ((unsigned)dt >= TRIT_DTYPE_COUNT) return trit_error(TRIT_ERR_DTYPE, "unknown dtype %d", (int)dt);
    if (ndim < 0 || ndim > TRIT_MAX_DIMS)
        return trit_error(TRIT_ERR_SHAPE, "a tensor has 0 to %d dims, %d given", TRIT_MAX_DIMS, ndim);
    if (ndim > 0 && !shape) return trit_error(TRIT_ERR_INVALID, "shape is NULL for a %d-d tensor", ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return trit_error(TRIT_ERR_SHAPE, "dim %d has negative size %lld", i, (long long)shape[i]);
        if (shape[i] > 0 && n > INT64_MAX / 16 / shape[i])
            return trit_error(TRIT_ERR_SHAPE, "tensor of this shape has too many elements");
        n *= shape[i];
    }
    const int64_t blk = trit_dtype_block(dt);
    if (blk > 1 && (ndim == 0 || shape[ndim - 1] % blk != 0))
        return trit_error(TRIT_ERR_SHAPE, "a %s tensor stores blocks of %lld elements along its last dim, so that dim "
                          "must be a multiple of %lld (got %lld)", trit_dtype_name(dt), (long long)blk,
                          (long long)blk, ndim ? (long long)shape[ndim - 1] : 0LL);
    t->dtype = dt;
    t->ndim = ndim;
    int64_t stride = 1;
    for (int i = TRIT_MAX_DIMS - 1; i >= 0; i--) {
        t->shape[i] = i < ndim ? shape[i] : 1;
        t->strides[i] = i < ndim ? stride : 0;
        if (i < ndim) stride *= shape[i] > 0 ? shape[i] : 1;
    }
    t->offset = 0;
    return TRIT_OK;
}

static trit_tensor *tensor_alloc(trit_dtype dt, int ndim, const int64_t *shape) {
    trit_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        trit_error(TRIT_ERR_NOMEM, "out of memory");
        return NULL;
    }
    if (trit_tensor_init_layout(t, dt, ndim, shape) != TRIT_OK) {
        free(t);
        return NULL;
    }
    t->graph_value = -1;
    return t;
}

trit_tensor *trit_tensor_new(trit_dtype dt, int ndim, const int64_t *shape) {
    trit_tensor *t = tensor_alloc(dt, ndim, shape);
    if (!t) return NULL;
    t->data = trit_aligned_alloc(trit_tensor_nbytes(t));
    if (!t->data) {
        free(t);
        return NULL;
    }
    t->flags = TRIT_FLAG_OWNS_DATA;
    return t;
}

trit_tensor *trit_tensor_new_param(trit_dtype dt, int ndim, const int64_t *shape, const char *name) {
    trit_tensor *t = trit_tensor_new(dt, ndim, shape);
    if (!t) return NULL;
    t->flags |= TRIT_FLAG_PARAM;
    if (name && trit_tensor_set_name(t, name) != TRIT_OK) {
        trit_tensor_free(t);
        return NULL;
    }
    return t;
}

trit_tensor *trit_tensor_wrap(trit_dtype dt, int ndim, const int64_t *shape, void *data) {
    if (!data) {
        trit_error(TRIT_ERR_INVALID, "trit_tensor_wrap: data is NULL");
        return NULL;
    }
    trit_tensor *t = tensor_alloc(dt, ndim, shape);
    if (t) t->data = data;
    return t;
}

void trit_tensor_drop_pages(const trit_tensor *t) {
    if (!t || !(t->flags & TRIT_FLAG_MAPPED) || !t->data) return;
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t pg = ps > 0 ? (uintptr_t)ps : 4096, at = (uintptr_t)trit_tensor_ptr(t),
                    lo = (at + pg - 1) / pg * pg, hi = (at + trit_tensor_nbytes(t)) / pg * pg;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

void trit_tensor_free(trit_tensor *t) {
    if (!t) return;
    if (t->grad) trit_tensor_free(t->grad);
    if (t->flags & TRIT_FLAG_OWNS_DATA) trit_aligned_free(t->data);
    if (t->flags & TRIT_FLAG_OWNS_QUANT) trit_quant_info_free(t->quant);
    free(t);
}

trit_status trit_tensor_move_data(trit_tensor *t, void *dst) {
    if (!t || !dst || !(t->flags & TRIT_FLAG_OWNS_DATA) || t->offset != 0)
        return trit_error(TRIT_ERR_INVALID, "trit_tensor_move_data: a tensor owning its data from element 0, and a destination");
    memcpy(dst, t->data, trit_tensor_nbytes(t));
    trit_aligned_free(t->data);
    t->data = dst;
    t->flags &= ~TRIT_FLAG_OWNS_DATA;
    return TRIT_OK;
}

trit_status trit_tensor_set_name(trit_tensor *t, const char *name) {
    if (!t || !name) return trit_error(TRIT_ERR_INVALID, "trit_tensor_set_name: NULL argument");
    if (strlen(name) >= TRIT_NAME_MAX)
        return trit_error(TRIT_ERR_INVALID, "tensor name '%.40s...' is longer than %d bytes", name, TRIT_NAME_MAX - 1);
    snprintf(t->name, sizeof t->name, "%s", name);
    return TRIT_OK;
}

int64_t trit_tensor_numel(const trit_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t trit_tensor_nbytes(const trit_tensor *t) { return trit_dtype_nbytes(t->dtype, trit_tensor_numel(t)); }

trit_status trit_tensor_set_quant(trit_tensor *t, trit_quant_info *q) {
    if (!t || !q) {
        trit_quant_info_free(q);
        return trit_error(TRIT_ERR_INVALID, "trit_tensor_set_quant: NULL argument");
    }
    const int64_t n = trit_tensor_numel(t);
    if (q->num_groups * q->group_size != n) {
        char b[128];
        trit_status s = trit_error(TRIT_ERR_SHAPE, "trit_tensor_set_quant: %lld groups of %lld do not cover tensor '%s' "
                                   "%s of %lld elements", (long long)q->num_groups, (long long)q->group_size,
                                   t->name, trit_tensor_shape_str(t, b, sizeof b), (long long)n);
        trit_quant_info_free(q);
        return s;
    }
    if (t->flags & TRIT_FLAG_OWNS_QUANT) trit_quant_info_free(t->quant);
    t->quant = q;
    t->flags |= TRIT_FLAG_OWNS_QUANT;
    return TRIT_OK;
}

bool trit_tensor_is_contiguous(const trit_tensor *t) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->strides[i] != expect) return false;
        expect *= t->shape[i];
    }
    return true;
}

bool trit_tensor_same_shape(const trit_tensor *a, const trit_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

void *trit_tensor_ptr(const trit_tensor *t) {
    return (char *)t->data + trit_dtype_nbytes(t->dtype, t->offset);
}

const char *trit_tensor_shape_str(const trit_tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, t->ndim == 1 ? ",)" : ")");
    return buf;
}

static int64_t offset_of(const trit_tensor *t, const int64_t *idx) {
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++) off += idx[i] * t->strides[i];
    return off;
}

static double load(const trit_tensor *t, int64_t off) {
    const void *d = t->data;
    switch (t->dtype) {
    case TRIT_F32: return ((const float *)d)[off];
    case TRIT_F64: return ((const double *)d)[off];
    case TRIT_BF16: return trit_bf16_to_f32(((const uint16_t *)d)[off]);
    case TRIT_F16: return trit_f16_to_f32(((const uint16_t *)d)[off]);
    case TRIT_I32: return ((const int32_t *)d)[off];
    case TRIT_I64: return (double)((const int64_t *)d)[off];
    case TRIT_I8: return ((const int8_t *)d)[off];
    case TRIT_U8: return ((const uint8_t *)d)[off];
    default: break;
    }
    // Blocked types: decode the element's block (views keep blocks whole, so off - off % blk
    // is a block start).
    const trit_dtype_traits *tr = trit_dtype_traits_of(t->dtype);
    float blk[256];
    if (!tr || tr->block_elems > 256) return 0;
    const int64_t start = off - off % tr->block_elems;
    tr->to_f32(blk, (const char *)d + trit_dtype_nbytes(t->dtype, start), tr->block_elems, t->quant, start);
    return blk[off - start];
}

static void store(trit_tensor *t, int64_t off, double v) {
    void *d = t->data;
    switch (t->dtype) {
    case TRIT_F32: ((float *)d)[off] = (float)v; break;
    case TRIT_F64: ((double *)d)[off] = v; break;
    case TRIT_BF16: ((uint16_t *)d)[off] = trit_f32_to_bf16((float)v); break;
    case TRIT_F16: ((uint16_t *)d)[off] = trit_f32_to_f16((float)v); break;
    // Integer dtypes as the dtype table converts: nearest even, saturated, NaN -> 0.
    case TRIT_I32: ((int32_t *)d)[off] = (int32_t)trit_f64_to_i64_sat(nearbyint(v), INT32_MIN, INT32_MAX); break;
    case TRIT_I64: ((int64_t *)d)[off] = trit_f64_to_i64_sat(nearbyint(v), INT64_MIN, INT64_MAX); break;
    case TRIT_I8: ((int8_t *)d)[off] = (int8_t)trit_f64_to_i64_sat(nearbyint(v), INT8_MIN, INT8_MAX); break;
    case TRIT_U8: ((uint8_t *)d)[off] = (uint8_t)trit_f64_to_i64_sat(nearbyint(v), 0, UINT8_MAX); break;
    default: {  // blocked types: decode the block, change one value, encode it again
        const trit_dtype_traits *tr = trit_dtype_traits_of(t->dtype);
        float blk[256];
        if (!tr || tr->block_elems > 256) break;
        const int64_t start = off - off % tr->block_elems;
        char *p = (char *)d + trit_dtype_nbytes(t->dtype, start);
        tr->to_f32(blk, p, tr->block_elems, t->quant, start);
        blk[off - start] = (float)v;
        tr->from_f32(p, blk, tr->block_elems, t->quant, start);
        break;
    }
    }
}

double trit_tensor_get(const trit_tensor *t, const int64_t *idx) { return load(t, offset_of(t, idx)); }
void trit_tensor_set(trit_tensor *t, const int64_t *idx, double v) { store(t, offset_of(t, idx), v); }

static int64_t flat_offset(const trit_tensor *t, int64_t i) {
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->shape[d]) * t->strides[d];
        i /= t->shape[d];
    }
    return off;
}

double trit_tensor_get_flat(const trit_tensor *t, int64_t i) { return load(t, flat_offset(t, i)); }
void trit_tensor_set_flat(trit_tensor *t, int64_t i, double v) { store(t, flat_offset(t, i), v); }

trit_status trit_tensor_copy(trit_tensor *dst, const trit_tensor *src) {
    if (!dst || !src) return trit_error(TRIT_ERR_INVALID, "trit_tensor_copy: NULL argument");
    if (!trit_tensor_same_shape(dst, src)) {
        char a[128], b[128];
        return trit_error(TRIT_ERR_SHAPE, "trit_tensor_copy: destination %s and source %s differ in shape",
                          trit_tensor_shape_str(dst, a, sizeof a), trit_tensor_shape_str(src, b, sizeof b));
    }
    int64_t n = trit_tensor_numel(src);
    if (dst->dtype == src->dtype && trit_tensor_is_contiguous(dst) && trit_tensor_is_contiguous(src)) {
        memmove(trit_tensor_ptr(dst), trit_tensor_ptr(src), trit_dtype_nbytes(src->dtype, n));
        return TRIT_OK;
    }
    // A block's scale follows from all its values: each block is encoded once from all of them.
    // (Storing one value at a time re-encodes the block from its decoded values, so earlier values
    // were rounded again at every change of scale: up to a whole q8_0 step off instead of half.)
    const trit_dtype_traits *tr = trit_dtype_traits_of(dst->dtype);
    if (tr && tr->block_elems > 1 && tr->block_elems <= 256 && trit_tensor_is_contiguous(dst) &&
        n % tr->block_elems == 0) {
        float blk[256];
        for (int64_t b = 0; b < n; b += tr->block_elems) {
            for (int64_t i = 0; i < tr->block_elems; i++) blk[i] = (float)load(src, flat_offset(src, b + i));
            tr->from_f32((char *)trit_tensor_ptr(dst) + trit_dtype_nbytes(dst->dtype, b), blk, tr->block_elems,
                         dst->quant, b);
        }
        return TRIT_OK;
    }
    for (int64_t i = 0; i < n; i++) store(dst, flat_offset(dst, i), load(src, flat_offset(src, i)));
    return TRIT_OK;
}

trit_tensor *trit_tensor_contiguous(const trit_tensor *t) {
    if (!t) {
        trit_error(TRIT_ERR_INVALID, "trit_tensor_contiguous: NULL tensor");
        return NULL;
    }
    trit_tensor *c = trit_tensor_new(t->dtype, t->ndim, t->shape);
    if (c && trit_tensor_copy(c, t) != TRIT_OK) {
        trit_tensor_free(c);
        return NULL;
    }
    return c;
}

trit_status trit_tensor_fill(trit_tensor *t, double v) {
    if (!t || !t->data) return trit_error(TRIT_ERR_INVALID, "trit_tensor_fill: tensor or data is NULL");
    int64_t n = trit_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) store(t, flat_offset(t, i), v);
    return TRIT_OK;
}

static trit_status fill_random(trit_tensor *t, bool normal, double a, double b, uint64_t seed, uint64_t stream) {
    if (!t || !t->data) return trit_error(TRIT_ERR_INVALID, "random fill: tensor or data is NULL");
    if (!trit_dtype_is_float(t->dtype)) return trit_error(TRIT_ERR_DTYPE, "random fill needs a float tensor, got %s", trit_dtype_name(t->dtype));
    int64_t n = trit_tensor_numel(t);
    if (t->dtype == TRIT_F64 && normal && trit_tensor_is_contiguous(t)) {
        trit_rng_fill_normal_f64(trit_tensor_ptr(t), n, seed, stream, 0, a, b);
        return TRIT_OK;
    }
    float *tmp = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!tmp) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    if (normal) trit_rng_fill_normal(tmp, n, seed, stream, 0, (float)a, (float)b);
    else trit_rng_fill_uniform(tmp, n, seed, stream, 0, (float)a, (float)b);
    for (int64_t i = 0; i < n; i++) store(t, flat_offset(t, i), tmp[i]);
    free(tmp);
    return TRIT_OK;
}

trit_status trit_tensor_fill_normal(trit_tensor *t, double mean, double std, uint64_t seed, uint64_t stream) {
    return fill_random(t, true, mean, std, seed, stream);
}

trit_status trit_tensor_fill_uniform(trit_tensor *t, double lo, double hi, uint64_t seed, uint64_t stream) {
    return fill_random(t, false, lo, hi, seed, stream);
}
