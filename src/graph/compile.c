// Compiling a graph: which values need gradients, the backward schedule, and a memory plan
// that places every activation, saved tensor and activation gradient in one arena by liveness.
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static int add_buffer(trit_graph *g, size_t bytes, int first) {
    if (g->n_bufs == g->cap_bufs) {
        int ncap = g->cap_bufs ? g->cap_bufs * 2 : 64;
        trit_buffer *p = realloc(g->bufs, (size_t)ncap * sizeof *p);
        if (!p) return -1;
        g->bufs = p;
        g->cap_bufs = ncap;
    }
    trit_buffer *b = &g->bufs[g->n_bufs];
    b->bytes = (bytes + TRIT_ALIGN - 1) / TRIT_ALIGN * TRIT_ALIGN;
    b->first = b->last = first;
    b->offset = 0;
    return g->n_bufs++;
}

static void extend(trit_graph *g, int buf, int step) {
    if (buf < 0) return;
    if (step > g->bufs[buf].last) g->bufs[buf].last = step;
    if (step < g->bufs[buf].first) g->bufs[buf].first = step;
}

static void mark_requires_grad(trit_graph *g) {
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        v->requires_grad = v->kind == VALUE_PARAM && !(v->t->flags & TRIT_FLAG_FROZEN);
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

static bool needs_grad(const trit_value *v) { return v->requires_grad && v->reaches_loss; }

static trit_status schedule_backward(trit_graph *g) {
    g->bwd_order = malloc(sizeof(int) * (size_t)(g->n_nodes + 1));
    if (!g->bwd_order) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    g->n_bwd = 0;
    for (int i = g->n_nodes - 1; i >= 0 && g->loss >= 0; i--) {
        trit_node *n = &g->nodes[i];
        if (!needs_grad(&g->values[n->out])) continue;
        n->bwd_step = g->n_bwd;
        g->bwd_order[g->n_bwd++] = i;
    }
    return TRIT_OK;
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
        c->ctx = &n->ctx;
        n->saved_bytes = n->def->saved_bytes ? n->def->saved_bytes(c) : 0;
        n->scratch_bytes = n->def->scratch_bytes ? n->def->scratch_bytes(c) : 0;
        if (n->scratch_bytes > g->scratch_bytes) g->scratch_bytes = n->scratch_bytes;
    }
}

// How many node inputs read value v.
static int uses_of(const trit_graph *g, int v) {
    int uses = 0;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++) uses += g->nodes[i].in[j] == v;
    return uses;
}

// An op whose backward may write in[0]'s gradient over its output's (bwd_in_place) gets one
// buffer for both when it is in[0]'s only reader and neither gradient is kept: the output's
// gradient dies at that step, where in[0]'s is born (and needs no zeroing: the op stores).
// Later nodes first, so a chain of such ops ends in one buffer.
static void share_grad_buffers(trit_graph *g) {
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const trit_node *n = &g->nodes[i];
        if (!n->def->bwd_in_place || n->bwd_step < 0 || n->n_in < 1) continue;
        trit_value *in = &g->values[n->in[0]], *out = &g->values[n->out];
        if (in->grad_buf < 0 || out->grad_buf < 0 || in->keep || out->keep || n->out == g->loss || n->in[0] == g->loss)
            continue;
        if (uses_of(g, n->in[0]) != 1 || g->bufs[in->grad_buf].bytes != g->bufs[out->grad_buf].bytes) continue;
        extend(g, out->grad_buf, g->bufs[in->grad_buf].last);
        g->bufs[in->grad_buf].bytes = 0;  // left unused
        in->grad_buf = out->grad_buf;
        in->grad_shared = true;
    }
}

