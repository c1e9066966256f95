// Views: new shapes and strides over the same storage, and numpy broadcasting.
#include "trit/tensor.h"

#include <string.h>

static trit_status check_in(const trit_tensor *t, trit_tensor *out, const char *what) {
    if (!t || !out) return trit_error(TRIT_ERR_INVALID, "%s: NULL argument", what);
    return TRIT_OK;
}

// Every view ends here: it owns nothing, and a blocked dtype (blocks of several elements) must
// keep whole blocks: unit stride along the last dim, whose size and every other stride and the
// offset are multiples of the block.
static trit_status finish_view(trit_tensor *v, trit_tensor *out, const char *what) {
    v->grad = NULL;
    v->flags &= ~(uint32_t)(TRIT_FLAG_OWNS_DATA | TRIT_FLAG_OWNS_QUANT);
    const int64_t blk = trit_dtype_block(v->dtype);
    if (blk > 1) {
        bool whole = v->ndim > 0 && v->strides[v->ndim - 1] == 1 && v->shape[v->ndim - 1] % blk == 0 &&
                     v->offset % blk == 0;
        for (int i = 0; i + 1 < v->ndim && whole; i++) whole = v->shape[i] == 1 || v->strides[i] % blk == 0;
        if (!whole) {
            char b[128];
            return trit_error(TRIT_ERR_SHAPE, "%s: this view of %s tensor '%s' %s would split its blocks of %lld "
                              "elements; view %s tensors only along whole blocks (the last dim stays whole "
                              "multiples of %lld), or dequantize first", what, trit_dtype_name(v->dtype), v->name,
                              trit_tensor_shape_str(v, b, sizeof b), (long long)blk, trit_dtype_name(v->dtype),
                              (long long)blk);
        }
    }
    *out = *v;
    return TRIT_OK;
}

static int norm_dim(int d, int ndim) { return d < 0 ? d + ndim : d; }

// Whether the product of the nonzero sizes of `shape` (sizes >= 0) stays below INT64_MAX / 16,
// the bound trit_tensor_init_layout puts on a tensor, so byte sizes of any dtype fit int64_t.
// Zeros are skipped, not taken as making everything fit: trit_tensor_numel multiplies from the
// first dim, so (2^32, 2^32, 0) would overflow before it reached the 0.
static bool numel_fits(int ndim, const int64_t *shape) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] <= 0) continue;  // 0, or reshape's -1 still to infer
        if (n > INT64_MAX / 16 / shape[i]) return false;
        n *= shape[i];
    }
    return true;
}

