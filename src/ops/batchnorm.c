// Batch normalisation, PyTorch semantics. x is viewed as (N, C, S) with S the product of the
// dims after C. Training mode (or no running statistics) normalises with the batch mean and
// biased variance of each channel and, when running statistics are given, updates them in
// forward: running = (1 - momentum) * running + momentum * batch, with the UNBIASED variance.
// Eval mode normalises with the running statistics. Forward saves per channel (mean, rstd) and
// whether batch statistics were used, so backward matches the forward that ran. Every loop is
// over channels, each reduced in a fixed order, so results do not depend on the thread count.
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "trit/ops.h"

#include <math.h>

// Inputs of trit_op_batchnorm_tracked: x, running_mean, running_var, [weight], [bias];
// of trit_op_batchnorm (no running statistics): x, [weight], [bias].
typedef struct trit_batchnorm_attr {
    double momentum, eps;
    int has_weight, has_bias, has_running;
} trit_batchnorm_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_batchnorm);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_batchnorm_tracked);

typedef struct bn_dims {
    int64_t N, C, S;
} bn_dims;

static bn_dims dims_of(const trit_tensor *x) {
    bn_dims d = {x->shape[0], x->shape[1], 1};
    for (int i = 2; i < x->ndim; i++) d.S *= x->shape[i];
    return d;
}

// Input slots: running stats (if any) come right after x, then weight, then bias.
static int weight_slot(const trit_batchnorm_attr *a) { return 1 + 2 * a->has_running; }
static int bias_slot(const trit_batchnorm_attr *a) { return weight_slot(a) + a->has_weight; }

static double stat_get(const trit_tensor *t, int64_t i) {
    const void *p = trit_tensor_ptr(t);
    return t->dtype == TRIT_F64 ? ((const double *)p)[i] : (double)((const float *)p)[i];
}

static void stat_set(const trit_tensor *t, int64_t i, double v) {
    void *p = trit_tensor_ptr(t);
    if (t->dtype == TRIT_F64) ((double *)p)[i] = v;
    else ((float *)p)[i] = (float)v;
}

static trit_status bn_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_batchnorm_attr *a = attr;
    const trit_tensor *x = in[0];
    char s1[128], s2[128];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "batchnorm: expected a %s x (the graph's compute dtype), got %s",
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (x->ndim < 2)
        return trit_error(TRIT_ERR_SHAPE, "batchnorm: expected x (N, C, ...) with at least 2 dims, got %s",
                          trit_tensor_shape_str(x, s1, sizeof s1));
    const int64_t C = x->shape[1];
    for (int i = 1; i < n_in; i++) {
        const bool stat = a->has_running && i < 3;
        const trit_dtype dt = in[i]->dtype;
        if (stat ? dt != TRIT_F32 && dt != TRIT_F64 : dt != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "batchnorm: %s must be %s, got %s",
                              stat ? "running statistics" : "weight and bias",
                              stat ? "f32 or f64" : trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(dt));
        if (in[i]->ndim != 1 || in[i]->shape[0] != C)
            return trit_error(TRIT_ERR_SHAPE, "batchnorm: expected weight, bias and running statistics of shape (%lld) for x %s, got %s",
                              (long long)C, trit_tensor_shape_str(x, s1, sizeof s1), trit_tensor_shape_str(in[i], s2, sizeof s2));
    }
    return trit_tensor_init_layout(out, x->dtype, x->ndim, x->shape);
}

// Per channel (mean, rstd), then a flag: 1 if batch statistics were used.
static size_t bn_saved_bytes(const trit_op_call *c) { return sizeof(double) * (size_t)(2 * c->in[0]->shape[1] + 1); }

// Batch mean and biased variance of channel ch of x: (N, C, S), in double, two passes.
static void channel_stats(const real *x, bn_dims d, int64_t ch, double *mean_out, double *var_out) {
    double sum = 0, sq = 0;
    for (int64_t n = 0; n < d.N; n++) {
        const real *p = x + (n * d.C + ch) * d.S;
        for (int64_t s = 0; s < d.S; s++) sum += (double)p[s];
    }
    const double mean = sum / (double)(d.N * d.S);
    for (int64_t n = 0; n < d.N; n++) {
        const real *p = x + (n * d.C + ch) * d.S;
        for (int64_t s = 0; s < d.S; s++) {
            const double v = (double)p[s] - mean;
            sq += v * v;
        }
    }
    *mean_out = mean;
    *var_out = sq / (double)(d.N * d.S);
}

