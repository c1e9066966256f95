// What an op constructor (the public trit_<op> at the end of each src/ops/*.c) needs of a graph:
// append a node, record a build error, and the argument checks several op files share. Declared
// here, in the ops layer, and implemented by graph/build.c, so an op file depends on this
// interface and never on the graph's internals. Not a public header.
#ifndef TRIT_OPS_OP_BUILD_H
#define TRIT_OPS_OP_BUILD_H

#include "ops/op_def.h"
#include "trit/graph.h"
#include "trit/ops.h"

#include <math.h>

// Appends a node; the op entry is chosen by the graph's dtype. Returns the output or NULL.
trit_tensor *trit_graph_apply(trit_graph *g, const trit_op_def *def_f32, const trit_op_def *def_f64,
                              int n_in, trit_tensor *const *in, const void *attr);
#define TRIT_APPLY(g, op, n, ins, attr) trit_graph_apply((g), &op##_f32, &op##_f64, (n), (ins), (attr))

// Records a build error on the graph (first one wins) and returns NULL for op constructors.
trit_tensor *trit_graph_fail(trit_graph *g, trit_status s);

// The stream of a random op built without one: the graph's count of such ops so far, in a range
// of its own (TRIT_STREAM_AUTO), so it follows build order and nothing compile does to the graph.
#define TRIT_STREAM_AUTO (UINT64_C(0xa0) << 56)
uint64_t trit_graph_next_stream(trit_graph *g);

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

#endif
