// Layernorm and rmsnorm over the last dim C. Statistics are computed in double from the stored
// values (two passes for the variance), whatever the compute dtype, and saved per row as
// (mean, rstd) for backward; rmsnorm saves a mean of 0, so both share one backward:
//   xhat = (x - mean) * rstd,  g = dy * w
//   layernorm: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//   rmsnorm:   dx = rstd * (g - xhat * mean(g * xhat))
// Weight and bias gradients are sums over rows; threads split the columns and add rows in
// order, so the sums do not depend on the thread count. The row loops are the kernels of
// kernels/rowops.h (vectorized for f32, the reference for f64).
#include "ops/norm.h"

#include "ops/op_build.h"
#include "ops/row_blocks.h"
#include "kernels/rowops.h"
#include "trit/ops.h"

#include <math.h>

static trit_status norm_infer(const char *name, const trit_tensor *const *in, int n_in, trit_tensor *out) {
    const trit_tensor *x = in[0];
    char a[128], b[128];
    for (int i = 0; i < n_in; i++)
        if (in[i]->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "%s: expected %s inputs (the graph's compute dtype), input %d is %s", name,
                              trit_dtype_name(TRIT_REAL_DTYPE), i, trit_dtype_name(in[i]->dtype));
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1)
        return trit_error(TRIT_ERR_SHAPE, "%s: expected x (..., C) with C >= 1, got %s", name,
                          trit_tensor_shape_str(x, a, sizeof a));
    const int64_t C = x->shape[x->ndim - 1];
    for (int i = 1; i < n_in; i++)
        if (in[i]->ndim != 1 || in[i]->shape[0] != C)
            return trit_error(TRIT_ERR_SHAPE, "%s: expected weight and bias of shape (%lld) for x %s, got %s", name,
                              (long long)C, trit_tensor_shape_str(x, a, sizeof a), trit_tensor_shape_str(in[i], b, sizeof b));
    return trit_tensor_init_layout(out, x->dtype, x->ndim, x->shape);
}

static size_t norm_scratch_bytes(const trit_op_call *c);

static trit_status layernorm_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    return norm_infer("layernorm", in, n_in, out);
}

static trit_status rmsnorm_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    return norm_infer("rmsnorm", in, n_in, out);
}

static int64_t norm_C(const trit_op_call *c) { return c->in[0]->shape[c->in[0]->ndim - 1]; }
static int64_t norm_rows(const trit_op_call *c) { return trit_tensor_numel(c->in[0]) / norm_C(c); }
static size_t norm_saved_bytes(const trit_op_call *c) { return sizeof(double) * 2 * (size_t)norm_rows(c); }

enum { NORM_ROWS = 64 };  // rows per block of a 16-bit output

// A 16-bit output (a graph with 16-bit activations, f32 build only) is written from fp32 rows
// computed NORM_ROWS at a time in a thread's scratch slot (ops/row_blocks.h); each row's
// statistics are the same either way.
static size_t norm_scratch_bytes(const trit_op_call *c) {
    if (!c->out || !trit_op_lowp_ok(c->out->dtype)) return 0;
    return trit_row_blocks_scratch(norm_rows(c), NORM_ROWS, sizeof(float) * (size_t)(NORM_ROWS * norm_C(c)));
}

#ifndef TRIT_REAL_F64
static void norm_forward_block(const trit_op_call *c, int64_t r0, int64_t n, void *slot, bool center) {
    const trit_norm_attr *a = c->attr;
    const float *x = trit_tensor_ptr(c->in[0]);                         // (rows, C)
    const float *w = a->has_weight ? trit_tensor_ptr(c->in[1]) : NULL;  // (C)
    const float *b = a->has_bias ? trit_tensor_ptr(c->in[1 + a->has_weight]) : NULL;  // (C)
    const int64_t C = norm_C(c);
    float *y = slot;  // (n, C)
    trit_kernel_norm_fwd_f32(y, (double *)c->saved + 2 * r0, NULL, x + r0 * C, NULL, w, b, n, C, a->eps, center);
    trit_dtype_traits_of(c->out->dtype)->from_f32((char *)c->out->data + trit_dtype_nbytes(c->out->dtype, r0 * C), y,
                                                   n * C, NULL, r0 * C);
}
static void layernorm_block(const trit_op_call *c, int64_t r0, int64_t n, int64_t block, void *slot) {
    (void)block;
    norm_forward_block(c, r0, n, slot, true);
}
static void rmsnorm_block(const trit_op_call *c, int64_t r0, int64_t n, int64_t block, void *slot) {
    (void)block;
    norm_forward_block(c, r0, n, slot, false);
}
#endif

