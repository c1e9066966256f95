// bias_gelu: out = gelu(h + b) in one pass, for the linear -> gelu of a transformer MLP (the
// linear then skips its bias). Backward computes the slope once per element and feeds both
// dh and the bias gradient's column sums; threads split the columns and add rows in order, so
// db does not depend on the thread count. The loops are the GELU kernels of kernels/rowops.h
// (the tanh form of ops/unary.c with its exact slope; vectorized for f32, the reference for f64).
#include "ops/fused.h"

#include "ops/op_build.h"
#include "kernels/rowops.h"
#include "ops/row_blocks.h"

#include <string.h>

// h and the output may be 16-bit (a graph with 16-bit activations) in the f32 build: the rows
// go through f32 copies in scratch, ROWS at a time, blocks in parallel (ops/row_blocks.h), so
// the f32 kernels run them. Backward's bias gradient takes each block's column sums in a row of
// its own and adds the rows in block order: the same sums, in the same order, as one pass.

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

static int64_t bg_rows(const trit_op_call *c) {
    const int64_t N = bg_N(c);
    return N > 0 ? trit_tensor_numel(c->in[0]) / N : 0;
}

// Per slot: forward's f32 input and output blocks; backward's input block. Backward's per-block
// bias-gradient rows (blocks, N) follow the slots.
static size_t bg_slot_bytes(const trit_op_call *c) { return 2 * sizeof(float) * (size_t)(ROWS * bg_N(c)); }
static size_t bg_slots_bytes(const trit_op_call *c) { return trit_row_blocks_scratch(bg_rows(c), ROWS, bg_slot_bytes(c)); }

static size_t bias_gelu_scratch(const trit_op_call *c) {
    if (!is_lowp(c)) return 0;
    return bg_slots_bytes(c) + sizeof(float) * (size_t)(trit_row_blocks_count(bg_rows(c), ROWS) * bg_N(c));
}

#ifndef TRIT_REAL_F64
// rows [r0, r0 + n) of t (rows of N values, any float dtype) as f32 in dst.
static void widen_rows(float *dst, const trit_tensor *t, int64_t r0, int64_t n, int64_t N) {
    trit_dtype_traits_of(t->dtype)->to_f32(dst, (const char *)trit_tensor_ptr(t) + trit_dtype_nbytes(t->dtype, r0 * N),
                                           n * N, NULL, r0 * N);
}

static void forward_block(const trit_op_call *c, int64_t r0, int64_t n, int64_t block, void *slot) {
    (void)block;
    const int64_t N = bg_N(c);
    float *x = slot, *y = x + ROWS * N;  // (n, N) each
    widen_rows(x, c->in[0], r0, n, N);
    trit_kernel_gelu_fwd_f32(y, x, trit_tensor_ptr(c->in[1]), n, N);
    trit_dtype_traits_of(c->out->dtype)->from_f32((char *)c->out->data + trit_dtype_nbytes(c->out->dtype, r0 * N), y,
                                                   n * N, NULL, r0 * N);
}

static void backward_block(const trit_op_call *c, int64_t r0, int64_t n, int64_t block, void *slot) {
    const int64_t N = bg_N(c);
    float *x = slot;  // (n, N)
    float *db = c->gin[1] ? (float *)((char *)c->scratch + bg_slots_bytes(c)) + block * N : NULL;  // (N)
    if (db) memset(db, 0, sizeof(float) * (size_t)N);
    widen_rows(x, c->in[0], r0, n, N);
    trit_kernel_gelu_bwd_f32(c->gin[0] ? (float *)c->gin[0]->data + r0 * N : NULL, db, x, trit_tensor_ptr(c->in[1]),
                             (const float *)c->gout->data + r0 * N, n, N);
}
#endif

static trit_status bias_gelu_forward(const trit_op_call *c) {
    const int64_t N = bg_N(c), rows = bg_rows(c);
    const real *h = trit_tensor_ptr(c->in[0]), *b = trit_tensor_ptr(c->in[1]);  // (rows, N), (N)
    if (!is_lowp(c)) {
        R(trit_kernel_gelu_fwd)((real *)c->out->data, h, b, rows, N);  // (rows, N)
        return TRIT_OK;
    }
#ifndef TRIT_REAL_F64
    trit_row_blocks_run(c, rows, N, ROWS, bg_slot_bytes(c), forward_block);
#endif
    return TRIT_OK;
}

static trit_status bias_gelu_backward(const trit_op_call *c) {
    const int64_t N = bg_N(c), rows = bg_rows(c);
    if (N == 0 || rows == 0) return TRIT_OK;
    real *dh = c->gin[0] ? c->gin[0]->data : NULL;
    real *db = c->gin[1] ? c->gin[1]->data : NULL;
    const real *h = trit_tensor_ptr(c->in[0]), *b = trit_tensor_ptr(c->in[1]);  // (rows, N), (N)
    if (!dh && !db) return TRIT_OK;
    if (!is_lowp(c)) {
        R(trit_kernel_gelu_bwd)(dh, db, h, b, c->gout->data, rows, N);
        return TRIT_OK;
    }
#ifndef TRIT_REAL_F64
    trit_row_blocks_run(c, rows, N, ROWS, bg_slot_bytes(c), backward_block);
    if (db) {
        const float *part = (const float *)((char *)c->scratch + bg_slots_bytes(c));  // (blocks, N)
        const int64_t nb = trit_row_blocks_count(rows, ROWS);
        for (int64_t k = 0; k < nb; k++)
            for (int64_t j = 0; j < N; j++) db[j] += part[k * N + j];
    }
#endif
    return TRIT_OK;
}

const trit_op_def R(trit_op_bias_gelu) = {
    .name = "bias_gelu",
    .bwd_unread = TRIT_OUT,
    .bwd_in_place = true,  // the GELU kernels store when dh is the output's gradient itself
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
