// Losses. Cross-entropy fuses log-softmax and the negative log-likelihood, so its gradient is
// (softmax - onehot) times a scale and no (rows, V) intermediate is kept: forward saves each
// row's max and log-sum-exp. Row losses and the block sums of mse and Huber are combined serially in
// a fixed order, so the loss does not depend on the thread count. The cross-entropy row loops are
// the kernels of kernels/rowops.h (vectorized for f32, the reference for f64).
#include "ops/loss.h"

#include "ops/op_build.h"
#include "kernels/rowops.h"
#include "trit/ops.h"

#include <math.h>

// ---- cross-entropy -------------------------------------------------------------------------

static trit_status ce_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    (void)attr;
    const trit_tensor *x = in[0], *t = in[1];
    char a[128], b[128];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "cross_entropy: expected %s logits (the graph's compute dtype), got %s",
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (t->dtype != TRIT_I32 && t->dtype != TRIT_I64)
        return trit_error(TRIT_ERR_DTYPE, "cross_entropy: expected i32 or i64 class indices as targets, got %s",
                          trit_dtype_name(t->dtype));
    bool ok = x->ndim >= 1 && x->shape[x->ndim - 1] >= 1 && t->ndim == x->ndim - 1;
    for (int i = 0; ok && i < t->ndim; i++) ok = t->shape[i] == x->shape[i];
    if (!ok)
        return trit_error(TRIT_ERR_SHAPE,
                          "cross_entropy: expected logits (..., V) with V >= 1 and targets (...), got logits %s and targets %s",
                          trit_tensor_shape_str(x, a, sizeof a), trit_tensor_shape_str(t, b, sizeof b));
    return trit_tensor_init_layout(out, x->dtype, 0, NULL);
}

static int64_t ce_rows(const trit_op_call *c) { return trit_tensor_numel(c->in[1]); }

// Per row: the max and log(sum(exp(x - max))); then the count of non-ignored rows.
static size_t ce_saved_bytes(const trit_op_call *c) { return sizeof(double) * (size_t)(2 * ce_rows(c) + 1); }
static size_t ce_scratch_bytes(const trit_op_call *c) { return sizeof(double) * (size_t)ce_rows(c); }

static trit_status ce_forward(const trit_op_call *c) {
    const trit_cross_entropy_attr *a = c->attr;
    const trit_tensor *tt = c->in[1];
    const int64_t V = c->in[0]->shape[c->in[0]->ndim - 1], rows = ce_rows(c);
    const real *x = trit_tensor_ptr(c->in[0]);  // (rows, V)
    double *stats = c->saved;                   // (rows, 2) then the count
    double *row_loss = c->scratch;              // (rows)
    const int64_t count = trit_ce_count_targets("cross_entropy", tt, V, a->ignore_index);
    if (count < 0) return TRIT_ERR_RANGE;
    R(trit_kernel_ce_fwd)(stats, row_loss, x, trit_tensor_ptr(tt), tt->dtype == TRIT_I64, a->ignore_index, rows, V);
    double total = 0;
    for (int64_t r = 0; r < rows; r++) total += row_loss[r];
    stats[2 * rows] = (double)count;
    if (a->reduction == TRIT_REDUCE_MEAN) total = count > 0 ? total / (double)count : 0.0;
    *(real *)c->out->data = (real)total;
    return TRIT_OK;
}

// d loss / d x[r, j] = scale * (softmax(x_r)[j] - [j == t_r]) on non-ignored rows.
static trit_status ce_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const trit_cross_entropy_attr *a = c->attr;
    const trit_tensor *tt = c->in[1];
    const int64_t V = c->in[0]->shape[c->in[0]->ndim - 1], rows = ce_rows(c);
    const real *x = trit_tensor_ptr(c->in[0]);  // (rows, V)
    const double *stats = c->saved;
    real *dx = c->gin[0]->data;  // (rows, V)
    const double count = stats[2 * rows];
    if (count == 0) return TRIT_OK;  // every row ignored: the loss is a constant 0
    const double go = (double)*(const real *)c->gout->data;
    const real scale = (real)(a->reduction == TRIT_REDUCE_MEAN ? go / count : go);
    R(trit_kernel_ce_bwd)(dx, x, stats, trit_tensor_ptr(tt), tt->dtype == TRIT_I64, a->ignore_index, scale, rows, V);
    return TRIT_OK;
}