// y = xhat * w + b over rows; stats: (rows, 2) receives (mean, rstd).
static void norm_forward_rows(const trit_op_call *c, bool center) {
    const trit_norm_attr *a = c->attr;
    const real *x = trit_tensor_ptr(c->in[0]);                         // (rows, C)
    const real *w = a->has_weight ? trit_tensor_ptr(c->in[1]) : NULL;  // (C)
    const real *b = a->has_bias ? trit_tensor_ptr(c->in[1 + a->has_weight]) : NULL;  // (C)
    const int64_t rows = norm_rows(c), C = norm_C(c);
    if (!trit_op_lowp_ok(c->out->dtype)) {
        R(trit_kernel_norm_fwd)(c->out->data, c->saved, NULL, x, NULL, w, b, rows, C, a->eps, center);
        return;
    }
#ifndef TRIT_REAL_F64
    trit_row_blocks_run(c, rows, C, NORM_ROWS, sizeof(float) * (size_t)(NORM_ROWS * C),
                        center ? layernorm_block : rmsnorm_block);
#endif
}

static trit_status layernorm_forward(const trit_op_call *c) {
    norm_forward_rows(c, true);
    return TRIT_OK;
}

static trit_status rmsnorm_forward(const trit_op_call *c) {
    norm_forward_rows(c, false);
    return TRIT_OK;
}

static trit_status norm_backward(const trit_op_call *c, bool center) {
    const trit_norm_attr *a = c->attr;
    const int64_t C = norm_C(c), rows = norm_rows(c);
    const real *x = trit_tensor_ptr(c->in[0]), *dy = c->gout->data;    // (rows, C)
    const real *w = a->has_weight ? trit_tensor_ptr(c->in[1]) : NULL;  // (C)
    if (c->gin[0])
        R(trit_kernel_norm_bwd_x)(c->gin[0]->data, NULL, x, dy, NULL, w, c->saved, rows, C, center,
                                  c->store_inputs & TRIT_IN(0));
    real *dw = a->has_weight && c->gin[1] ? c->gin[1]->data : NULL;
    real *db = a->has_bias && c->gin[1 + a->has_weight] ? c->gin[1 + a->has_weight]->data : NULL;
    if (dw || db) R(trit_kernel_norm_bwd_params)(dw, db, x, dy, c->saved, rows, C);
    return TRIT_OK;
}

static trit_status layernorm_backward(const trit_op_call *c) { return norm_backward(c, true); }
static trit_status rmsnorm_backward(const trit_op_call *c) { return norm_backward(c, false); }

const trit_op_def R(trit_op_layernorm) = {
    .name = "layernorm",
    .bwd_unread = TRIT_OUT,
    .bwd_stores = TRIT_IN(0),
    .infer = layernorm_infer,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
    .saved_bytes = norm_saved_bytes,
    .scratch_bytes = norm_scratch_bytes,
    .lowp_output = true,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2),
    .attr_size = sizeof(trit_norm_attr),
};

const trit_op_def R(trit_op_rmsnorm) = {
    .name = "rmsnorm",
    .bwd_unread = TRIT_OUT,
    .bwd_stores = TRIT_IN(0),
    .infer = rmsnorm_infer,
    .forward = rmsnorm_forward,
    .backward = rmsnorm_backward,
    .saved_bytes = norm_saved_bytes,
    .scratch_bytes = norm_scratch_bytes,
    .lowp_output = true,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .attr_size = sizeof(trit_norm_attr),
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_layernorm(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b, double eps) {
    if (!trit_graph_eps_ok(g, "layernorm", eps)) return NULL;
    trit_norm_attr a = {.eps = eps, .has_weight = w != NULL, .has_bias = b != NULL};
    trit_tensor *in[3] = {x};
    int n = 1;
    if (w) in[n++] = w;
    if (b) in[n++] = b;
    return TRIT_APPLY(g, trit_op_layernorm, n, in, &a);
}

trit_tensor *trit_rmsnorm(trit_graph *g, trit_tensor *x, trit_tensor *w, double eps) {
    if (!trit_graph_eps_ok(g, "rmsnorm", eps)) return NULL;
    trit_norm_attr a = {.eps = eps, .has_weight = w != NULL};
    trit_tensor *in[2] = {x, w};
    return TRIT_APPLY(g, trit_op_rmsnorm, w ? 2 : 1, in, &a);
}

#endif
