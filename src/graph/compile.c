// Compiling a graph: fusion and 16-bit storage, which values need gradients, then the schedule
// (schedule.c), the memory plan (plan.c), the step list and every op call prepared.
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static void mark_requires_grad(trit_graph *g) {
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        v->requires_grad = (v->kind == VALUE_PARAM && !(v->t->flags & TRIT_FLAG_FROZEN)) || v->wants_grad;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        bool rg = false;
        for (int j = 0; j < n->n_in; j++)
            if (!(n->def->no_grad_inputs & TRIT_IN(j)) && g->values[n->in[j]].requires_grad) rg = true;
        g->values[n->out].requires_grad = rg && n->def->backward != NULL;
    }
}

static void mark_reaches_loss(trit_graph *g) {
    if (g->loss < 0) return;
    g->values[g->loss].reaches_loss = true;
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const trit_node *n = &g->nodes[i];
        if (!g->values[n->out].reaches_loss) continue;
        for (int j = 0; j < n->n_in; j++)
            if (!(n->def->no_grad_inputs & TRIT_IN(j))) g->values[n->in[j]].reaches_loss = true;
    }
}

// Sizes of saved and scratch memory need the op call's tensors, so prepare calls first.
static void prepare_calls(trit_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        trit_node *n = &g->nodes[i];
        trit_op_call *c = &n->fwd;
        memset(c, 0, sizeof *c);
        c->n_in = n->n_in;
        for (int j = 0; j < n->n_in; j++) c->in[j] = g->values[n->in[j]].t;
        c->out = g->values[n->out].t;
        c->attr = n->attr;
        n->ctx.matmul = g->policy.matmul;  // scratch sizes may depend on it
        c->ctx = &n->ctx;
        for (int j = 0; j < n->n_in; j++)
            if (!(n->def->no_grad_inputs & TRIT_IN(j)) && trit_value_needs_grad(&g->values[n->in[j]]))
                c->grad_inputs |= TRIT_IN(j);
        n->saved_bytes = n->def->saved_bytes ? n->def->saved_bytes(c) : 0;
        n->scratch_bytes = n->def->scratch_bytes ? n->def->scratch_bytes(c) : 0;
        if (n->scratch_bytes > g->scratch_bytes) g->scratch_bytes = n->scratch_bytes;
    }
}

static trit_status attach_param_grads(trit_graph *g) {
    for (int i = 0; i < g->n_params; i++) {
        trit_value *v = &g->values[g->params[i]];
        trit_tensor *p = v->t;
        // A parameter is stored in the accumulate dtype or, without master weights, in bf16/f16;
        // its gradient is always in the accumulate dtype.
        // A frozen parameter gets no gradient, so it may be of any dtype its readers take (a
        // quantized weight of a linear, for one).
        if (!trit_value_needs_grad(v)) continue;
        const bool lowp = g->dtype == TRIT_F32 && (p->dtype == TRIT_BF16 || p->dtype == TRIT_F16);
        if (p->dtype != g->dtype && !lowp)
            return trit_error(TRIT_ERR_DTYPE, "parameter '%s' is %s but the graph accumulates in %s (trainable "
                              "parameters may be %s, or bf16/f16 in an f32 graph; freeze it to use it as it is)",
                              p->name, trit_dtype_name(p->dtype), trit_dtype_name(g->dtype), trit_dtype_name(g->dtype));
        if (!p->grad) {
            p->grad = trit_tensor_new(g->dtype, p->ndim, p->shape);
            if (!p->grad) return TRIT_ERR_NOMEM;
        } else if (!trit_tensor_same_shape(p->grad, p) || p->grad->dtype != g->dtype) {
            return trit_error(TRIT_ERR_SHAPE, "parameter '%s' has a grad of another shape or dtype", p->name);
        }
        v->grad = p->grad;
    }
    return TRIT_OK;
}

static void *buf_at(const trit_graph *g, int buf) { return buf >= 0 ? g->arena.base + g->bufs[buf].offset : NULL; }

// Every call prepared: forward reads the values, backward and recompute steps the recomputed
// copies where there are some, and a recomputed node's backward the saved memory of its recompute.
static void finish_calls(trit_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        trit_node *n = &g->nodes[i];
        n->fwd.saved = buf_at(g, n->saved_buf);
        n->fwd.scratch = g->scratch;
        n->ctx.recompute = false;
        n->bwd = n->fwd;
        for (int j = 0; j < n->n_in; j++) n->bwd.in[j] = trit_value_bwd_tensor(&g->values[n->in[j]]);
        n->bwd.out = trit_value_bwd_tensor(&g->values[n->out]);
        if (n->rec_pos >= 0) {
            n->bwd.saved = buf_at(g, n->rec_saved_buf);
            n->rec = n->bwd;
            n->rec.ctx = &n->rctx;
        }
        n->bwd.gout = g->values[n->out].grad;
        for (int j = 0; j < n->n_in; j++) {
            const trit_value *v = &g->values[n->in[j]];
            n->bwd.gin[j] = (n->def->no_grad_inputs & TRIT_IN(j)) || !trit_value_needs_grad(v) ? NULL : v->grad;
        }
    }
}

