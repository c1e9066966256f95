// Optimizer configs with torch.optim's defaults, their range checks, the GPT-2 weight-decay
// rule for parameter groups, and the checks every parameter must pass.
#include "optim/optim_internal.h"

#include <float.h>
#include <math.h>

trit_optim_config trit_optim_sgd(double momentum, bool nesterov) {
    return (trit_optim_config){.kind = TRIT_OPTIM_SGD, .momentum = momentum, .nesterov = nesterov,
                               .alpha = 0.99, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
}

trit_optim_config trit_optim_rmsprop(double alpha, double eps, double momentum) {
    return (trit_optim_config){.kind = TRIT_OPTIM_RMSPROP, .momentum = momentum, .alpha = alpha,
                               .beta1 = 0.9, .beta2 = 0.999, .eps = eps};
}

trit_optim_config trit_optim_adam(double beta1, double beta2, double eps) {
    return (trit_optim_config){.kind = TRIT_OPTIM_ADAM, .alpha = 0.99, .beta1 = beta1,
                               .beta2 = beta2, .eps = eps};
}

trit_optim_config trit_optim_adamw(double beta1, double beta2, double eps) {
    trit_optim_config c = trit_optim_adam(beta1, beta2, eps);
    c.kind = TRIT_OPTIM_ADAMW;
    return c;
}

trit_optim_config trit_optim_adamw8bit(double beta1, double beta2, double eps) {
    trit_optim_config c = trit_optim_adam(beta1, beta2, eps);
    c.kind = TRIT_OPTIM_ADAMW8BIT;
    return c;
}

trit_optim_config trit_optim_galore(int64_t rank, int64_t update_gap, double scale) {
    trit_optim_config c = trit_optim_adamw(0.9, 0.999, 1e-8);
    c.kind = TRIT_OPTIM_GALORE;
    c.galore_rank = rank;
    c.galore_update = update_gap;
    c.galore_scale = scale;
    c.qgalore_cos = 0.4;
    return c;
}

trit_optim_config trit_optim_qgalore(int64_t rank, int64_t update_gap, double scale) {
    trit_optim_config c = trit_optim_galore(rank, update_gap, scale);
    c.kind = TRIT_OPTIM_QGALORE;
    return c;
}

const char *trit_optim_kind_name(trit_optim_kind kind) {
    switch (kind) {
    case TRIT_OPTIM_SGD: return "sgd";
    case TRIT_OPTIM_RMSPROP: return "rmsprop";
    case TRIT_OPTIM_ADAM: return "adam";
    case TRIT_OPTIM_ADAMW: return "adamw";
    case TRIT_OPTIM_ADAMW8BIT: return "adamw8bit";
    case TRIT_OPTIM_GALORE: return "galore";
    case TRIT_OPTIM_QGALORE: return "qgalore";
    }
    return "unknown";
}

// [0, 1) and finite; NaN fails every comparison, so it is rejected too.
static bool in_unit(double x) { return x >= 0.0 && x < 1.0; }

trit_status trit_optim_config_check(const trit_optim_config *cfg) {
    if (!cfg) return trit_error(TRIT_ERR_INVALID, "optimizer config is NULL");
    const char *name = trit_optim_kind_name(cfg->kind);
    switch (cfg->kind) {
    case TRIT_OPTIM_SGD:
        if (!(cfg->momentum >= 0.0 && isfinite(cfg->momentum)))
            return trit_error(TRIT_ERR_INVALID, "sgd: momentum must be finite and >= 0, got %g",
                              cfg->momentum);
        if (cfg->nesterov && cfg->momentum <= 0.0)
            return trit_error(TRIT_ERR_INVALID,
                              "sgd: Nesterov needs momentum > 0, got %g: set a momentum or "
                              "turn Nesterov off", cfg->momentum);
        return TRIT_OK;
    case TRIT_OPTIM_RMSPROP:
        if (!in_unit(cfg->alpha))
            return trit_error(TRIT_ERR_INVALID, "rmsprop: alpha must be in [0, 1), got %g "
                              "(0.99 is the usual value)", cfg->alpha);
        if (!(cfg->momentum >= 0.0 && isfinite(cfg->momentum)))
            return trit_error(TRIT_ERR_INVALID,
                              "rmsprop: momentum must be finite and >= 0, got %g", cfg->momentum);
        break;
    case TRIT_OPTIM_ADAM:
    case TRIT_OPTIM_ADAMW:
    case TRIT_OPTIM_ADAMW8BIT:
    case TRIT_OPTIM_GALORE:
    case TRIT_OPTIM_QGALORE:
        if (!in_unit(cfg->beta1) || !in_unit(cfg->beta2))
            return trit_error(TRIT_ERR_INVALID,
                              "%s: betas must be in [0, 1), got (%g, %g) (usual: 0.9, 0.999)",
                              name, cfg->beta1, cfg->beta2);
        if (cfg->kind == TRIT_OPTIM_GALORE || cfg->kind == TRIT_OPTIM_QGALORE) {
            if (cfg->galore_rank < 1 || cfg->galore_update < 1)
                return trit_error(TRIT_ERR_INVALID, "%s: rank and update gap must be >= 1, got %lld and %lld "
                                  "(usual: 128 and 200)", name, (long long)cfg->galore_rank,
                                  (long long)cfg->galore_update);
            if (!(cfg->galore_scale > 0.0 && cfg->galore_scale <= FLT_MAX))
                return trit_error(TRIT_ERR_INVALID, "%s: scale must be finite and > 0, got %g (usual: 0.25)", name,
                                  cfg->galore_scale);
            if (!(cfg->qgalore_cos >= 0.0 && cfg->qgalore_cos <= 1.0))
                return trit_error(TRIT_ERR_INVALID, "%s: the cosine threshold must be in [0, 1], got %g (usual: 0.4)",
                                  name, cfg->qgalore_cos);
        }
        break;
    default:
        return trit_error(TRIT_ERR_INVALID, "unknown optimizer kind %d", (int)cfg->kind);
    }
    // The update runs in fp32: an eps that rounds to a float zero or subnormal would divide
    // 0 by 0 where a gradient has been zero.
    if (!(cfg->eps >= FLT_MIN && cfg->eps <= FLT_MAX))
        return trit_error(TRIT_ERR_INVALID, "%s: eps must be in [%g, %g] (an fp32 normal), got %g (usual: 1e-8)",
                          name, (double)FLT_MIN, (double)FLT_MAX, cfg->eps);
    return TRIT_OK;
}

int trit_optim_state_keys(const trit_optim_config *cfg, const char *keys[OPTIM_MAX_BUFS]) {
    switch (cfg->kind) {
    case TRIT_OPTIM_SGD:
        if (cfg->momentum == 0.0) return 0;
        keys[0] = "momentum_buffer";
        return 1;
    case TRIT_OPTIM_RMSPROP:
        keys[0] = "square_avg";
        if (cfg->momentum == 0.0) return 1;
        keys[1] = "momentum_buffer";
        return 2;
    case TRIT_OPTIM_ADAM:
    case TRIT_OPTIM_ADAMW:
    case TRIT_OPTIM_ADAMW8BIT:
    case TRIT_OPTIM_GALORE:
    case TRIT_OPTIM_QGALORE:
        keys[0] = "exp_avg";
        keys[1] = "exp_avg_sq";
        return 2;
    }
    return 0;
}

bool trit_optim_wants_decay(const trit_tensor *p) { return p && p->ndim >= 2; }

trit_status trit_optim_split_decay(trit_tensor *const *params, int num_params, trit_tensor **decay,
                                   int *num_decay, trit_tensor **no_decay, int *num_no_decay) {
    if (num_params < 0 || (num_params > 0 && !params))
        return trit_error(TRIT_ERR_INVALID, "split_decay: params is NULL or num_params < 0 (%d)",
                          num_params);
    if (!decay || !no_decay || !num_decay || !num_no_decay)
        return trit_error(TRIT_ERR_INVALID, "split_decay: output arrays and counts must be given");
    int nd = 0, nn = 0;
    for (int i = 0; i < num_params; i++) {
        if (!params[i])
            return trit_error(TRIT_ERR_INVALID, "split_decay: params[%d] is NULL", i);
        if (trit_optim_wants_decay(params[i]))
            decay[nd++] = params[i];
        else
            no_decay[nn++] = params[i];
    }
    *num_decay = nd;
    *num_no_decay = nn;
    return TRIT_OK;
}

trit_status trit_optim_check_param(const trit_tensor *p, const char *who, int index) {
    if (!p) return trit_error(TRIT_ERR_INVALID, "%s: parameter %d is NULL", who, index);
    const char *name = p->name[0] ? p->name : "(unnamed)";
    if (p->dtype != TRIT_F32 && p->dtype != TRIT_BF16 && p->dtype != TRIT_F16)
        return trit_error(TRIT_ERR_DTYPE,
                          "%s: parameter %d '%s' is %s, expected f32 (or bf16/f16 without master weights)",
                          who, index, name, trit_dtype_name(p->dtype));
    if (!p->data || !trit_tensor_is_contiguous(p))
        return trit_error(TRIT_ERR_INVALID,
                          "%s: parameter %d '%s' must have contiguous data", who, index, name);
    const trit_tensor *g = p->grad;
    if (!g) return TRIT_OK;
    if (g->dtype != TRIT_F32)
        return trit_error(TRIT_ERR_DTYPE, "%s: grad of parameter %d '%s' is %s, expected f32",
                          who, index, name, trit_dtype_name(g->dtype));
    if (!trit_tensor_same_shape(p, g)) {
        char ps[128], gs[128];
        return trit_error(TRIT_ERR_SHAPE, "%s: grad of parameter %d '%s' has shape %s, expected %s",
                          who, index, name, trit_tensor_shape_str(g, gs, sizeof gs),
                          trit_tensor_shape_str(p, ps, sizeof ps));
    }
    if (!g->data || !trit_tensor_is_contiguous(g))
        return trit_error(TRIT_ERR_INVALID, "%s: grad of parameter %d '%s' must be contiguous",
                          who, index, name);
    return TRIT_OK;
}
