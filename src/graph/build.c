// Building a graph: inputs, leaves (parameters and constants) and op nodes, in call order,
// which is already a topological order.
#include "graph/graph_internal.h"
#include "ops/cast.h"
#include "ops/view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int ncap = *cap ? *cap * 2 : 16;
    while (ncap < need) ncap *= 2;
    void *q = realloc(*p, (size_t)ncap * elem);
    if (!q) return false;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    *p = q;
    *cap = ncap;
    return true;
}

static bool policy_ok(const trit_compute_policy *p) {
    if (!p) return trit_error(TRIT_ERR_INVALID, "trit_graph_new_policy: policy is NULL"), false;
    const bool low = p->activation == TRIT_BF16 || p->activation == TRIT_F16;
    if (p->accumulate == TRIT_F64 && p->activation == TRIT_F64 && p->matmul == TRIT_MATMUL_HIGHEST) return true;
    if (p->accumulate == TRIT_F32 && (p->activation == TRIT_F32 || low) && (unsigned)p->matmul <= TRIT_MATMUL_MEDIUM)
        return true;
    trit_error(TRIT_ERR_DTYPE, "compute policy {accumulate %s, activation %s, matmul %s} is not supported: use "
               "accumulate f32 with activations f32, bf16 or f16 (any matmul precision), or all f64 with matmul "
               "highest (the reference path)", trit_dtype_name(p->accumulate), trit_dtype_name(p->activation),
               trit_matmul_precision_name(p->matmul));
    return false;
}

trit_graph *trit_graph_new_policy(const trit_compute_policy *policy) {
    if (!policy_ok(policy)) return NULL;
    trit_graph *g = calloc(1, sizeof *g);
    if (!g) {
        trit_error(TRIT_ERR_NOMEM, "trit_graph_new: out of memory");
        return NULL;
    }
    g->policy = *policy;
    g->dtype = policy->accumulate;
    g->loss = -1;
    g->training = true;
    g->grad_scale = 1.0;
    g->num_micro = 1;
    const char *fuse = getenv("TRIT_FUSE");
    g->fusion = !(fuse && strcmp(fuse, "0") == 0);
    // TRIT_GRAD_STORE=0 zeroes every gradient buffer and adds into it: the reference the stores
    // are checked against, and the way to time what they save.
    const char *store = getenv("TRIT_GRAD_STORE");
    g->grad_stores = !(store && strcmp(store, "0") == 0);
    // TRIT_VIEW_GRADS=0 gives every view a gradient buffer of its own, added into its root's by
    // the view's backward: the reference the aliased gradients are checked against.
    const char *views = getenv("TRIT_VIEW_GRADS");
    g->view_grads = !(views && strcmp(views, "0") == 0);
    return g;
}

trit_graph *trit_graph_new(trit_dtype compute) {
    if (compute != TRIT_F32 && compute != TRIT_F64) {
        trit_error(TRIT_ERR_DTYPE, "trit_graph_new: compute dtype must be f32 or f64, got %s",
                   trit_dtype_name(compute));
        return NULL;
    }
    const trit_compute_policy p = {compute, compute, TRIT_MATMUL_HIGHEST};
    return trit_graph_new_policy(&p);
}

void trit_graph_free(trit_graph *g) {
    if (!g) return;
    trit_graph_release_compiled(g);
    for (int i = 0; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        if (v->kind == VALUE_INPUT || v->kind == VALUE_OP) {
            free(v->grad);  // activation grads: struct only, data lives in the arena
            free(v->t);
        }
    }
    for (int i = 0; i < g->n_nodes; i++) free(g->nodes[i].attr);
    free(g->values);
    free(g->nodes);
    free(g->params);
    free(g->hooks);
    free(g->param_group);
    free(g);
}

trit_dtype trit_graph_dtype(const trit_graph *g) { return g->dtype; }

trit_compute_policy trit_graph_policy(const trit_graph *g) { return g->policy; }

trit_status trit_graph_status(const trit_graph *g) {
    if (!g) return trit_error(TRIT_ERR_INVALID, "graph is NULL");
    if (g->status != TRIT_OK) trit_error(g->status, "%s", g->error);
    return g->status;
}

trit_tensor *trit_graph_fail(trit_graph *g, trit_status s) {
    if (g && g->status == TRIT_OK) {
        g->status = s;
        snprintf(g->error, sizeof g->error, "%s", trit_last_error());
    }
    return NULL;
}

