// bias_gelu: out = gelu(h + b) in one pass, for the linear -> gelu of a transformer MLP (the
// linear then skips its bias). Backward computes the slope once per element and feeds both
// dh and the bias gradient's column sums; threads split the columns and add rows in order, so
// db does not depend on the thread count. The loops are the GELU kernels of kernels/rowops.h
// (the tanh form of ops/unary.c with its exact slope; vectorized for f32, the reference for f64).
#include "ops/fused.h"

#include "ops/op_build.h"
#include "kernels/rowops.h"

// h and the output may be 16-bit (a graph with 16-bit activations) in the f32 build: the rows
// go through f32 copies in scratch, ROWS at a time, so the f32 kernels run them.

enum { ROWS = 128 };

static trit_status bias_gelu_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    char a[128], b[128];
    if (n_in != 2) return trit_error(TRIT_ERR_INVALID, "bias_gelu: expected 2 inputs (h, b), got %d", n_in);
    for (int i = 0; i < 2; i++)
        if (in[i]->dtype != TRIT_REAL_DTYPE && !(i == 0 && trit_op_lowp_ok(in[i]->dtype)))
            return trit_error(TRIT_ERR_DTYPE, "bias_gelu: expected %s inputs (h may be bf16/f16 in an f32 graph), input "
                              "%d is %s", trit_dtype_name(TRIT_REAL_DTYPE), i, trit_dtype_name(in[i]->dtype));
    const trit_tensor *h = in[0], *bias = in[1];
    if (h->ndim < 1 || bias->ndim != 1 || bias->shape[0] != h->shape[h->ndim - 1])
        return trit_error(TRIT_ERR_SHAPE, "bias_gelu: expected h (..., N) and b (N), got h %s and b %s",
                          trit_tensor_shape_str(h, a, sizeof a), trit_tensor_shape_str(bias, b, sizeof b));
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, h->ndim, h->shape);
}

static int64_t bg_N(const trit_op_call *c) { return c->in[1]->shape[0]; }

static bool is_lowp(const trit_op_call *c) { return trit_op_lowp_ok(c->in[0]->dtype) || trit_op_lowp_ok(c->out->dtype); }

static size_t bias_gelu_scratch(const trit_op_call *c) {
    return is_lowp(c) ? 2 * sizeof(float) * (size_t)(ROWS * bg_N(c)) : 0;
}

#ifndef TRIT_REAL_F64
// rows [r0, r0 + n) of t (rows of N values, any float dtype) as f32 in dst.
static void widen_rows(float *dst, const trit_tensor *t, int64_t r0, int64_t n, int64_t N) {
    trit_dtype_traits_of(t->dtype)->to_f32(dst, (const char *)trit_tensor_ptr(t) + trit_dtype_nbytes(t->dtype, r0 * N),
                                           n * N, NULL, r0 * N);
}
#endif

static trit_status bias_gelu_forward(const trit_op_call *c) {
    const int64_t N = bg_N(c), numel = trit_tensor_numel(c->in[0]);
    const int64_t rows = N > 0 ? numel / N : 0;
    const real *h = trit_tensor_ptr(c->in[0]), *b = trit_tensor_ptr(c->in[1]);  // (rows, N), (N)
    if (!is_lowp(c)) {
        R(trit_kernel_gelu_fwd)((real *)c->out->data, h, b, rows, N);  // (rows, N)
        return TRIT_OK;
    }
#ifndef TRIT_REAL_F64
    float *x = c->scratch, *y = x + ROWS * N;  // (ROWS, N) each
    const trit_dtype_traits *out = trit_dtype_traits_of(c->out->dtype);
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS) {
        const int64_t n = rows - r0 < ROWS ? rows - r0 : ROWS;
        widen_rows(x, c->in[0], r0, n, N);
        trit_kernel_gelu_fwd_f32(y, x, b, n, N);
        out->from_f32((char *)c->out->data + trit_dtype_nbytes(c->out->dtype, r0 * N), y, n * N, NULL, r0 * N);
    }
#endif
    return TRIT_OK;
}

static trit_status bias_gelu_backward(const trit_op_call *c) {
    const int64_t N = bg_N(c), numel = trit_tensor_numel(c->in[0]);
    if (N == 0 || numel == 0) return TRIT_OK;
    const int64_t rows = numel / N;
    real *dh = c->gin[0] ? c->gin[0]->data : NULL;
    real *db = c->gin[1] ? c->gin[1]->data : NULL;
    const real *h = trit_tensor_ptr(c->in[0]), *b = trit_tensor_ptr(c->in[1]);  // (rows, N), (N)
    if (!dh && !db) return TRIT_OK;
    if (!is_lowp(c)) {
        R(trit_kernel_gelu_bwd)(dh, db, h, b, c->gout->data, rows, N);
        return TRIT_OK;
    }
#ifndef TRIT_REAL_F64
    // Blocks of rows: db receives each block's column sums in block order.
    float *x = c->scratch;  // (ROWS, N)
    const real *g = c->gout->data;
    for (int64_t r0 = 0; r0 < rows; r0 += ROWS) {
        const int64_t n = rows - r0 < ROWS ? rows - r0 : ROWS;
        widen_rows(x, c->in[0], r0, n, N);
        trit_kernel_gelu_bwd_f32(dh ? dh + r0 * N : NULL, db, x, b, g + r0 * N, n, N);
    }
#endif
    return TRIT_OK;
}

const trit_op_def R(trit_op_bias_gelu) = {
    .name = "bias_gelu",
    .infer = bias_gelu_infer,
    .forward = bias_gelu_forward,
    .backward = bias_gelu_backward,
    .scratch_bytes = bias_gelu_scratch,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .lowp_inputs = TRIT_IN(0),
    .lowp_output = true,
    .attr_size = 0,
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_bias_gelu(trit_graph *g, trit_tensor *h, trit_tensor *b) {
    trit_tensor *in[2] = {h, b};
    return TRIT_APPLY(g, trit_op_bias_gelu, 2, in, NULL);
}

#endif