trit_status trit_tensor_view_reshape(const trit_tensor *t, int ndim, const int64_t *shape, trit_tensor *out) {
    trit_status s = check_in(t, out, "reshape");
    if (s != TRIT_OK) return s;
    if (ndim < 0 || ndim > TRIT_MAX_DIMS || (ndim > 0 && !shape))
        return trit_error(TRIT_ERR_SHAPE, "reshape: %d dims requested, 0 to %d allowed", ndim, TRIT_MAX_DIMS);
    int64_t want[TRIT_MAX_DIMS], known = 1, n = trit_tensor_numel(t);
    int infer = -1;
    for (int i = 0; i < ndim; i++) {
        want[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0) return trit_error(TRIT_ERR_SHAPE, "reshape: more than one -1 dim");
            infer = i;
        } else if (shape[i] < 0) {
            return trit_error(TRIT_ERR_SHAPE, "reshape: dim %d is %lld; sizes are >= 0, or one -1 to infer", i,
                              (long long)shape[i]);
        }
    }
    if (!numel_fits(ndim, want))
        return trit_error(TRIT_ERR_SHAPE, "reshape: the new shape has more than 2^59 elements (counting its nonzero "
                          "sizes), but the tensor has %lld", (long long)n);
    for (int i = 0; i < ndim; i++)
        if (i != infer) known *= want[i];  // bounded by the check above
    if (infer >= 0) {
        if (known == 0 || n % known) return trit_error(TRIT_ERR_SHAPE, "reshape: cannot infer -1 for %lld elements", (long long)n);
        want[infer] = n / known;
        known = n;
    }
    char a[128];
    if (known != n)
        return trit_error(TRIT_ERR_SHAPE, "reshape: %s has %lld elements, the new shape has %lld",
                          trit_tensor_shape_str(t, a, sizeof a), (long long)n, (long long)known);
    // Map new dims onto runs of old dims that are contiguous among themselves.
    int64_t nstr[TRIT_MAX_DIMS] = {0};
    int64_t oshape[TRIT_MAX_DIMS], ostride[TRIT_MAX_DIMS];
    int on = t->ndim;
    memcpy(oshape, t->shape, sizeof oshape);
    memcpy(ostride, t->strides, sizeof ostride);
    if (on == 0) {
        on = 1;
        oshape[0] = 1;
        ostride[0] = 1;
    }
    if (n == 0) {
        for (int i = ndim - 1, st = 1; i >= 0; i--) {
            nstr[i] = st;
            st *= want[i] > 0 ? want[i] : 1;
        }
    } else {
        int view_d = ndim - 1;
        int64_t base = ostride[on - 1], tensor_numel = 1, view_numel = 1;
        for (int d = on - 1; d >= 0; d--) {
            tensor_numel *= oshape[d];
            if (d == 0 || (oshape[d - 1] != 1 && ostride[d - 1] != tensor_numel * base)) {
                while (view_d >= 0 && (view_numel < tensor_numel || want[view_d] == 1)) {
                    nstr[view_d] = view_numel * base;
                    view_numel *= want[view_d];
                    view_d--;
                }
                if (view_numel != tensor_numel)
                    return trit_error(TRIT_ERR_SHAPE, "reshape: %s with these strides cannot be viewed as the new shape; make it contiguous first",
                                      trit_tensor_shape_str(t, a, sizeof a));
                if (d > 0) {
                    base = ostride[d - 1];
                    tensor_numel = view_numel = 1;
                }
            }
        }
        if (view_d != -1) return trit_error(TRIT_ERR_SHAPE, "reshape: shapes do not map");
    }
    trit_tensor v = *t;
    v.ndim = ndim;
    for (int i = 0; i < TRIT_MAX_DIMS; i++) {
        v.shape[i] = i < ndim ? want[i] : 1;
        v.strides[i] = i < ndim ? nstr[i] : 0;
    }
    return finish_view(&v, out, "reshape");
}

static void as_view(const trit_tensor *t, trit_tensor *out) { *out = *t; }

trit_status trit_tensor_view_permute(const trit_tensor *t, const int *perm, trit_tensor *out) {
    trit_status s = check_in(t, out, "permute");
    if (s != TRIT_OK) return s;
    if (t->ndim > 0 && !perm) return trit_error(TRIT_ERR_INVALID, "permute: perm is NULL");
    bool seen[TRIT_MAX_DIMS] = {0};
    trit_tensor v;
    as_view(t, &v);
    for (int i = 0; i < t->ndim; i++) {
        int p = norm_dim(perm[i], t->ndim);
        if (p < 0 || p >= t->ndim || seen[p])
            return trit_error(TRIT_ERR_INVALID, "permute: entry %d (%d) is not a permutation of 0..%d", i, perm[i], t->ndim - 1);
        seen[p] = true;
        v.shape[i] = t->shape[p];
        v.strides[i] = t->strides[p];
    }
    return finish_view(&v, out, "permute");
}

