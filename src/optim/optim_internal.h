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

// Philox stream base of Q-GaLore's stochastic rounding of weights to the int8 grid.
#define OPTIM_QGALORE_STREAM 0x5147000000000000ull

// At most four state buffers per parameter (Adam's moments; RMSProp's square average +
// momentum; GaLore's moments, basis and Q-GaLore's refresh schedule).
#define OPTIM_MAX_BUFS 4

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

// Adam's normalized step in z (n): z = step * m / (sqrt(v) / bc2_sqrt + eps) after updating
// m and v with g, the values the AdamW kernel adds to the decayed weight (GaLore's direction).
void trit_optim_adam_direction(float *z, const float *g, float *m, float *v, int64_t n, const optim_scalars *s);

// ---- GaLore (galore.c) ----
// One projected matrix (rows, cols) of rank r: left (rows < cols) has basis P (rows, r) and
// moments (r, cols); right has Q (r, cols) and moments (rows, r).
typedef struct optim_galore {
    int64_t rows, cols, rank;
    bool left;
    float *basis;          // GaLore: f32 basis
    uint8_t *basis_q;      // Q-GaLore: int4 codes (value + 8, two per byte, low nibble first)
    float *basis_scales;   // and their absmax / 7 per TRIT_QGALORE_GROUP
    double *sched;         // Q-GaLore: [gap, refreshes, queue length, queue...]
} optim_galore;
#define OPTIM_QGALORE_SCHED (3 + TRIT_QGALORE_QUEUE)

// Scratch of the largest projected matrix, allocated once with the optimizer.
typedef struct optim_galore_ws {
    float *r, *z;   // (rank * max side) each: projected gradient and step
    float *d;       // (rows * cols): the step projected back
    float *basis;   // (rank * max side): Q-GaLore's decoded basis
    size_t bytes;
} optim_galore_ws;

// Element counts of a projected matrix's state buffers: moments, basis.
int64_t trit_galore_moment_count(const optim_galore *gl);
int64_t trit_galore_basis_count(const optim_galore *gl);
// Whether the matrix refreshes its basis before the step after `done` completed steps.
bool trit_galore_due(const trit_optim_config *cfg, const optim_galore *gl, int64_t done);
// The step of one projected matrix w (rows, cols) with gradient g; m, v: its moments. done =
// steps completed before this one; index and seed key Q-GaLore's rounding.
trit_status trit_galore_step(const trit_optim_config *cfg, optim_galore *gl, const optim_galore_ws *ws, float *w,
                             const float *g, float *m, float *v, const optim_scalars *s, int64_t done, int index,
                             uint64_t seed);
// Workspace for matrices of at most `side_rank` = rank * max side and `elems` values.
trit_status trit_galore_ws_alloc(optim_galore_ws *ws, int64_t side_rank, int64_t elems, bool quantized);
void trit_galore_ws_free(optim_galore_ws *ws);

// Every state buffer starts on a 64-byte boundary so vector loads are aligned.
typedef struct optim_param {
    trit_tensor *t;
    int group;
    int64_t n;
    bool has_state;  // false for parameters frozen when the optimizer was made
    int sr_key;          // stochastic rounding draws as parameter sr_key's, from element sr_first of it
    int64_t sr_first;    // (its own index and 0, unless trit_optim_set_rounding_key says otherwise)
    bool proj;       // GaLore: a matrix of a low-rank group, stepped by trit_galore_step
    optim_galore gl;
    float *buf[OPTIM_MAX_BUFS];     // f32 state, or NULL
    uint8_t *code[OPTIM_MAX_BUFS];  // 8-bit state (AdamW8bit), or NULL
    float *absmax[OPTIM_MAX_BUFS];  // its block scales
} optim_param;

typedef struct optim_group {
    double lr_scale, weight_decay;
    bool low_rank;
    int first, count;  // range in the optimizer's parameter list
} optim_group;

// One state buffer: its own dtype and shape (a parameter's state need not be shaped like it, nor
// f32: a low-rank projection's, or 8-bit codes with block scales), laid out in the one block.
typedef struct optim_state_entry {
    char name[TRIT_NAME_MAX + 32];
    int param, buf;
    trit_dtype dtype;
    int ndim;
    int64_t shape[TRIT_MAX_DIMS];
    int64_t count;
    void *data;            // nbytes(dtype, count) bytes
    float *scales;         // (num_scales) block scales, or NULL
    int64_t num_scales;
} optim_state_entry;

struct trit_optim {
    trit_optim_config cfg;
    int n_groups;
    optim_group *groups;
    int n_params;
    optim_param *params;
    trit_tensor **tensors;  // the parameters in group order, for clipping and get_group
    int n_keys;
    const char *keys[OPTIM_MAX_BUFS];
    int n_state;
    optim_state_entry *state;
    void *block;            // all state buffers and their scales (64-byte aligned in block_raw)
    void *block_raw;
    int64_t step;
    bool stochastic;        // 16-bit parameters round stochastically (trit_optim_set_rounding)
    uint64_t sr_seed;
    trit_dynamic_code *maps;  // AdamW8bit: [0] signed (exp_avg), [1] unsigned (exp_avg_sq); else NULL
    optim_galore_ws ws;       // GaLore: scratch of the largest projected matrix
    int64_t block_bytes;
    struct optim_offload *offload;  // the block in a memory-mapped file (offload.c), or NULL
};

// Bytes an entry takes in the block: values and scales, each from a 64-byte boundary.
static inline int64_t optim_line_up(int64_t bytes) { return (bytes + TRIT_ALIGN - 1) / TRIT_ALIGN * TRIT_ALIGN; }
int64_t trit_optim_entry_bytes(const optim_state_entry *e);
// Points the entries and the update loops' views into o->block (laid out in entry order).
void trit_optim_bind_state(trit_optim *o);
// offload.c: after parameter i's step, its state leaves the process's memory (the file keeps it)
// and the next one's is read ahead; unmaps and closes the file.
void trit_optim_offload_release(trit_optim *o, int i);
void trit_optim_offload_close(trit_optim *o);

// The state buffer keys of a config, in order ("exp_avg", "exp_avg_sq", ...); returns the count.
int trit_optim_state_keys(const trit_optim_config *cfg, const char *keys[OPTIM_MAX_BUFS]);

// Checks one parameter for an optimizer or for clipping: f32, contiguous, and a grad (if set)
// that is f32, contiguous and of the same shape. `who` names the caller in messages.
trit_status trit_optim_check_param(const trit_tensor *p, const char *who, int index);

#endif