static trit_status plan_buffers(trit_graph *g) {
    const int N = g->n_nodes, END = g->n_nodes + g->n_bwd;
    // Storage of inputs and of every non-view op output.
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        if (v->kind == VALUE_INPUT) {
            v->data_buf = add_buffer(g, trit_tensor_nbytes(v->t), 0);
            if (v->data_buf >= 0) g->bufs[v->data_buf].last = END;
        } else if (v->kind == VALUE_OP && v->root == i && !v->dead) {
            v->data_buf = add_buffer(g, trit_tensor_nbytes(v->t), v->producer);
        } else {
            continue;
        }
        if (v->data_buf < 0) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < N; i++) {
        trit_node *n = &g->nodes[i];
        const int bstep = n->bwd_step >= 0 ? N + n->bwd_step : -1;
        // Forward reads inputs; backward reads inputs and output except those its op declares
        // unread. Views reach their root.
        const uint32_t unread = n->def->bwd_unread;
        for (int j = 0; j < n->n_in; j++) {
            int buf = g->values[g->values[n->in[j]].root].data_buf;
            extend(g, buf, i);
            if (bstep >= 0 && !(unread & TRIT_IN(j))) extend(g, buf, bstep);
        }
        int obuf = g->values[g->values[n->out].root].data_buf;
        extend(g, obuf, i);
        if (bstep >= 0 && !(unread & TRIT_OUT)) extend(g, obuf, bstep);
        if (g->values[n->out].keep || n->out == g->loss) extend(g, obuf, END);
        if (n->saved_bytes) {
            n->saved_buf = add_buffer(g, n->saved_bytes, i);
            if (n->saved_buf < 0) return trit_error(TRIT_ERR_NOMEM, "out of memory");
            if (bstep >= 0) extend(g, n->saved_buf, bstep);
        }
    }
    // Gradients of activations live from their first writer's step to their producer's step.
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        if (v->kind != VALUE_OP || !needs_grad(v)) continue;
        int prod_step = N + g->nodes[v->producer].bwd_step;
        v->grad_buf = add_buffer(g, trit_tensor_nbytes(v->t) / trit_dtype_size(v->t->dtype) * trit_dtype_size(g->dtype), prod_step);
        v->grad_shared = false;
        if (v->grad_buf < 0) return trit_error(TRIT_ERR_NOMEM, "out of memory");
        if (i == g->loss) g->bufs[v->grad_buf].first = N;
        if (v->keep) g->bufs[v->grad_buf].last = N + g->n_bwd;
    }
    for (int s = 0; s < g->n_bwd; s++) {
        const trit_node *n = &g->nodes[g->bwd_order[s]];
        for (int j = 0; j < n->n_in; j++) extend(g, g->values[n->in[j]].grad_buf, N + s);
    }
    share_grad_buffers(g);
    return TRIT_OK;
}

// Larger buffers first; equal sizes keep id order, so plans are reproducible.
static bool placed_before(const trit_buffer *bufs, int a, int b) {
    return bufs[a].bytes != bufs[b].bytes ? bufs[a].bytes > bufs[b].bytes : a < b;
}

static void sort_ids(int *ids, int n, const trit_buffer *bufs) {
    for (int i = 1; i < n; i++) {  // insertion sort: stable, and n is the number of buffers
        int x = ids[i], j = i - 1;
        while (j >= 0 && placed_before(bufs, x, ids[j])) {
            ids[j + 1] = ids[j];
            j--;
        }
        ids[j + 1] = x;
    }
}

// Greedy placement, largest first: each buffer goes at the lowest offset that does not
// overlap, in address, a placed buffer whose lifetime overlaps its own.
static size_t pack_buffers(trit_graph *g, int *order) {
    for (int i = 0; i < g->n_bufs; i++) order[i] = i;
    sort_ids(order, g->n_bufs, g->bufs);
    size_t total = 0;
    for (int k = 0; k < g->n_bufs; k++) {
        trit_buffer *b = &g->bufs[order[k]];
        size_t off = 0;
        bool moved = true;
        while (moved) {
            moved = false;
            for (int m = 0; m < k; m++) {
                const trit_buffer *p = &g->bufs[order[m]];
                bool live = p->first <= b->last && b->first <= p->last;
                if (live && off < p->offset + p->bytes && p->offset < off + b->bytes) {
                    off = p->offset + p->bytes;
                    moved = true;
                }
            }
        }
        b->offset = off;
        if (off + b->bytes > total) total = off + b->bytes;
    }
    return total;
}

static trit_tensor *grad_tensor_like(const trit_tensor *t, trit_dtype dt) {
    trit_tensor *gt = calloc(1, sizeof *gt);
    if (!gt) return NULL;
    trit_tensor_init_layout(gt, dt, t->ndim, t->shape);
    gt->graph_value = -1;
    snprintf(gt->name, sizeof gt->name, "grad(%.80s)", t->name);
    return gt;
}

static trit_status attach_param_grads(trit_graph *g) {
    for (int i = 0; i < g->n_params; i++) {
        trit_value *v = &g->values[g->params[i]];
        trit_tensor *p = v->t;
        // A parameter is stored in the accumulate dtype or, without master weights, in bf16/f16;
        // its gradient is always in the accumulate dtype.
        // A frozen parameter gets no gradient, so it may be of any dtype its readers take (a
        // quantized weight of a linear, for one).
        if (!needs_grad(v)) continue;
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

static trit_status assign_memory(trit_graph *g) {
    int *order = malloc(sizeof(int) * (size_t)(g->n_bufs + 1));
    if (!order) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    size_t total = pack_buffers(g, order);
    free(order);
    size_t scratch_off = (total + TRIT_ALIGN - 1) / TRIT_ALIGN * TRIT_ALIGN;
    trit_status s = trit_arena_init(&g->arena, scratch_off + g->scratch_bytes + TRIT_ALIGN);
    if (s != TRIT_OK) return s;
    uint8_t *base = g->arena.base;
    g->arena.used = g->arena.peak = scratch_off + g->scratch_bytes;
    g->scratch = g->scratch_bytes ? base + scratch_off : NULL;
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        if (v->data_buf >= 0) v->t->data = base + g->bufs[v->data_buf].offset;
        if (v->grad_buf >= 0) {
            if (!(v->grad = grad_tensor_like(v->t, g->dtype))) return trit_error(TRIT_ERR_NOMEM, "out of memory");
            v->grad->data = base + g->bufs[v->grad_buf].offset;
        }
    }
    // Views share their root's storage (in build order, so a view of a view is resolved).
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        if (v->kind == VALUE_OP && v->root != i) v->t->data = g->values[v->root].t->data;
    }
    return TRIT_OK;
}

