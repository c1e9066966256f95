// trit optimizers: SGD (momentum, Nesterov), RMSProp, Adam and AdamW with the update formulas of
// torch.optim, parameter groups (each with its own lr multiplier and weight decay), gradient
// clipping by global L2 norm, and learning-rate schedules as pure functions of the step.
//
// Parameters are contiguous f32 tensors (or bf16/f16 without master weights, see
// trit_optim_set_rounding) whose `grad` (same shape, f32, contiguous) is filled by the graph.
// Optimizer state is fp32 (8-bit codes with block scales for AdamW8bit), allocated once by
// trit_optim_new; a step allocates nothing.
// Every element update is independent, so results do not depend on the thread count.
#ifndef TRIT_OPTIM_H
#define TRIT_OPTIM_H

#include "trit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- configuration ---------------------------------------------------------------------------

typedef enum trit_optim_kind {
    TRIT_OPTIM_SGD = 0,  // p -= lr * d, d = g + wd p (with momentum: buf = mu buf + d)
    TRIT_OPTIM_RMSPROP,  // v = alpha v + (1 - alpha) g^2; p -= lr g / (sqrt(v) + eps)
    TRIT_OPTIM_ADAM,     // L2 decay added to the gradient, bias-corrected moments
    TRIT_OPTIM_ADAMW,    // decoupled decay p *= 1 - lr wd, then Adam without decay
    TRIT_OPTIM_ADAMW8BIT,  // AdamW with both moments stored in 8 bits (below)
    TRIT_OPTIM_GALORE,     // AdamW with the gradients of low-rank groups' matrices projected (below)
    TRIT_OPTIM_QGALORE,    // GaLore with int4 bases, int8-grid weights and lazy refreshes (below)
} trit_optim_kind;

// AdamW8bit keeps the moments of a parameter with at least TRIT_OPTIM_8BIT_MIN_SIZE elements
// as bitsandbytes' 8-bit optimizers do: block-wise codes of its dynamic maps (trit/quant.h;
// the signed map for exp_avg, the unsigned one for exp_avg_sq), TRIT_OPTIM_8BIT_BLOCK values
// per block, one f32 absmax per block. A step, per block: decode both moments to f32, the
// AdamW update of TRIT_OPTIM_ADAMW (same scalars, same fp32 arithmetic), encode them again
// with the block's new absmax. Blocks are independent, so the thread count changes nothing.
// Smaller parameters (biases, norm gains: bitsandbytes' min_8bit_size) keep fp32 moments and
// are stepped exactly as by TRIT_OPTIM_ADAMW. State: 2 bytes + 8 / 256 bytes of scales per
// element instead of 8.
#define TRIT_OPTIM_8BIT_BLOCK 256
#define TRIT_OPTIM_8BIT_MIN_SIZE 4096

// GaLore (Zhao et al. 2024, galore-torch's GaLoreAdamW) steps each matrix W (m, n) of a group
// with low_rank set by a gradient projected on a rank-r basis of its smaller side: for m < n,
// P (m, r) = the top r left singular vectors of G and R = P^T G (r, n); for m >= n, Q (r, n) =
// the top r right singular vectors and R = G Q^T (m, r). Adam's moments live in R's shape; the
// normalized step N (AdamW's, same scalars and fp32 arithmetic) is projected back, P N or N Q,
// and W = W * (1 - lr wd) + scale * that. The basis is recomputed (LAPACK's SVD, in double, on
// one OpenBLAS thread) on the first step and every galore_update steps after, each vector signed
// so its largest entry is positive; the moments are kept across refreshes as galore-torch keeps
// them. (galore-torch's AdamW adds eps to sqrt(v) before the bias correction and decays after
// the step; here both follow TRIT_OPTIM_ADAMW, so at full rank with an axis-aligned basis the
// step is AdamW's exactly.) Vectors, and matrices of groups without low_rank, are stepped as by
// TRIT_OPTIM_ADAMW. State of a projected matrix: exp_avg and exp_avg_sq (R's shape) and
// galore_basis (P or Q): 2 r max(m, n) + r min(m, n) values instead of 2 m n.
//
// Q-GaLore (Zhang et al. 2024) adds, per projected matrix: the basis stored as int4 codes with an
// f32 absmax scale per TRIT_QGALORE_GROUP values (symmetric, where Q-GaLore's are affine uint4);
// the weight rounded stochastically to an int8 grid (scale absmax / 127 per TRIT_QGALORE_GROUP
// values) after each update, with the bits of trit_optim_set_rounding's seed; and lazy
// refreshes: at each refresh the |cosine similarity| of the new leading basis vector with the
// previous basis's is queued (the last TRIT_QGALORE_QUEUE), and while their mean is at least
// qgalore_cos the matrix's refresh gap doubles, so refreshes are skipped while consecutive bases
// agree. Its gap and queue are the state entry galore_sched (f64). The graph still reads the
// weights as f32 (their values on the int8 grid): the memory Q-GaLore saves on int8 weights is
// not saved here.
#define TRIT_QGALORE_GROUP 256
#define TRIT_QGALORE_QUEUE 5

