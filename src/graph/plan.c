// Memory planning: every activation, saved tensor, recomputed copy and activation gradient is a
// buffer with a first and last position on the schedule's timeline (schedule.c); buffers are
// packed largest-first at the lowest offset free for their lifetime, into one arena allocated
// once, and the graph's tensors are pointed into it. A recomputed value has two buffers, one
// for forward and one from its recompute step to its last backward reader.
#include "graph/graph_internal.h"

#include <stdio.h>
#include <stdlib.h>
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

static void extend(trit_graph *g, int buf, int pos) {
    if (buf < 0 || pos < 0) return;
    if (pos > g->bufs[buf].last) g->bufs[buf].last = pos;
    if (pos < g->bufs[buf].first) g->bufs[buf].first = pos;
}

// How many of node n's inputs are value v.
static int reads_of(const trit_node *n, int v) {
    int reads = 0;
    for (int j = 0; j < n->n_in; j++) reads += n->in[j] == v;
    return reads;
}

// How many nodes read value v (a view of it counts as one).
static int readers_of(const trit_graph *g, int v) {
    int r = 0;
    for (int i = 0; i < g->n_nodes; i++) r += reads_of(&g->nodes[i], v) > 0;
    return r;
}

// Whether input j of node n may take the output's gradient buffer: a gradient first written by
// this backward (so it needs no zeroing: the op stores), of the same size, not kept.
static bool can_take_out_grad(const trit_graph *g, const trit_node *n, int j) {
    const trit_value *in = &g->values[n->in[j]], *out = &g->values[n->out];
    return in->grad_buf >= 0 && out->grad_buf >= 0 && !in->keep && !out->keep && n->out != g->loss &&
           n->in[j] != g->loss && in->kind != VALUE_INPUT && reads_of(n, n->in[j]) == 1 &&
           g->bufs[in->grad_buf].first == n->bwd_pos && g->bufs[in->grad_buf].bytes == g->bufs[out->grad_buf].bytes;
}

static void take_out_grad(trit_graph *g, const trit_node *n, int j) {
    trit_value *in = &g->values[n->in[j]], *out = &g->values[n->out];
    extend(g, out->grad_buf, g->bufs[in->grad_buf].last);
    g->bufs[in->grad_buf].bytes = 0;  // left unused
    in->grad_buf = out->grad_buf;
    in->grad_shared = true;
}

// An op whose backward may write in[0]'s gradient over its output's (bwd_in_place) gets one
// buffer for both when its backward is the first to write in[0]'s gradient (in[0]'s only
// reader, or its last in forward order, such as a residual add's stream) and neither gradient
// is kept: the output's gradient dies at that step, where in[0]'s is born (and needs no zeroing:
// the op stores); in[0]'s other readers add into it later. Later nodes first, so a chain of
// such ops ends in one buffer.
// An add also gives in[1] that buffer (bwd_passes_b) when nothing else will write into it while
// either gradient waits to be read: in[1] has no other reader, nor in[0] if it shares too. Both
// are then pinned, so their producers do not write their own inputs' gradients over it in place
// (a LoRA sum: the base's and the adapter's products get their gradients with no copy).
static void share_grad_buffers(trit_graph *g) {
    for (int i = g->n_nodes - 1; i >= 0; i--) {
        const trit_node *n = &g->nodes[i];
        if (!n->def->bwd_in_place || n->bwd_step < 0 || n->n_in < 1 || g->values[n->out].grad_pinned) continue;
        const bool a = can_take_out_grad(g, n, 0);
        if (a) take_out_grad(g, n, 0);
        if (!n->def->bwd_passes_b || n->n_in < 2 || n->in[1] == n->in[0] || g->values[n->in[1]].root != n->in[1] ||
            !can_take_out_grad(g, n, 1) || readers_of(g, n->in[1]) != 1 || (a && readers_of(g, n->in[0]) != 1))
            continue;
        take_out_grad(g, n, 1);
        g->values[n->in[0]].grad_pinned = g->values[n->in[1]].grad_pinned = true;
    }
}

// The buffer backward-phase steps read value v's storage from: its root's recomputed copy, or
// the root's forward storage.
static int bwd_buf(const trit_graph *g, int v) {
    const trit_value *r = &g->values[g->values[v].root];
    return r->shadow_buf >= 0 ? r->shadow_buf : r->data_buf;
}

// Storage of inputs, of every non-view op output, and of the copies recompute steps write.
static trit_status plan_storage(trit_graph *g) {
    const int END = g->n_positions;
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        const size_t bytes = trit_tensor_nbytes(v->t);
        if (v->kind == VALUE_INPUT) {
            if ((v->data_buf = add_buffer(g, bytes, 0)) >= 0) g->bufs[v->data_buf].last = END;
        } else if (v->kind == VALUE_OP && v->root == i && !v->dead) {
            v->data_buf = add_buffer(g, bytes, v->producer);
            const int rec = g->nodes[v->producer].rec_pos;
            if (v->data_buf >= 0 && v->recomputed && rec >= 0 && (v->shadow_buf = add_buffer(g, bytes, rec)) < 0)
                v->data_buf = -1;
        } else {
            continue;
        }
        if (v->data_buf < 0) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    }
    return TRIT_OK;
}