int trit_graph_add_value(trit_graph *g, trit_tensor *t, trit_value_kind kind, int producer) {
    if (!grow((void **)&g->values, &g->cap_values, g->n_values + 1, sizeof(trit_value))) return -1;
    int id = g->n_values++;
    trit_value *v = &g->values[id];
    memset(v, 0, sizeof *v);
    v->t = t;
    v->kind = kind;
    v->producer = producer;
    v->root = id;
    v->grad_buf = v->data_buf = v->shadow_buf = v->grad_tiler = -1;
    v->grad_shared = false;
    if (kind == VALUE_INPUT || kind == VALUE_OP) {
        t->graph = g;
        t->graph_value = id;
    }
    return id;
}

trit_tensor *trit_graph_input(trit_graph *g, trit_dtype dt, int ndim, const int64_t *shape, const char *name) {
    if (!g) {
        trit_error(TRIT_ERR_INVALID, "trit_graph_input: graph is NULL");
        return NULL;
    }
    if (g->compiled) {
        trit_error(TRIT_ERR_STATE, "trit_graph_input: graph is already compiled; add inputs before compiling");
        return trit_graph_fail(g, TRIT_ERR_STATE);
    }
    trit_tensor *t = calloc(1, sizeof *t);
    if (!t) return trit_graph_fail(g, trit_error(TRIT_ERR_NOMEM, "out of memory"));
    trit_status s = trit_tensor_init_layout(t, dt, ndim, shape);
    if (s != TRIT_OK) {
        free(t);
        return trit_graph_fail(g, s);
    }
    t->flags = TRIT_FLAG_INPUT;
    if (name) snprintf(t->name, sizeof t->name, "%s", name);
    if (trit_graph_add_value(g, t, VALUE_INPUT, -1) < 0) {
        free(t);
        return trit_graph_fail(g, trit_error(TRIT_ERR_NOMEM, "out of memory"));
    }
    return t;
}

// The value id of a tensor given to an op: its own id if the graph made it, else a leaf.
static int value_of(trit_graph *g, trit_tensor *t) {
    if (t->graph == g) return t->graph_value;
    if (t->graph != NULL) {
        trit_error(TRIT_ERR_INVALID, "tensor '%s' belongs to another graph; build each graph from its own inputs",
                   t->name);
        return -1;
    }
    for (int i = 0; i < g->n_params; i++)
        if (g->values[g->params[i]].t == t) return g->params[i];
    for (int i = 0; i < g->n_values; i++)
        if (g->values[i].kind == VALUE_CONST && g->values[i].t == t) return i;
    if (!t->data) {
        trit_error(TRIT_ERR_INVALID, "tensor '%s' has no data; parameters and constants must be allocated",
                   t->name);
        return -1;
    }
    bool param = (t->flags & TRIT_FLAG_PARAM) != 0;
    int id = trit_graph_add_value(g, t, param ? VALUE_PARAM : VALUE_CONST, -1);
    if (id < 0) {
        trit_error(TRIT_ERR_NOMEM, "out of memory");
        return -1;
    }
    if (param) {
        if (!grow((void **)&g->params, &g->cap_params, g->n_params + 1, sizeof(int))) {
            trit_error(TRIT_ERR_NOMEM, "out of memory");
            return -1;
        }
        g->params[g->n_params++] = id;
    }
    return id;
}