// Frees what compile made (also after a failed compile, so a retry starts clean): the step
// list, the plan and arena, and the gradient tensors of activations and the recomputed copies.
void trit_graph_release_compiled(trit_graph *g) {
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        if (v->kind != VALUE_PARAM) free(v->grad);
        free(v->shadow);
        v->grad = v->shadow = NULL;
        v->grad_buf = v->data_buf = v->shadow_buf = v->grad_tiler = -1;
        v->grad_shared = v->grad_pinned = v->grad_alias = v->recomputed = false;
    }
    for (int i = 0; i < g->n_nodes; i++) g->nodes[i].reads_streamed = false;  // nodes may change: set it again
    memset(&g->streamed, 0, sizeof g->streamed);
    free(g->steps);
    free(g->bwd_order);
    free(g->bufs);
    trit_arena_free(&g->arena);
    g->steps = NULL;
    g->bwd_order = NULL;
    g->bufs = NULL;
    g->n_bufs = g->cap_bufs = g->n_bwd = g->n_steps = g->n_fwd_steps = g->n_positions = 0;
    g->compiled = false;
}

static trit_status set_root(trit_graph *g, trit_tensor *root, bool seeded) {
    const char *fn = seeded ? "trit_graph_compile_output" : "trit_graph_compile";
    g->loss = -1;
    g->seeded = seeded;
    if (!root) return TRIT_OK;
    if (root->graph != g || g->values[root->graph_value].kind != VALUE_OP)
        return trit_error(TRIT_ERR_INVALID, "%s: the %s must be an op result of this graph", fn, seeded ? "output" : "loss");
    if (!seeded && trit_tensor_numel(root) != 1) {
        char buf[128];
        return trit_error(TRIT_ERR_SHAPE, "%s: the loss must be a scalar, got shape %s; reduce it with trit_mean or "
                          "trit_sum, or seed backward with trit_graph_compile_output", fn,
                          trit_tensor_shape_str(root, buf, sizeof buf));
    }
    g->loss = root->graph_value;
    return TRIT_OK;
}

static trit_status compile(trit_graph *g, trit_tensor *root, bool seeded) {
    const char *fn = seeded ? "trit_graph_compile_output" : "trit_graph_compile";
    if (!g) return trit_error(TRIT_ERR_INVALID, "%s: graph is NULL", fn);
    if (g->status != TRIT_OK) return trit_error(g->status, "graph build failed: %s", g->error);
    if (g->compiled) return trit_error(TRIT_ERR_STATE, "%s: graph is already compiled", fn);
    if (seeded && !root) return trit_error(TRIT_ERR_INVALID, "%s: output is NULL", fn);
    if (trit_graph_fuse(g) < 0) return trit_error(TRIT_ERR_NOMEM, "%s: out of memory while fusing ops", fn);
    trit_graph_store_lowp(g);
    trit_status s = set_root(g, root, seeded);
    if (s != TRIT_OK) return s;
    mark_requires_grad(g);
    mark_reaches_loss(g);
    prepare_calls(g);
    s = trit_graph_schedule(g);
    if (s == TRIT_OK) s = attach_param_grads(g);
    if (s == TRIT_OK) s = trit_graph_plan_memory(g);
    if (s == TRIT_OK && g->plan_only) {
        g->compiled = true;
        return TRIT_OK;
    }
    // The calls first: the step list marks the backward calls that store their gradients.
    if (s == TRIT_OK) finish_calls(g);
    if (s == TRIT_OK) s = trit_graph_build_steps(g);
    if (s != TRIT_OK) {
        trit_graph_release_compiled(g);
        return s;
    }
    g->compiled = true;
    g->forward_done = false;
    return TRIT_OK;
}

trit_status trit_graph_compile(trit_graph *g, trit_tensor *loss) { return compile(g, loss, false); }

trit_status trit_graph_compile_output(trit_graph *g, trit_tensor *out) { return compile(g, out, true); }

trit_status trit_graph_memory_report(const trit_graph *g, trit_graph_memory *out) {
    if (!g || !out) return trit_error(TRIT_ERR_INVALID, "trit_graph_memory_report: NULL argument");
    if (!g->compiled) return trit_error(TRIT_ERR_STATE, "trit_graph_memory_report: compile the graph first");
    memset(out, 0, sizeof *out);
    out->arena_bytes = g->arena.size;
    out->num_nodes = g->n_nodes;
    out->num_backward_nodes = g->n_bwd;
    for (int i = 0; i < g->n_values; i++) {
        const trit_value *v = &g->values[i];
        size_t b = trit_tensor_nbytes(v->t);
        if (v->kind == VALUE_OP && v->root == i && !v->dead) out->activation_bytes += b;
        if (v->kind == VALUE_INPUT) out->input_bytes += b;
        if (v->kind == VALUE_OP && !v->dead && g->nodes[v->producer].n_in == 1 &&
            strcmp(g->nodes[v->producer].def->name, "cast") == 0 &&
            g->values[g->nodes[v->producer].in[0]].kind == VALUE_PARAM)
            out->param_copy_bytes += b;
        if (v->kind == VALUE_PARAM) {
            out->num_param_elems += trit_tensor_numel(v->t);
            out->param_bytes += b + trit_quant_info_bytes(v->t->quant);  // a quantized operand's scales too
            const char *d = v->t->data;
            if (g->streamed.bytes && d >= g->streamed.base && d < g->streamed.base + g->streamed.bytes) {
                out->streamed_bytes += b;
                out->streamed_resident = b > out->streamed_resident ? b : out->streamed_resident;
            }
            if (v->t->grad) out->grad_bytes += trit_tensor_nbytes(v->t->grad);
        }
    }
    return TRIT_OK;
}
