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

// The gradient d loss / d t of a kept value (trit_graph_keep), readable after backward; NULL
// (with a message) if t was not kept or no trainable parameter lies upstream of it.
trit_tensor *trit_graph_grad(trit_graph *g, trit_tensor *t);

// Compile for training when loss is a scalar (0-d or 1 element) tensor of the graph, for
// inference when loss is NULL.
trit_status trit_graph_compile(trit_graph *g, trit_tensor *loss);

// Forward pass. With a loss, a NaN or Inf loss returns TRIT_ERR_NUMERIC (the value stays readable).
trit_status trit_graph_forward(trit_graph *g);
// Backward pass from the loss: adds d(loss * grad_scale)/d(param) into every trainable
// parameter's grad (so repeated backward calls accumulate micro-batches).
trit_status trit_graph_backward(trit_graph *g);
// Zero the grads of the graph's parameters.
void trit_graph_zero_grad(trit_graph *g);

// Training mode turns on dropout and batch statistics; eval mode off. Default: training.
void trit_graph_set_training(trit_graph *g, bool training);
bool trit_graph_training(const trit_graph *g);
// Random ops draw from (seed, node, step); set step before each forward for a fresh mask.
void trit_graph_set_rng(trit_graph *g, uint64_t seed, uint64_t step);
// Multiplier on d(loss)/d(loss); 1/n for n accumulated micro-batches, or a loss scale.
void trit_graph_set_grad_scale(trit_graph *g, double scale);

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