static trit_status bn_forward(const trit_op_call *c) {
    const trit_batchnorm_attr *a = c->attr;
    const bn_dims d = dims_of(c->in[0]);
    const int64_t m = d.N * d.S;
    const bool batch = c->ctx->training || !a->has_running;
    const bool update = c->ctx->training && a->has_running && !c->ctx->recompute;  // once per forward
    char buf[128];
    if (batch && m <= 1)
        return trit_error(TRIT_ERR_SHAPE, "batchnorm: batch statistics need more than 1 value per channel, x is %s; use a larger batch or eval mode",
                          trit_tensor_shape_str(c->in[0], buf, sizeof buf));
    const real *x = trit_tensor_ptr(c->in[0]);                                       // (N, C, S)
    const real *w = a->has_weight ? trit_tensor_ptr(c->in[weight_slot(a)]) : NULL;  // (C)
    const real *b = a->has_bias ? trit_tensor_ptr(c->in[bias_slot(a)]) : NULL;      // (C)
    const trit_tensor *rm = a->has_running ? c->in[1] : NULL, *rv = a->has_running ? c->in[2] : NULL;  // (C)
    real *y = c->out->data;  // (N, C, S)
    double *stats = c->saved;
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < d.C; ch++) {
        double mean, var;
        if (batch) {
            channel_stats(x, d, ch, &mean, &var);
        } else {
            mean = stat_get(rm, ch);
            var = stat_get(rv, ch);
        }
        const double rstd = 1.0 / sqrt(var + a->eps);
        stats[2 * ch] = mean;
        stats[2 * ch + 1] = rstd;
        if (update) {
            stat_set(rm, ch, (1.0 - a->momentum) * stat_get(rm, ch) + a->momentum * mean);
            stat_set(rv, ch, (1.0 - a->momentum) * stat_get(rv, ch) + a->momentum * var * (double)m / (double)(m - 1));
        }
        // y = x * k + shift with k = rstd * w and shift = b - mean * k.
        const real k = (real)(rstd * (w ? (double)w[ch] : 1.0));
        const real mu = (real)mean, bb = b ? b[ch] : (real)0;
        for (int64_t n = 0; n < d.N; n++) {
            const real *p = x + (n * d.C + ch) * d.S;
            real *q = y + (n * d.C + ch) * d.S;
            for (int64_t s = 0; s < d.S; s++) q[s] = (p[s] - mu) * k + bb;
        }
    }
    stats[2 * d.C] = batch ? 1.0 : 0.0;
    return TRIT_OK;
}

