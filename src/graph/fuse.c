// Fusion: compile's first pass rewrites op patterns into fused ops that do the same math in
// fewer passes over memory (or, for the classifier, without ever storing the logits):
//   linear(x, W, b) -> gelu           =>  linear(x, W) -> bias_gelu(., b)
//   linear(x, W, b) -> add_act -> gelu =>  linear(x, W) -> add_act -> bias_gelu(., b)
//   s = add(x, r) -> layernorm(s)     =>  f = add_layernorm(x, r) (2, ...); s = f[0]; ln = f[1]
//   linear(x, W, b) -> cross_entropy  =>  classifier_ce(x, W, targets, b)
// A pattern is rewritten only where the intermediate value has no other use and is not kept,
// so every value the caller can see keeps its meaning.
#include "graph/graph_internal.h"
#include "ops/fused.h"
#include "ops/loss.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/unary.h"
#include "ops/binary.h"
#include "ops/view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define IS_OP(g, n, op) ((n)->def == ((g)->dtype == TRIT_F64 ? &op##_f64 : &op##_f32))
#define OP_DEF(g, op) ((g)->dtype == TRIT_F64 ? &op##_f64 : &op##_f32)

static int *count_uses(const trit_graph *g) {
    int *uses = calloc((size_t)g->n_values + 1, sizeof(int));
    if (!uses) return NULL;
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++) uses[g->nodes[i].in[j]]++;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i].keep) uses[i] += 1000;  // never fuse a kept value away
    return uses;
}

// The node that made value v, if v is an op output used exactly once.
static trit_node *sole_producer(trit_graph *g, const int *uses, int v) {
    const trit_value *val = &g->values[v];
    if (val->kind != VALUE_OP || val->dead || val->producer < 0 || uses[v] != 1) return NULL;
    return &g->nodes[val->producer];
}

static bool contiguous_ok(const trit_graph *g, const trit_op_def *def, const int *in, int n_in) {
    for (int j = 0; j < n_in; j++)
        if ((def->contiguous_inputs & TRIT_IN(j)) && !trit_tensor_is_contiguous(g->values[in[j]].t)) return false;
    return true;
}

static bool set_attr(trit_node *n, const void *attr, size_t size) {
    void *copy = NULL;
    if (size && !(copy = malloc(size))) return false;
    if (size) memcpy(copy, attr, size);
    free(n->attr);
    n->attr = copy;
    return true;
}

// Room for one more node, so the rewrite that follows cannot fail halfway.
static bool reserve_node(trit_graph *g) {
    if (g->n_nodes < g->cap_nodes) return true;
    int ncap = g->cap_nodes ? g->cap_nodes * 2 : 16;
    trit_node *p = realloc(g->nodes, (size_t)ncap * sizeof *p);
    if (!p) return false;
    g->nodes = p;
    g->cap_nodes = ncap;
    return true;
}

// Opens a hole at node position pos (producers shift up by one); reserve_node first.
static void insert_node(trit_graph *g, int pos) {
    memmove(&g->nodes[pos + 1], &g->nodes[pos], (size_t)(g->n_nodes - pos) * sizeof(trit_node));
    g->n_nodes++;
    memset(&g->nodes[pos], 0, sizeof(trit_node));
    g->nodes[pos].saved_buf = g->nodes[pos].bwd_step = -1;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i].producer >= pos) g->values[i].producer++;
}

void trit_graph_remove_node(trit_graph *g, int pos) {
    free(g->nodes[pos].attr);
    memmove(&g->nodes[pos], &g->nodes[pos + 1], (size_t)(g->n_nodes - pos - 1) * sizeof(trit_node));
    g->n_nodes--;
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i].producer > pos) g->values[i].producer--;
}

// gelu(linear(x, W, b)) and, for a LoRA product l added to the linear's output,
// gelu(add_act(linear(x, W, b), l)) = bias_gelu(add_act(linear(x, W), l), b).
static int fuse_bias_gelu(trit_graph *g, const int *uses, trit_node *n) {
    if (!IS_OP(g, n, trit_op_gelu)) return 0;
    trit_node *lin = sole_producer(g, uses, n->in[0]);
    if (lin && IS_OP(g, lin, trit_op_add_act)) {
        const trit_tensor *sum = g->values[n->in[0]].t, *y = g->values[lin->in[0]].t;
        lin = trit_tensor_same_shape(sum, y) ? sole_producer(g, uses, lin->in[0]) : NULL;
    }
    if (!lin || !IS_OP(g, lin, trit_op_linear) || lin->n_in != 3) return 0;
    int in[2] = {n->in[0], lin->in[2]};
    const trit_op_def *def = OP_DEF(g, trit_op_bias_gelu);
    if (!contiguous_ok(g, def, in, 2)) return 0;
    lin->n_in = 2;
    n->def = def;
    n->n_in = 2;
    memcpy(n->in, in, sizeof in);
    return 1;
}

// Makes node `pos` a SELECT view of value `from` at `index`, producing value `out`; attr is an
// allocated trit_view_attr the node takes.
static void make_select(trit_graph *g, int pos, int from, int64_t index, int out, trit_view_attr *attr) {
    *attr = (trit_view_attr){.kind = TRIT_VIEW_SELECT, .dim = 0, .start = index};
    trit_node *n = &g->nodes[pos];
    free(n->attr);
    n->attr = attr;
    n->def = OP_DEF(g, trit_op_view);
    n->n_in = 1;
    n->in[0] = from;
    n->out = out;
    const trit_tensor *src = g->values[from].t;
    // Cannot fail: element `index` of the fused value's first dim has the value's own shape.
    (void)n->def->infer(&src, 1, n->attr, g->values[out].t);
    g->values[out].producer = pos;
    g->values[out].root = g->values[from].root;
}