// Forward reads inputs and writes the output at the node's position; saved memory lives from
// the step that writes it (forward, or the recompute) to the backward step.
static trit_status plan_forward(trit_graph *g) {
    const int END = g->n_positions;
    for (int i = 0; i < g->n_nodes; i++) {
        trit_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) extend(g, g->values[g->values[n->in[j]].root].data_buf, i);
        const int obuf = g->values[g->values[n->out].root].data_buf;
        extend(g, obuf, i);
        if (g->values[n->out].keep || n->out == g->loss) extend(g, obuf, END);
        n->saved_buf = n->rec_saved_buf = -1;
        if (!n->saved_bytes) continue;
        if ((n->saved_buf = add_buffer(g, n->saved_bytes, i)) < 0) return trit_error(TRIT_ERR_NOMEM, "out of memory");
        if (n->rec_pos >= 0) {
            if ((n->rec_saved_buf = add_buffer(g, n->saved_bytes, n->rec_pos)) < 0)
                return trit_error(TRIT_ERR_NOMEM, "out of memory");
            extend(g, n->rec_saved_buf, n->bwd_pos);
        } else {
            extend(g, n->saved_buf, n->bwd_pos);
        }
    }
    return TRIT_OK;
}

// A recompute step reads its inputs and writes its copy; a backward step reads what its op
// declares read. Both through the recomputed copies where there are some.
static void plan_backward_reads(trit_graph *g) {
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        if (n->rec_pos >= 0) {
            for (int j = 0; j < n->n_in; j++) extend(g, bwd_buf(g, n->in[j]), n->rec_pos);
            extend(g, bwd_buf(g, n->out), n->rec_pos);
        }
        if (n->bwd_pos < 0) continue;
        const uint32_t unread = n->def->bwd_unread;
        for (int j = 0; j < n->n_in; j++)
            if (!(unread & TRIT_IN(j))) extend(g, bwd_buf(g, n->in[j]), n->bwd_pos);
        if (!(unread & TRIT_OUT)) extend(g, bwd_buf(g, n->out), n->bwd_pos);
    }
}

// The node that reads every aliased view of root r once, can store each of their gradients
// (bwd_stores), and so writes all of r's gradient when the views tile r: each a run of r's last
// dimension with r's strides, together covering it once (a split of q, k and v read by one
// attention). Then r's gradient needs no zeroing (schedule.c gives the node those stores). r's
// only readers must be those views. -1 when there is no such node.
static int view_tiler(const trit_graph *g, int r) {
    const trit_tensor *rt = g->values[r].t;
    const int last = rt->ndim - 1;
    int node = -1, nviews = 0;
    int64_t covered = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] != r) continue;
            const trit_value *v = &g->values[n->out];
            if (!n->def->is_view || !v->grad_alias || v->t->ndim != rt->ndim || last < 0) return -1;
            for (int d = 0; d < last; d++)
                if (v->t->shape[d] != rt->shape[d] || v->t->strides[d] != rt->strides[d]) return -1;
            if (v->t->strides[last] != 1 || v->t->offset < 0 || v->t->offset + v->t->shape[last] > rt->shape[last])
                return -1;
            covered += v->t->shape[last];
            nviews++;
        }
    }
    // The views' reader: one node, reading each view once, storing its gradient.
    for (int i = 0; i < g->n_nodes && nviews > 0; i++) {
        const trit_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            const trit_value *v = &g->values[n->in[j]];
            if (!v->grad_alias || v->root != r) continue;
            if ((node >= 0 && node != i) || !(n->def->bwd_stores & TRIT_IN(j))) return -1;
            node = i;
        }
    }
    if (node < 0 || covered != rt->shape[last]) return -1;
    // Disjoint runs whose lengths sum to the dimension cover it once.
    const trit_node *n = &g->nodes[node];
    for (int a = 0; a < n->n_in; a++)
        for (int b = a + 1; b < n->n_in; b++) {
            const trit_tensor *x = g->values[n->in[a]].t, *y = g->values[n->in[b]].t;
            if (g->values[n->in[a]].root != r || g->values[n->in[b]].root != r) continue;
            const bool overlap = x->offset < y->offset + y->shape[last] && y->offset < x->offset + x->shape[last];
            if (n->in[a] == n->in[b] || overlap) return -1;
        }
    return node;
}

