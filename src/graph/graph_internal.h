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
    bool grad_pinned;      // grad_buf also holds a sibling's gradient until that is read (plan.c):
                           // no backward may write another gradient over it in place
    bool grad_alias;       // a view whose gradient is that view of its root's gradient (plan.c): its
                           // readers write there, and its own backward (a strided add) is left out
    int grad_tiler;        // node whose backward stores the whole of this root's gradient through
                           // aliased views of it that tile it (plan.c), so it needs no zeroing; or -1
    int data_buf;          // planner buffer of this value's storage, -1 if not planned
    bool dead;             // removed by a rewrite (fusion): no producer, no storage
    bool wants_grad;       // an input whose gradient the caller asked for
    bool mark_recompute;   // asked to be recomputed in backward (trit_graph_recompute)
    bool recomputed;       // compile's decision, on roots: backward reads a recomputed copy
    trit_tensor *shadow;   // the copy backward reads (root and views of a recomputed root), else NULL
    int shadow_buf;        // planner buffer of a recomputed root's copy, -1 if none
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
    int bwd_pos;             // timeline position of the backward step, -1 if none
    int rec_pos;             // timeline position of the recompute step, -1 if none
    int rec_saved_buf;       // planner buffer of the recompute's saved memory, -1 if none
    bool reads_streamed;     // an input lies in the streamed range (trit_graph_set_streamed)
    trit_op_call fwd, bwd, rec;
    trit_exec_ctx ctx, rctx; // rctx: the recompute's (forward's, with recompute set)
} trit_node;

// A block of arena memory with the steps it must stay intact for.
typedef struct trit_buffer {
    size_t bytes;
    int first, last;  // inclusive positions on the timeline: forward node i at i, then the
                      // backward phase's recompute and backward steps in order
    size_t offset;
} trit_buffer;

// One entry of the compiled step list (trit_graph_step_kind); arg is the node (forward,
// backward, recompute), the planner buffer (zero) or the parameter's index in g->params
// (gradient-final events), or the group (parameter events; -1 for the others).
typedef struct trit_step {
    uint8_t kind;
    uint8_t event;  // trit_graph_event_kind of an event step
    int arg;
} trit_step;

typedef struct trit_hook {
    trit_graph_event_kind kind;
    trit_graph_hook fn;
    void *ctx;
} trit_hook;

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
    trit_hook *hooks;
    int n_hooks, cap_hooks;
    int *param_group;         // (n_param_group) trit_graph_set_param_groups, or NULL
    int n_param_group;        // entries of param_group (the parameters when it was set)
    uint64_t next_stream;     // build-order counter of random ops without a stream of their own
    // compiled state
    bool compiled;
    bool plan_only;           // trit_graph_set_plan_only: compile sizes the arena, allocates nothing
    bool forward_done;
    int loss;                 // value id of the loss or the seeded output, or -1
    bool seeded;              // compiled with trit_graph_compile_output: backward needs a seed
    int *bwd_order;           // node ids in backward order
    int n_bwd;
    trit_step *steps;         // forward steps [0, n_fwd_steps), then the backward phase
    int n_steps, n_fwd_steps;
    int n_positions;          // timeline length (forward nodes plus backward-phase compute steps)
    int64_t micro, num_micro; // trit_graph_set_micro
    trit_buffer *bufs;
    int n_bufs, cap_bufs;
    trit_arena arena;
    void *scratch;
    size_t scratch_bytes;
    bool training;
    bool fusion;              // let compile substitute fused ops (trit_graph_set_fusion)
    bool grad_stores;         // first writers that can store into a gradient buffer do (TRIT_GRAD_STORE=0: none)
    bool view_grads;          // views' readers write into their root's gradient (plan.c; TRIT_VIEW_GRADS=0: none)
    uint64_t seed, step;
    double grad_scale;
    struct {                  // trit_graph_set_streamed
        const char *base;
        size_t bytes;
        void (*release)(void *ctx);
        void *ctx;
    } streamed;
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

// Compile's step list (schedule.c): the backward order with its recompute steps and every
// node's timeline positions, then (after memory is planned) the list with zero and event steps.
trit_status trit_graph_schedule(trit_graph *g);
trit_status trit_graph_build_steps(trit_graph *g);
// Whether value v gets a gradient (a trainable parameter or an input asking for one upstream,
// the loss downstream).
static inline bool trit_value_needs_grad(const trit_value *v) { return v->requires_grad && v->reaches_loss; }
// The tensor backward-phase steps read for value v: its recomputed copy, or v itself.
static inline trit_tensor *trit_value_bwd_tensor(const trit_value *v) { return v->shadow ? v->shadow : v->t; }

// Memory planning (plan.c): buffers with their lifetimes on the timeline, packed into one arena,
// and tensors pointed into it.
trit_status trit_graph_plan_memory(trit_graph *g);

#endif
