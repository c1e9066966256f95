// Loss scaling: the scale's schedule (dynamic or static) and unscaling gradients with the
// finite check that decides whether a step is taken.
#include "optim/optim_internal.h"

#include <math.h>

trit_status trit_loss_scaler_init(trit_loss_scaler *s, double initial, bool dynamic) {
    if (!s) return trit_error(TRIT_ERR_INVALID, "trit_loss_scaler_init: NULL scaler");
    if (!(initial >= 1.0 && isfinite(initial)))
        return trit_error(TRIT_ERR_INVALID, "loss scale must be finite and >= 1, got %g", initial);
    *s = (trit_loss_scaler){.scale = initial, .dynamic = dynamic, .growth = 2.0, .backoff = 0.5,
                            .growth_interval = 2000, .clean = 0};
    return TRIT_OK;
}

void trit_loss_scaler_update(trit_loss_scaler *s, bool finite) {
    if (!s || !s->dynamic) return;
    if (!finite) {
        s->scale = fmax(1.0, s->scale * s->backoff);
        s->clean = 0;
        return;
    }
    if (++s->clean >= s->growth_interval) {
        const double grown = s->scale * s->growth;
        if (isfinite(grown) && grown <= 0x1p64) s->scale = grown;  // beyond 2^64 nothing is gained
        s->clean = 0;
    }
}

// Sum of squares of one gradient in fixed chunks (each chunk summed in order, the chunk sums in
// order), so the result is the same on any number of threads; Inf or NaN makes it non-finite.
static double sumsq(const float *g, int64_t n) {
    const int64_t chunks = (n + OPTIM_CHUNK - 1) / OPTIM_CHUNK;
    double total = 0;
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t lo = c * OPTIM_CHUNK, hi = lo + OPTIM_CHUNK < n ? lo + OPTIM_CHUNK : n;
        double s = 0;
        for (int64_t i = lo; i < hi; i++) s += (double)g[i] * g[i];
        total += s;
    }
    return total;
}

bool trit_grads_unscale(trit_tensor *const *params, int num_params, double inv_scale) {
    double total = 0;
    for (int i = 0; i < num_params; i++) {
        const trit_tensor *p = params[i];
        if (!p || !p->grad || (p->flags & TRIT_FLAG_FROZEN)) continue;
        total += sumsq(trit_tensor_ptr(p->grad), trit_tensor_numel(p->grad));
    }
    if (!isfinite(total)) return false;
    if (inv_scale == 1.0) return true;
    const float f = (float)inv_scale;
    for (int i = 0; i < num_params; i++) {
        trit_tensor *p = params[i];
        if (!p || !p->grad || (p->flags & TRIT_FLAG_FROZEN)) continue;
        float *g = trit_tensor_ptr(p->grad);
        const int64_t n = trit_tensor_numel(p->grad);
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
        for (int64_t j = 0; j < n; j++) g[j] *= f;
    }
    return true;
}