trit_tensor *trit_graph_apply(trit_graph *g, const trit_op_def *def_f32, const trit_op_def *def_f64,
                              int n_in, trit_tensor *const *in, const void *attr) {
    if (!g) {
        trit_error(TRIT_ERR_INVALID, "op called with a NULL graph");
        return NULL;
    }
    const trit_op_def *def = g->dtype == TRIT_F64 ? def_f64 : def_f32;
    if (g->status != TRIT_OK) return NULL;
    if (g->compiled) {
        trit_error(TRIT_ERR_STATE, "%s: graph is already compiled; build a new graph to add ops", def->name);
        return trit_graph_fail(g, TRIT_ERR_STATE);
    }
    if (n_in < 0 || n_in > TRIT_OP_MAX_IN) {
        trit_error(TRIT_ERR_INVALID, "%s: %d inputs given, at most %d allowed", def->name, n_in, TRIT_OP_MAX_IN);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_tensor *ins[TRIT_OP_MAX_IN] = {0};
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) {
            trit_error(TRIT_ERR_INVALID, "%s: input %d is NULL (did an earlier op fail?)", def->name, i);
            return trit_graph_fail(g, TRIT_ERR_INVALID);
        }
        ins[i] = in[i];
        // An op that cannot read a 16-bit float input gets it cast to the accumulate dtype,
        // so any op works on bf16/f16 values (a 16-bit parameter, a low-precision activation).
        const trit_dtype dt = in[i]->dtype;
        if ((dt == TRIT_BF16 || dt == TRIT_F16) && g->dtype != dt && !(def->lowp_inputs & TRIT_IN(i))) {
            const trit_cast_attr ca = {.dtype = g->dtype};
            if (!(ins[i] = TRIT_APPLY(g, trit_op_cast, 1, &ins[i], &ca))) return NULL;
        }
        if ((def->contiguous_inputs & TRIT_IN(i)) && !trit_tensor_is_contiguous(ins[i])) {
            ins[i] = TRIT_APPLY(g, trit_op_contiguous, 1, &ins[i], NULL);
            if (!ins[i]) return NULL;
        }
    }
    int ids[TRIT_OP_MAX_IN];
    for (int i = 0; i < n_in; i++)
        if ((ids[i] = value_of(g, ins[i])) < 0) return trit_graph_fail(g, TRIT_ERR_INVALID);

    trit_tensor *out = calloc(1, sizeof *out);
    void *attr_copy = NULL;
    if (!out || (def->attr_size && !(attr_copy = malloc(def->attr_size)))) {
        free(out);
        return trit_graph_fail(g, trit_error(TRIT_ERR_NOMEM, "out of memory"));
    }
    if (def->attr_size) memcpy(attr_copy, attr, def->attr_size);
    out->graph_value = -1;
    trit_status s = def->infer((const trit_tensor *const *)ins, n_in, attr_copy, out);
    if (s != TRIT_OK) {
        free(out);
        free(attr_copy);
        return trit_graph_fail(g, s);
    }
    if (!grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(trit_node))) {
        free(out);
        free(attr_copy);
        return trit_graph_fail(g, trit_error(TRIT_ERR_NOMEM, "out of memory"));
    }
    int nid = g->n_nodes;
    int vid = trit_graph_add_value(g, out, VALUE_OP, nid);
    if (vid < 0) {
        free(out);
        free(attr_copy);
        return trit_graph_fail(g, trit_error(TRIT_ERR_NOMEM, "out of memory"));
    }
    g->n_nodes++;
    trit_node *n = &g->nodes[nid];
    memset(n, 0, sizeof *n);
    n->def = def;
    n->n_in = n_in;
    memcpy(n->in, ids, sizeof(int) * (size_t)n_in);
    n->out = vid;
    n->attr = attr_copy;
    n->saved_buf = n->bwd_step = -1;
    if (def->is_view) g->values[vid].root = g->values[ids[0]].root;
    snprintf(out->name, sizeof out->name, "%s.%d", def->name, nid);
    return out;
}

trit_status trit_graph_keep(trit_graph *g, trit_tensor *t) {
    if (!g || !t) return trit_error(TRIT_ERR_INVALID, "trit_graph_keep: NULL argument");
    if (t->graph != g) return trit_error(TRIT_ERR_INVALID, "trit_graph_keep: tensor '%s' is not a value of this graph", t->name);
    if (g->compiled) return trit_error(TRIT_ERR_STATE, "trit_graph_keep: call before trit_graph_compile");
    g->values[t->graph_value].keep = true;
    return TRIT_OK;
}

trit_status trit_graph_input_requires_grad(trit_graph *g, trit_tensor *input) {
    if (!g || !input) return trit_error(TRIT_ERR_INVALID, "trit_graph_input_requires_grad: NULL argument");
    if (input->graph != g || g->values[input->graph_value].kind != VALUE_INPUT)
        return trit_error(TRIT_ERR_INVALID, "trit_graph_input_requires_grad: '%s' is not an input of this graph (make it with trit_graph_input)",
                          input->name);
    if (g->compiled) return trit_error(TRIT_ERR_STATE, "trit_graph_input_requires_grad: call before trit_graph_compile");
    const trit_dtype dt = input->dtype;
    if (dt != g->dtype && dt != TRIT_F32 && dt != TRIT_BF16 && dt != TRIT_F16)
        return trit_error(TRIT_ERR_DTYPE, "trit_graph_input_requires_grad: '%s' is %s; only float inputs have gradients",
                          input->name, trit_dtype_name(dt));
    g->values[input->graph_value].wants_grad = true;
    return TRIT_OK;
}

trit_status trit_graph_recompute(trit_graph *g, trit_tensor *t) {
    if (!g || !t) return trit_error(TRIT_ERR_INVALID, "trit_graph_recompute: NULL argument");
    if (t->graph != g || g->values[t->graph_value].kind != VALUE_OP)
        return trit_error(TRIT_ERR_INVALID, "trit_graph_recompute: '%s' is not an op result of this graph", t->name);
    if (g->compiled) return trit_error(TRIT_ERR_STATE, "trit_graph_recompute: call before trit_graph_compile");
    g->values[t->graph_value].mark_recompute = true;
    return TRIT_OK;
}

