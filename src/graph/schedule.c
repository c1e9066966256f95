// The step list. First the schedule: which values backward recomputes, the backward order, and
// a position on one timeline for every step that computes (forward node i at position i, then the
// backward phase's recompute and backward steps in the order they run), which the memory planner
// turns into buffer lifetimes. Then, once memory is planned, the list itself: forward steps,
// and the backward phase with each gradient buffer's zeroing before its first writer and an
// event after the last backward step that adds into each parameter's gradient; with parameter
// groups, each group's "needed" event before the first step of a phase that reads one of its
// parameters and its "done" event after the last.
#include "graph/graph_internal.h"

#include <stdlib.h>
#include <string.h>

static int root_of(const trit_graph *g, int v) { return g->values[v].root; }

// A marked root is recomputed when an op (not a view) made it, nothing outside the graph reads it
// (kept, the loss) and every live view of it is marked too: a view that must stay readable would
// hold the root's storage anyway (a fused pair's unmarked half, say).
static void decide_recompute(trit_graph *g) {
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        v->recomputed = v->kind == VALUE_OP && v->root == i && !v->dead && v->mark_recompute && !v->keep &&
                        i != g->loss && !g->nodes[v->producer].def->is_view;
    }
    for (int i = 0; i < g->n_values; i++) {
        const trit_value *v = &g->values[i];
        if (v->kind != VALUE_OP || v->dead || v->root == i) continue;
        if (!v->mark_recompute || v->keep || i == g->loss) g->values[v->root].recomputed = false;
    }
}

// Root r is needed by the backward phase: if it is recomputed and not yet, its producer and,
// first, whatever recomputed roots that producer reads. Returns whether anything was added.
static bool want(const trit_graph *g, int r, bool *have, bool *need) {
    if (!g->values[r].recomputed || have[r]) return false;
    have[r] = true;
    const int p = g->values[r].producer;
    need[p] = true;
    const trit_node *n = &g->nodes[p];
    for (int j = 0; j < n->n_in; j++) want(g, root_of(g, n->in[j]), have, need);
    return true;
}

// What node n's backward reads, made available: recompute steps (in build order) placed at the
// next positions.
static int place_recomputes(trit_graph *g, const trit_node *n, int pos, bool *have, bool *need) {
    const uint32_t unread = n->def->bwd_unread;
    bool any = false;
    for (int j = 0; j < n->n_in; j++)
        if (!(unread & TRIT_IN(j))) any |= want(g, root_of(g, n->in[j]), have, need);
    const int out = root_of(g, n->out);
    if (!(unread & TRIT_OUT) || (n->saved_bytes && out == n->out)) any |= want(g, out, have, need);
    if (!any) return pos;
    for (int m = 0; m < g->n_nodes; m++) {
        if (!need[m]) continue;
        need[m] = false;
        g->nodes[m].rec_pos = pos++;
    }
    return pos;
}

trit_status trit_graph_schedule(trit_graph *g) {
    const int N = g->n_nodes;
    g->bwd_order = malloc(sizeof(int) * (size_t)(N + 1));
    bool *have = calloc((size_t)g->n_values + 1, sizeof(bool));
    bool *need = calloc((size_t)N + 1, sizeof(bool));
    if (!g->bwd_order || !have || !need) {
        free(have);
        free(need);
        return trit_error(TRIT_ERR_NOMEM, "out of memory");
    }
    g->n_bwd = 0;
    for (int i = 0; i < N; i++) g->nodes[i].bwd_step = g->nodes[i].bwd_pos = g->nodes[i].rec_pos = -1;
    for (int i = N - 1; i >= 0 && g->loss >= 0; i--) {
        trit_node *n = &g->nodes[i];
        if (!trit_value_needs_grad(&g->values[n->out])) continue;
        n->bwd_step = g->n_bwd;
        g->bwd_order[g->n_bwd++] = i;
    }
    decide_recompute(g);
    int pos = N;
    for (int k = 0; k < g->n_bwd; k++) {
        trit_node *n = &g->nodes[g->bwd_order[k]];
        pos = place_recomputes(g, n, pos, have, need);
        n->bwd_pos = pos++;
    }
    g->n_positions = pos;
    free(have);
    free(need);
    return TRIT_OK;
}

