// InfoNCE with in-batch negatives: sentence-transformers' MultipleNegativesRankingLoss, the
// one-directional form of SimCLR's and CLIP's loss. Anchors a (B, C) and candidates p (N, C),
// N >= B: candidate i is anchor i's positive, every other candidate (the other anchors'
// positives, then any extra hard negatives in rows B..N-1) one of its negatives.
//   â_i = a_i / max(||a_i||, eps), p̂_j likewise, eps = 1e-12 (F.normalize's)
//   S_ij = (â_i . p̂_j) / tau                  (B, N), tau > 0 (MNRL's scale 20 is tau = 0.05)
//   loss_i = logsumexp_j S_ij - S_ii           cross-entropy of row i against target i
//   loss = mean_i loss_i (or the sum)
// Norms, dot products, the log-sum-exp (row max subtracted) and the gradients run in double
// whatever the storage dtype. Backward, with k = dloss / B for the mean (dloss for the sum):
//   G_ij = k (softmax(S_i)_j - [i == j]) / tau
//   dâ_i = sum_j G_ij p̂_j,  dp̂_j = sum_i G_ij â_i
//   da = (dâ - â (â . dâ)) / ||a|| where ||a|| >= eps; dâ / eps where the norm was clamped
// (the clamp's gradient, as PyTorch's clamp_min: a zero row gets a large but finite gradient).
// Each row of S, of dâ and of dp̂ is computed by one thread in a fixed order, and the row losses
// are added serially, so the loss and gradients do not depend on the thread count.
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "trit/ops.h"

#include <math.h>

#define INFO_NCE_EPS 1e-12
// Below this many multiply-adds a call stays on one thread.
#define INFO_NCE_PAR_MIN ((int64_t)1 << 15)

typedef struct trit_info_nce_attr {
    double tau;     // temperature, > 0
    int reduction;  // trit_reduction
} trit_info_nce_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_info_nce);

static trit_status info_nce_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    const trit_info_nce_attr *at = attr;
    const trit_tensor *a = in[0], *p = in[1];
    char s0[128], s1[128];
    if (a->dtype != TRIT_REAL_DTYPE || p->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "info_nce: expected %s anchors and candidates (the graph's compute dtype), got %s and %s",
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(a->dtype), trit_dtype_name(p->dtype));
    if (a->ndim != 2 || p->ndim != 2 || a->shape[0] < 1 || a->shape[1] < 1 || p->shape[1] != a->shape[1] ||
        p->shape[0] < a->shape[0])
        return trit_error(TRIT_ERR_SHAPE, "info_nce: expected anchors (B, C) and candidates (N, C) with N >= B >= 1 and C >= 1 "
                          "(candidate i is anchor i's positive), got %s and %s",
                          trit_tensor_shape_str(a, s0, sizeof s0), trit_tensor_shape_str(p, s1, sizeof s1));
    if (!(at->tau > 0 && isfinite(at->tau)))
        return trit_error(TRIT_ERR_INVALID, "info_nce: temperature tau must be finite and > 0, got %g "
                          "(0.05 is sentence-transformers' scale 20)", at->tau);
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 0, NULL);
}

typedef struct nce_dims {
    int64_t B, N, C;
} nce_dims;

static nce_dims dims_of(const trit_op_call *c) {
    return (nce_dims){c->in[0]->shape[0], c->in[1]->shape[0], c->in[0]->shape[1]};
}

// Saved: the norms of the B anchors and N candidates (before clamping), then softmax(S) (B, N).
static size_t info_nce_saved_bytes(const trit_op_call *c) {
    const nce_dims d = dims_of(c);
    return sizeof(double) * (size_t)(d.B + d.N + d.B * d.N);
}

// Forward: the row losses (B); backward: dâ (B, C) then dp̂ (N, C).
static size_t info_nce_scratch_bytes(const trit_op_call *c) {
    const nce_dims d = dims_of(c);
    const int64_t n = (d.B + d.N) * d.C > d.B ? (d.B + d.N) * d.C : d.B;
    return sizeof(double) * (size_t)n;
}

static double inv_norm(double n) { return 1.0 / (n >= INFO_NCE_EPS ? n : INFO_NCE_EPS); }

static void row_norms(double *norm /* (rows) */, const real *x /* (rows, C) */, int64_t rows, int64_t C) {
#pragma omp parallel for schedule(static) if (rows * C >= INFO_NCE_PAR_MIN)
    for (int64_t i = 0; i < rows; i++) {
        double s = 0;
        for (int64_t k = 0; k < C; k++) s += (double)x[i * C + k] * (double)x[i * C + k];
        norm[i] = sqrt(s);
    }
}

