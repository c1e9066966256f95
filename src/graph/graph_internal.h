// Graph internals shared by build.c, compile.c and execute.c, and by the public op constructors
// at the end of each src/ops/*.c. Not a public header.
#ifndef TRIT_GRAPH_INTERNAL_H
#define TRIT_GRAPH_INTERNAL_H

#include "ops/op_def.h"
#include "trit/graph.h"
#include "trit/ops.h"

#include <math.h>

typedef enum { VALUE_INPUT, VALUE_PARAM, VALUE_CONST, VALUE_OP } trit_value_kind;

typedef struct trit_value {
    trit_tensor *t;        // graph-owned for inputs and op outputs; caller-owned for leaves
    trit_value_kind kind;
    int producer;          // node index, -1 for leaves
    int root;              // value whose storage this one shares (itself unless a view)
    bool requires_grad;    // a trainable parameter lies upstream
    bool reaches_loss;     // the loss lies downstream (or is this value)
    bool keep;
    trit_tensor *grad;     // contiguous gradient; the param's own grad for parameters
    int grad_buf;          // planner buffer of an activation gradient, -1 if none
    int data_buf;          // planner buffer of this value's storage, -1 if not planned
    bool dead;             // removed by a rewrite (fusion): no producer, no storage
} trit_value;

typedef struct trit_node {
    const trit_op_def *def;
    int n_in;
    int in[TRIT_OP_MAX_IN];  // value ids
    int out;                 // value id
    void *attr;              // owned copy of the op's attribute struct
    size_t saved_bytes, scratch_bytes;
    int saved_buf;           // planner buffer, -1 if none
    int bwd_step;            // position in the backward schedule, -1 if not run backward
    trit_op_call fwd, bwd;
    trit_exec_ctx ctx;
} trit_node;

// A block of arena memory with the steps it must stay intact for.
typedef struct trit_buffer {
    size_t bytes;
    int first, last;  // inclusive steps on the timeline: forward 0..N-1, backward N..N+B-1
    size_t offset;
} trit_buffer;

struct trit_graph {
    trit_compute_policy policy;
    trit_dtype dtype;         // policy.accumulate
    trit_status status;       // first build error
    char error[512];
    trit_value *values;
    int n_values, cap_values;
    trit_node *nodes;
    int n_nodes, cap_nodes;
    int *params;              // value ids of parameter leaves, first-use order
    int n_params, cap_params;
    // compiled state
    bool compiled;
    bool forward_done;
    int loss;                 // value id or -1
    int *bwd_order;           // node ids in backward order
    int n_bwd;
    int **zero_at;            // per backward step: -1-terminated grad buffers to zero first
    trit_buffer *bufs;
    int n_bufs, cap_bufs;
    trit_arena arena;
    void *scratch;
    size_t scratch_bytes;
    bool training;
    bool fusion;              // let compile substitute fused ops (trit_graph_set_fusion)
    uint64_t seed, step;
    double grad_scale;
};

// Appends a node; the op entry is chosen by the graph's dtype. Returns the output or NULL.
trit_tensor *trit_graph_apply(trit_graph *g, const trit_op_def *def_f32, const trit_op_def *def_f64,
                              int n_in, trit_tensor *const *in, const void *attr);
#define TRIT_APPLY(g, op, n, ins, attr) trit_graph_apply((g), &op##_f32, &op##_f64, (n), (ins), (attr))

// Appends a value (its tensor is tagged with the graph for inputs and op outputs); -1 when out
// of memory.
int trit_graph_add_value(trit_graph *g, trit_tensor *t, trit_value_kind kind, int producer);

// Records a build error on the graph (first one wins) and returns NULL for op constructors.
trit_tensor *trit_graph_fail(trit_graph *g, trit_status s);

// Argument checks that constructors of several op files share (norms, batchnorm, losses and their
// fused forms), so one argument gets one message whichever op takes it. False after recording
// the error on the graph.
static inline bool trit_graph_eps_ok(trit_graph *g, const char *op, double eps) {
    if (eps >= 0 && isfinite(eps)) return true;
    trit_error(TRIT_ERR_INVALID, "%s: eps must be finite and >= 0, got %g (PyTorch's default is 1e-5)", op, eps);
    trit_graph_fail(g, TRIT_ERR_INVALID);
    return false;
}

static inline bool trit_graph_reduction_ok(trit_graph *g, const char *op, trit_reduction red) {
    if (red == TRIT_REDUCE_MEAN || red == TRIT_REDUCE_SUM) return true;
    trit_error(TRIT_ERR_INVALID, "%s: reduction must be TRIT_REDUCE_MEAN or TRIT_REDUCE_SUM, got %d", op, (int)red);
    trit_graph_fail(g, TRIT_ERR_INVALID);
    return false;
}

void trit_graph_release_compiled(trit_graph *g);

// Compile's first pass: replaces op patterns with fused ops (fuse.c). Returns the number of
// rewrites, or -1 on allocation failure.
int trit_graph_fuse(trit_graph *g);
// Removes node pos (its output value must already be dead or rewired); later producers shift.
void trit_graph_remove_node(trit_graph *g, int pos);
// Compile's second pass under 16-bit activations (lowp.c): stores a value in the activation
// dtype where its producer can write it and all its readers can read it, and drops the casts
// that then convert nothing. Returns the number of values lowered.
int trit_graph_store_lowp(trit_graph *g);

// Number of nodes of each kind after fusion, for tests and reports.
int trit_graph_count_op(const trit_graph *g, const char *name);

#endif