// Hyper-parameters shared by all groups. Weight decay belongs to the groups.
typedef struct trit_optim_config {
    trit_optim_kind kind;
    double momentum;  // SGD and RMSProp; 0 = none. Dampening is always 0.
    bool nesterov;    // SGD only; needs momentum > 0
    double alpha;     // RMSProp smoothing constant, in [0, 1)
    double beta1;     // Adam(W) first-moment decay, in [0, 1)
    double beta2;     // Adam(W) second-moment decay, in [0, 1)
    double eps;       // RMSProp and Adam(W); > 0
    int64_t galore_rank;    // GaLore / Q-GaLore: r >= 1, at most the smaller side of each projected matrix
    int64_t galore_update;  // steps between basis refreshes (>= 1; Q-GaLore's initial gap)
    double galore_scale;    // factor of the projected-back step (> 0; 0.25 in the paper)
    double qgalore_cos;     // Q-GaLore: mean |cosine| at which a matrix's gap doubles (0.4)
} trit_optim_config;

// Configs with torch.optim's defaults for everything not passed.
trit_optim_config trit_optim_sgd(double momentum, bool nesterov);
trit_optim_config trit_optim_rmsprop(double alpha, double eps, double momentum);  // 0.99, 1e-8, 0
trit_optim_config trit_optim_adam(double beta1, double beta2, double eps);        // 0.9, 0.999, 1e-8
trit_optim_config trit_optim_adamw(double beta1, double beta2, double eps);
trit_optim_config trit_optim_adamw8bit(double beta1, double beta2, double eps);
// AdamW's defaults plus rank, update gap and scale; Q-GaLore's cosine threshold is 0.4.
trit_optim_config trit_optim_galore(int64_t rank, int64_t update_gap, double scale);
trit_optim_config trit_optim_qgalore(int64_t rank, int64_t update_gap, double scale);
const char *trit_optim_kind_name(trit_optim_kind kind);

// Checks ranges (betas in [0, 1), eps > 0, momentum >= 0, Nesterov with momentum).
trit_status trit_optim_config_check(const trit_optim_config *cfg);

// ---- parameter groups ------------------------------------------------------------------------

typedef struct trit_optim_group {
    trit_tensor *const *params;  // read during trit_optim_new only (the list is copied)
    int num_params;
    double lr_scale;             // this group's lr = lr passed to step * lr_scale (>= 0)
    double weight_decay;         // >= 0; L2 for SGD/RMSProp/Adam, decoupled for AdamW
    bool low_rank;               // GaLore / Q-GaLore: project this group's 2-D parameters
} trit_optim_group;

// The GPT-2 rule: decay weights of matmuls and embeddings (ndim >= 2), never biases or norm
// gains (ndim < 2).
bool trit_optim_wants_decay(const trit_tensor *p);

// Splits params by trit_optim_wants_decay, keeping their order. `decay` and `no_decay` must
// each hold num_params entries; the counts are written to *num_decay and *num_no_decay.
trit_status trit_optim_split_decay(trit_tensor *const *params, int num_params, trit_tensor **decay,
                                   int *num_decay, trit_tensor **no_decay, int *num_no_decay);

// ---- the optimizer -----------------------------------------------------------------------------

typedef struct trit_optim trit_optim;

// Validates every parameter (non-NULL, f32, contiguous, grad f32 of the same shape if already
// set, in no more than one group) and allocates all state. Parameters flagged TRIT_FLAG_FROZEN
// now get no state and are never updated. Returns NULL with trit_last_error() set on failure.
trit_optim *trit_optim_new(const trit_optim_config *cfg, const trit_optim_group *groups,
                           int num_groups);
// One group with lr_scale 1.
trit_optim *trit_optim_new_single(const trit_optim_config *cfg, trit_tensor *const *params,
                                  int num_params, double weight_decay);
// Two groups by the GPT-2 rule: group 0 = ndim >= 2 with `weight_decay`, group 1 = the rest
// with none. Both have lr_scale 1.
trit_optim *trit_optim_new_gpt2(const trit_optim_config *cfg, trit_tensor *const *params,
                                int num_params, double weight_decay);
void trit_optim_free(trit_optim *o);

// One update with learning rate `lr` (e.g. from trit_lr_at). Parameters that are frozen or
// whose grad is NULL are skipped. All grads are checked before any parameter changes, so a
// failed step leaves parameters and state untouched. Increments the step counter.
trit_status trit_optim_step(trit_optim *o, double lr);