// ---- the list --------------------------------------------------------------------------------

static int param_index(const trit_graph *g, int v) {
    for (int i = 0; i < g->n_params; i++)
        if (g->params[i] == v) return i;
    return -1;
}

// Position of the last backward step that adds into each parameter's gradient (-1: none).
static void grad_final_positions(const trit_graph *g, int *final) {
    for (int i = 0; i < g->n_params; i++) final[i] = -1;
    for (int k = 0; k < g->n_bwd; k++) {
        const trit_node *n = &g->nodes[g->bwd_order[k]];
        for (int j = 0; j < n->n_in; j++) {
            const trit_value *v = &g->values[n->in[j]];
            if (v->kind != VALUE_PARAM || (n->def->no_grad_inputs & TRIT_IN(j)) || !trit_value_needs_grad(v)) continue;
            const int p = param_index(g, n->in[j]);
            if (p >= 0 && n->bwd_pos > final[p]) final[p] = n->bwd_pos;
        }
    }
}

// ---- parameter groups -------------------------------------------------------------------------

// The group of value v's storage (a grouped parameter, or a view of one), -1 for none.
static int group_of_value(const trit_graph *g, int v) {
    const int r = root_of(g, v);
    if (!g->param_group || g->values[r].kind != VALUE_PARAM) return -1;
    const int p = param_index(g, r);
    return p >= 0 && p < g->n_param_group ? g->param_group[p] : -1;
}

static int num_groups(const trit_graph *g) {
    int n = 0;
    for (int i = 0; g->param_group && i < g->n_param_group; i++)
        if (g->param_group[i] >= n) n = g->param_group[i] + 1;
    return n;
}

// Widens group spans [first, last] (positions; first -1 while unread) by node's reads at pos:
// every input, or for a backward step the inputs its op's backward reads.
static void note_reads(const trit_graph *g, int node, int pos, bool backward, int *first, int *last) {
    const trit_node *n = &g->nodes[node];
    for (int j = 0; j < n->n_in; j++) {
        if (backward && (n->def->bwd_unread & TRIT_IN(j))) continue;
        const int gr = group_of_value(g, n->in[j]);
        if (gr < 0) continue;
        if (first[gr] < 0) first[gr] = pos;
        last[gr] = pos;
    }
}

// Group spans of both phases: span[0..ng) forward firsts, then forward lasts, backward firsts,
// backward lasts.
static void group_spans(const trit_graph *g, const int *node_at, int ng, int *span) {
    for (int i = 0; i < 4 * ng; i++) span[i] = -1;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].def->is_view) note_reads(g, i, i, false, span, span + ng);
    for (int pos = g->n_nodes; g->loss >= 0 && pos < g->n_positions; pos++) {
        const int node = node_at[pos - g->n_nodes];
        note_reads(g, node, pos, g->nodes[node].rec_pos != pos, span + 2 * ng, span + 3 * ng);
    }
}

// Whether gradient buffer b is zeroed before its first writer: every planned gradient buffer but
// the seed's (written by backward itself) and one shared with an in-place op's output gradient.
static bool zeroed(const trit_graph *g, int v) {
    const trit_value *val = &g->values[v];
    return val->grad_buf >= 0 && v != g->loss && !val->grad_shared;
}

// The input of node `node` whose gradient (value v's, a zeroed buffer) its backward may store
// rather than add to zeros, or -1: v is exactly one of its inputs and the op can store that one.
static int stored_input(const trit_graph *g, int node, int v) {
    const trit_node *n = &g->nodes[node];
    int at = -1;
    if (!g->grad_stores) return -1;
    for (int j = 0; j < n->n_in; j++) {
        if (n->in[j] != v) continue;
        if (at >= 0) return -1;  // read twice: two writes
        at = j;
    }
    const uint32_t bit = at >= 0 ? TRIT_IN(at) : 0;
    return bit && (n->def->bwd_stores & bit) && !(n->def->no_grad_inputs & bit) ? at : -1;
}