int trit_graph_mark(const trit_graph *g) { return g ? g->n_values : 0; }

trit_status trit_graph_recompute_since(trit_graph *g, int mark, const trit_tensor *except) {
    if (!g) return trit_error(TRIT_ERR_INVALID, "trit_graph_recompute_since: graph is NULL");
    if (mark < 0 || mark > g->n_values)
        return trit_error(TRIT_ERR_RANGE, "trit_graph_recompute_since: mark %d outside [0, %d]; take it with trit_graph_mark",
                          mark, g->n_values);
    if (g->compiled) return trit_error(TRIT_ERR_STATE, "trit_graph_recompute_since: call before trit_graph_compile");
    for (int i = mark; i < g->n_values; i++) {
        trit_value *v = &g->values[i];
        if (v->kind == VALUE_OP && v->t != except) v->mark_recompute = true;
    }
    return TRIT_OK;
}

uint64_t trit_graph_next_stream(trit_graph *g) { return g ? TRIT_STREAM_AUTO | g->next_stream++ : TRIT_STREAM_AUTO; }

trit_status trit_graph_add_hook(trit_graph *g, trit_graph_event_kind kind, trit_graph_hook fn, void *ctx) {
    if (!g || !fn) return trit_error(TRIT_ERR_INVALID, "trit_graph_add_hook: NULL graph or function");
    if ((unsigned)kind > TRIT_EVENT_PARAMS_DONE) return trit_error(TRIT_ERR_INVALID, "trit_graph_add_hook: unknown event %d", (int)kind);
    if (!grow((void **)&g->hooks, &g->cap_hooks, g->n_hooks + 1, sizeof(trit_hook)))
        return trit_error(TRIT_ERR_NOMEM, "out of memory");
    g->hooks[g->n_hooks++] = (trit_hook){.kind = kind, .fn = fn, .ctx = ctx};
    return TRIT_OK;
}

void trit_graph_set_micro(trit_graph *g, int64_t micro, int64_t num_micro) {
    if (!g) return;
    g->num_micro = num_micro > 0 ? num_micro : 1;
    g->micro = micro >= 0 && micro < g->num_micro ? micro : g->num_micro - 1;
}

trit_tensor *trit_graph_grad(trit_graph *g, trit_tensor *t) {
    const trit_value *w = g && t && t->graph == g ? &g->values[t->graph_value] : NULL;
    if (!w || !(w->keep || w->wants_grad)) {
        trit_error(TRIT_ERR_INVALID, "trit_graph_grad: pass a value of this graph marked with trit_graph_keep, or an "
                   "input marked with trit_graph_input_requires_grad");
        return NULL;
    }
    trit_value *v = &g->values[t->graph_value];
    if (!g->compiled || !v->grad) {
        trit_error(TRIT_ERR_STATE, "trit_graph_grad: '%s' has no gradient (compile with a loss it leads to, after a parameter)", t->name);
        return NULL;
    }
    return v->grad;
}

int trit_graph_num_params(const trit_graph *g) { return g ? g->n_params : 0; }

trit_tensor *trit_graph_param(const trit_graph *g, int i) {
    if (!g || i < 0 || i >= g->n_params) return NULL;
    return g->values[g->params[i]].t;
}

// The setters cannot report failure, so a NULL graph is a no-op, as with trit_graph_free.
void trit_graph_set_training(trit_graph *g, bool training) {
    if (g) g->training = training;
}
bool trit_graph_training(const trit_graph *g) { return g && g->training; }
void trit_graph_set_rng(trit_graph *g, uint64_t seed, uint64_t step) {
    if (!g) return;
    g->seed = seed;
    g->step = step;
}
void trit_graph_set_plan_only(trit_graph *g, bool on) {
    if (g && !g->compiled) g->plan_only = on;
}

void trit_graph_set_fusion(trit_graph *g, bool on) {
    if (g) g->fusion = on;
}
void trit_graph_set_grad_scale(trit_graph *g, double scale) {
    if (g) g->grad_scale = scale;
}

void trit_graph_print(const trit_graph *g) {
    if (!g) return;
    char a[128], b[128];
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        fprintf(stderr, "%4d %-14s out %s", i, n->def->name, trit_tensor_shape_str(g->values[n->out].t, a, sizeof a));
        for (int j = 0; j < n->n_in; j++)
            fprintf(stderr, "%s %s%s", j ? "," : " <-", g->values[n->in[j]].t->name,
                    trit_tensor_shape_str(g->values[n->in[j]].t, b, sizeof b));
        fprintf(stderr, "\n");
    }
}
