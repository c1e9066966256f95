// bias_gelu: out = gelu(h + b) in one pass, for the linear -> gelu of a transformer MLP (the
// linear then skips its bias). Backward computes the slope once per element and feeds both
// dh and the bias gradient's column sums; threads split the columns and add rows in order, so
// db does not depend on the thread count.
#include "ops/fused.h"

#include <math.h>

// The tanh-form GELU of ops/unary.c, with the same arithmetic so the fused op matches the
// unfused add + gelu: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written with
// e = exp(-2|u|) so neither the value nor the exact slope suffers 1 - tanh^2 cancellation.
#define GELU_C ((real)0.79788456080286535588)  // sqrt(2/pi)
#define GELU_A ((real)0.044715)

static inline real gelu_half(real u, real e) { return (u >= 0 ? 1 : e) / (1 + e); }

static inline real gelu(real x) {
    const real u = GELU_C * (x + GELU_A * x * x * x), e = REXP(-2 * RFABS(u));
    return x * gelu_half(u, e);
}

static inline real gelu_slope(real x) {
    const real u = GELU_C * (x + GELU_A * x * x * x), e = REXP(-2 * RFABS(u));
    const real h = gelu_half(u, e);
    if (e == 0) return h;  // saturated: the second term is 0 (and x^2 may be Inf)
    const real den = 1 + e;
    return h + x * (2 * e / (den * den)) * GELU_C * (1 + 3 * GELU_A * x * x);
}

// Columns per work item of the bias gradient.
#define BG_COL_BLOCK 64
// Below this many elements the loops stay on one thread.
#define BG_PAR_MIN 16384

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
#pragma omp parallel for schedule(static) if (numel >= BG_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const real *hr = h + r * N;
        real *yr = y + r * N;
        for (int64_t j = 0; j < N; j++) yr[j] = gelu(hr[j] + b[j]);
    }
    return TRIT_OK;
}

// dh += g * gelu'(h + b) row by row (no bias gradient wanted).
static void bias_gelu_backward_h(const trit_op_call *c, int64_t rows, int64_t N) {
    const real *h = trit_tensor_ptr(c->in[0]), *b = trit_tensor_ptr(c->in[1]), *g = c->gout->data;
    real *dh = c->gin[0]->data;  // (rows, N)
#pragma omp parallel for schedule(static) if (rows * N >= BG_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const real *hr = h + r * N, *gr = g + r * N;
        real *dhr = dh + r * N;
        for (int64_t j = 0; j < N; j++) dhr[j] += gr[j] * gelu_slope(hr[j] + b[j]);
    }
}

// db += column sums of g * gelu'(h + b), and dh += the same when dh is not NULL. Each column
// block is one work item that adds its rows in order.
static void bias_gelu_backward_hb(const trit_op_call *c, int64_t rows, int64_t N, real *dh, real *db) {
    const real *h = trit_tensor_ptr(c->in[0]), *b = trit_tensor_ptr(c->in[1]), *g = c->gout->data;
    const int64_t nblocks = (N + BG_COL_BLOCK - 1) / BG_COL_BLOCK;
#pragma omp parallel for schedule(static) if (rows * N >= BG_PAR_MIN)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * BG_COL_BLOCK, n = N - c0 < BG_COL_BLOCK ? N - c0 : BG_COL_BLOCK;
        double acc[BG_COL_BLOCK] = {0};
        real d[BG_COL_BLOCK];
        for (int64_t r = 0; r < rows; r++) {
            const real *hr = h + r * N + c0, *gr = g + r * N + c0;
            for (int64_t j = 0; j < n; j++) {
                d[j] = gr[j] * gelu_slope(hr[j] + b[c0 + j]);
                acc[j] += (double)d[j];
            }
            if (dh)
                for (int64_t j = 0; j < n; j++) dh[r * N + c0 + j] += d[j];
        }
        for (int64_t j = 0; j < n; j++) db[c0 + j] += (real)acc[j];
    }
}

static trit_status bias_gelu_backward(const trit_op_call *c) {
    const int64_t N = bg_N(c), numel = trit_tensor_numel(c->in[0]);
    if (N == 0 || numel == 0) return TRIT_OK;
    const int64_t rows = numel / N;
    real *dh = c->gin[0] ? c->gin[0]->data : NULL;
    real *db = c->gin[1] ? c->gin[1]->data : NULL;
    if (db)
        bias_gelu_backward_hb(c, rows, N, dh, db);
    else if (dh)
        bias_gelu_backward_h(c, rows, N);
    return TRIT_OK;
}

const trit_op_def R(trit_op_bias_gelu) = {
    .name = "bias_gelu",
    .infer = bias_gelu_infer,
    .forward = bias_gelu_forward,
    .backward = bias_gelu_backward,
    .contiguous_inputs = 3,
    .attr_size = 0,
};
