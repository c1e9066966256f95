// Learning-rate schedules: pure functions of the step (no state), so a resumed run gets the
// same lr from the step counter alone. Warmup and cosine follow nanoGPT's get_lr.
#include "trit/optim.h"

#include <math.h>

#define LR_PI 3.14159265358979323846

trit_lr_schedule trit_lr_constant(double lr) {
    return (trit_lr_schedule){.kind = TRIT_LR_CONSTANT, .peak = lr, .floor = lr, .gamma = 1.0,
                              .step_size = 1};
}

trit_lr_schedule trit_lr_warmup_cosine(double peak, double floor, int64_t warmup_steps,
                                       int64_t total_steps) {
    return (trit_lr_schedule){.kind = TRIT_LR_WARMUP_COSINE, .peak = peak, .floor = floor,
                              .warmup_steps = warmup_steps, .total_steps = total_steps,
                              .gamma = 1.0, .step_size = 1};
}

trit_lr_schedule trit_lr_step_decay(double lr, double gamma, int64_t step_size) {
    return (trit_lr_schedule){.kind = TRIT_LR_STEP_DECAY, .peak = lr, .floor = 0.0,
                              .gamma = gamma, .step_size = step_size};
}

trit_lr_schedule trit_lr_two_stage(double peak, double floor, int64_t warmup_steps, int64_t total_steps,
                                   int64_t stage2_at, double stage2_scale) {
    trit_lr_schedule s = trit_lr_warmup_cosine(peak, floor, warmup_steps, total_steps);
    s.kind = TRIT_LR_TWO_STAGE;
    s.stage2_at = stage2_at;
    s.stage2_scale = stage2_scale;
    return s;
}

static bool finite_nonneg(double x) { return x >= 0.0 && isfinite(x); }

trit_status trit_lr_check(const trit_lr_schedule *s) {
    if (!s) return trit_error(TRIT_ERR_INVALID, "lr schedule is NULL");
    if (!finite_nonneg(s->peak))
        return trit_error(TRIT_ERR_INVALID, "lr schedule: peak lr must be finite and >= 0, got %g",
                          s->peak);
    if (s->warmup_steps < 0)
        return trit_error(TRIT_ERR_INVALID, "lr schedule: warmup_steps must be >= 0, got %lld",
                          (long long)s->warmup_steps);
    switch (s->kind) {
    case TRIT_LR_CONSTANT: return TRIT_OK;
    case TRIT_LR_TWO_STAGE:
        if (!(s->stage2_scale > 0 && s->stage2_scale <= 1) || s->stage2_at < 0)
            return trit_error(TRIT_ERR_INVALID, "lr schedule: the second stage needs a step >= 0 and a scale in (0, 1], "
                              "got step %lld, scale %g", (long long)s->stage2_at, s->stage2_scale);
        __attribute__((fallthrough));  // the rest is a warmup + cosine schedule
    case TRIT_LR_WARMUP_COSINE:
        if (!finite_nonneg(s->floor))
            return trit_error(TRIT_ERR_INVALID, "lr schedule: floor lr must be finite and >= 0, "
                              "got %g", s->floor);
        if (s->total_steps < s->warmup_steps)
            return trit_error(TRIT_ERR_INVALID, "lr schedule: total_steps (%lld) must be >= "
                              "warmup_steps (%lld)", (long long)s->total_steps,
                              (long long)s->warmup_steps);
        return TRIT_OK;
    case TRIT_LR_STEP_DECAY:
        if (!(s->gamma > 0.0 && isfinite(s->gamma)))
            return trit_error(TRIT_ERR_INVALID, "lr schedule: gamma must be finite and > 0, got %g "
                              "(0.1 is usual)", s->gamma);
        if (s->step_size < 1)
            return trit_error(TRIT_ERR_INVALID, "lr schedule: step_size must be >= 1, got %lld",
                              (long long)s->step_size);
        return TRIT_OK;
    }
    return trit_error(TRIT_ERR_INVALID, "lr schedule: unknown kind %d", (int)s->kind);
}

double trit_lr_at(const trit_lr_schedule *s, int64_t step) {
    if (step < 0 || trit_lr_check(s) != TRIT_OK) return NAN;
    const int64_t w = s->warmup_steps;
    if (step < w) return s->peak * (double)(step + 1) / (double)w;
    switch (s->kind) {
    case TRIT_LR_CONSTANT: return s->peak;
    case TRIT_LR_WARMUP_COSINE:
    case TRIT_LR_TWO_STAGE: {
        const double stage = s->kind == TRIT_LR_TWO_STAGE && step >= s->stage2_at ? s->stage2_scale : 1.0;
        if (step >= s->total_steps) return stage * s->floor;
        double ratio = (double)(step - w) / (double)(s->total_steps - w);
        double coeff = 0.5 * (1.0 + cos(LR_PI * ratio));
        return stage * (s->floor + coeff * (s->peak - s->floor));
    }
    case TRIT_LR_STEP_DECAY:
        return s->peak * pow(s->gamma, (double)((step - w) / s->step_size));
    }
    return NAN;
}
