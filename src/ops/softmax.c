// Softmax and log-softmax over the last dim. Rows are independent, so they are split across
// threads with no effect on the result. Each row subtracts its max before exponentiating and sums
// the exponentials in double, so logits of any magnitude give finite results. The row loops are
// the kernels of kernels/rowops.h (vectorized for f32, the reference for f64).
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "kernels/rowops.h"
#include "trit/ops.h"

// Both keep their output, which is all backward needs.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_softmax);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_log_softmax);

static trit_status rows_infer(const char *name, const trit_tensor *const *in, trit_tensor *out) {
    const trit_tensor *x = in[0];
    char buf[128];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "%s: expected a %s input (the graph's compute dtype), got %s", name,
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return trit_error(TRIT_ERR_SHAPE, "%s: expected at least 1 dim with a non-empty last dim, got shape %s", name,
                          trit_tensor_shape_str(x, buf, sizeof buf));
    return trit_tensor_init_layout(out, x->dtype, x->ndim, x->shape);
}

static trit_status softmax_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    (void)attr;
    return rows_infer("softmax", in, out);
}

static trit_status log_softmax_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    (void)attr;
    return rows_infer("log_softmax", in, out);
}

static int64_t row_len(const trit_op_call *c) { return c->out->shape[c->out->ndim - 1]; }
static int64_t n_rows(const trit_op_call *c) { return trit_tensor_numel(c->out) / row_len(c); }

// x, y: (rows, C).
static trit_status softmax_forward(const trit_op_call *c) {
    R(trit_kernel_softmax_fwd)(c->out->data, trit_tensor_ptr(c->in[0]), n_rows(c), row_len(c));
    return TRIT_OK;
}

// dx = y * (dy - sum(dy * y)), y the saved output; all (rows, C).
static trit_status softmax_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    R(trit_kernel_softmax_bwd)(c->gin[0]->data, c->out->data, c->gout->data, n_rows(c), row_len(c));
    return TRIT_OK;
}

static trit_status log_softmax_forward(const trit_op_call *c) {
    R(trit_kernel_log_softmax_fwd)(c->out->data, trit_tensor_ptr(c->in[0]), n_rows(c), row_len(c));
    return TRIT_OK;
}

// dx = dy - exp(y) * sum(dy), y the saved output; all (rows, C).
static trit_status log_softmax_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    R(trit_kernel_log_softmax_bwd)(c->gin[0]->data, c->out->data, c->gout->data, n_rows(c), row_len(c));
    return TRIT_OK;
}

const trit_op_def R(trit_op_softmax) = {
    .name = "softmax",
    .infer = softmax_infer,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .contiguous_inputs = TRIT_IN(0),
};

const trit_op_def R(trit_op_log_softmax) = {
    .name = "log_softmax",
    .infer = log_softmax_infer,
    .forward = log_softmax_forward,
    .backward = log_softmax_backward,
    .contiguous_inputs = TRIT_IN(0),
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_softmax(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_softmax, 1, &x, NULL); }

trit_tensor *trit_log_softmax(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_log_softmax, 1, &x, NULL); }

#endif
