// Causal multi-head self-attention, the plain way: per (batch, head) the full score matrix
// S = q k^T / sqrt(hs) is formed by GEMM, each row is soft-maxed over the keys at or before its
// query (later keys get probability 0), and out = P v. P (B, H, T, T) is kept for backward.
// This version is the reference a tiled (flash) version is tested against, so it favours being
// obviously right over saving memory.
//
// Backward, per (b, h), with dO the output gradient of the head:
//   dV += P^T dO
//   dP  = dO v^T
//   dS  = P * (dP - rowsum(P * dP)) / sqrt(hs)   (softmax backward; 0 at masked positions)
//   dQ += dS k,   dK += dS^T q
//
// Work is split over the B*H (batch, head) pairs; each pair is computed the same way whichever
// thread takes it, so results do not depend on the thread count. The GEMMs inside run on the
// thread of their pair (one thread team per call, however small the shapes).
#include "ops/attention.h"

#include "ops/op_build.h"
#include "kernels/gemm.h"
#include "trit/ops.h"

#include <omp.h>

typedef struct attn_dims {
    int64_t B, T, C, H, hs;
} attn_dims;

static attn_dims dims_of(const trit_op_call *c) {
    const trit_attention_attr *a = c->attr;
    const trit_tensor *q = c->in[0];
    attn_dims d = {q->shape[0], q->shape[1], q->shape[2], a->n_head, 0};
    d.hs = d.C / d.H;
    return d;
}

// Base pointer of batch b and leading dimension (elements between time steps) of an input.
static const real *in_base(const trit_tensor *t, int64_t b) {
    return (const real *)t->data + t->offset + b * t->strides[0];
}
static int64_t in_ld(const trit_tensor *t) { return t->shape[1] > 1 ? t->strides[1] : t->shape[2]; }

// Per-thread T x T buffers for dP in backward. The count depends only on the shape and the
// process's fixed slot count (trit_thread_slots), so compile time and run time agree on it.
static int64_t attn_slots(const attn_dims *d) {
    int64_t procs = trit_thread_slots();
    int64_t bh = d->B * d->H;
    return bh < procs ? bh : procs;
}

static trit_status attention_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_attention_attr *a = attr;
    char s0[96], s1[96], s2[96];
    if (n_in != 3) return trit_error(TRIT_ERR_INVALID, "attention: expected 3 inputs (q, k, v), got %d", n_in);
    for (int i = 0; i < 3; i++) {
        if (in[i]->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "attention: %s must be %s (the graph's compute dtype), got %s",
                              i == 0 ? "q" : i == 1 ? "k" : "v", trit_dtype_name(TRIT_REAL_DTYPE),
                              trit_dtype_name(in[i]->dtype));
    }
    const trit_tensor *q = in[0], *k = in[1], *v = in[2];
    if (q->ndim != 3 || !trit_tensor_same_shape(q, k) || !trit_tensor_same_shape(q, v))
        return trit_error(TRIT_ERR_SHAPE, "attention: expected q, k, v of one shape (B, T, C), got q %s, k %s, v %s",
                          trit_tensor_shape_str(q, s0, sizeof s0), trit_tensor_shape_str(k, s1, sizeof s1),
                          trit_tensor_shape_str(v, s2, sizeof s2));
    if (a->n_head < 1 || q->shape[2] % a->n_head != 0)
        return trit_error(TRIT_ERR_SHAPE, "attention: C = %lld channels do not split into %d heads; C must be a multiple of n_head",
                          (long long)q->shape[2], a->n_head);
    for (int i = 0; i < 3; i++)
        if (!trit_attention_layout_ok(in[i]))
            return trit_error(TRIT_ERR_INVALID, "attention: input %d needs a unit-stride last dim; pass it through trit_contiguous", i);
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 3, q->shape);
}

static size_t attention_saved_bytes(const trit_op_call *c) {
    attn_dims d = dims_of(c);
    return sizeof(real) * (size_t)(d.B * d.H * d.T * d.T);
}

static size_t attention_scratch_bytes(const trit_op_call *c) {
    attn_dims d = dims_of(c);
    return sizeof(real) * (size_t)(attn_slots(&d) * d.T * d.T);
}

// p: (T) scores of query i. Scales, masks keys after i and soft-maxes the rest in place.
static void causal_softmax_row(real *p, int64_t i, int64_t T, real scale) {
    real mx = RMAX_NEG;
    for (int64_t j = 0; j <= i; j++) {
        p[j] *= scale;
        if (p[j] > mx) mx = p[j];
    }
    double sum = 0;
    for (int64_t j = 0; j <= i; j++) {
        p[j] = REXP(p[j] - mx);
        sum += (double)p[j];
    }
    for (int64_t j = 0; j <= i; j++) p[j] = (real)((double)p[j] / sum);
    for (int64_t j = i + 1; j < T; j++) p[j] = 0;
}

