// bias_gelu: out = gelu(h + b) in one pass, for the linear -> gelu of a transformer MLP (the
// linear then skips its bias). Backward computes the slope once per element and feeds both
// dh and the bias gradient's column sums; threads split the columns and add rows in order, so
// db does not depend on the thread count. The loops are the GELU kernels of kernels/rowops.h
// (the tanh form of ops/unary.c with its exact slope; vectorized for f32, the reference for f64).
#include "ops/fused.h"

#include "kernels/rowops.h"

static trit_status bias_gelu_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    char a[128], b[128];
    if (n_in != 2) return trit_error(TRIT_ERR_INVALID, "bias_gelu: expected 2 inputs (h, b), got %d", n_in);
    for (int i = 0; i < 2; i++)
        if (in[i]->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "bias_gelu: expected %s inputs (the graph's compute dtype), input %d is %s",
                              trit_dtype_name(TRIT_REAL_DTYPE), i, trit_dtype_name(in[i]->dtype));
    const trit_tensor *h = in[0], *bias = in[1];
    if (h->ndim < 1 || bias->ndim != 1 || bias->shape[0] != h->shape[h->ndim - 1])
        return trit_error(TRIT_ERR_SHAPE, "bias_gelu: expected h (..., N) and b (N), got h %s and b %s",
                          trit_tensor_shape_str(h, a, sizeof a), trit_tensor_shape_str(bias, b, sizeof b));
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, h->ndim, h->shape);
}

static int64_t bg_N(const trit_op_call *c) { return c->in[1]->shape[0]; }

static trit_status bias_gelu_forward(const trit_op_call *c) {
    const int64_t N = bg_N(c), numel = trit_tensor_numel(c->in[0]);
    const int64_t rows = N > 0 ? numel / N : 0;
    const real *h = trit_tensor_ptr(c->in[0]), *b = trit_tensor_ptr(c->in[1]);  // (rows, N), (N)
    real *y = c->out->data;                                                      // (rows, N)
    R(trit_kernel_gelu_fwd)(y, h, b, rows, N);
    return TRIT_OK;
}

static trit_status bias_gelu_backward(const trit_op_call *c) {
    const int64_t N = bg_N(c), numel = trit_tensor_numel(c->in[0]);
    if (N == 0 || numel == 0) return TRIT_OK;
    const int64_t rows = numel / N;
    real *dh = c->gin[0] ? c->gin[0]->data : NULL;
    real *db = c->gin[1] ? c->gin[1]->data : NULL;
    const real *h = trit_tensor_ptr(c->in[0]), *b = trit_tensor_ptr(c->in[1]);  // (rows, N), (N)
    if (dh || db) R(trit_kernel_gelu_bwd)(dh, db, h, b, c->gout->data, rows, N);
    return TRIT_OK;
}

const trit_op_def R(trit_op_bias_gelu) = {
    .name = "bias_gelu",
    .infer = bias_gelu_infer,
    .forward = bias_gelu_forward,
    .backward = bias_gelu_backward,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .attr_size = 0,
};
