// Graph constructors for the ops that only transformer blocks use: rotary position embedding
// and the SwiGLU gate.
#include "graph/graph_internal.h"
#include "ops/rope.h"
#include "ops/swiglu.h"
#include "trit/ops.h"

trit_tensor *trit_rope(trit_graph *g, trit_tensor *x, int n_head, double theta) {
    trit_rope_attr a = {.n_head = n_head, .theta = theta, .pos0 = 0};
    return TRIT_APPLY(g, trit_op_rope, 1, &x, &a);
}

trit_tensor *trit_swiglu(trit_graph *g, trit_tensor *gate, trit_tensor *up) {
    trit_tensor *in[2] = {gate, up};
    return TRIT_APPLY(g, trit_op_swiglu, 2, in, NULL);
}
