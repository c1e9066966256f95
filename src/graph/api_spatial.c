// Graph constructors for ops that mix positions: attention, concat, conv2d and pooling.
#include "graph/graph_internal.h"
#include "ops/attention.h"
#include "ops/concat.h"
#include "ops/conv2d.h"
#include "ops/pool.h"
#include "trit/ops.h"

trit_tensor *trit_attention(trit_graph *g, trit_tensor *q, trit_tensor *k, trit_tensor *v, int n_head) {
    trit_tensor *in[3] = {q, k, v};
    if (n_head < 1) {
        trit_error(TRIT_ERR_INVALID, "attention: n_head must be >= 1, got %d", n_head);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    // Views with unit-stride rows (e.g. slices of a fused qkv) are read in place; others are copied.
    for (int i = 0; i < 3; i++)
        if (in[i] && !trit_attention_layout_ok(in[i]) && !(in[i] = trit_contiguous(g, in[i]))) return NULL;
    trit_attention_attr a = {.n_head = n_head};
    return TRIT_APPLY(g, trit_op_attention, 3, in, &a);
}

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

trit_tensor *trit_conv2d(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b, int stride, int padding) {
    trit_tensor *in[3] = {x, w, b};
    trit_conv2d_attr a = {.stride = stride, .padding = padding};
    return TRIT_APPLY(g, trit_op_conv2d, b ? 3 : 2, in, &a);
}

trit_tensor *trit_maxpool2d(trit_graph *g, trit_tensor *x, int kernel, int stride, int padding) {
    trit_pool2d_attr a = {.kernel = kernel, .stride = stride, .padding = padding};
    return TRIT_APPLY(g, trit_op_maxpool2d, 1, &x, &a);
}

trit_tensor *trit_avgpool2d(trit_graph *g, trit_tensor *x, int kernel, int stride, int padding) {
    trit_pool2d_attr a = {.kernel = kernel, .stride = stride, .padding = padding};
    return TRIT_APPLY(g, trit_op_avgpool2d, 1, &x, &a);
}