static trit_status attention_forward(const trit_op_call *c) {
    const attn_dims d = dims_of(c);
    const trit_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    const int64_t ldq = in_ld(q), ldk = in_ld(k), ldv = in_ld(v), BH = d.B * d.H, T = d.T;
    const real scale = (real)(1.0 / sqrt((double)d.hs));
    real *probs = c->saved;  // (B, H, T, T)
    real *out = c->out->data;  // (B, T, C)
    if (BH == 0 || T == 0 || d.hs == 0) return TRIT_OK;
    // With a single pair the loop runs on this thread and the GEMMs may use the others.
#pragma omp parallel for schedule(static) if (BH > 1)
    for (int64_t bh = 0; bh < BH; bh++) {
        const int64_t b = bh / d.H, h = bh % d.H;
        real *p = probs + bh * T * T;  // (T, T)
        const real *qh = in_base(q, b) + h * d.hs, *kh = in_base(k, b) + h * d.hs, *vh = in_base(v, b) + h * d.hs;
        R(trit_kernel_gemm)(false, true, T, T, d.hs, qh, ldq, kh, ldk, p, T, false);
        for (int64_t i = 0; i < T; i++) causal_softmax_row(p + i * T, i, T, scale);
        R(trit_kernel_gemm)(false, false, T, d.hs, T, p, T, vh, ldv, out + b * T * d.C + h * d.hs, d.C, false);
    }
    return TRIT_OK;
}

// dp: (T, T) holds dP = dO v^T on entry and dS on return; p: (T, T) the probabilities.
static void softmax_backward_rows(real *dp, const real *p, int64_t T, real scale) {
    for (int64_t i = 0; i < T; i++) {
        real *dr = dp + i * T;
        const real *pr = p + i * T;
        double dot = 0;
        for (int64_t j = 0; j <= i; j++) dot += (double)pr[j] * (double)dr[j];
        for (int64_t j = 0; j <= i; j++) dr[j] = (real)((double)pr[j] * ((double)dr[j] - dot)) * scale;
        for (int64_t j = i + 1; j < T; j++) dr[j] = 0;
    }
}

static trit_status attention_backward(const trit_op_call *c) {
    const attn_dims d = dims_of(c);
    const trit_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    real *gq = c->gin[0] ? c->gin[0]->data : NULL;  // (B, T, C)
    real *gk = c->gin[1] ? c->gin[1]->data : NULL;  // (B, T, C)
    real *gv = c->gin[2] ? c->gin[2]->data : NULL;  // (B, T, C)
    const real *go = c->gout->data;                  // (B, T, C)
    const real *probs = c->saved;                    // (B, H, T, T)
    const int64_t ldq = in_ld(q), ldk = in_ld(k), ldv = in_ld(v), BH = d.B * d.H, T = d.T, C = d.C;
    const real scale = (real)(1.0 / sqrt((double)d.hs));
    if (BH == 0 || T == 0 || d.hs == 0 || (!gq && !gk && !gv)) return TRIT_OK;
    const int64_t slots = attn_slots(&d);
    const int threads = (int)(slots < omp_get_max_threads() ? slots : omp_get_max_threads());
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        real *dp = (real *)c->scratch + (int64_t)omp_get_thread_num() * T * T;  // (T, T)
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < BH; bh++) {
            const int64_t b = bh / d.H, h = bh % d.H, col = b * T * C + h * d.hs;
            const real *p = probs + bh * T * T;
            const real *qh = in_base(q, b) + h * d.hs, *kh = in_base(k, b) + h * d.hs, *vh = in_base(v, b) + h * d.hs;
            if (gv) R(trit_kernel_gemm)(true, false, T, d.hs, T, p, T, go + col, C, gv + col, C, true);
            if (!gq && !gk) continue;
            R(trit_kernel_gemm)(false, true, T, T, d.hs, go + col, C, vh, ldv, dp, T, false);
            softmax_backward_rows(dp, p, T, scale);
            if (gq) R(trit_kernel_gemm)(false, false, T, d.hs, T, dp, T, kh, ldk, gq + col, C, true);
            if (gk) R(trit_kernel_gemm)(true, false, T, d.hs, T, dp, T, qh, ldq, gk + col, C, true);
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_attention) = {
    .name = "attention",
    .infer = attention_infer,
    .forward = attention_forward,
    .backward = attention_backward,
    .saved_bytes = attention_saved_bytes,
    .scratch_bytes = attention_scratch_bytes,
    .attr_size = sizeof(trit_attention_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

bool trit_attention_inputs(trit_graph *g, const char *op, int n_head, trit_tensor **in) {
    if (n_head < 1) {
        trit_error(TRIT_ERR_INVALID, "%s: n_head must be >= 1, got %d", op, n_head);
        trit_graph_fail(g, TRIT_ERR_INVALID);
        return false;
    }
    // Views with unit-stride rows (e.g. slices of a fused qkv) are read in place; others are copied.
    for (int i = 0; i < 3; i++)
        if (in[i] && !trit_attention_layout_ok(in[i]) && !(in[i] = trit_contiguous(g, in[i]))) return false;
    return true;
}

trit_tensor *trit_attention(trit_graph *g, trit_tensor *q, trit_tensor *k, trit_tensor *v, int n_head) {
    trit_tensor *in[3] = {q, k, v};
    if (!trit_attention_inputs(g, "attention", n_head, in)) return NULL;
    trit_attention_attr a = {.n_head = n_head};
    return TRIT_APPLY(g, trit_op_attention, 3, in, &a);
}

#endif
