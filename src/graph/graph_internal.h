// Graph internals shared by build.c, compile.c and execute.c. Not a public header.
#ifndef TRIT_GRAPH_INTERNAL_H
#define TRIT_GRAPH_INTERNAL_H

#include "ops/op_build.h"
#include "ops/op_def.h"
#include "trit/graph.h"

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
    bool grad_shared;      // grad_buf is another value's (an in-place backward): that value zeroes it
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

// Appends a value (its tensor is tagged with the graph for inputs and op outputs); -1 when out
// of memory.
int trit_graph_add_value(trit_graph *g, trit_tensor *t, trit_value_kind kind, int producer);

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
