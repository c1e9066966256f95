// Inverted dropout: in training mode element i is kept iff
//   trit_rng_uniform(seed, stream, (step << 32) + i) >= p
// and kept elements are scaled by 1 / (1 - p), so eval mode is the identity. Forward saves the
// mask (one byte per element) and whether it applied one, so backward matches the forward that
// ran even if the mode changed in between.
#include "ops/dropout.h"

#include "ops/op_build.h"
#include "trit/ops.h"

#include <string.h>

// Elements per parallel work item: a multiple of 4, so each item starts on a Philox block.
#define DROPOUT_CHUNK 4096
// The saved buffer starts with this many bytes of header (byte 0: 1 if a mask was applied).
#define DROPOUT_HEADER 64

static trit_status dropout_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    const trit_dropout_attr *a = attr;
    const trit_tensor *x = in[0];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "dropout: expected a %s input (the graph's compute dtype), got %s",
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (!(a->p >= 0.0 && a->p < 1.0))
        return trit_error(TRIT_ERR_INVALID, "dropout: p must be in [0, 1), got %g", a->p);
    return trit_tensor_init_layout(out, x->dtype, x->ndim, x->shape);
}

static size_t dropout_saved_bytes(const trit_op_call *c) { return DROPOUT_HEADER + (size_t)trit_tensor_numel(c->out); }

static trit_status dropout_forward(const trit_op_call *c) {
    const trit_dropout_attr *a = c->attr;
    const int64_t n = trit_tensor_numel(c->out);
    const real *x = trit_tensor_ptr(c->in[0]);  // (n)
    real *y = c->out->data;                     // (n)
    uint8_t *flag = c->saved, *mask = flag + DROPOUT_HEADER;
    if (!c->ctx->training || a->p == 0.0) {
        flag[0] = 0;
        memcpy(y, x, sizeof(real) * (size_t)n);
        return TRIT_OK;
    }
    flag[0] = 1;
    const uint64_t seed = c->ctx->seed, stream = a->stream;
    const uint64_t first_block = (c->ctx->step << TRIT_DROPOUT_STEP_SHIFT) / 4;
    const double p = a->p;
    const real scale = (real)(1.0 / (1.0 - p));
    const int64_t nchunks = (n + DROPOUT_CHUNK - 1) / DROPOUT_CHUNK;
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < nchunks; k++) {
        const int64_t i0 = k * DROPOUT_CHUNK, i1 = i0 + DROPOUT_CHUNK < n ? i0 + DROPOUT_CHUNK : n;
        uint32_t bits[4];
        for (int64_t i = i0; i < i1; i++) {
            if (i % 4 == 0) trit_rng_block(seed, stream, first_block + (uint64_t)i / 4, bits);
            // The same 24-bit uniform as trit_rng_uniform, computed once per Philox block.
            const double u = (double)(bits[i % 4] >> 8) * 0x1p-24;
            mask[i] = u >= p;
            y[i] = mask[i] ? x[i] * scale : (real)0;
        }
    }
    return TRIT_OK;
}

static trit_status dropout_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const trit_dropout_attr *a = c->attr;
    const int64_t n = trit_tensor_numel(c->out);
    const real *dy = c->gout->data;  // (n)
    real *dx = c->gin[0]->data;      // (n)
    const uint8_t *flag = c->saved, *mask = flag + DROPOUT_HEADER;
    const real scale = (real)(1.0 / (1.0 - a->p));
    if (!flag[0]) {
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; i++) dx[i] += dy[i];
        return TRIT_OK;
    }
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        if (mask[i]) dx[i] += dy[i] * scale;
    return TRIT_OK;
}

const trit_op_def R(trit_op_dropout) = {
    .name = "dropout",
    .bwd_unread = TRIT_IN(0) | TRIT_OUT,
    .infer = dropout_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .saved_bytes = dropout_saved_bytes,
    .contiguous_inputs = TRIT_IN(0),
    .attr_size = sizeof(trit_dropout_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_dropout_stream(trit_graph *g, trit_tensor *x, double p, uint64_t stream) {
    if (!(p >= 0 && p < 1)) {
        trit_error(TRIT_ERR_INVALID, "dropout: p must be in [0, 1), got %g", p);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_dropout_attr a = {.p = p, .stream = stream};
    return TRIT_APPLY(g, trit_op_dropout, 1, &x, &a);
}

trit_tensor *trit_dropout(trit_graph *g, trit_tensor *x, double p) {
    return trit_dropout_stream(g, x, p, trit_graph_next_stream(g));
}

#endif
