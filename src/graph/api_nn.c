// Graph constructors for the neural-network ops: softmax, losses, embedding, normalisations
// and dropout. Cheap argument checks happen here, shape and dtype checks in each op's infer.
#include "graph/graph_internal.h"
#include "ops/batchnorm.h"
#include "ops/dropout.h"
#include "ops/embedding.h"
#include "ops/fake_quant.h"
#include "ops/loss.h"
#include "ops/norm.h"
#include "ops/softmax.h"
#include "trit/ops.h"

#include <math.h>

static bool reduction_ok(trit_graph *g, const char *op, trit_reduction red) {
    if (red == TRIT_REDUCE_MEAN || red == TRIT_REDUCE_SUM) return true;
    trit_error(TRIT_ERR_INVALID, "%s: reduction must be TRIT_REDUCE_MEAN or TRIT_REDUCE_SUM, got %d", op, (int)red);
    trit_graph_fail(g, TRIT_ERR_INVALID);
    return false;
}

static bool eps_ok(trit_graph *g, const char *op, double eps) {
    if (eps >= 0 && isfinite(eps)) return true;
    trit_error(TRIT_ERR_INVALID, "%s: eps must be finite and >= 0, got %g (PyTorch's default is 1e-5)", op, eps);
    trit_graph_fail(g, TRIT_ERR_INVALID);
    return false;
}

trit_tensor *trit_softmax(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_softmax, 1, &x, NULL); }

trit_tensor *trit_log_softmax(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_log_softmax, 1, &x, NULL); }

trit_tensor *trit_cross_entropy(trit_graph *g, trit_tensor *logits, trit_tensor *targets, int64_t ignore_index,
                                trit_reduction red) {
    if (!reduction_ok(g, "cross_entropy", red)) return NULL;
    trit_cross_entropy_attr a = {.ignore_index = ignore_index, .reduction = (int)red};
    trit_tensor *in[2] = {logits, targets};
    return TRIT_APPLY(g, trit_op_cross_entropy, 2, in, &a);
}

trit_tensor *trit_mse(trit_graph *g, trit_tensor *pred, trit_tensor *target, trit_reduction red) {
    if (!reduction_ok(g, "mse", red)) return NULL;
    trit_mse_attr a = {.reduction = (int)red};
    trit_tensor *in[2] = {pred, target};
    return TRIT_APPLY(g, trit_op_mse, 2, in, &a);
}

trit_tensor *trit_embedding(trit_graph *g, trit_tensor *weight, trit_tensor *idx) {
    trit_tensor *in[2] = {weight, idx};
    return TRIT_APPLY(g, trit_op_embedding, 2, in, NULL);
}

trit_tensor *trit_layernorm(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b, double eps) {
    if (!eps_ok(g, "layernorm", eps)) return NULL;
    trit_norm_attr a = {.eps = eps, .has_weight = w != NULL, .has_bias = b != NULL};
    trit_tensor *in[3] = {x};
    int n = 1;
    if (w) in[n++] = w;
    if (b) in[n++] = b;
    return TRIT_APPLY(g, trit_op_layernorm, n, in, &a);
}

trit_tensor *trit_rmsnorm(trit_graph *g, trit_tensor *x, trit_tensor *w, double eps) {
    if (!eps_ok(g, "rmsnorm", eps)) return NULL;
    trit_norm_attr a = {.eps = eps, .has_weight = w != NULL};
    trit_tensor *in[2] = {x, w};
    return TRIT_APPLY(g, trit_op_rmsnorm, w ? 2 : 1, in, &a);
}

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
    if (!eps_ok(g, "batchnorm", eps)) return NULL;
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

trit_tensor *trit_fake_quant(trit_graph *g, trit_tensor *x, const trit_fake_quant_spec *s, trit_tensor *running_absmax) {
    if (!s) {
        trit_error(TRIT_ERR_INVALID, "fake_quant: NULL spec");
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    const trit_fake_quant_attr a = {.spec = *s};
    trit_tensor *in[2] = {x, running_absmax};
    return TRIT_APPLY(g, trit_op_fake_quant, running_absmax ? 2 : 1, in, &a);
}

trit_tensor *trit_dropout(trit_graph *g, trit_tensor *x, double p) {
    if (!(p >= 0 && p < 1)) {
        trit_error(TRIT_ERR_INVALID, "dropout: p must be in [0, 1), got %g", p);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_dropout_attr a = {.p = p};
    return TRIT_APPLY(g, trit_op_dropout, 1, &x, &a);
}
