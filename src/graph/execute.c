// Running a compiled graph: its step list (schedule.c), forward steps in build order (and the
// parameter groups' events between them), then the backward phase with its zeroing, recompute
// steps and events. Nothing here allocates.
#include "graph/graph_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static trit_status check_compiled(const trit_graph *g, const char *what) {
    if (!g) return trit_error(TRIT_ERR_INVALID, "%s: graph is NULL", what);
    if (!g->compiled) return trit_error(TRIT_ERR_STATE, "%s: compile the graph first (trit_graph_compile)", what);
    if (g->plan_only)
        return trit_error(TRIT_ERR_STATE, "%s: the graph was compiled to plan its memory only (trit_graph_set_plan_only); "
                          "build it again to run it", what);
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

static trit_status fire(trit_graph *g, const trit_step *st) {
    const trit_graph_event_kind kind = (trit_graph_event_kind)st->event;
    if (kind == TRIT_EVENT_STEP_END && g->micro != g->num_micro - 1) return TRIT_OK;
    trit_graph_event e = {.kind = kind, .param = -1, .micro = g->micro, .num_micro = g->num_micro, .group = -1};
    if (kind == TRIT_EVENT_PARAMS_NEEDED || kind == TRIT_EVENT_PARAMS_DONE) {
        e.group = st->arg;
        e.backward = st >= g->steps + g->n_fwd_steps;
    } else if (kind == TRIT_EVENT_GRAD_FINAL) {
        e.param = st->arg;
        e.tensor = g->values[g->params[st->arg]].t;
    }
    for (int h = 0; h < g->n_hooks; h++) {
        if (g->hooks[h].kind != kind) continue;
        trit_status s = g->hooks[h].fn(g->hooks[h].ctx, &e);
        if (s != TRIT_OK) {
            char msg[768];
            snprintf(msg, sizeof msg, "%s", trit_last_error());
            return trit_error(s, "graph hook at event %d: %s", (int)kind, msg);
        }
    }
    return TRIT_OK;
}

trit_status trit_graph_forward(trit_graph *g) {
    trit_status s = check_compiled(g, "trit_graph_forward");
    if (s != TRIT_OK) return s;
    g->forward_done = false;
    for (int k = 0; k < g->n_fwd_steps; k++) {
        if (g->steps[k].kind == TRIT_STEP_EVENT) {
            if ((s = fire(g, &g->steps[k])) != TRIT_OK) return s;
            continue;
        }
        const int i = g->steps[k].arg;
        trit_node *n = &g->nodes[i];
        n->ctx.training = g->training;
        n->ctx.seed = g->seed;
        n->ctx.step = g->step;
        s = n->def->forward(&n->fwd);
        if (s != TRIT_OK) return with_context(s, n->def->name, "", i);
        if (n->reads_streamed) g->streamed.release(g->streamed.ctx);
    }
    if (g->loss >= 0 && !g->seeded) {
        double l = scalar_value(g->values[g->loss].t);
        if (!isfinite(l))
            return trit_error(TRIT_ERR_NUMERIC, "loss is %s: lower the learning rate, enable clipping, or check the inputs for NaN/Inf",
                              isnan(l) ? "NaN" : "Inf");
    }
    g->forward_done = true;
    return TRIT_OK;
}

static trit_status run_compute_step(trit_graph *g, const trit_step *st) {
    trit_node *n = st->kind == TRIT_STEP_BACKWARD || st->kind == TRIT_STEP_RECOMPUTE ? &g->nodes[st->arg] : NULL;
    trit_status s = TRIT_OK;
    switch ((trit_graph_step_kind)st->kind) {
    case TRIT_STEP_ZERO: memset(g->arena.base + g->bufs[st->arg].offset, 0, g->bufs[st->arg].bytes); return TRIT_OK;
    case TRIT_STEP_EVENT: return fire(g, st);
    case TRIT_STEP_RECOMPUTE:
        n->rctx = n->ctx;  // the forward's mode, seed and step: the same values, the same masks
        n->rctx.recompute = true;
        s = n->def->forward(&n->rec);
        return s == TRIT_OK ? s : with_context(s, n->def->name, " recompute", st->arg);
    case TRIT_STEP_BACKWARD:
        s = n->def->backward(&n->bwd);
        return s == TRIT_OK ? s : with_context(s, n->def->name, " backward", st->arg);
    case TRIT_STEP_FORWARD: break;
    }
    return trit_error(TRIT_ERR_STATE, "backward: a forward step in the backward phase");
}

