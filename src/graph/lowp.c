// Storing activations in 16 bits. Under a policy with bf16/f16 activations, after fusion and
// before memory planning, a value is stored in the activation dtype when
//   - its producer can write it (lowp_output: linear, bias_gelu, flash_attention), and
//   - every reader, through any views of it, reads 16-bit values at that input (lowp_inputs),
//     or is a cast to the activation dtype (which then converts nothing and is removed, its
//     readers taking the value itself).
// So a linear whose output only attention or GELU reads stores it in 16 bits, while one that
// feeds the fp32 residual stream (an add) keeps fp32 and needs no conversion at all. Kept
// values and the loss stay in the accumulate dtype.
#include "graph/graph_internal.h"

#include <string.h>

static bool is_lowp(trit_dtype dt) { return dt == TRIT_BF16 || dt == TRIT_F16; }

// The cast node reading value v to dtype `to`, at node i.
static bool is_cast_to(const trit_node *n, trit_dtype to) {
    return strcmp(n->def->name, "cast") == 0 && n->attr && *(const trit_dtype *)n->attr == to;
}

// Whether every reader of v (through views) takes 16-bit values there.
static bool readers_ok(const trit_graph *g, int v, trit_dtype act, int depth) {
    if (g->values[v].keep || v == g->loss || depth > 8) return false;
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] != v) continue;
            if (n->def->is_view) {
                if (!readers_ok(g, n->out, act, depth + 1)) return false;
            } else if (!(n->def->lowp_inputs & TRIT_IN(j)) || (strcmp(n->def->name, "cast") == 0 && !is_cast_to(n, act))) {
                return false;
            }
        }
    }
    return true;
}

// v and every view of it now hold dtype act (views keep their element strides and offsets).
static void set_dtype(trit_graph *g, int v, trit_dtype act) {
    g->values[v].t->dtype = act;
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        if (!n->def->is_view) continue;
        for (int j = 0; j < n->n_in; j++)
            if (n->in[j] == v) set_dtype(g, n->out, act);
    }
}

// Casts whose input already has the target dtype and is contiguous: readers take the input.
static void drop_identity_casts(trit_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        trit_node *n = &g->nodes[i];
        if (strcmp(n->def->name, "cast") != 0 || n->n_in != 1) continue;
        const trit_value *in = &g->values[n->in[0]];
        trit_value *out = &g->values[n->out];
        if (in->t->dtype != out->t->dtype || out->keep || n->out == g->loss || !trit_tensor_is_contiguous(in->t))
            continue;
        const int from = n->out, to = n->in[0];
        for (int k = 0; k < g->n_nodes; k++)
            for (int j = 0; j < g->nodes[k].n_in; j++)
                if (g->nodes[k].in[j] == from) g->nodes[k].in[j] = to;
        out->dead = true;
        out->producer = -1;
        trit_graph_remove_node(g, i--);
    }
}

int trit_graph_store_lowp(trit_graph *g) {
    const trit_dtype act = g->policy.activation;
    if (!is_lowp(act)) return 0;
    int lowered = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        trit_value *v = &g->values[n->out];
        if (!n->def->lowp_output || v->t->dtype != g->dtype || !trit_tensor_is_contiguous(v->t)) continue;
        if (!readers_ok(g, n->out, act, 0)) continue;
        set_dtype(g, n->out, act);
        lowered++;
    }
    drop_identity_casts(g);
    return lowered;
}