static void push(trit_graph *g, trit_graph_step_kind kind, int arg, trit_graph_event_kind ev) {
    g->steps[g->n_steps++] = (trit_step){.kind = (uint8_t)kind, .event = (uint8_t)ev, .arg = arg};
}

// The backward phase at one position: a recompute step, or a backward step with the zeroing of
// the gradient buffers it is the first to write (but those its op stores into: no memset pass
// over memory the op writes anyway) and the events of the gradients it finishes.
// The events of groups whose span in `at` (firsts or lasts, ng of them) is pos.
static void push_groups(trit_graph *g, const int *at, int ng, int pos, trit_graph_event_kind ev) {
    for (int gr = 0; gr < ng; gr++)
        if (at[gr] == pos) push(g, TRIT_STEP_EVENT, gr, ev);
}

static void push_position(trit_graph *g, int pos, int node, const int *final, const int *span, int ng) {
    push_groups(g, span + 2 * ng, ng, pos, TRIT_EVENT_PARAMS_NEEDED);
    if (g->nodes[node].rec_pos == pos) {
        push(g, TRIT_STEP_RECOMPUTE, node, 0);
        push_groups(g, span + 3 * ng, ng, pos, TRIT_EVENT_PARAMS_DONE);
        return;
    }
    for (int v = 0; v < g->n_values; v++) {
        if (!zeroed(g, v) || g->bufs[g->values[v].grad_buf].first != pos) continue;
        if (g->grad_stores && g->values[v].grad_tiler == node) {  // it stores every view that tiles v (plan.c)
            const trit_node *n = &g->nodes[node];
            for (int j = 0; j < n->n_in; j++) {
                const trit_value *in = &g->values[n->in[j]];
                if (in->grad_alias && in->root == v) g->nodes[node].bwd.store_inputs |= TRIT_IN(j);
            }
            continue;
        }
        const int j = stored_input(g, node, v);
        if (j >= 0)
            g->nodes[node].bwd.store_inputs |= TRIT_IN(j);
        else
            push(g, TRIT_STEP_ZERO, g->values[v].grad_buf, 0);
    }
    // A view whose gradient is a view of its root's has nothing to add (plan.c).
    if (!g->values[g->nodes[node].out].grad_alias) push(g, TRIT_STEP_BACKWARD, node, 0);
    // Several finished at once come in reverse order of first use, the order of flat storage.
    for (int p = g->n_params - 1; p >= 0; p--)
        if (final[p] == pos) push(g, TRIT_STEP_EVENT, p, TRIT_EVENT_GRAD_FINAL);
    push_groups(g, span + 3 * ng, ng, pos, TRIT_EVENT_PARAMS_DONE);
}

