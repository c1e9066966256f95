// View ops alias their input's storage, so forward does nothing. Backward applies the same
// view to the input's (contiguous) gradient and adds the output gradient into it: one rule for
// reshape, permute, slice and expand (expand's repeated elements sum, as broadcasting needs).
#include "ops/view.h"

#include "ops/op_build.h"
#include "kernels/strided.h"
#include "trit/ops.h"

#include <string.h>

static trit_status select_view(const trit_tensor *in, int dim, int64_t index, trit_tensor *out) {
    trit_status s = trit_tensor_view_slice(in, dim, index, index + 1, 1, out);
    if (s != TRIT_OK) return s;
    for (int d = dim; d < TRIT_MAX_DIMS - 1; d++) {
        out->shape[d] = out->shape[d + 1];
        out->strides[d] = out->strides[d + 1];
    }
    out->shape[TRIT_MAX_DIMS - 1] = 1;
    out->strides[TRIT_MAX_DIMS - 1] = 0;
    out->ndim--;
    return TRIT_OK;
}

static trit_status apply_view(const trit_tensor *in, const trit_view_attr *a, trit_tensor *out) {
    switch (a->kind) {
    case TRIT_VIEW_RESHAPE: return trit_tensor_view_reshape(in, a->ndim, a->shape, out);
    case TRIT_VIEW_PERMUTE: return trit_tensor_view_permute(in, a->perm, out);
    case TRIT_VIEW_SLICE: return trit_tensor_view_slice(in, a->dim, a->start, a->stop, a->step, out);
    case TRIT_VIEW_EXPAND: return trit_tensor_view_expand(in, a->ndim, a->shape, out);
    case TRIT_VIEW_SELECT: return select_view(in, a->dim, a->start, out);
    }
    return trit_error(TRIT_ERR_INVALID, "unknown view kind %d", a->kind);
}

static trit_status view_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    trit_tensor v;
    trit_status s = apply_view(in[0], attr, &v);
    if (s != TRIT_OK) return s;
    out->dtype = v.dtype;
    out->ndim = v.ndim;
    for (int i = 0; i < TRIT_MAX_DIMS; i++) {
        out->shape[i] = v.shape[i];
        out->strides[i] = v.strides[i];
    }
    out->offset = v.offset;
    return TRIT_OK;
}

static trit_status view_forward(const trit_op_call *c) {
    (void)c;
    return TRIT_OK;
}

static trit_status view_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    trit_tensor gv;
    trit_status s = apply_view(c->gin[0], c->attr, &gv);
    if (s != TRIT_OK) return s;
    int64_t cstr[TRIT_MAX_DIMS], st = 1;
    for (int i = c->gout->ndim - 1; i >= 0; i--) {
        cstr[i] = st;
        st *= c->gout->shape[i];
    }
    R(trit_kernel_strided_add)((real *)gv.data + gv.offset, gv.strides, (const real *)c->gout->data, cstr,
                               gv.ndim, gv.shape);
    return TRIT_OK;
}

const trit_op_def R(trit_op_view) = {
    .name = "view",
    .infer = view_infer,
    .forward = view_forward,
    .backward = view_backward,
    .is_view = true,
    .attr_size = sizeof(trit_view_attr),
};

static trit_status contiguous_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    (void)attr;
    return trit_tensor_init_layout(out, in[0]->dtype, in[0]->ndim, in[0]->shape);
}

static trit_status contiguous_forward(const trit_op_call *c) {
    const trit_tensor *x = c->in[0];
    if (x->dtype != TRIT_REAL_DTYPE) return trit_tensor_copy(c->out, x);
    R(trit_kernel_strided_copy)((real *)c->out->data, c->out->strides, (const real *)x->data + x->offset, x->strides,
                                x->ndim, x->shape);
    return TRIT_OK;
}

static trit_status contiguous_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const int64_t n = trit_tensor_numel(c->gout);
    real *gi = c->gin[0]->data;
    const real *go = c->gout->data;
    for (int64_t i = 0; i < n; i++) gi[i] += go[i];
    return TRIT_OK;
}

const trit_op_def R(trit_op_contiguous) = {
    .name = "contiguous",
    .infer = contiguous_infer,
    .forward = contiguous_forward,
    .backward = contiguous_backward,
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

static trit_tensor *view_node(trit_graph *g, trit_tensor *x, const trit_view_attr *a) {
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
    return x ? view_node(g, x, &a) : NULL;
}

trit_tensor *trit_permute(trit_graph *g, trit_tensor *x, const int *perm) {
    if (!x || (x->ndim > 0 && !perm)) {
        trit_error(TRIT_ERR_INVALID, "permute: NULL argument");
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_view_attr a = {.kind = TRIT_VIEW_PERMUTE};
    memcpy(a.perm, perm, sizeof(int) * (size_t)x->ndim);
    return view_node(g, x, &a);
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
    return view_node(g, x, &a);
}

trit_tensor *trit_expand(trit_graph *g, trit_tensor *x, int ndim, const int64_t *shape) {
    if (ndim < 0 || ndim > TRIT_MAX_DIMS || (ndim > 0 && !shape)) {
        trit_error(TRIT_ERR_INVALID, "expand: bad shape (%d dims)", ndim);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_view_attr a = {.kind = TRIT_VIEW_EXPAND, .ndim = ndim};
    memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    return view_node(g, x, &a);
}

trit_tensor *trit_contiguous(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_contiguous, 1, &x, NULL); }

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

#endif