static trit_status build_zero_lists(trit_graph *g) {
    g->zero_at = calloc((size_t)g->n_bwd + 1, sizeof(int *));
    int *count = calloc((size_t)g->n_bwd + 1, sizeof(int));
    if (!g->zero_at || !count) {
        free(count);
        return trit_error(TRIT_ERR_NOMEM, "out of memory");
    }
    const int N = g->n_nodes;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < g->n_values; i++) {
            int b = g->values[i].grad_buf;
            if (b < 0 || i == g->loss || g->values[i].grad_shared) continue;
            int s = g->bufs[b].first - N;
            if (pass == 0) count[s]++;
            else g->zero_at[s][--count[s]] = b;
        }
        if (pass == 0) {
            for (int s = 0; s < g->n_bwd; s++) {
                if (!(g->zero_at[s] = malloc(sizeof(int) * (size_t)(count[s] + 1)))) {
                    free(count);
                    return trit_error(TRIT_ERR_NOMEM, "out of memory");
                }
                g->zero_at[s][count[s]] = -1;
            }
        }
    }
    free(count);
    return TRIT_OK;
}

static void finish_calls(trit_graph *g) {
    uint8_t *base = g->arena.base;
    for (int i = 0; i < g->n_nodes; i++) {
        trit_node *n = &g->nodes[i];
        n->fwd.saved = n->saved_buf >= 0 ? base + g->bufs[n->saved_buf].offset : NULL;
        n->fwd.scratch = g->scratch;
        n->ctx.node = (uint64_t)i;
        n->ctx.matmul = g->policy.matmul;
        n->bwd = n->fwd;
        n->bwd.gout = g->values[n->out].grad;
        for (int j = 0; j < n->n_in; j++) {
            const trit_value *v = &g->values[n->in[j]];
            n->bwd.gin[j] = (n->def->no_grad_inputs & TRIT_IN(j)) || !needs_grad(v) ? NULL : v->grad;
        }
    }
}

void trit_graph_release_compiled(trit_graph *g) {
    if (g->zero_at)
        for (int s = 0; s < g->n_bwd; s++) free(g->zero_at[s]);
    free(g->zero_at);
    free(g->bwd_order);
    free(g->bufs);
    trit_arena_free(&g->arena);
    g->zero_at = NULL;
    g->bwd_order = NULL;
    g->bufs = NULL;
    g->n_bufs = g->cap_bufs = g->n_bwd = 0;
    g->compiled = false;
}

trit_status trit_graph_compile(trit_graph *g, trit_tensor *loss) {
    if (!g) return trit_error(TRIT_ERR_INVALID, "trit_graph_compile: graph is NULL");
    if (g->status != TRIT_OK) return trit_error(g->status, "graph build failed: %s", g->error);
    if (g->compiled) return trit_error(TRIT_ERR_STATE, "trit_graph_compile: graph is already compiled");
    if (trit_graph_fuse(g) < 0) return trit_error(TRIT_ERR_NOMEM, "trit_graph_compile: out of memory while fusing ops");
    trit_graph_store_lowp(g);
    g->loss = -1;
    if (loss) {
        if (loss->graph != g || g->values[loss->graph_value].kind != VALUE_OP)
            return trit_error(TRIT_ERR_INVALID, "trit_graph_compile: the loss must be an op result of this graph");
        if (trit_tensor_numel(loss) != 1) {
            char buf[128];
            return trit_error(TRIT_ERR_SHAPE, "trit_graph_compile: the loss must be a scalar, got shape %s; reduce it with trit_mean or trit_sum",
                              trit_tensor_shape_str(loss, buf, sizeof buf));
        }
        g->loss = loss->graph_value;
    }
    mark_requires_grad(g);
    mark_reaches_loss(g);
    trit_status s = schedule_backward(g);
    if (s == TRIT_OK) s = attach_param_grads(g);
    if (s == TRIT_OK) {
        prepare_calls(g);
        s = plan_buffers(g);
    }
    if (s == TRIT_OK) s = assign_memory(g);
    if (s == TRIT_OK) s = build_zero_lists(g);
    if (s != TRIT_OK) {
        trit_graph_release_compiled(g);
        return s;
    }
    finish_calls(g);
    g->compiled = true;
    g->forward_done = false;
    return TRIT_OK;
}

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
            out->param_bytes += b;
            if (v->t->grad) out->grad_bytes += trit_tensor_nbytes(v->t->grad);
        }
    }
    return TRIT_OK;
}
