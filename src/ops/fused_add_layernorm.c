// add_layernorm: the residual add and the layernorm that reads it, in one pass per row.
// out (2, ..., C): out[0] = s = x + r (the residual stream, still needed downstream) and
// out[1] = layernorm(s) with the statistics of ops/norm.c (double, two passes, biased
// variance, eps inside the sqrt), saved per row as (mean, rstd). Backward, per row:
//   sh = (s - mean) * rstd,  g = gout[1] * w
//   ds = gout[0] + rstd * (g - mean(g) - sh * mean(g * sh)),  dx += ds,  dr += ds
// and dw, db are column sums over rows that threads split by columns, adding rows in order, so
// the sums do not depend on the thread count. The row loops are the norm kernels of
// kernels/rowops.h (vectorized for f32, the reference for f64).
#include "ops/fused.h"

#include "ops/op_build.h"
#include "kernels/rowops.h"

#include <math.h>
#include <string.h>

static trit_status add_layernorm_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_add_layernorm_attr *a = attr;
    const trit_tensor *x = in[0], *r = in[1];
    char s1[128], s2[128];
    const int want = 2 + (a->has_weight ? 1 : 0) + (a->has_bias ? 1 : 0);
    if (n_in != want)
        return trit_error(TRIT_ERR_INVALID, "add_layernorm: expected %d inputs (x, r%s%s), got %d", want,
                          a->has_weight ? ", w" : "", a->has_bias ? ", b" : "", n_in);
    if (!(a->eps >= 0 && isfinite(a->eps)))
        return trit_error(TRIT_ERR_INVALID, "add_layernorm: eps must be finite and >= 0, got %g", a->eps);
    for (int i = 0; i < n_in; i++)
        if (in[i]->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "add_layernorm: expected %s inputs (the graph's compute dtype), input %d is %s",
                              trit_dtype_name(TRIT_REAL_DTYPE), i, trit_dtype_name(in[i]->dtype));
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1 || x->ndim >= TRIT_MAX_DIMS)
        return trit_error(TRIT_ERR_SHAPE, "add_layernorm: expected x (..., C) with C >= 1 and at most %d dims, got %s",
                          TRIT_MAX_DIMS - 1, trit_tensor_shape_str(x, s1, sizeof s1));
    if (!trit_tensor_same_shape(x, r))
        return trit_error(TRIT_ERR_SHAPE, "add_layernorm: expected x and r of the same shape (no broadcasting), got %s and %s",
                          trit_tensor_shape_str(x, s1, sizeof s1), trit_tensor_shape_str(r, s2, sizeof s2));
    const int64_t C = x->shape[x->ndim - 1];
    for (int i = 2; i < n_in; i++)
        if (in[i]->ndim != 1 || in[i]->shape[0] != C)
            return trit_error(TRIT_ERR_SHAPE, "add_layernorm: expected weight and bias of shape (%lld) for x %s, got %s",
                              (long long)C, trit_tensor_shape_str(x, s1, sizeof s1),
                              trit_tensor_shape_str(in[i], s2, sizeof s2));
    int64_t shape[TRIT_MAX_DIMS];
    shape[0] = 2;
    memcpy(shape + 1, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, x->ndim + 1, shape);
}

static int64_t aln_C(const trit_op_call *c) { return c->in[0]->shape[c->in[0]->ndim - 1]; }
static int64_t aln_rows(const trit_op_call *c) { return trit_tensor_numel(c->in[0]) / aln_C(c); }
static size_t aln_saved_bytes(const trit_op_call *c) { return sizeof(double) * 2 * (size_t)aln_rows(c); }

static const real *aln_weight(const trit_op_call *c) {
    const trit_add_layernorm_attr *a = c->attr;
    return a->has_weight ? trit_tensor_ptr(c->in[2]) : NULL;
}

static const real *aln_bias(const trit_op_call *c) {
    const trit_add_layernorm_attr *a = c->attr;
    return a->has_bias ? trit_tensor_ptr(c->in[2 + a->has_weight]) : NULL;
}

static trit_status add_layernorm_forward(const trit_op_call *c) {
    const trit_add_layernorm_attr *a = c->attr;
    const int64_t C = aln_C(c), rows = aln_rows(c);
    const real *x = trit_tensor_ptr(c->in[0]), *r = trit_tensor_ptr(c->in[1]);  // (rows, C)
    const real *w = aln_weight(c), *b = aln_bias(c);                          // (C)
    real *s = c->out->data, *y = s + rows * C;                                // (rows, C) each
    double *stats = c->saved;                                                 // (rows, 2)
    R(trit_kernel_norm_fwd)(y, stats, s, x, r, w, b, rows, C, a->eps, true);
    return TRIT_OK;
}

static trit_status add_layernorm_backward(const trit_op_call *c) {
    const trit_add_layernorm_attr *a = c->attr;
    const int64_t C = aln_C(c), rows = aln_rows(c);
    if (rows == 0) return TRIT_OK;
    const real *s = c->out->data;                         // (rows, C): the saved sum x + r
    const real *g0 = c->gout->data, *g1 = g0 + rows * C;  // (rows, C) each
    real *dx = c->gin[0] ? c->gin[0]->data : NULL, *dr = c->gin[1] ? c->gin[1]->data : NULL;
    // The kernel stores both gradients or adds to both: where only one is to be stored, that one
    // is zeroed and both are added to.
    const uint32_t asked = (dx ? TRIT_IN(0) : 0) | (dr ? TRIT_IN(1) : 0), st = c->store_inputs & asked;
    if (st && st != asked) trit_op_zero_stored(c, st == TRIT_IN(0) ? 0 : 1);
    if (dx || dr) R(trit_kernel_norm_bwd_x)(dx, dr, s, g1, g0, aln_weight(c), c->saved, rows, C, true, st && st == asked);
    real *dw = a->has_weight && c->gin[2] ? c->gin[2]->data : NULL;
    real *db = a->has_bias && c->gin[2 + a->has_weight] ? c->gin[2 + a->has_weight]->data : NULL;
    if (dw || db) R(trit_kernel_norm_bwd_params)(dw, db, s, g1, c->saved, rows, C);
    return TRIT_OK;
}

const trit_op_def R(trit_op_add_layernorm) = {
    .name = "add_layernorm",
    .bwd_unread = TRIT_IN(0) | TRIT_IN(1),
    .bwd_stores = TRIT_IN(0) | TRIT_IN(1),
    .infer = add_layernorm_infer,
    .forward = add_layernorm_forward,
    .backward = add_layernorm_backward,
    .saved_bytes = aln_saved_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2) | TRIT_IN(3),
    .attr_size = sizeof(trit_add_layernorm_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_add_layernorm(trit_graph *g, trit_tensor *x, trit_tensor *r, trit_tensor *w, trit_tensor *b,
                                double eps) {
    if (!trit_graph_eps_ok(g, "add_layernorm", eps)) return NULL;
    trit_add_layernorm_attr a = {.eps = eps, .has_weight = w != NULL, .has_bias = b != NULL};
    trit_tensor *in[4] = {x, r};
    int n = 2;
    if (w) in[n++] = w;
    if (b) in[n++] = b;
    return TRIT_APPLY(g, trit_op_add_layernorm, n, in, &a);
}

#endif