static int fuse_add_layernorm(trit_graph *g, int li) {
    trit_node *ln = &g->nodes[li];
    if (!IS_OP(g, ln, trit_op_layernorm)) return 0;
    // With 16-bit activations the norm writes its output in 16 bits (graph/lowp.c), which the
    // fused op's single fp32 buffer for sum and normalised rows cannot: keep them apart.
    if (g->policy.activation == TRIT_BF16 || g->policy.activation == TRIT_F16) return 0;
    const int s = ln->in[0];
    const trit_value *sv = &g->values[s];
    if (sv->kind != VALUE_OP || sv->dead || sv->producer < 0) return 0;
    const int si = sv->producer;
    trit_node *add = &g->nodes[si];
    if (!IS_OP(g, add, trit_op_add) || sv->t->ndim >= TRIT_MAX_DIMS) return 0;
    const trit_tensor *st = sv->t;
    for (int j = 0; j < 2; j++) {
        const trit_tensor *t = g->values[add->in[j]].t;
        if (!trit_tensor_same_shape(t, st) || t->dtype != g->dtype) return 0;
    }
    // The fused node takes the add's place, so the norm's weight and bias must exist by then
    // (a cast of a 16-bit parameter made for the norm comes after the add: no fusion then).
    for (int j = 1; j < ln->n_in; j++)
        if (g->values[ln->in[j]].producer >= si) return 0;
    const trit_norm_attr *na = ln->attr;
    trit_add_layernorm_attr fa = {.eps = na->eps, .has_weight = na->has_weight != 0, .has_bias = na->has_bias != 0};
    int in[4] = {add->in[0], add->in[1]}, n_in = 2;
    for (int j = 1; j < ln->n_in; j++) in[n_in++] = ln->in[j];
    const trit_op_def *def = OP_DEF(g, trit_op_add_layernorm);
    if (!contiguous_ok(g, def, in, n_in)) return 0;

    const int lnout = ln->out;  // ln and add point into the node array, which may move now
    // Everything that can fail first, so a failure leaves the graph as it was.
    int64_t shape[TRIT_MAX_DIMS];
    shape[0] = 2;
    memcpy(shape + 1, st->shape, sizeof(int64_t) * (size_t)st->ndim);
    trit_tensor *ft = calloc(1, sizeof *ft);
    trit_add_layernorm_attr *fattr = malloc(sizeof *fattr);
    trit_view_attr *sel0 = malloc(sizeof *sel0), *sel1 = malloc(sizeof *sel1);
    int f = -1;
    if (!ft || !fattr || !sel0 || !sel1 || trit_tensor_init_layout(ft, g->dtype, st->ndim + 1, shape) != TRIT_OK ||
        !reserve_node(g) || (f = trit_graph_add_value(g, ft, VALUE_OP, si)) < 0) {
        free(ft);
        free(fattr);
        free(sel0);
        free(sel1);
        return -1;
    }
    snprintf(ft->name, sizeof ft->name, "add_layernorm.%d", si);
    insert_node(g, si + 1);
    trit_node *fn = &g->nodes[si];
    *fattr = fa;
    free(fn->attr);
    fn->attr = fattr;
    fn->def = def;
    fn->n_in = n_in;
    memcpy(fn->in, in, sizeof(int) * (size_t)n_in);
    fn->out = f;
    make_select(g, si + 1, f, 0, s, sel0);
    make_select(g, li + 1, f, 1, lnout, sel1);
    return 1;
}

static int fuse_classifier(trit_graph *g, const int *uses, int ci) {
    trit_node *ce = &g->nodes[ci];
    if (!IS_OP(g, ce, trit_op_cross_entropy)) return 0;
    const int lg = ce->in[0];
    trit_node *lin = sole_producer(g, uses, lg);
    if (!lin || !IS_OP(g, lin, trit_op_linear)) return 0;
    const trit_cross_entropy_attr *ca = ce->attr;
    trit_classifier_attr fa = {.ignore_index = ca->ignore_index, .reduction = ca->reduction,
                               .has_bias = lin->n_in == 3, .chunk_rows = 0};
    int in[4] = {lin->in[0], lin->in[1], ce->in[1]}, n_in = 3;
    if (lin->n_in == 3) in[n_in++] = lin->in[2];
    const trit_op_def *def = OP_DEF(g, trit_op_classifier_ce);
    if (!contiguous_ok(g, def, in, n_in)) return 0;
    if (!set_attr(ce, &fa, sizeof fa)) return -1;
    ce->def = def;
    ce->n_in = n_in;
    memcpy(ce->in, in, sizeof(int) * (size_t)n_in);
    const int li = g->values[lg].producer;
    g->values[lg].dead = true;
    g->values[lg].producer = -1;
    trit_graph_remove_node(g, li);
    return 1;
}

int trit_graph_fuse(trit_graph *g) {
    if (!g->fusion) return 0;
    int total = 0;
    for (bool changed = true; changed;) {
        changed = false;
        int *uses = count_uses(g);
        if (!uses) return -1;
        for (int i = 0; i < g->n_nodes && !changed; i++) {
            int r = fuse_bias_gelu(g, uses, &g->nodes[i]);
            if (r == 0) r = fuse_classifier(g, uses, i);
            if (r == 0) r = fuse_add_layernorm(g, i);
            if (r < 0) {
                free(uses);
                return -1;
            }
            if (r > 0) {
                total++;
                changed = true;
            }
        }
        free(uses);
    }
    return total;
}

int trit_graph_count_op(const trit_graph *g, const char *name) {
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += strcmp(g->nodes[i].def->name, name) == 0;
    return n;
}