static trit_status info_nce_forward(const trit_op_call *c) {
    const trit_info_nce_attr *at = c->attr;
    const nce_dims d = dims_of(c);
    const real *a = trit_tensor_ptr(c->in[0]), *p = trit_tensor_ptr(c->in[1]);  // (B, C), (N, C)
    double *na = c->saved, *np = na + d.B, *P = np + d.N;                        // (B), (N), (B, N)
    double *row_loss = c->scratch;                                               // (B)
    row_norms(na, a, d.B, d.C);
    row_norms(np, p, d.N, d.C);
#pragma omp parallel for schedule(static) if (d.B * d.N * d.C >= INFO_NCE_PAR_MIN)
    for (int64_t i = 0; i < d.B; i++) {
        double *S = P + i * d.N, mx = -INFINITY;
        const double ia = inv_norm(na[i]) / at->tau;
        for (int64_t j = 0; j < d.N; j++) {
            double s = 0;
            for (int64_t k = 0; k < d.C; k++) s += (double)a[i * d.C + k] * (double)p[j * d.C + k];
            S[j] = s * ia * inv_norm(np[j]);
            mx = S[j] > mx ? S[j] : mx;
        }
        double z = 0;
        for (int64_t j = 0; j < d.N; j++) z += exp(S[j] - mx);
        const double lse = mx + log(z);
        row_loss[i] = lse - S[i];
        for (int64_t j = 0; j < d.N; j++) S[j] = exp(S[j] - lse);
    }
    double total = 0;
    for (int64_t i = 0; i < d.B; i++) total += row_loss[i];
    if (at->reduction == TRIT_REDUCE_MEAN) total /= (double)d.B;
    *(real *)c->out->data = (real)total;
    return TRIT_OK;
}

// dx (+)= the gradient through x / max(||x||, eps) of dxh (C), the gradient of the normalised row.
static void unnormalise(real *dx, const real *x, const double *dxh, double norm, int64_t C) {
    if (norm < INFO_NCE_EPS) {
        for (int64_t k = 0; k < C; k++) dx[k] += (real)(dxh[k] / INFO_NCE_EPS);
        return;
    }
    double dot = 0;
    for (int64_t k = 0; k < C; k++) dot += (double)x[k] * dxh[k];
    dot /= norm * norm;  // (x/|x|) . dxh / |x|
    for (int64_t k = 0; k < C; k++) dx[k] += (real)((dxh[k] - (double)x[k] * dot) / norm);
}

static trit_status info_nce_backward(const trit_op_call *c) {
    if (!c->gin[0] && !c->gin[1]) return TRIT_OK;
    const trit_info_nce_attr *at = c->attr;
    const nce_dims d = dims_of(c);
    const real *a = trit_tensor_ptr(c->in[0]), *p = trit_tensor_ptr(c->in[1]);  // (B, C), (N, C)
    const double *na = c->saved, *np = na + d.B, *P = np + d.N;                  // (B), (N), (B, N)
    double *dah = c->scratch, *dph = dah + d.B * d.C;                            // (B, C), (N, C)
    const double go = (double)*(const real *)c->gout->data;
    const double k = (at->reduction == TRIT_REDUCE_MEAN ? go / (double)d.B : go) / at->tau;
    const bool par = d.B * d.N * d.C >= INFO_NCE_PAR_MIN;
    if (c->gin[0]) {
        real *da = c->gin[0]->data;  // (B, C)
#pragma omp parallel for schedule(static) if (par)
        for (int64_t i = 0; i < d.B; i++) {
            double *g = dah + i * d.C;
            for (int64_t m = 0; m < d.C; m++) g[m] = 0;
            for (int64_t j = 0; j < d.N; j++) {
                const double w = k * (P[i * d.N + j] - (i == j)) * inv_norm(np[j]);
                for (int64_t m = 0; m < d.C; m++) g[m] += w * (double)p[j * d.C + m];
            }
            unnormalise(da + i * d.C, a + i * d.C, g, na[i], d.C);
        }
    }
    if (c->gin[1]) {
        real *dp = c->gin[1]->data;  // (N, C)
#pragma omp parallel for schedule(static) if (par)
        for (int64_t j = 0; j < d.N; j++) {
            double *g = dph + j * d.C;
            for (int64_t m = 0; m < d.C; m++) g[m] = 0;
            for (int64_t i = 0; i < d.B; i++) {
                const double w = k * (P[i * d.N + j] - (i == j)) * inv_norm(na[i]);
                for (int64_t m = 0; m < d.C; m++) g[m] += w * (double)a[i * d.C + m];
            }
            unnormalise(dp + j * d.C, p + j * d.C, g, np[j], d.C);
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_info_nce) = {
    .name = "info_nce",
    .infer = info_nce_infer,
    .forward = info_nce_forward,
    .backward = info_nce_backward,
    .saved_bytes = info_nce_saved_bytes,
    .scratch_bytes = info_nce_scratch_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .bwd_unread = TRIT_OUT,
    .attr_size = sizeof(trit_info_nce_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_info_nce(trit_graph *g, trit_tensor *anchors, trit_tensor *candidates, double tau,
                           trit_reduction red) {
    if (!trit_graph_reduction_ok(g, "info_nce", red)) return NULL;
    trit_info_nce_attr a = {.tau = tau, .reduction = (int)red};
    trit_tensor *in[2] = {anchors, candidates};
    return TRIT_APPLY(g, trit_op_info_nce, 2, in, &a);
}

#endif