trit_status trit_tensor_view_transpose(const trit_tensor *t, int d0, int d1, trit_tensor *out) {
    trit_status s = check_in(t, out, "transpose");
    if (s != TRIT_OK) return s;
    d0 = norm_dim(d0, t->ndim);
    d1 = norm_dim(d1, t->ndim);
    if (d0 < 0 || d0 >= t->ndim || d1 < 0 || d1 >= t->ndim)
        return trit_error(TRIT_ERR_INVALID, "transpose: dims %d, %d out of range for a %d-d tensor", d0, d1, t->ndim);
    int perm[TRIT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return trit_tensor_view_permute(t, perm, out);
}

trit_status trit_tensor_view_slice(const trit_tensor *t, int dim, int64_t start, int64_t stop, int64_t step, trit_tensor *out) {
    trit_status s = check_in(t, out, "slice");
    if (s != TRIT_OK) return s;
    dim = norm_dim(dim, t->ndim);
    if (dim < 0 || dim >= t->ndim) return trit_error(TRIT_ERR_INVALID, "slice: dim out of range for a %d-d tensor", t->ndim);
    if (step < 1) return trit_error(TRIT_ERR_INVALID, "slice: step must be >= 1, got %lld", (long long)step);
    int64_t n = t->shape[dim];
    if (start < 0) start += n;
    if (stop < 0) stop += n;
    if (start < 0 || start > n || stop < start || stop > n)
        return trit_error(TRIT_ERR_RANGE, "slice: [%lld, %lld) is outside dim %d of size %lld", (long long)start,
                          (long long)stop, dim, (long long)n);
    trit_tensor v;
    as_view(t, &v);
    v.offset = t->offset + start * t->strides[dim];
    v.shape[dim] = (stop - start + step - 1) / step;
    v.strides[dim] = t->strides[dim] * step;
    return finish_view(&v, out, "slice");
}

trit_status trit_tensor_view_expand(const trit_tensor *t, int ndim, const int64_t *shape, trit_tensor *out) {
    trit_status s = check_in(t, out, "expand");
    if (s != TRIT_OK) return s;
    char a[128];
    if (ndim < t->ndim || ndim > TRIT_MAX_DIMS || (ndim > 0 && !shape))
        return trit_error(TRIT_ERR_SHAPE, "expand: cannot expand %s to %d dims", trit_tensor_shape_str(t, a, sizeof a), ndim);
    trit_tensor v;
    as_view(t, &v);
    v.ndim = ndim;
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        // -1 keeps an existing dim; a new leading dim has no size to keep.
        if (shape[i] < -1 || (shape[i] == -1 && i < lead))
            return trit_error(TRIT_ERR_SHAPE, "expand: size %lld for dim %d of %s; sizes are >= 0, or -1 to keep one of "
                              "the tensor's own dims (not a new leading dim)", (long long)shape[i], i,
                              trit_tensor_shape_str(t, a, sizeof a));
    }
    for (int i = 0; i < TRIT_MAX_DIMS; i++) {
        if (i >= ndim) {
            v.shape[i] = 1;
            v.strides[i] = 0;
            continue;
        }
        int64_t want = shape[i];
        if (i < lead) {
            v.shape[i] = want;
            v.strides[i] = 0;
            continue;
        }
        int64_t have = t->shape[i - lead];
        if (have == want || want == -1) {
            v.shape[i] = have;
            v.strides[i] = t->strides[i - lead];
        } else if (have == 1) {
            v.shape[i] = want;
            v.strides[i] = 0;
        } else {
            return trit_error(TRIT_ERR_SHAPE, "expand: dim %d of %s has size %lld and cannot become %lld", i - lead,
                              trit_tensor_shape_str(t, a, sizeof a), (long long)have, (long long)want);
        }
    }
    if (!numel_fits(v.ndim, v.shape))
        return trit_error(TRIT_ERR_SHAPE, "expand: %s to this shape would have more than 2^59 elements (element "
                          "counts would overflow int64_t byte sizes); expand to a smaller shape",
                          trit_tensor_shape_str(t, a, sizeof a));
    return finish_view(&v, out, "expand");
}

trit_status trit_broadcast_shape(const trit_tensor *a, const trit_tensor *b, int *ndim, int64_t *shape) {
    int n = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - a->ndim), ib = i - (n - b->ndim);
        int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1) {
            char x[128], y[128];
            return trit_error(TRIT_ERR_SHAPE, "shapes %s and %s do not broadcast (dim %d: %lld vs %lld)",
                              trit_tensor_shape_str(a, x, sizeof x), trit_tensor_shape_str(b, y, sizeof y), i,
                              (long long)da, (long long)db);
        }
        shape[i] = da == 1 ? db : da;
    }
    *ndim = n;
    return TRIT_OK;
}
