// trit graphs: a model is built once from op calls into a graph of nodes, compiled (topological
// order, backward derived from each op's rule, activation memory planned by liveness in one
// arena) and then run many times. A compiled step allocates nothing.
#ifndef TRIT_GRAPH_H
#define TRIT_GRAPH_H

#include "trit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct trit_graph trit_graph;

// How a graph computes (instead of one dtype per graph):
// - accumulate: gradients, statistics, reductions, losses and every matmul sum: TRIT_F32, or
//   TRIT_F64 for the reference path that gradient checks use;
// - activation: the dtype matmul inputs are stored in between ops (TRIT_F32, TRIT_BF16 or
//   TRIT_F16; equal to accumulate for f64). Low-precision activations enter a matmul through
//   a `cast` node the op constructors insert, so the cast value is what backward keeps;
// - matmul: how fp32 operands that still meet a matmul are multiplied (see
//   trit_matmul_precision).
// Which values are stored in the activation dtype is the policy table in docs/ARCHITECTURE.md.
typedef struct trit_compute_policy {
    trit_dtype accumulate;
    trit_dtype activation;
    trit_matmul_precision matmul;
} trit_compute_policy;

// A graph whose values and gradients are all of dtype `compute` (TRIT_F32, or TRIT_F64):
// the policy {compute, compute, TRIT_MATMUL_HIGHEST}.
trit_graph *trit_graph_new(trit_dtype compute);
// A graph under `policy`; NULL with a message if the policy is not one of the combinations above.
trit_graph *trit_graph_new_policy(const trit_compute_policy *policy);
void trit_graph_free(trit_graph *g);
// The accumulate dtype (values without a low-precision rule, and all gradients).
trit_dtype trit_graph_dtype(const trit_graph *g);
trit_compute_policy trit_graph_policy(const trit_graph *g);

// A graph input: storage is allocated at compile time and stays valid until the graph is
// freed; fill its data before each forward.
trit_tensor *trit_graph_input(trit_graph *g, trit_dtype dt, int ndim, const int64_t *shape, const char *name);

// Op results are trit_tensor* owned by the graph. An op given bad arguments (or NULL inputs)
// returns NULL with trit_last_error() set; the graph remembers the first error and compile
// reports it, so a builder can check once at the end.
trit_status trit_graph_status(const trit_graph *g);

// Keep a tensor's value readable after forward (its memory is not reused).
trit_status trit_graph_keep(trit_graph *g, trit_tensor *t);

// The gradient d loss / d t of a kept value (trit_graph_keep) or of an input that asked for one
// (trit_graph_input_requires_grad), readable after backward; NULL (with a message) otherwise, or
// when nothing that needs a gradient lies upstream of it.
trit_tensor *trit_graph_grad(trit_graph *g, trit_tensor *t);

// Asks for d(loss)/d(input) of a graph input of a float dtype (a pipeline stage's input): after
// backward, trit_graph_grad(g, input) returns it. Call before compile.
trit_status trit_graph_input_requires_grad(trit_graph *g, trit_tensor *input);

// Activation recompute (checkpointing): value t, an op result that is neither kept nor the loss,
// is not held from forward until backward; backward computes it again from the values it was
// made of, in a buffer of its own, just before a backward step first reads it (a recompute step).
// The results are the same bits. A value of a fused pair whose other half is not marked, and a
// value shared with a view that is not marked, stays held. Call before compile.
trit_status trit_graph_recompute(trit_graph *g, trit_tensor *t);
// A point in the build: the number of values made so far.
int trit_graph_mark(const trit_graph *g);
// trit_graph_recompute for every op result made since `mark`, except `except` (may be NULL),
// kept values and the loss: e.g. everything inside a transformer block but its output.
trit_status trit_graph_recompute_since(trit_graph *g, int mark, const trit_tensor *except);

// Compile for training when loss is a scalar (0-d or 1 element) tensor of the graph, for
// inference when loss is NULL.
trit_status trit_graph_compile(trit_graph *g, trit_tensor *loss);
// Compile for a backward pass seeded with a given gradient of `out`, an op result of any shape
// (a pipeline stage's output): run it with trit_graph_backward_seed.
trit_status trit_graph_compile_output(trit_graph *g, trit_tensor *out);

// Forward pass. With a loss, a NaN or Inf loss returns TRIT_ERR_NUMERIC (the value stays readable).
trit_status trit_graph_forward(trit_graph *g);
// Backward pass from the loss: adds d(loss * grad_scale)/d(param) into every trainable
// parameter's grad (so repeated backward calls accumulate micro-batches).
trit_status trit_graph_backward(trit_graph *g);
// Backward pass from dout = d(loss)/d(out) for the output (or scalar loss) the graph was compiled
// with: dout has its shape and the accumulate dtype and is used as given (grad_scale does not
// apply). Gradients add into the parameters' grads as with trit_graph_backward.
trit_status trit_graph_backward_seed(trit_graph *g, const trit_tensor *dout);

// ---- the step list and its events ---------------------------------------------------------
// Compile turns the graph into a list of steps: forward nodes, then backward nodes with the
// zeroing of gradient buffers, recompute steps and events between them. Hooks run at events:
// "parameter P's gradient is final for this micro-batch" (right after the last backward step that
// adds into it; a data-parallel exchange starts there), "micro-batch ends" and "step ends" (the
// last micro-batch of trit_graph_set_micro's count). With parameter groups set
// (trit_graph_set_param_groups), also "group G's parameters are needed" right before the first
// step of a phase (forward, then the backward phase) that reads one of them, and "group G's
// parameters are done" right after the last such step of the phase (a sharded exchange gathers
// a group's values there, and gives them back).
typedef enum trit_graph_event_kind {
    TRIT_EVENT_GRAD_FINAL = 0,
    TRIT_EVENT_MICRO_END,
    TRIT_EVENT_STEP_END,
    TRIT_EVENT_PARAMS_NEEDED,
    TRIT_EVENT_PARAMS_DONE,
} trit_graph_event_kind;