// Parameters stored in bf16 or f16 (training without fp32 master weights) are updated in f32
// and rounded back: to nearest (the default) or, with stochastic set, stochastically with
// random bits keyed by (seed, parameter index, step, element), so the expected weight follows
// the exact update and tiny updates are not lost. f32 parameters are unaffected.
void trit_optim_set_rounding(trit_optim *o, bool stochastic, uint64_t seed);
// Parameter i's stochastic rounding draws those of parameter `key` from its element `first` on
// (a ZeRO shard's 1-D piece of a parameter rounds as the whole parameter does in one process).
trit_status trit_optim_set_rounding_key(trit_optim *o, int i, int key, int64_t first);

// Zeroes the grads of all parameters the optimizer holds (NULL grads are left alone).
void trit_optim_zero_grad(trit_optim *o);

const trit_optim_config *trit_optim_get_config(const trit_optim *o);
int trit_optim_num_groups(const trit_optim *o);
// The group's settings; its `params` points at the optimizer's own copy of the list.
trit_status trit_optim_get_group(const trit_optim *o, int group, trit_optim_group *out);
trit_status trit_optim_set_group(trit_optim *o, int group, double lr_scale, double weight_decay);
int trit_optim_num_params(const trit_optim *o);
trit_tensor *trit_optim_param(const trit_optim *o, int i);  // in group order

// ---- loss scaling ------------------------------------------------------------------------------
// The loss is multiplied by `scale` before backward so small gradients survive 16-bit values;
// the gradients are divided by it again before clipping and the update. A dynamic scaler (as
// PyTorch's GradScaler) halves the scale and the step is skipped when a gradient is not finite,
// and doubles it after growth_interval clean steps in a row; a static one never changes.

typedef struct trit_loss_scaler {
    double scale;             // current scale, >= 1
    bool dynamic;
    double growth, backoff;   // 2 and 0.5
    int64_t growth_interval;  // clean steps before growing (2000)
    int64_t clean;            // clean steps since the scale last changed
} trit_loss_scaler;

// A dynamic scaler starting at `initial` (2^16 for fp16), or a static one at `initial`.
trit_status trit_loss_scaler_init(trit_loss_scaler *s, double initial, bool dynamic);
// After a step: finite = every gradient was finite (the step was taken). The scale never goes
// below 1: halving further would only shrink gradients that overflow without any scale.
void trit_loss_scaler_update(trit_loss_scaler *s, bool finite);
// Multiplies every gradient of params by inv_scale (skipped when it is 1) and reports whether
// all of them are finite, checked before scaling (the sum of squares is thread-independent).
bool trit_grads_unscale(trit_tensor *const *params, int num_params, double inv_scale);

// ---- state, for checkpoints ----------------------------------------------------------------
// State buffers are typed arrays (f32, or u8 codes with f32 block scales) owned by the
// optimizer, listed in a fixed order (group order, then parameter order, then the kind's
// buffers). Names are "<param name>.<key>" with the keys of torch.optim ("momentum_buffer",
// "square_avg", "exp_avg", "exp_avg_sq"; GaLore adds "galore_basis" and Q-GaLore "galore_sched"
// for a projected matrix); a parameter with an empty name is called "param<i>"
// after its index in trit_optim_param order. Saving = copying each buffer's values (and
// scales) out plus the step counter; restoring = copying them into a new optimizer of the same
// kind built over the same parameters with the same config.

// A typed buffer, so optimizers whose state is stored in 8 bits with block scales, low rank, or
// sliced across processes, describe it the same way. Each buffer has its own dtype and shape:
// f32 values shaped like their parameter, without scales; AdamW8bit's quantized moments are u8
// codes (indices into the dynamic map) shaped like the parameter, with ceil(count / 256)
// scales; GaLore's moments are f32 in the projected shape, its basis f32 (rows, r) or (r, cols),
// Q-GaLore's basis int4 codes with a scale per 256 and its schedule f64.
typedef struct trit_optim_state_buf {
    const char *name;
    trit_dtype dtype;               // storage of data
    void *data;                     // writable, so a loader can fill it: nbytes(dtype, count) bytes
    float *scales;                  // (num_scales) block scales of a quantized state, else NULL (writable)
    int64_t num_scales;
    int ndim;                       // the buffer's shape
    int64_t shape[TRIT_MAX_DIMS];
    int64_t count;                  // elements
    const trit_tensor *param;
} trit_optim_state_buf;