trit_status trit_graph_build_steps(trit_graph *g) {
    const int N = g->n_nodes, P = g->n_positions, ng = num_groups(g);
    int *node_at = malloc(sizeof(int) * (size_t)(P - N + 1));
    int *final = malloc(sizeof(int) * (size_t)(g->n_params + 1));
    int *span = malloc(sizeof(int) * (size_t)(4 * ng + 1));
    int cap = P + 2 + g->n_params + 4 * ng;
    for (int v = 0; v < g->n_values; v++) cap += zeroed(g, v);
    free(g->steps);
    g->steps = malloc(sizeof(trit_step) * (size_t)cap);
    if (!node_at || !final || !span || !g->steps) {
        free(node_at);
        free(final);
        free(span);
        return trit_error(TRIT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < N; i++) {
        const trit_node *n = &g->nodes[i];
        if (n->rec_pos >= 0) node_at[n->rec_pos - N] = i;
        if (n->bwd_pos >= 0) node_at[n->bwd_pos - N] = i;
    }
    grad_final_positions(g, final);
    group_spans(g, node_at, ng, span);
    g->n_steps = 0;
    for (int i = 0; i < N; i++) g->nodes[i].bwd.store_inputs = 0;  // decided again below
    for (int i = 0; i < N; i++) {
        if (g->nodes[i].def->is_view) continue;
        push_groups(g, span, ng, i, TRIT_EVENT_PARAMS_NEEDED);
        push(g, TRIT_STEP_FORWARD, i, 0);
        push_groups(g, span + ng, ng, i, TRIT_EVENT_PARAMS_DONE);
    }
    g->n_fwd_steps = g->n_steps;
    if (g->loss >= 0) {
        for (int pos = N; pos < P; pos++) push_position(g, pos, node_at[pos - N], final, span, ng);
        push(g, TRIT_STEP_EVENT, -1, TRIT_EVENT_MICRO_END);
        push(g, TRIT_STEP_EVENT, -1, TRIT_EVENT_STEP_END);
    }
    free(node_at);
    free(final);
    free(span);
    return TRIT_OK;
}

trit_status trit_graph_set_param_groups(trit_graph *g, const int *group, int n_params) {
    if (!g) return trit_error(TRIT_ERR_INVALID, "trit_graph_set_param_groups: graph is NULL");
    if (group && n_params != g->n_params)
        return trit_error(TRIT_ERR_INVALID, "trit_graph_set_param_groups: %d groups given for the graph's %d parameters",
                          n_params, g->n_params);
    for (int i = 0; group && i < n_params; i++)
        if (group[i] < -1)
            return trit_error(TRIT_ERR_RANGE, "trit_graph_set_param_groups: parameter %d ('%s') has group %d; a group is "
                              ">= 0, or -1 for none", i, g->values[g->params[i]].t->name, group[i]);
    int *copy = group ? malloc(sizeof(int) * (size_t)(n_params + 1)) : NULL;
    if (group && !copy) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    if (copy) memcpy(copy, group, sizeof(int) * (size_t)n_params);
    free(g->param_group);
    g->param_group = copy;
    g->n_param_group = group ? n_params : 0;
    // A compiled graph's list is made again: the plan it rests on does not change.
    return g->compiled && !g->plan_only ? trit_graph_build_steps(g) : TRIT_OK;
}

int trit_graph_num_steps(const trit_graph *g) { return g && g->compiled ? g->n_steps : 0; }

trit_status trit_graph_step_at(const trit_graph *g, int i, trit_graph_step_info *out) {
    if (!g || !out) return trit_error(TRIT_ERR_INVALID, "trit_graph_step_at: NULL argument");
    if (!g->compiled) return trit_error(TRIT_ERR_STATE, "trit_graph_step_at: compile the graph first");
    if (i < 0 || i >= g->n_steps)
        return trit_error(TRIT_ERR_RANGE, "trit_graph_step_at: step %d outside [0, %d)", i, g->n_steps);
    const trit_step *s = &g->steps[i];
    const bool has_node = s->kind == TRIT_STEP_FORWARD || s->kind == TRIT_STEP_BACKWARD || s->kind == TRIT_STEP_RECOMPUTE;
    *out = (trit_graph_step_info){
        .kind = (trit_graph_step_kind)s->kind,
        .node = has_node ? s->arg : -1,
        .op = has_node ? g->nodes[s->arg].def->name : "",
        .event = (trit_graph_event_kind)s->event,
        .param = s->kind == TRIT_STEP_EVENT && s->event == TRIT_EVENT_GRAD_FINAL ? s->arg : -1,
        .group = s->kind == TRIT_STEP_EVENT && (s->event == TRIT_EVENT_PARAMS_NEEDED || s->event == TRIT_EVENT_PARAMS_DONE)
                     ? s->arg : -1,
        .backward = i >= g->n_fwd_steps,
    };
    return TRIT_OK;
}