const trit_op_def R(trit_op_cross_entropy) = {
    .name = "cross_entropy",
    .infer = ce_infer,
    .forward = ce_forward,
    .backward = ce_backward,
    .saved_bytes = ce_saved_bytes,
    .scratch_bytes = ce_scratch_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .no_grad_inputs = TRIT_IN(1),
    .attr_size = sizeof(trit_cross_entropy_attr),
};

// ---- mean squared error --------------------------------------------------------------------

// Elements per partial sum: the partials are added in block order, whatever the threads.
#define MSE_BLOCK 8192

static trit_status mse_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    (void)attr;
    const trit_tensor *p = in[0], *t = in[1];
    char a[128], b[128];
    if (p->dtype != TRIT_REAL_DTYPE || t->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "mse: expected %s pred and target (the graph's compute dtype), got %s and %s",
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(p->dtype), trit_dtype_name(t->dtype));
    if (!trit_tensor_same_shape(p, t))
        return trit_error(TRIT_ERR_SHAPE, "mse: expected pred and target of the same shape, got %s and %s",
                          trit_tensor_shape_str(p, a, sizeof a), trit_tensor_shape_str(t, b, sizeof b));
    return trit_tensor_init_layout(out, p->dtype, 0, NULL);
}

static int64_t mse_blocks(const trit_op_call *c) { return (trit_tensor_numel(c->in[0]) + MSE_BLOCK - 1) / MSE_BLOCK; }
static size_t mse_scratch_bytes(const trit_op_call *c) { return sizeof(double) * (size_t)mse_blocks(c); }

static trit_status mse_forward(const trit_op_call *c) {
    const trit_mse_attr *a = c->attr;
    const int64_t n = trit_tensor_numel(c->in[0]), nb = mse_blocks(c);
    const real *p = trit_tensor_ptr(c->in[0]), *t = trit_tensor_ptr(c->in[1]);  // (n)
    double *part = c->scratch;                                                  // (nb)
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t end = (b + 1) * MSE_BLOCK < n ? (b + 1) * MSE_BLOCK : n;
        double s = 0;
        for (int64_t i = b * MSE_BLOCK; i < end; i++) {
            const double d = (double)p[i] - (double)t[i];
            s += d * d;
        }
        part[b] = s;
    }
    double total = 0;
    for (int64_t b = 0; b < nb; b++) total += part[b];
    if (a->reduction == TRIT_REDUCE_MEAN && n > 0) total /= (double)n;
    *(real *)c->out->data = (real)total;
    return TRIT_OK;
}

// d/dp = 2 (p - t) * scale, d/dt = -d/dp.
static trit_status mse_backward(const trit_op_call *c) {
    const trit_mse_attr *a = c->attr;
    const int64_t n = trit_tensor_numel(c->in[0]);
    const real *p = trit_tensor_ptr(c->in[0]), *t = trit_tensor_ptr(c->in[1]);  // (n)
    real *dp = c->gin[0] ? c->gin[0]->data : NULL, *dt = c->gin[1] ? c->gin[1]->data : NULL;
    const double go = (double)*(const real *)c->gout->data;
    const real k = (real)(2.0 * (a->reduction == TRIT_REDUCE_MEAN && n > 0 ? go / (double)n : go));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const real g = k * (p[i] - t[i]);
        if (dp) dp[i] += g;
        if (dt) dt[i] -= g;
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_mse) = {
    .name = "mse",
    .infer = mse_infer,
    .forward = mse_forward,
    .backward = mse_backward,
    .scratch_bytes = mse_scratch_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .attr_size = sizeof(trit_mse_attr),
};

// ---- Huber ---------------------------------------------------------------------------------
// PyTorch's HuberLoss: per element d = p - t, 0.5 d^2 where |d| <= delta, else
// delta (|d| - 0.5 delta); the gradient is d clipped to [-delta, delta]. Summed like mse.

