// Concat copies each input into its slab of the output; backward adds each slab of the output
// gradient back into its input's gradient. Both go through the strided kernels, so inputs may be
// any view.
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "kernels/strided.h"
#include "trit/ops.h"

typedef struct trit_concat_attr {
    int axis;  // 0 <= axis < ndim (the constructor resolves negative axes)
} trit_concat_attr;

// Inputs: n tensors of equal shape except along axis (any strides); out: contiguous, the sum
// of their sizes along axis.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_concat);

static trit_status concat_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_concat_attr *a = attr;
    char s0[96], s1[96];
    if (n_in < 1) return trit_error(TRIT_ERR_INVALID, "concat: expected 1 to %d inputs, got %d", TRIT_OP_MAX_IN, n_in);
    const trit_tensor *x0 = in[0];
    if (a->axis < 0 || a->axis >= x0->ndim)
        return trit_error(TRIT_ERR_INVALID, "concat: axis %d out of range for %d-d inputs", a->axis, x0->ndim);
    int64_t shape[TRIT_MAX_DIMS];
    for (int d = 0; d < x0->ndim; d++) shape[d] = x0->shape[d];
    shape[a->axis] = 0;
    for (int i = 0; i < n_in; i++) {
        const trit_tensor *x = in[i];
        if (x->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "concat: input %d must be %s (the graph's compute dtype), got %s", i,
                              trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
        bool ok = x->ndim == x0->ndim;
        for (int d = 0; ok && d < x0->ndim; d++) ok = d == a->axis || x->shape[d] == x0->shape[d];
        if (!ok)
            return trit_error(TRIT_ERR_SHAPE, "concat: input %d has shape %s, input 0 has %s; all dims but axis %d must agree",
                              i, trit_tensor_shape_str(x, s0, sizeof s0), trit_tensor_shape_str(x0, s1, sizeof s1), a->axis);
        shape[a->axis] += x->shape[a->axis];
    }
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, x0->ndim, shape);
}

static trit_status concat_forward(const trit_op_call *c) {
    const trit_concat_attr *a = c->attr;
    const trit_tensor *out = c->out;
    real *slab = out->data;
    for (int i = 0; i < c->n_in; i++) {
        const trit_tensor *x = c->in[i];
        R(trit_kernel_strided_copy)(slab, out->strides, (const real *)x->data + x->offset, x->strides, x->ndim, x->shape);
        slab += x->shape[a->axis] * out->strides[a->axis];
    }
    return TRIT_OK;
}

static trit_status concat_backward(const trit_op_call *c) {
    const trit_concat_attr *a = c->attr;
    const trit_tensor *go = c->gout;
    const real *slab = go->data;
    for (int i = 0; i < c->n_in; i++) {
        const trit_tensor *gi = c->gin[i];
        const int64_t len = c->in[i]->shape[a->axis];
        if (gi) R(trit_kernel_strided_add)(gi->data, gi->strides, slab, go->strides, gi->ndim, gi->shape);
        slab += len * go->strides[a->axis];
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_concat) = {
    .name = "concat",
    .infer = concat_infer,
    .forward = concat_forward,
    .backward = concat_backward,
    .attr_size = sizeof(trit_concat_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_concat(trit_graph *g, int n, trit_tensor *const *xs, int axis) {
    if (n < 1 || n > TRIT_OP_MAX_IN || !xs || !xs[0]) {
        trit_error(TRIT_ERR_INVALID, "concat: expected 1 to %d non-NULL tensors, got n = %d%s", TRIT_OP_MAX_IN, n,
                   xs && n >= 1 && !xs[0] ? " with a NULL first tensor" : "");
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    const int nd = xs[0]->ndim;
    trit_concat_attr a = {.axis = axis < 0 ? axis + nd : axis};
    if (a.axis < 0 || a.axis >= nd) {
        trit_error(TRIT_ERR_INVALID, "concat: axis %d out of range for %d-d tensors", axis, nd);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    return TRIT_APPLY(g, trit_op_concat, n, xs, &a);
}

#endif
