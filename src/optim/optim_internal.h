// Shared by the optimizer driver (optimizer.c), its configs and groups (config.c) and the
// element-wise update loops (update.c). Not a public header.
#ifndef TRIT_OPTIM_INTERNAL_H
#define TRIT_OPTIM_INTERNAL_H

#include "trit/optim.h"
#include "trit/quant.h"

// Elements per static OpenMP chunk. Chunks are fixed, so which thread updates an element never
// changes its value; below OPTIM_PAR_MIN elements a loop runs on the calling thread.
#define OPTIM_CHUNK 8192
#define OPTIM_PAR_MIN 32768
// Philox stream base of the stochastic rounding of 16-bit parameters (plus index << 40 + step).
#define OPTIM_SR_STREAM 0x5352000000000000ull

// At most two fp32 buffers per parameter (Adam's moments; RMSProp's square average + momentum).
#define OPTIM_MAX_BUFS 2

// Scalars of one parameter's update, already rounded to float the way torch.optim rounds its
// Python-float hyper-parameters when they meet fp32 tensors.
typedef struct optim_scalars {
    float neg_lr;            // -lr (SGD, RMSProp); -lr / (1 - beta1^t) for Adam(W)
    float weight_decay;      // L2 coefficient added to the gradient (0 for AdamW)
    float decay_mul;         // AdamW: 1 - lr * wd, applied to p first
    float momentum;
    float a, one_minus_a;    // RMSProp alpha / Adam beta1
    float b, one_minus_b;    // Adam beta2
    float bc2_sqrt;          // Adam: sqrt(1 - beta2^t)
    float eps;
} optim_scalars;

// p, g and state buffers: (n) fp32, contiguous, not aliased.
void trit_optim_update_sgd(float *p, const float *g, int64_t n, const optim_scalars *s);
void trit_optim_update_momentum(float *p, const float *g, float *buf, int64_t n,
                                const optim_scalars *s, bool nesterov);
// buf is NULL without momentum.
void trit_optim_update_rmsprop(float *p, const float *g, float *sq, float *buf, int64_t n,
                               const optim_scalars *s);
// decoupled: AdamW (p *= decay_mul, no L2 term); otherwise Adam with L2 decay.
void trit_optim_update_adam(float *p, const float *g, float *m, float *v, int64_t n,
                            const optim_scalars *s, bool decoupled);

// AdamW with 8-bit moments: p, g (n) from an element that starts a block; m, v: (n) codes of
// the signed and unsigned dynamic maps; am, av: (ceil(n / TRIT_OPTIM_8BIT_BLOCK)) their absmax.
typedef struct optim_q8 {
    uint8_t *m, *v;
    float *am, *av;
    const trit_dynamic_code *map_m, *map_v;  // signed, unsigned
} optim_q8;
void trit_optim_update_adamw8bit(float *p, const float *g, const optim_q8 *q, int64_t n, const optim_scalars *s);

// The state buffer keys of a config, in order ("exp_avg", "exp_avg_sq", ...); returns the count.
int trit_optim_state_keys(const trit_optim_config *cfg, const char *keys[OPTIM_MAX_BUFS]);

// Checks one parameter for an optimizer or for clipping: f32, contiguous, and a grad (if set)
// that is f32, contiguous and of the same shape. `who` names the caller in messages.
trit_status trit_optim_check_param(const trit_tensor *p, const char *who, int index);

#endif
