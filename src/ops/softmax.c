// Softmax and log-softmax over the last dim. Rows are independent, so they are split across
// threads with no effect on the result. Each row subtracts its max before exponentiating and sums
// the exponentials in double, so logits of any magnitude give finite results.
#include "ops/softmax.h"

#include <math.h>

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

// Max of one row x: (C), and sum(exp(x - max)) accumulated in double (>= 1, never 0).
static real row_max_sumexp(const real *x, int64_t C, double *sum_out) {
    real m = x[0];
    for (int64_t j = 1; j < C; j++)
        if (x[j] > m) m = x[j];
    double s = 0;
    for (int64_t j = 0; j < C; j++) s += (double)REXP(x[j] - m);
    *sum_out = s;
    return m;
}

static trit_status softmax_forward(const trit_op_call *c) {
    const int64_t C = c->out->shape[c->out->ndim - 1], rows = trit_tensor_numel(c->out) / C;
    const real *x = trit_tensor_ptr(c->in[0]);  // (rows, C)
    real *y = c->out->data;                     // (rows, C)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const real *xr = x + r * C;
        real *yr = y + r * C;
        double s;
        const real m = row_max_sumexp(xr, C, &s), inv = (real)(1.0 / s);
        for (int64_t j = 0; j < C; j++) yr[j] = REXP(xr[j] - m) * inv;
    }
    return TRIT_OK;
}

// dx = y * (dy - sum(dy * y)), y the saved output.
static trit_status softmax_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const int64_t C = c->out->shape[c->out->ndim - 1], rows = trit_tensor_numel(c->out) / C;
    const real *y = c->out->data, *dy = c->gout->data;  // (rows, C)
    real *dx = c->gin[0]->data;                         // (rows, C)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const real *yr = y + r * C, *dyr = dy + r * C;
        real *dxr = dx + r * C;
        double dot = 0;
        for (int64_t j = 0; j < C; j++) dot += (double)dyr[j] * (double)yr[j];
        const real d = (real)dot;
        for (int64_t j = 0; j < C; j++) dxr[j] += yr[j] * (dyr[j] - d);
    }
    return TRIT_OK;
}

static trit_status log_softmax_forward(const trit_op_call *c) {
    const int64_t C = c->out->shape[c->out->ndim - 1], rows = trit_tensor_numel(c->out) / C;
    const real *x = trit_tensor_ptr(c->in[0]);  // (rows, C)
    real *y = c->out->data;                     // (rows, C)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const real *xr = x + r * C;
        real *yr = y + r * C;
        double s;
        const real m = row_max_sumexp(xr, C, &s), ls = (real)log(s);
        for (int64_t j = 0; j < C; j++) yr[j] = (xr[j] - m) - ls;
    }
    return TRIT_OK;
}

// dx = dy - exp(y) * sum(dy), y the saved output.
static trit_status log_softmax_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const int64_t C = c->out->shape[c->out->ndim - 1], rows = trit_tensor_numel(c->out) / C;
    const real *y = c->out->data, *dy = c->gout->data;  // (rows, C)
    real *dx = c->gin[0]->data;                         // (rows, C)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const real *yr = y + r * C, *dyr = dy + r * C;
        real *dxr = dx + r * C;
        double sum = 0;
        for (int64_t j = 0; j < C; j++) sum += (double)dyr[j];
        const real sr = (real)sum;
        for (int64_t j = 0; j < C; j++) dxr[j] += dyr[j] - REXP(yr[j]) * sr;
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_softmax) = {
    .name = "softmax",
    .infer = softmax_infer,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .contiguous_inputs = 1,
};

const trit_op_def R(trit_op_log_softmax) = {
    .name = "log_softmax",
    .infer = log_softmax_infer,
    .forward = log_softmax_forward,
    .backward = log_softmax_backward,
    .contiguous_inputs = 1,
};