// With xhat = (x - mean) * rstd and sums over the N * S = m elements of a channel:
//   dw = sum(dy * xhat), db = sum(dy),
//   dx = rstd * w * (dy - db / m - xhat * dw / m) with batch statistics, rstd * w * dy without.
static trit_status bn_backward(const trit_op_call *c) {
    const trit_batchnorm_attr *a = c->attr;
    const bn_dims d = dims_of(c->in[0]);
    const double m = (double)(d.N * d.S);
    const real *x = trit_tensor_ptr(c->in[0]), *dy = c->gout->data;              // (N, C, S)
    const real *w = a->has_weight ? trit_tensor_ptr(c->in[weight_slot(a)]) : NULL;  // (C)
    real *dx = c->gin[0] ? c->gin[0]->data : NULL;                                  // (N, C, S)
    real *dw = a->has_weight && c->gin[weight_slot(a)] ? c->gin[weight_slot(a)]->data : NULL;  // (C)
    real *db = a->has_bias && c->gin[bias_slot(a)] ? c->gin[bias_slot(a)]->data : NULL;        // (C)
    const double *stats = c->saved;
    const bool batch = stats[2 * d.C] != 0.0;
#pragma omp parallel for schedule(static)
    for (int64_t ch = 0; ch < d.C; ch++) {
        const double mean = stats[2 * ch], rstd = stats[2 * ch + 1];
        double sdy = 0, sdyx = 0;
        for (int64_t n = 0; n < d.N; n++) {
            const real *p = x + (n * d.C + ch) * d.S, *g = dy + (n * d.C + ch) * d.S;
            for (int64_t s = 0; s < d.S; s++) {
                sdy += (double)g[s];
                sdyx += (double)g[s] * (((double)p[s] - mean) * rstd);
            }
        }
        if (dw) dw[ch] += (real)sdyx;
        if (db) db[ch] += (real)sdy;
        if (!dx) continue;
        const real k = (real)(rstd * (w ? (double)w[ch] : 1.0)), mu = (real)mean, r = (real)rstd;
        const real mdy = batch ? (real)(sdy / m) : 0, mdyx = batch ? (real)(sdyx / m) : 0;
        for (int64_t n = 0; n < d.N; n++) {
            const real *p = x + (n * d.C + ch) * d.S, *g = dy + (n * d.C + ch) * d.S;
            real *q = dx + (n * d.C + ch) * d.S;
            for (int64_t s = 0; s < d.S; s++) q[s] += k * (g[s] - mdy - (p[s] - mu) * r * mdyx);
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_batchnorm) = {
    .name = "batchnorm",
    .infer = bn_infer,
    .forward = bn_forward,
    .backward = bn_backward,
    .saved_bytes = bn_saved_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2),
    .attr_size = sizeof(trit_batchnorm_attr),
};

// Running statistics are written in place, so they are never copied: the constructor checks
// that they are contiguous state leaves.
const trit_op_def R(trit_op_batchnorm_tracked) = {
    .name = "batchnorm",
    .infer = bn_infer,
    .forward = bn_forward,
    .backward = bn_backward,
    .saved_bytes = bn_saved_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(3) | TRIT_IN(4),
    .no_grad_inputs = TRIT_IN(1) | TRIT_IN(2),
    .attr_size = sizeof(trit_batchnorm_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

// Running statistics are written by forward, so they must be the caller's own contiguous
// state tensors, not graph values or trainable parameters.
static bool running_stat_ok(trit_graph *g, const char *what, const trit_tensor *t) {
    const char *why = NULL;
    if (t->graph != NULL) why = "is a value of a graph; pass a tensor made with trit_tensor_new";
    else if (!(t->flags & TRIT_FLAG_STATE)) why = "lacks TRIT_FLAG_STATE; set t->flags |= TRIT_FLAG_STATE";
    else if (t->flags & TRIT_FLAG_PARAM) why = "is a trainable parameter; running statistics are state";
    else if (!t->data) why = "has no data";
    else if (!trit_tensor_is_contiguous(t)) why = "is not contiguous";
    if (!why) return true;
    trit_error(TRIT_ERR_INVALID, "batchnorm: %s '%s' %s", what, t->name, why);
    trit_graph_fail(g, TRIT_ERR_INVALID);
    return false;
}

trit_tensor *trit_batchnorm(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b,
                            trit_tensor *running_mean, trit_tensor *running_var, double momentum, double eps) {
    if (!trit_graph_eps_ok(g, "batchnorm", eps)) return NULL;
    if (!(momentum >= 0 && momentum <= 1)) {
        trit_error(TRIT_ERR_INVALID, "batchnorm: momentum must be in [0, 1], got %g (PyTorch's default is 0.1)", momentum);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    if ((running_mean == NULL) != (running_var == NULL)) {
        trit_error(TRIT_ERR_INVALID, "batchnorm: give both running_mean and running_var, or neither (NULL for both)");
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    const bool tracked = running_mean != NULL;
    if (tracked && (!running_stat_ok(g, "running_mean", running_mean) || !running_stat_ok(g, "running_var", running_var)))
        return NULL;
    trit_batchnorm_attr a = {
        .momentum = momentum, .eps = eps, .has_weight = w != NULL, .has_bias = b != NULL, .has_running = tracked};
    trit_tensor *in[5] = {x};
    int n = 1;
    if (tracked) {
        in[n++] = running_mean;
        in[n++] = running_var;
    }
    if (w) in[n++] = w;
    if (b) in[n++] = b;
    return tracked ? TRIT_APPLY(g, trit_op_batchnorm_tracked, n, in, &a) : TRIT_APPLY(g, trit_op_batchnorm, n, in, &a);
}

#endif
