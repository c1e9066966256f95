// Graph constructors for shape ops: views where the layout allows, copies otherwise.
#include "graph/graph_internal.h"
#include "ops/cast.h"
#include "ops/view.h"
#include "trit/ops.h"

#include <string.h>

static trit_tensor *apply_view(trit_graph *g, trit_tensor *x, const trit_view_attr *a) {
    return TRIT_APPLY(g, trit_op_view, 1, &x, a);
}

trit_tensor *trit_reshape(trit_graph *g, trit_tensor *x, int ndim, const int64_t *shape) {
    if (!x || ndim < 0 || ndim > TRIT_MAX_DIMS || (ndim > 0 && !shape)) {
        trit_error(TRIT_ERR_INVALID, "reshape: NULL input or bad shape (%d dims)", ndim);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_view_attr a = {.kind = TRIT_VIEW_RESHAPE, .ndim = ndim};
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    trit_tensor probe;
    if (trit_tensor_view_reshape(x, ndim, shape, &probe) != TRIT_OK) x = trit_contiguous(g, x);
    return x ? apply_view(g, x, &a) : NULL;
}

trit_tensor *trit_permute(trit_graph *g, trit_tensor *x, const int *perm) {
    if (!x || (x->ndim > 0 && !perm)) {
        trit_error(TRIT_ERR_INVALID, "permute: NULL argument");
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_view_attr a = {.kind = TRIT_VIEW_PERMUTE};
    memcpy(a.perm, perm, sizeof(int) * (size_t)x->ndim);
    return apply_view(g, x, &a);
}

trit_tensor *trit_transpose(trit_graph *g, trit_tensor *x, int d0, int d1) {
    if (!x) {
        trit_error(TRIT_ERR_INVALID, "transpose: NULL input");
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    int perm[TRIT_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) perm[i] = i;
    int a0 = d0 < 0 ? d0 + x->ndim : d0, a1 = d1 < 0 ? d1 + x->ndim : d1;
    if (a0 < 0 || a0 >= x->ndim || a1 < 0 || a1 >= x->ndim) {
        trit_error(TRIT_ERR_INVALID, "transpose: dims %d, %d out of range for a %d-d tensor", d0, d1, x->ndim);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    perm[a0] = a1;
    perm[a1] = a0;
    return trit_permute(g, x, perm);
}

trit_tensor *trit_slice(trit_graph *g, trit_tensor *x, int dim, int64_t start, int64_t stop) {
    trit_view_attr a = {.kind = TRIT_VIEW_SLICE, .dim = dim, .start = start, .stop = stop, .step = 1};
    return apply_view(g, x, &a);
}

trit_tensor *trit_expand(trit_graph *g, trit_tensor *x, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TRIT_MAX_DIMS || (ndim > 0 && !shape)) {
        trit_error(TRIT_ERR_INVALID, "expand: bad shape (%d dims)", ndim);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_view_attr a = {.kind = TRIT_VIEW_EXPAND, .ndim = ndim};
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return apply_view(g, x, &a);
}

trit_tensor *trit_contiguous(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_contiguous, 1, &x, NULL); }

trit_tensor *trit_cast(trit_graph *g, trit_tensor *x, trit_dtype dt) {
    if (x && x->dtype == dt) return x;
    const trit_cast_attr a = {.dtype = dt};
    return TRIT_APPLY(g, trit_op_cast, 1, &x, &a);
}

trit_status trit_split(trit_graph *g, trit_tensor *x, int axis, int n, const int64_t *sizes, trit_tensor **out) {
    if (!g || !x || n <= 0 || !sizes || !out) {
        trit_error(TRIT_ERR_INVALID, "split: NULL argument or n <= 0");
        trit_graph_fail(g, TRIT_ERR_INVALID);
        return TRIT_ERR_INVALID;
    }
    int ax = axis < 0 ? axis + x->ndim : axis;
    if (ax < 0 || ax >= x->ndim) {
        trit_error(TRIT_ERR_INVALID, "split: axis %d out of range for a %d-d tensor", axis, x->ndim);
        trit_graph_fail(g, TRIT_ERR_INVALID);
        return TRIT_ERR_INVALID;
    }
    int64_t total = 0;
    for (int i = 0; i < n; i++) total += sizes[i] < 0 ? x->shape[ax] + 1 : sizes[i];
    if (total != x->shape[ax]) {
        trit_error(TRIT_ERR_SHAPE, "split: sizes add up to %lld but axis %d has %lld", (long long)total, axis,
                   (long long)x->shape[ax]);
        trit_graph_fail(g, TRIT_ERR_SHAPE);
        return TRIT_ERR_SHAPE;
    }
    int64_t start = 0;
    for (int i = 0; i < n; i++) {
        out[i] = trit_slice(g, x, ax, start, start + sizes[i]);
        if (!out[i]) return trit_graph_status(g);
        start += sizes[i];
    }
    return TRIT_OK;
}
