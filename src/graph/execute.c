// Running a compiled graph: forward in build order, backward in the compiled schedule.
// Nothing here allocates.
#include "graph/graph_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static trit_status check_compiled(const trit_graph *g, const char *what) {
    if (!g) return trit_error(TRIT_ERR_INVALID, "%s: graph is NULL", what);
    if (!g->compiled) return trit_error(TRIT_ERR_STATE, "%s: compile the graph first (trit_graph_compile)", what);
    return TRIT_OK;
}

// Prefixes the op's own message with where it happened (copied first: trit_error writes the
// same buffer it would read from).
static trit_status with_context(trit_status s, const char *op, const char *phase, int node) {
    char msg[768];
    snprintf(msg, sizeof msg, "%s", trit_last_error());
    return trit_error(s, "%s%s (node %d): %s", op, phase, node, msg);
}

static double scalar_value(const trit_tensor *t) {
    return t->dtype == TRIT_F64 ? *(const double *)trit_tensor_ptr(t) : *(const float *)trit_tensor_ptr(t);
}

trit_status trit_graph_forward(trit_graph *g) {
    trit_status s = check_compiled(g, "trit_graph_forward");
    if (s != TRIT_OK) return s;
    g->forward_done = false;
    for (int i = 0; i < g->n_nodes; i++) {
        trit_node *n = &g->nodes[i];
        n->ctx.training = g->training;
        n->ctx.seed = g->seed;
        n->ctx.step = g->step;
        if (n->def->is_view) continue;
        s = n->def->forward(&n->fwd);
        if (s != TRIT_OK) return with_context(s, n->def->name, "", i);
    }
    if (g->loss >= 0) {
        double l = scalar_value(g->values[g->loss].t);
        if (!isfinite(l))
            return trit_error(TRIT_ERR_NUMERIC, "loss is %s: lower the learning rate, enable clipping, or check the inputs for NaN/Inf",
                              isnan(l) ? "NaN" : "Inf");
    }
    g->forward_done = true;
    return TRIT_OK;
}

trit_status trit_graph_backward(trit_graph *g) {
    trit_status s = check_compiled(g, "trit_graph_backward");
    if (s != TRIT_OK) return s;
    if (g->loss < 0) return trit_error(TRIT_ERR_STATE, "trit_graph_backward: graph was compiled without a loss");
    if (!g->forward_done)
        return trit_error(TRIT_ERR_STATE, "trit_graph_backward: run a successful trit_graph_forward first");
    trit_value *lv = &g->values[g->loss];
    if (!lv->grad) return TRIT_OK;  // nothing trainable upstream of the loss
    if (g->dtype == TRIT_F64) *(double *)lv->grad->data = g->grad_scale;
    else *(float *)lv->grad->data = (float)g->grad_scale;
    for (int k = 0; k < g->n_bwd; k++) {
        for (const int *b = g->zero_at[k]; *b >= 0; b++)
            memset(g->arena.base + g->bufs[*b].offset, 0, g->bufs[*b].bytes);
        trit_node *n = &g->nodes[g->bwd_order[k]];
        s = n->def->backward(&n->bwd);
        if (s != TRIT_OK) return with_context(s, n->def->name, " backward", g->bwd_order[k]);
    }
    g->forward_done = false;  // saved activations may have been overwritten by gradients
    return TRIT_OK;
}

void trit_graph_zero_grad(trit_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_params; i++) {
        trit_tensor *p = g->values[g->params[i]].t;
        if (p->grad) memset(p->grad->data, 0, trit_tensor_nbytes(p->grad));
    }
}