typedef struct trit_graph_event {
    trit_graph_event_kind kind;
    int param;              // GRAD_FINAL: index in trit_graph_param order; -1 otherwise
    trit_tensor *tensor;    // GRAD_FINAL: the parameter, whose grad now holds this micro-batch's sum
    int64_t micro, num_micro;
    int group;              // PARAMS_NEEDED, PARAMS_DONE: the group; -1 otherwise
    bool backward;          // PARAMS_NEEDED, PARAMS_DONE: in the backward phase (else forward)
} trit_graph_event;

// A hook returns TRIT_OK, or a status that stops backward (reported with the hook's message).
typedef trit_status (*trit_graph_hook)(void *ctx, const trit_graph_event *e);
// Hooks run in the order they were added; before or after compile.
trit_status trit_graph_add_hook(trit_graph *g, trit_graph_event_kind kind, trit_graph_hook fn, void *ctx);
// The micro-batch the next backward belongs to (0-based) out of num_micro in the step; default
// 0 of 1, so every backward ends a step.
void trit_graph_set_micro(trit_graph *g, int64_t micro, int64_t num_micro);
// Parameter groups: group[i] (>= 0, or -1 for none) for trit_graph_param(g, i), n_params of them
// (a transformer block's weights, say). A step reads a parameter when its node has it (or a view
// of it) as an input: a forward or recompute step always, a backward step unless the op's
// backward does not read that input. Before or after compile (the step list is made again);
// NULL clears the groups.
trit_status trit_graph_set_param_groups(trit_graph *g, const int *group, int n_params);

typedef enum trit_graph_step_kind {
    TRIT_STEP_FORWARD = 0,
    TRIT_STEP_BACKWARD,
    TRIT_STEP_RECOMPUTE,  // a forward node run again in backward, into a buffer of its own
    TRIT_STEP_ZERO,       // a gradient buffer zeroed before its first writer
    TRIT_STEP_EVENT,
} trit_graph_step_kind;

typedef struct trit_graph_step_info {
    trit_graph_step_kind kind;
    int node;                     // forward, backward, recompute: node index (else -1)
    const char *op;               // its op's name (else "")
    trit_graph_event_kind event;  // event steps
    int param;                    // gradient-final events: index in trit_graph_param order (else -1)
    int group;                    // parameter events: the group (else -1)
    bool backward;                // in the backward phase (else forward)
} trit_graph_step_info;
int trit_graph_num_steps(const trit_graph *g);  // 0 before compile
trit_status trit_graph_step_at(const trit_graph *g, int i, trit_graph_step_info *out);
// Weights kept in a file mapping (a trainer's `--offload optimizer+frozen`): after every step
// whose node reads a value stored in [base, base + bytes) (a parameter or a view of one),
// release(ctx) runs and drops the pages, so a step holds one such weight in memory at a time and
// the next read takes it from the file. One range per graph, set after compile; the memory
// report counts the parameters inside it as streamed. bytes 0 clears it.
trit_status trit_graph_set_streamed(trit_graph *g, const void *base, size_t bytes, void (*release)(void *ctx), void *ctx);
// Zero the grads of the graph's parameters.
void trit_graph_zero_grad(trit_graph *g);

// Training mode turns on dropout and batch statistics; eval mode off. Default: training.
void trit_graph_set_training(trit_graph *g, bool training);
bool trit_graph_training(const trit_graph *g);
// Random ops draw from (seed, stream, step), the stream fixed when the op was built; set step
// before each forward for a fresh mask.
void trit_graph_set_rng(trit_graph *g, uint64_t seed, uint64_t step);
// Multiplier on d(loss)/d(loss); 1/n for n accumulated micro-batches, or a loss scale.
void trit_graph_set_grad_scale(trit_graph *g, double scale);

// Plan only: compile orders the graph and plans its memory (trit_graph_memory_report gives the
// arena it would have) but allocates no arena and builds no steps, so the graph cannot run; for
// choosing between graphs by their memory without holding each. Call before compile.
void trit_graph_set_plan_only(trit_graph *g, bool on);

// Fused ops (bias+GELU, residual add+LayerNorm, classifier+cross-entropy in row chunks) are
// substituted at compile time unless turned off here or by TRIT_FUSE=0. Call before compile.
void trit_graph_set_fusion(trit_graph *g, bool on);

// Parameters (trainable and frozen) the graph reads, in first-use order.
int trit_graph_num_params(const trit_graph *g);
trit_tensor *trit_graph_param(const trit_graph *g, int i);

typedef struct trit_graph_memory {
    size_t arena_bytes;       // activations, saved tensors, gradients of activations, scratch
    size_t activation_bytes;  // sum of forward values before reuse
    size_t grad_bytes;        // parameter gradients
    size_t param_bytes;
    size_t param_copy_bytes;  // 16-bit compute copies of parameters (cast values in the arena)
    size_t streamed_bytes;    // of param_bytes, the values in the streamed range (trit_graph_set_streamed)
    size_t streamed_resident; // and the largest of them: what a step holds of the range at once
    int64_t num_param_elems;  // elements of the parameters
    size_t input_bytes;
    int num_nodes;
    int num_backward_nodes;
} trit_graph_memory;
trit_status trit_graph_memory_report(const trit_graph *g, trit_graph_memory *out);

// Print nodes in execution order with shapes (debugging).
void trit_graph_print(const trit_graph *g);

#ifdef __cplusplus
}
#endif
#endif
