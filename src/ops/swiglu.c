// SwiGLU: out = silu(gate) * up, silu(g) = g * sigmoid(g). Backward:
//   d up   = gout * silu(g)
//   d gate = gout * up * sigmoid(g) * (1 + g (1 - sigmoid(g)))
// Inputs may be strided views (in a gated MLP they are the two halves of one linear layer's
// output), so the loops walk rows of the last dim with each input's own strides, and nothing is
// copied. Nothing is saved: backward recomputes the sigmoid from the inputs.
#include "ops/swiglu.h"

#include "ops/op_build.h"
#include "trit/ops.h"

// exp of a non-positive number only, so large |x| neither overflows nor loses the small tail.
static inline real sigmoid(real x) {
    if (x >= 0) return 1 / (1 + REXP(-x));
    const real e = REXP(x);
    return e / (1 + e);
}

// Element offset of the first element of row r (all dims but the last) of t.
static int64_t row_offset(const trit_tensor *t, int64_t r) {
    int64_t off = t->offset;
    for (int d = t->ndim - 2; d >= 0; d--) {
        off += (r % t->shape[d]) * t->strides[d];
        r /= t->shape[d];
    }
    return off;
}

void R(trit_swiglu_row)(real *y, const real *g, int64_t gs, const real *u, int64_t us, int64_t N) {
    for (int64_t j = 0; j < N; j++) {
        const real x = g[j * gs];
        y[j] = x * sigmoid(x) * u[j * us];
    }
}

static int64_t last_dim(const trit_tensor *t) { return t->ndim ? t->shape[t->ndim - 1] : 1; }
static int64_t last_stride(const trit_tensor *t) { return t->ndim ? t->strides[t->ndim - 1] : 1; }

static trit_status swiglu_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    char s0[96], s1[96];
    if (n_in != 2) return trit_error(TRIT_ERR_INVALID, "swiglu: expected 2 inputs (gate, up), got %d", n_in);
    for (int i = 0; i < 2; i++)
        if (in[i]->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "swiglu: %s must be %s (the graph's compute dtype), got %s",
                              i == 0 ? "gate" : "up", trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(in[i]->dtype));
    if (!trit_tensor_same_shape(in[0], in[1]))
        return trit_error(TRIT_ERR_SHAPE, "swiglu: gate and up must have one shape, got gate %s, up %s",
                          trit_tensor_shape_str(in[0], s0, sizeof s0), trit_tensor_shape_str(in[1], s1, sizeof s1));
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, in[0]->ndim, in[0]->shape);
}

static trit_status swiglu_forward(const trit_op_call *c) {
    const trit_tensor *gt = c->in[0], *ut = c->in[1];  // (..., N) each, any strides
    const int64_t N = last_dim(gt), rows = N ? trit_tensor_numel(gt) / N : 0;
    const int64_t gs = last_stride(gt), us = last_stride(ut);
    const real *gd = gt->data, *ud = ut->data;
    real *y = c->out->data;  // (..., N)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        R(trit_swiglu_row)(y + r * N, gd + row_offset(gt, r), gs, ud + row_offset(ut, r), us, N);
    return TRIT_OK;
}

static trit_status swiglu_backward(const trit_op_call *c) {
    const trit_tensor *gt = c->in[0], *ut = c->in[1];
    const int64_t N = last_dim(gt), rows = N ? trit_tensor_numel(gt) / N : 0;
    const int64_t gs = last_stride(gt), us = last_stride(ut);
    const real *gd = gt->data, *ud = ut->data, *go = c->gout->data;  // gout: (..., N)
    real *dg = c->gin[0] ? c->gin[0]->data : NULL, *du = c->gin[1] ? c->gin[1]->data : NULL;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const real *g = gd + row_offset(gt, r), *u = ud + row_offset(ut, r), *gor = go + r * N;
        for (int64_t j = 0; j < N; j++) {
            const real x = g[j * gs], sg = sigmoid(x);
            if (du) du[r * N + j] += gor[j] * (x * sg);
            if (dg) dg[r * N + j] += gor[j] * u[j * us] * (sg * (1 + x * (1 - sg)));
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_swiglu) = {
    .name = "swiglu",
    .infer = swiglu_infer,
    .forward = swiglu_forward,
    .backward = swiglu_backward,
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_swiglu(trit_graph *g, trit_tensor *gate, trit_tensor *up) {
    trit_tensor *in[2] = {gate, up};
    return TRIT_APPLY(g, trit_op_swiglu, 2, in, NULL);
}

#endif
