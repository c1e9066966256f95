// Pooling of a sequence's hidden states x (B, T, C) into one vector per row, out (B, C): the mean
// over the positions a selector keeps (sentence-transformers' mean pooling), or the hidden state
// at the last kept position (last-token pooling: in a causal model the last token has seen the
// whole text). The selector, an optional second input, is
//   (B, T) a mask of 0 and 1, of any plain integer or float dtype (an attention mask), or
//   (B)    per-row lengths: positions [0, len) are kept (right padding), or
//   absent: all T positions.
// A row that keeps no position is an error at run time naming the row, not a zero vector: an
// empty text has no mean and no last token, and a zero vector would pass unnoticed into a cosine
// loss. So is a mask value other than 0 or 1 and a length outside [1, T].
//
// Forward checks the selector and saves what backward needs (per-row 1/count and keep flags, or
// the chosen positions), so backward reads neither x nor the selector. Each output element is
// summed in double over t in order by one thread, so results do not depend on the thread count.
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "trit/ops.h"

TRIT_DECLARE_REAL(const trit_op_def, trit_op_mean_pool);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_last_token_pool);

// Columns per task: a task owns one row's block of columns and walks t for them.
#define POOL_COLS 64
// Below this many reads of x a call stays on one thread.
#define POOL_PAR_MIN ((int64_t)1 << 15)

static trit_status seq_pool_infer(const char *name, const trit_tensor *const *in, int n_in, trit_tensor *out) {
    char a[128], b[128];
    const trit_tensor *x = in[0];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "%s: expected %s hidden states (the graph's compute dtype), got %s", name,
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (x->ndim != 3 || x->shape[0] < 1 || x->shape[1] < 1 || x->shape[2] < 1)
        return trit_error(TRIT_ERR_SHAPE, "%s: expected hidden states (B, T, C) with B, T, C >= 1, got %s", name,
                          trit_tensor_shape_str(x, a, sizeof a));
    if (n_in == 2) {
        const trit_tensor *s = in[1];
        const bool mask = s->ndim == 2 && s->shape[0] == x->shape[0] && s->shape[1] == x->shape[1];
        const bool lengths = s->ndim == 1 && s->shape[0] == x->shape[0];
        if (!mask && !lengths)
            return trit_error(TRIT_ERR_SHAPE, "%s: expected a mask (%lld, %lld) or lengths (%lld) for hidden states %s, got %s",
                              name, (long long)x->shape[0], (long long)x->shape[1], (long long)x->shape[0],
                              trit_tensor_shape_str(x, a, sizeof a), trit_tensor_shape_str(s, b, sizeof b));
        if (trit_dtype_is_quantized(s->dtype) || trit_dtype_size(s->dtype) == 0)
            return trit_error(TRIT_ERR_DTYPE, "%s: expected an integer or float %s, got %s", name,
                              mask ? "mask" : "lengths", trit_dtype_name(s->dtype));
    }
    const int64_t shape[2] = {x->shape[0], x->shape[2]};
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 2, shape);
}

// Fills keep (B, T) with 0/1 from the selector of call c, checking every value; returns the
// status (the message names the op, the row and what was found).
// `what` is what an empty row lacks ("mean", "last token").
static trit_status selector_keep(const char *name, const char *what, const trit_op_call *c, uint8_t *keep /* (B, T) */) {
    const int64_t B = c->in[0]->shape[0], T = c->in[0]->shape[1];
    const trit_tensor *s = c->n_in == 2 ? c->in[1] : NULL;
    if (!s || s->ndim == 1) {
        for (int64_t b = 0; b < B; b++) {
            const double len = s ? trit_tensor_get_flat(s, b) : (double)T;
            if (!(len >= 1 && len <= (double)T && len == (double)(int64_t)len))
                return trit_error(TRIT_ERR_RANGE, "%s: length %g of row %lld is not a whole number in [1, %lld] (T); "
                                  "every row needs at least one position", name, len, (long long)b, (long long)T);
            for (int64_t t = 0; t < T; t++) keep[b * T + t] = t < (int64_t)len;
        }
        return TRIT_OK;
    }
    for (int64_t b = 0; b < B; b++) {
        int64_t kept = 0;
        for (int64_t t = 0; t < T; t++) {
            const double m = trit_tensor_get_flat(s, b * T + t);
            if (m != 0 && m != 1)
                return trit_error(TRIT_ERR_RANGE, "%s: mask value %g at (%lld, %lld) is not 0 or 1; pass an attention "
                                  "mask (1 = keep the position)", name, m, (long long)b, (long long)t);
            keep[b * T + t] = m == 1;
            kept += m == 1;
        }
        if (kept == 0)
            return trit_error(TRIT_ERR_RANGE, "%s: mask row %lld keeps no position (an empty sequence has no %s); "
                              "drop empty texts from the batch", name, (long long)b, what);
    }
    return TRIT_OK;
}

// ---- mean pooling --------------------------------------------------------------------------

static trit_status mean_pool_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    return seq_pool_infer("mean_pool", in, n_in, out);
}

// Per row 1 / (kept positions) as a double, then the (B, T) keep flags.
static size_t mean_pool_saved_bytes(const trit_op_call *c) {
    const int64_t B = c->in[0]->shape[0], T = c->in[0]->shape[1];
    return sizeof(double) * (size_t)B + (size_t)(B * T);
}