static trit_status run_backward_step(trit_graph *g, const trit_step *st) {
    const trit_status s = run_compute_step(g, st);
    if (s == TRIT_OK && (st->kind == TRIT_STEP_BACKWARD || st->kind == TRIT_STEP_RECOMPUTE) &&
        g->nodes[st->arg].reads_streamed)
        g->streamed.release(g->streamed.ctx);
    return s;
}

trit_status trit_graph_set_streamed(trit_graph *g, const void *base, size_t bytes, void (*release)(void *ctx), void *ctx) {
    trit_status s = check_compiled(g, "trit_graph_set_streamed");
    if (s != TRIT_OK) return s;
    if (bytes && (!base || !release)) return trit_error(TRIT_ERR_INVALID, "trit_graph_set_streamed: NULL range or release");
    g->streamed.base = base;
    g->streamed.bytes = bytes;
    g->streamed.release = release;
    g->streamed.ctx = ctx;
    for (int i = 0; i < g->n_nodes; i++) {
        trit_node *n = &g->nodes[i];
        n->reads_streamed = false;
        for (int j = 0; j < n->n_in && bytes; j++) {
            const char *d = g->values[n->in[j]].t->data;
            n->reads_streamed = n->reads_streamed || (d >= g->streamed.base && d < g->streamed.base + bytes);
        }
    }
    return TRIT_OK;
}

// The backward phase from a seeded gradient of the root (written by the caller).
static trit_status run_backward(trit_graph *g) {
    for (int k = g->n_fwd_steps; k < g->n_steps; k++) {
        trit_status s = run_backward_step(g, &g->steps[k]);
        if (s != TRIT_OK) return s;
    }
    g->forward_done = false;  // saved activations may have been overwritten by gradients
    return TRIT_OK;
}

static trit_status check_backward(trit_graph *g, const char *what) {
    trit_status s = check_compiled(g, what);
    if (s != TRIT_OK) return s;
    if (g->loss < 0) return trit_error(TRIT_ERR_STATE, "%s: graph was compiled without a loss", what);
    if (!g->forward_done) return trit_error(TRIT_ERR_STATE, "%s: run a successful trit_graph_forward first", what);
    return TRIT_OK;
}

trit_status trit_graph_backward(trit_graph *g) {
    trit_status s = check_backward(g, "trit_graph_backward");
    if (s != TRIT_OK) return s;
    if (g->seeded)
        return trit_error(TRIT_ERR_STATE, "trit_graph_backward: the graph was compiled for a seeded output; use trit_graph_backward_seed");
    trit_value *lv = &g->values[g->loss];
    if (!lv->grad) return TRIT_OK;  // nothing trainable upstream of the loss
    if (g->dtype == TRIT_F64) *(double *)lv->grad->data = g->grad_scale;
    else *(float *)lv->grad->data = (float)g->grad_scale;
    return run_backward(g);
}

trit_status trit_graph_backward_seed(trit_graph *g, const trit_tensor *dout) {
    trit_status s = check_backward(g, "trit_graph_backward_seed");
    if (s != TRIT_OK) return s;
    if (!dout) return trit_error(TRIT_ERR_INVALID, "trit_graph_backward_seed: dout is NULL");
    trit_value *lv = &g->values[g->loss];
    if (!trit_tensor_same_shape(dout, lv->t) || dout->dtype != g->dtype) {
        char a[128], b[128];
        return trit_error(TRIT_ERR_SHAPE, "trit_graph_backward_seed: dout is %s %s; the output is %s, so dout must be %s %s",
                          trit_dtype_name(dout->dtype), trit_tensor_shape_str(dout, a, sizeof a),
                          trit_tensor_shape_str(lv->t, b, sizeof b), trit_dtype_name(g->dtype), b);
    }
    if (!lv->grad) return TRIT_OK;
    if ((s = trit_tensor_copy(lv->grad, dout)) != TRIT_OK) return s;
    return run_backward(g);
}

void trit_graph_zero_grad(trit_graph *g) {
    if (!g) return;
    for (int i = 0; i < g->n_params; i++) {
        trit_tensor *p = g->values[g->params[i]].t;
        if (p->grad) memset(p->grad->data, 0, trit_tensor_nbytes(p->grad));
    }
}