// A view whose every reader writes its gradient through strides (bwd_strided_gin) gets no
// gradient buffer of its own: its gradient is that view of its root's, into which its readers
// then add directly (the root's buffer, zeroed before its first writer, now lives from theirs),
// and the view's backward, which would add its own into the root's, is left out (schedule.c).
static bool view_grad_aliasable(const trit_graph *g, int v) {
    const trit_value *val = &g->values[v];
    if (!g->view_grads || val->kind != VALUE_OP || val->dead || val->root == v || val->grad_buf < 0 || val->keep ||
        v == g->loss || val->wants_grad)
        return false;
    const trit_node *view = &g->nodes[val->producer];
    const trit_value *root = &g->values[val->root];
    if (!view->def->is_view || view->in[0] != val->root || root->grad_buf < 0 || root->grad_shared ||
        !trit_tensor_is_contiguous(root->t))
        return false;
    int readers = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        for (int j = 0; j < n->n_in; j++) {
            if (n->in[j] != v) continue;
            if (n->def->is_view || !(n->def->bwd_strided_gin & TRIT_IN(j))) return false;
            readers++;
        }
    }
    return readers > 0;
}

static void alias_view_grads(trit_graph *g) {
    for (int v = 0; v < g->n_values; v++) {
        if (!view_grad_aliasable(g, v)) continue;
        trit_value *val = &g->values[v];
        const int rbuf = g->values[val->root].grad_buf;
        extend(g, rbuf, g->bufs[val->grad_buf].first);
        g->bufs[val->grad_buf].bytes = 0;  // left unused
        val->grad_buf = rbuf;
        val->grad_shared = val->grad_alias = true;
    }
    for (int r = 0; r < g->n_values; r++) {
        trit_value *root = &g->values[r];
        if (root->kind == VALUE_OP && root->root == r && root->grad_buf >= 0 && !root->grad_shared && !root->keep &&
            r != g->loss)
            root->grad_tiler = view_tiler(g, r);
    }
}

// Gradients of activations live from their first writer's step to their producer's backward
// step; the seed's from the start of the backward phase; an input's and a kept value's to the end.
static trit_status plan_grads(trit_graph *g) {
    const int N = g->n_nodes, END = g->n_positions;
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        const bool input = v->kind == VALUE_INPUT && v->wants_grad;
        if ((v->kind != VALUE_OP && !input) || !trit_value_needs_grad(v)) continue;
        const size_t bytes = trit_tensor_nbytes(v->t) / trit_dtype_size(v->t->dtype) * trit_dtype_size(g->dtype);
        v->grad_buf = add_buffer(g, bytes, input ? END : g->nodes[v->producer].bwd_pos);
        v->grad_shared = v->grad_pinned = false;
        if (v->grad_buf < 0) return trit_error(TRIT_ERR_NOMEM, "out of memory");
        if (i == g->loss) g->bufs[v->grad_buf].first = N;
        if (v->keep || input) g->bufs[v->grad_buf].last = END;
    }
    for (int k = 0; k < g->n_bwd; k++) {
        const trit_node *n = &g->nodes[g->bwd_order[k]];
        for (int j = 0; j < n->n_in; j++) extend(g, g->values[n->in[j]].grad_buf, n->bwd_pos);
    }
    share_grad_buffers(g);
    alias_view_grads(g);
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

// The copy of value v that backward-phase steps read: v's layout over its root's recomputed
// storage.
static trit_tensor *shadow_of(const trit_tensor *t, void *root_data) {
    trit_tensor *s = malloc(sizeof *s);
    if (!s) return NULL;
    *s = *t;
    s->flags &= ~(uint32_t)(TRIT_FLAG_OWNS_DATA | TRIT_FLAG_OWNS_QUANT);
    s->grad = NULL;
    s->data = root_data;
    return s;
}

static trit_status assign_memory(trit_graph *g) {
    int *order = malloc(sizeof(int) * (size_t)(g->n_bufs + 1));
    if (!order) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    size_t total = pack_buffers(g, order);
    free(order);
    size_t scratch_off = (total + TRIT_ALIGN - 1) / TRIT_ALIGN * TRIT_ALIGN;
    if (g->plan_only) {  // the size the arena would have, for trit_graph_memory_report
        g->arena.size = scratch_off + g->scratch_bytes + TRIT_ALIGN;
        return TRIT_OK;
    }
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
            if (v->grad_alias) {  // the view's layout over its root's gradient (the root's own layout)
                memcpy(v->grad->strides, v->t->strides, sizeof v->grad->strides);
                v->grad->offset = v->t->offset;
            }
        }
    }
    // Views share their root's storage (in build order, so a view of a view is resolved), and
    // the copies of a recomputed root's views share the root's copy.
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        if (v->kind != VALUE_OP || v->dead) continue;
        if (v->root != i) v->t->data = g->values[v->root].t->data;
        const trit_value *r = &g->values[v->root];
        if (r->shadow_buf >= 0 && !(v->shadow = shadow_of(v->t, base + g->bufs[r->shadow_buf].offset)))
            return trit_error(TRIT_ERR_NOMEM, "out of memory");
    }
    return TRIT_OK;
}

trit_status trit_graph_plan_memory(trit_graph *g) {
    trit_status s = plan_storage(g);
    if (s == TRIT_OK) s = plan_forward(g);
    if (s == TRIT_OK) {
        plan_backward_reads(g);
        s = plan_grads(g);
    }
    if (s == TRIT_OK) s = assign_memory(g);
    return s;
}