static trit_status mean_pool_forward(const trit_op_call *c) {
    const int64_t B = c->in[0]->shape[0], T = c->in[0]->shape[1], C = c->in[0]->shape[2];
    const real *x = trit_tensor_ptr(c->in[0]);  // (B, T, C)
    real *out = c->out->data;                   // (B, C)
    double *inv = c->saved;                     // (B)
    uint8_t *keep = (uint8_t *)(inv + B);       // (B, T)
    trit_status s = selector_keep("mean_pool", "mean", c, keep);
    if (s != TRIT_OK) return s;
    for (int64_t b = 0; b < B; b++) {
        int64_t n = 0;
        for (int64_t t = 0; t < T; t++) n += keep[b * T + t];
        inv[b] = 1.0 / (double)n;
    }
    const int64_t nblk = (C + POOL_COLS - 1) / POOL_COLS;
#pragma omp parallel for schedule(static) if (B * T * C >= POOL_PAR_MIN)
    for (int64_t task = 0; task < B * nblk; task++) {
        const int64_t b = task / nblk, c0 = task % nblk * POOL_COLS;
        const int64_t nc = C - c0 < POOL_COLS ? C - c0 : POOL_COLS;
        double acc[POOL_COLS] = {0};
        for (int64_t t = 0; t < T; t++) {
            if (!keep[b * T + t]) continue;
            const real *xr = x + (b * T + t) * C + c0;
            for (int64_t j = 0; j < nc; j++) acc[j] += (double)xr[j];
        }
        for (int64_t j = 0; j < nc; j++) out[b * C + c0 + j] = (real)(acc[j] * inv[b]);
    }
    return TRIT_OK;
}

// dx[b, t, :] += keep[b, t] / count_b * dy[b, :]
static trit_status mean_pool_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const int64_t B = c->in[0]->shape[0], T = c->in[0]->shape[1], C = c->in[0]->shape[2];
    const double *inv = c->saved;
    const uint8_t *keep = (const uint8_t *)(inv + B);
    const real *dy = c->gout->data;  // (B, C)
    real *dx = c->gin[0]->data;      // (B, T, C)
#pragma omp parallel for schedule(static) if (B * T * C >= POOL_PAR_MIN)
    for (int64_t bt = 0; bt < B * T; bt++) {
        if (!keep[bt]) continue;
        const int64_t b = bt / T;
        const real w = (real)inv[b];
        for (int64_t j = 0; j < C; j++) dx[bt * C + j] += w * dy[b * C + j];
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_mean_pool) = {
    .name = "mean_pool",
    .infer = mean_pool_infer,
    .forward = mean_pool_forward,
    .backward = mean_pool_backward,
    .saved_bytes = mean_pool_saved_bytes,
    .contiguous_inputs = TRIT_IN(0),
    .no_grad_inputs = TRIT_IN(1),
    .bwd_unread = TRIT_IN(0) | TRIT_IN(1) | TRIT_OUT,
};

// ---- last-token pooling --------------------------------------------------------------------

static trit_status last_pool_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    return seq_pool_infer("last_token_pool", in, n_in, out);
}

// The chosen position of each row; the keep flags live in scratch.
static size_t last_pool_saved_bytes(const trit_op_call *c) { return sizeof(int64_t) * (size_t)c->in[0]->shape[0]; }
static size_t last_pool_scratch_bytes(const trit_op_call *c) {
    return (size_t)(c->in[0]->shape[0] * c->in[0]->shape[1]);
}

static trit_status last_pool_forward(const trit_op_call *c) {
    const int64_t B = c->in[0]->shape[0], T = c->in[0]->shape[1], C = c->in[0]->shape[2];
    const real *x = trit_tensor_ptr(c->in[0]);  // (B, T, C)
    real *out = c->out->data;                   // (B, C)
    int64_t *pos = c->saved;                    // (B)
    uint8_t *keep = c->scratch;                 // (B, T)
    trit_status s = selector_keep("last_token_pool", "last token", c, keep);
    if (s != TRIT_OK) return s;
    for (int64_t b = 0; b < B; b++) {
        pos[b] = T - 1;
        while (!keep[b * T + pos[b]]) pos[b]--;  // selector_keep saw a kept position in every row
        const real *xr = x + (b * T + pos[b]) * C;
        for (int64_t j = 0; j < C; j++) out[b * C + j] = xr[j];
    }
    return TRIT_OK;
}

static trit_status last_pool_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const int64_t B = c->in[0]->shape[0], T = c->in[0]->shape[1], C = c->in[0]->shape[2];
    const int64_t *pos = c->saved;
    const real *dy = c->gout->data;  // (B, C)
    real *dx = c->gin[0]->data;      // (B, T, C)
    for (int64_t b = 0; b < B; b++)
        for (int64_t j = 0; j < C; j++) dx[(b * T + pos[b]) * C + j] += dy[b * C + j];
    return TRIT_OK;
}

const trit_op_def R(trit_op_last_token_pool) = {
    .name = "last_token_pool",
    .infer = last_pool_infer,
    .forward = last_pool_forward,
    .backward = last_pool_backward,
    .saved_bytes = last_pool_saved_bytes,
    .scratch_bytes = last_pool_scratch_bytes,
    .contiguous_inputs = TRIT_IN(0),
    .no_grad_inputs = TRIT_IN(1),
    .bwd_unread = TRIT_IN(0) | TRIT_IN(1) | TRIT_OUT,
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_mean_pool(trit_graph *g, trit_tensor *x, trit_tensor *sel) {
    trit_tensor *in[2] = {x, sel};
    return TRIT_APPLY(g, trit_op_mean_pool, sel ? 2 : 1, in, NULL);
}

trit_tensor *trit_last_token_pool(trit_graph *g, trit_tensor *x, trit_tensor *sel) {
    trit_tensor *in[2] = {x, sel};
    return TRIT_APPLY(g, trit_op_last_token_pool, sel ? 2 : 1, in, NULL);
}

#endif