static trit_status huber_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    const trit_huber_attr *a = attr;
    const trit_tensor *p = in[0], *t = in[1];
    char s0[128], s1[128];
    if (p->dtype != TRIT_REAL_DTYPE || t->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "huber: expected %s pred and target (the graph's compute dtype), got %s and %s",
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(p->dtype), trit_dtype_name(t->dtype));
    if (!trit_tensor_same_shape(p, t))
        return trit_error(TRIT_ERR_SHAPE, "huber: expected pred and target of the same shape, got %s and %s",
                          trit_tensor_shape_str(p, s0, sizeof s0), trit_tensor_shape_str(t, s1, sizeof s1));
    if (!(a->delta > 0 && isfinite(a->delta)))
        return trit_error(TRIT_ERR_INVALID, "huber: delta must be finite and > 0, got %g (PyTorch's default is 1)", a->delta);
    return trit_tensor_init_layout(out, p->dtype, 0, NULL);
}

static trit_status huber_forward(const trit_op_call *c) {
    const trit_huber_attr *a = c->attr;
    const int64_t n = trit_tensor_numel(c->in[0]), nb = mse_blocks(c);
    const real *p = trit_tensor_ptr(c->in[0]), *t = trit_tensor_ptr(c->in[1]);  // (n)
    double *part = c->scratch;                                                  // (nb)
    const double delta = a->delta;
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t end = (b + 1) * MSE_BLOCK < n ? (b + 1) * MSE_BLOCK : n;
        double s = 0;
        for (int64_t i = b * MSE_BLOCK; i < end; i++) {
            const double d = fabs((double)p[i] - (double)t[i]);
            s += d <= delta ? 0.5 * d * d : delta * (d - 0.5 * delta);
        }
        part[b] = s;
    }
    double total = 0;
    for (int64_t b = 0; b < nb; b++) total += part[b];
    if (a->reduction == TRIT_REDUCE_MEAN && n > 0) total /= (double)n;
    *(real *)c->out->data = (real)total;
    return TRIT_OK;
}

static trit_status huber_backward(const trit_op_call *c) {
    const trit_huber_attr *a = c->attr;
    const int64_t n = trit_tensor_numel(c->in[0]);
    const real *p = trit_tensor_ptr(c->in[0]), *t = trit_tensor_ptr(c->in[1]);  // (n)
    real *dp = c->gin[0] ? c->gin[0]->data : NULL, *dt = c->gin[1] ? c->gin[1]->data : NULL;
    const double go = (double)*(const real *)c->gout->data;
    const double k = a->reduction == TRIT_REDUCE_MEAN && n > 0 ? go / (double)n : go, delta = a->delta;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)p[i] - (double)t[i];
        const real g = (real)(k * (d < -delta ? -delta : d > delta ? delta : d));
        if (dp) dp[i] += g;
        if (dt) dt[i] -= g;
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_huber) = {
    .name = "huber",
    .infer = huber_infer,
    .forward = huber_forward,
    .backward = huber_backward,
    .scratch_bytes = mse_scratch_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .bwd_unread = TRIT_OUT,
    .attr_size = sizeof(trit_huber_attr),
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_cross_entropy(trit_graph *g, trit_tensor *logits, trit_tensor *targets, int64_t ignore_index,
                                trit_reduction red) {
    if (!trit_graph_reduction_ok(g, "cross_entropy", red)) return NULL;
    trit_cross_entropy_attr a = {.ignore_index = ignore_index, .reduction = (int)red};
    trit_tensor *in[2] = {logits, targets};
    return TRIT_APPLY(g, trit_op_cross_entropy, 2, in, &a);
}

trit_tensor *trit_mse(trit_graph *g, trit_tensor *pred, trit_tensor *target, trit_reduction red) {
    if (!trit_graph_reduction_ok(g, "mse", red)) return NULL;
    trit_mse_attr a = {.reduction = (int)red};
    trit_tensor *in[2] = {pred, target};
    return TRIT_APPLY(g, trit_op_mse, 2, in, &a);
}

trit_tensor *trit_huber(trit_graph *g, trit_tensor *pred, trit_tensor *target, double delta, trit_reduction red) {
    if (!trit_graph_reduction_ok(g, "huber", red)) return NULL;
    trit_huber_attr a = {.delta = delta, .reduction = (int)red};
    trit_tensor *in[2] = {pred, target};
    return TRIT_APPLY(g, trit_op_huber, 2, in, &a);
}

#endif