int trit_optim_num_state(const trit_optim *o);
// Bytes of scratch the optimizer holds besides its state (GaLore: the projections of the largest
// matrix), for memory reports.
size_t trit_optim_scratch_bytes(const trit_optim *o);
trit_status trit_optim_get_state(const trit_optim *o, int i, trit_optim_state_buf *out);
// Number of completed steps (Adam's bias correction uses it). One counter serves all
// parameters; torch.optim counts per parameter, which differs only for a parameter skipped on
// some steps (NULL grad or frozen), whose bias correction here follows the global count.
int64_t trit_optim_get_step(const trit_optim *o);
trit_status trit_optim_set_step(trit_optim *o, int64_t step);

// ---- offload ----------------------------------------------------------------------------------
// Moves the state into a new file at `path` (refused if it exists; unlinked at once, so nothing
// is left behind), mapped shared: a step then streams it parameter by parameter, reading the next
// parameter's state ahead and dropping each one's pages from memory after its update (the file
// keeps them; the kernel writes them back when it needs the memory). The same bits as in memory. The state listing,
// checkpoints and loading see the mapped buffers as before. Call once, before the first step.
trit_status trit_optim_offload(trit_optim *o, const char *path);
bool trit_optim_offloaded(const trit_optim *o);
// Bytes of state in the file, and the most a step holds at once (the largest parameter's state);
// both 0 when the state is in memory.
void trit_optim_offload_bytes(const trit_optim *o, size_t *offloaded, size_t *resident);
// Drops from memory the whole pages of [at, at + bytes) that lie in o's file mapping (after a
// caller read a state buffer, e.g. to save it); nothing outside the mapping is touched.
void trit_optim_offload_evict(const trit_optim *o, const void *at, size_t bytes);

// ---- gradient clipping -------------------------------------------------------------------------
// The L2 norm over all grads of `params` (NULL grads and frozen params skipped), accumulated in
// double over fixed blocks summed in a fixed order: the same bits for any thread count.
// A NaN or Inf norm returns TRIT_ERR_NUMERIC (norm still written) and leaves grads unchanged.
trit_status trit_optim_grad_norm(trit_tensor *const *params, int num_params, double *norm);
// As torch.nn.utils.clip_grad_norm_: computes the norm, then scales every grad by
// max_norm / (norm + 1e-6) when that factor is below 1. *norm receives the norm before clipping.
trit_status trit_optim_clip_grad_norm(trit_tensor *const *params, int num_params, double max_norm,
                                      double *norm);
// The same over all parameters the optimizer holds.
trit_status trit_optim_clip_grads(trit_optim *o, double max_norm, double *norm);

// ---- learning-rate schedules -------------------------------------------------------------------
// Steps count from 0. With warmup_steps = W > 0, steps s < W give peak * (s + 1) / W. After
// warmup: CONSTANT stays at peak; WARMUP_COSINE follows a half cosine from peak at s = W to
// floor at s = total_steps and stays at floor; STEP_DECAY gives peak * gamma^floor((s - W) / k);
// TWO_STAGE is WARMUP_COSINE times stage2_scale from step stage2_at on (BitNet b1.58's recipe:
// the learning rate drops at mid-training).

typedef enum trit_lr_kind {
    TRIT_LR_CONSTANT = 0,
    TRIT_LR_WARMUP_COSINE,
    TRIT_LR_STEP_DECAY,
    TRIT_LR_TWO_STAGE,
} trit_lr_kind;

typedef struct trit_lr_schedule {
    trit_lr_kind kind;
    double peak;           // lr after warmup (the base lr of step decay)
    double floor;          // WARMUP_COSINE: lr at and after total_steps
    int64_t warmup_steps;  // 0 = no warmup
    int64_t total_steps;   // WARMUP_COSINE: end of the decay, >= warmup_steps
    double gamma;          // STEP_DECAY: factor applied every step_size steps, in (0, 1]
    int64_t step_size;     // STEP_DECAY: k >= 1
    int64_t stage2_at;     // TWO_STAGE: first step of the second stage
    double stage2_scale;   // TWO_STAGE: factor of the second stage, in (0, 1]
} trit_lr_schedule;

trit_lr_schedule trit_lr_constant(double lr);
trit_lr_schedule trit_lr_warmup_cosine(double peak, double floor, int64_t warmup_steps,
                                       int64_t total_steps);
trit_lr_schedule trit_lr_step_decay(double lr, double gamma, int64_t step_size);
trit_lr_schedule trit_lr_two_stage(double peak, double floor, int64_t warmup_steps, int64_t total_steps,
                                   int64_t stage2_at, double stage2_scale);
trit_status trit_lr_check(const trit_lr_schedule *s);
// The lr at `step` (a pure function). NaN when the schedule fails trit_lr_check or step < 0,
// which trit_optim_step then refuses.
double trit_lr_at(const trit_lr_schedule *s, int64_t step);

#ifdef __cplusplus
}
#endif
#endif
