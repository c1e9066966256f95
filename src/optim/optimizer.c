// The optimizer object: parameter groups, state (fp32, or 8-bit codes with block scales)
// allocated once, the step driver that turns a group's hyper-parameters into per-step scalars
// (as torch.optim does, in double, then rounded to float), and the state listing that
// checkpoints use.
#include "optim/optim_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


// A 16-bit parameter is stepped in chunks of OPTIM_CHUNK values: each must start on an 8-bit block.
_Static_assert(OPTIM_CHUNK % TRIT_OPTIM_8BIT_BLOCK == 0, "8-bit blocks must not straddle optimizer chunks");

static bool skipped(const trit_tensor *p) { return (p->flags & TRIT_FLAG_FROZEN) || !p->grad; }

static trit_status check_groups(const trit_optim_group *groups, int num_groups, int *total) {
    if (num_groups < 1 || !groups)
        return trit_error(TRIT_ERR_INVALID, "optimizer: need at least one parameter group, got %d",
                          num_groups);
    int64_t n = 0;
    for (int gi = 0; gi < num_groups; gi++) {
        const trit_optim_group *g = &groups[gi];
        if (g->num_params < 0 || (g->num_params > 0 && !g->params))
            return trit_error(TRIT_ERR_INVALID, "optimizer: group %d has params NULL or "
                              "num_params < 0 (%d)", gi, g->num_params);
        if (!(g->lr_scale >= 0.0 && isfinite(g->lr_scale)))
            return trit_error(TRIT_ERR_INVALID,
                              "optimizer: group %d lr_scale must be finite and >= 0, got %g", gi,
                              g->lr_scale);
        if (!(g->weight_decay >= 0.0 && isfinite(g->weight_decay)))
            return trit_error(TRIT_ERR_INVALID,
                              "optimizer: group %d weight_decay must be finite and >= 0, got %g",
                              gi, g->weight_decay);
        for (int i = 0; i < g->num_params; i++) {
            trit_status st = trit_optim_check_param(g->params[i], "optimizer", (int)n + i);
            if (st != TRIT_OK) return st;
        }
        n += g->num_params;
        if (n > INT32_MAX / 2)
            return trit_error(TRIT_ERR_RANGE, "optimizer: too many parameters (%lld)", (long long)n);
    }
    *total = (int)n;
    return TRIT_OK;
}

// A parameter in two groups would be stepped twice per step; torch.optim refuses it too.
static trit_status check_duplicates(const trit_optim *o) {
    for (int i = 0; i < o->n_params; i++)
        for (int j = 0; j < i; j++)
            if (trit_tensor_ptr(o->tensors[i]) == trit_tensor_ptr(o->tensors[j]))
                return trit_error(TRIT_ERR_INVALID,
                                  "optimizer: parameters %d and %d ('%s') are the same tensor or "
                                  "share storage; list each parameter once", j, i,
                                  o->tensors[i]->name);
    return TRIT_OK;
}

// A projected matrix's buffers: the moments in the projected shape, the basis (f32, or int4
// codes with a scale per TRIT_QGALORE_GROUP), Q-GaLore's schedule (f64).
static void galore_layout(const trit_optim *o, const optim_param *p, int b, optim_state_entry *e) {
    const optim_galore *gl = &p->gl;
    e->ndim = 2;
    e->num_scales = 0;
    e->dtype = TRIT_F32;
    if (b < 2) {
        e->shape[0] = gl->left ? gl->rank : gl->rows, e->shape[1] = gl->left ? gl->cols : gl->rank;
    } else if (b == 2) {
        e->shape[0] = gl->left ? gl->rows : gl->rank, e->shape[1] = gl->left ? gl->rank : gl->cols;
        if (o->cfg.kind == TRIT_OPTIM_QGALORE) {
            e->dtype = TRIT_QINT4;
            e->num_scales = (trit_galore_basis_count(gl) + TRIT_QGALORE_GROUP - 1) / TRIT_QGALORE_GROUP;
        }
    } else {
        e->dtype = TRIT_F64, e->ndim = 1, e->shape[0] = OPTIM_QGALORE_SCHED;
    }
    e->count = e->ndim == 1 ? e->shape[0] : e->shape[0] * e->shape[1];
}

// The layout of parameter p's state buffer b: f32 values shaped like the parameter, without
// scales; for AdamW8bit and a parameter of at least TRIT_OPTIM_8BIT_MIN_SIZE elements, u8
// codes shaped like it with one f32 absmax per block. An optimizer with other states (low-rank
// projections) describes them here; the block, the listing and checkpoints follow.
static void state_layout(const trit_optim *o, const optim_param *p, int b, optim_state_entry *e) {
    if (p->proj) {
        galore_layout(o, p, b, e);
        return;
    }
    const bool q8 = o->cfg.kind == TRIT_OPTIM_ADAMW8BIT && p->n >= TRIT_OPTIM_8BIT_MIN_SIZE;
    e->dtype = q8 ? TRIT_U8 : TRIT_F32;
    e->ndim = p->t->ndim;
    memcpy(e->shape, p->t->shape, sizeof e->shape);
    e->count = p->n;
    e->num_scales = q8 ? (p->n + TRIT_OPTIM_8BIT_BLOCK - 1) / TRIT_OPTIM_8BIT_BLOCK : 0;
}

static bool is_galore(const trit_optim_config *c) { return c->kind == TRIT_OPTIM_GALORE || c->kind == TRIT_OPTIM_QGALORE; }

// The keys of parameter p's buffers: the kind's, and for a GaLore matrix its basis (and Q-GaLore's schedule).
static int param_keys(const trit_optim *o, const optim_param *p, const char *keys[OPTIM_MAX_BUFS]) {
    int n = 0;
    for (; n < o->n_keys; n++) keys[n] = o->keys[n];
    if (p->proj) keys[n++] = "galore_basis";
    if (p->proj && o->cfg.kind == TRIT_OPTIM_QGALORE) keys[n++] = "galore_sched";
    return n;
}

int64_t trit_optim_entry_bytes(const optim_state_entry *e) {
    return optim_line_up((int64_t)trit_dtype_nbytes(e->dtype, e->count)) + optim_line_up(e->num_scales * (int64_t)sizeof(float));
}

static void name_entry(optim_state_entry *e, const optim_param *p, int i, const char *key) {
    if (p->t->name[0]) snprintf(e->name, sizeof e->name, "%s.%s", p->t->name, key);
    else snprintf(e->name, sizeof e->name, "param%d.%s", i, key);
}

// Lays out all state buffers (and their scales) in one zeroed block and names them.
static trit_status alloc_state(trit_optim *o) {
    int n_state = 0;
    const char *keys[OPTIM_MAX_BUFS];
    for (int i = 0; i < o->n_params; i++) n_state += o->params[i].has_state ? param_keys(o, &o->params[i], keys) : 0;
    o->n_state = n_state;
    if (n_state == 0) return TRIT_OK;
    if (!(o->state = calloc((size_t)n_state, sizeof *o->state)))
        return trit_error(TRIT_ERR_NOMEM, "optimizer: out of memory");
    int64_t total = 0;
    for (int i = 0, k = 0; i < o->n_params; i++) {
        const optim_param *p = &o->params[i];
        const int nk = p->has_state ? param_keys(o, p, keys) : 0;
        for (int b = 0; b < nk; b++, k++) {
            optim_state_entry *e = &o->state[k];
            e->param = i, e->buf = b;
            state_layout(o, p, b, e);
            name_entry(e, p, i, keys[b]);
            if (trit_optim_entry_bytes(e) > INT64_MAX / 4 - total) return trit_error(TRIT_ERR_RANGE, "optimizer: state size overflows");
            total += trit_optim_entry_bytes(e);
        }
    }
    // calloc: a large block comes as fresh zero pages, resident only once written, so state that
    // is offloaded before the first step never occupies memory.
    if (!(o->block_raw = calloc(1, (size_t)total + TRIT_ALIGN)))
        return trit_error(TRIT_ERR_NOMEM, "optimizer: could not allocate %lld bytes of state", (long long)total);
    o->block = (void *)(((uintptr_t)o->block_raw + TRIT_ALIGN - 1) / TRIT_ALIGN * TRIT_ALIGN);
    o->block_bytes = total;
    trit_optim_bind_state(o);
    return TRIT_OK;
}

void trit_optim_bind_state(trit_optim *o) {
    char *at = o->block;
    for (int k = 0; k < o->n_state; k++) {
        optim_state_entry *e = &o->state[k];
        e->data = at;
        e->scales = e->num_scales ? (float *)(at + optim_line_up((int64_t)trit_dtype_nbytes(e->dtype, e->count))) : NULL;
        at += trit_optim_entry_bytes(e);
        optim_param *p = &o->params[e->param];
        if (e->dtype == TRIT_F32) p->buf[e->buf] = e->data;  // the update loops' views
        else if (e->dtype == TRIT_F64) p->gl.sched = e->data;
        else p->code[e->buf] = e->data, p->absmax[e->buf] = e->scales;
    }
    for (int i = 0; i < o->n_params; i++) {
        optim_param *p = &o->params[i];
        if (!p->proj) continue;
        p->gl.basis = o->cfg.kind == TRIT_OPTIM_GALORE ? p->buf[2] : NULL;
        if (o->cfg.kind == TRIT_OPTIM_QGALORE) p->gl.basis_q = p->code[2], p->gl.basis_scales = p->absmax[2];
    }
}

// GaLore: which parameters are projected (2-D, of a low-rank group, not frozen), each checked
// against the rank, and the workspace of the largest.
static trit_status galore_plan(trit_optim *o) {
    if (!is_galore(&o->cfg)) return TRIT_OK;
    const int64_t r = o->cfg.galore_rank;
    int64_t side_rank = 0, elems = 0;
    for (int i = 0; i < o->n_params; i++) {
        optim_param *p = &o->params[i];
        if (!o->groups[p->group].low_rank || p->t->ndim != 2 || !p->has_state) continue;
        const int64_t rows = p->t->shape[0], cols = p->t->shape[1], small = rows < cols ? rows : cols;
        if (r > small)
            return trit_error(TRIT_ERR_INVALID, "%s: rank %lld is larger than parameter %d '%s' (%lld x %lld) allows: "
                              "its smaller side has %lld; pass a rank <= %lld (trit train: --galore-rank), or leave "
                              "the matrix out of the low-rank group", trit_optim_kind_name(o->cfg.kind), (long long)r, i, p->t->name,
                              (long long)rows, (long long)cols, (long long)small, (long long)small);
        if (p->t->dtype != TRIT_F32)
            return trit_error(TRIT_ERR_DTYPE, "%s: parameter %d '%s' is %s; projected matrices need f32 weights "
                              "(train with fp32 master weights)", trit_optim_kind_name(o->cfg.kind), i, p->t->name,
                              trit_dtype_name(p->t->dtype));
        p->proj = true;
        p->gl = (optim_galore){.rows = rows, .cols = cols, .rank = r, .left = rows < cols};
        const int64_t sr = r * (rows > cols ? rows : cols);
        side_rank = sr > side_rank ? sr : side_rank;
        elems = rows * cols > elems ? rows * cols : elems;
    }
    return side_rank ? trit_galore_ws_alloc(&o->ws, side_rank, elems, o->cfg.kind == TRIT_OPTIM_QGALORE) : TRIT_OK;
}

trit_optim *trit_optim_new(const trit_optim_config *cfg, const trit_optim_group *groups,
                           int num_groups) {
    int total = 0;
    if (trit_optim_config_check(cfg) != TRIT_OK) return NULL;
    if (check_groups(groups, num_groups, &total) != TRIT_OK) return NULL;
    trit_optim *o = calloc(1, sizeof *o);
    if (!o) {
        trit_error(TRIT_ERR_NOMEM, "optimizer: out of memory");
        return NULL;
    }
    o->cfg = *cfg;
    o->n_keys = trit_optim_state_keys(cfg, o->keys);
    o->n_groups = num_groups;
    o->n_params = total;
    o->groups = calloc((size_t)num_groups, sizeof *o->groups);
    o->params = calloc((size_t)total + 1, sizeof *o->params);
    o->tensors = calloc((size_t)total + 1, sizeof *o->tensors);
    if (cfg->kind == TRIT_OPTIM_ADAMW8BIT && (o->maps = malloc(2 * sizeof *o->maps))) {
        trit_quant_dynamic_code_init(&o->maps[0], true);
        trit_quant_dynamic_code_init(&o->maps[1], false);
    }
    if (!o->groups || !o->params || !o->tensors || (cfg->kind == TRIT_OPTIM_ADAMW8BIT && !o->maps)) {
        trit_error(TRIT_ERR_NOMEM, "optimizer: out of memory");
        trit_optim_free(o);
        return NULL;
    }
    int k = 0;
    for (int gi = 0; gi < num_groups; gi++) {
        o->groups[gi] = (optim_group){groups[gi].lr_scale, groups[gi].weight_decay, groups[gi].low_rank, k,
                                      groups[gi].num_params};
        for (int i = 0; i < groups[gi].num_params; i++, k++) {
            trit_tensor *t = groups[gi].params[i];
            o->tensors[k] = t;
            o->params[k] = (optim_param){.t = t, .group = gi, .n = trit_tensor_numel(t), .sr_key = k,
                                         .has_state = !(t->flags & TRIT_FLAG_FROZEN)};
        }
    }
    if (check_duplicates(o) != TRIT_OK || galore_plan(o) != TRIT_OK || alloc_state(o) != TRIT_OK) {
        trit_optim_free(o);
        return NULL;
    }
    return o;
}

trit_optim *trit_optim_new_single(const trit_optim_config *cfg, trit_tensor *const *params,
                                  int num_params, double weight_decay) {
    trit_optim_group g = {params, num_params, 1.0, weight_decay, false};
    return trit_optim_new(cfg, &g, 1);
}

trit_optim *trit_optim_new_gpt2(const trit_optim_config *cfg, trit_tensor *const *params,
                                int num_params, double weight_decay) {
    if (num_params < 0 || (num_params > 0 && !params)) {
        trit_error(TRIT_ERR_INVALID, "optimizer: params is NULL or num_params < 0 (%d)",
                   num_params);
        return NULL;
    }
    trit_tensor **lists = calloc(2 * (size_t)num_params + 2, sizeof *lists);
    if (!lists) {
        trit_error(TRIT_ERR_NOMEM, "optimizer: out of memory");
        return NULL;
    }
    int nd = 0, nn = 0;
    trit_optim *o = NULL;
    if (trit_optim_split_decay(params, num_params, lists, &nd, lists + num_params + 1, &nn) ==
        TRIT_OK) {
        trit_optim_group g[2] = {{lists, nd, 1.0, weight_decay, false},
                                 {lists + num_params + 1, nn, 1.0, 0.0, false}};
        o = trit_optim_new(cfg, g, 2);
    }
    free(lists);
    return o;
}

void trit_optim_free(trit_optim *o) {
    if (!o) return;
    if (o->offload) trit_optim_offload_close(o);
    free(o->block_raw);
    trit_galore_ws_free(&o->ws);
    free(o->maps);
    free(o->state);
    free(o->tensors);
    free(o->params);
    free(o->groups);
    free(o);
}

// Per-step scalars of one group at step t (1-based), as torch.optim computes them.
static optim_scalars group_scalars(const trit_optim_config *c, const optim_group *g, double lr,
                                   int64_t t) {
    double lr_g = lr * g->lr_scale;
    optim_scalars s = {.neg_lr = (float)-lr_g, .weight_decay = (float)g->weight_decay,
                       .decay_mul = 1.0f, .momentum = (float)c->momentum, .eps = (float)c->eps};
    if (c->kind == TRIT_OPTIM_RMSPROP) {
        s.a = (float)c->alpha;
        s.one_minus_a = (float)(1.0 - c->alpha);
    } else if (c->kind == TRIT_OPTIM_ADAM || c->kind == TRIT_OPTIM_ADAMW || c->kind == TRIT_OPTIM_ADAMW8BIT ||
               is_galore(c)) {
        double bc1 = 1.0 - pow(c->beta1, (double)t);
        double bc2 = 1.0 - pow(c->beta2, (double)t);
        s.neg_lr = (float)-(lr_g / bc1);
        s.bc2_sqrt = (float)sqrt(bc2);
        s.a = (float)c->beta1;
        s.one_minus_a = (float)(1.0 - c->beta1);
        s.b = (float)c->beta2;
        s.one_minus_b = (float)(1.0 - c->beta2);
        if (c->kind != TRIT_OPTIM_ADAM) {
            s.decay_mul = (float)(1.0 - lr_g * g->weight_decay);
            s.weight_decay = 0.0f;
        }
    }
    return s;
}

// Every parameter that will be stepped is checked before any is changed.
static trit_status check_step(const trit_optim *o) {
    for (int i = 0; i < o->n_params; i++) {
        const optim_param *p = &o->params[i];
        if (skipped(p->t)) continue;
        trit_status st = trit_optim_check_param(p->t, "optimizer step", i);
        if (st != TRIT_OK) return st;
        if (trit_tensor_numel(p->t) != p->n)
            return trit_error(TRIT_ERR_SHAPE, "optimizer step: parameter %d '%s' has %lld "
                              "elements, %lld when the optimizer was made", i, p->t->name,
                              (long long)trit_tensor_numel(p->t), (long long)p->n);
        if (!p->has_state)
            return trit_error(TRIT_ERR_STATE, "optimizer step: parameter %d '%s' was frozen when "
                              "the optimizer was made and has no state; make a new optimizer "
                              "after unfreezing it", i, p->t->name);
    }
    return TRIT_OK;
}

// The kind's update of elements [lo, lo + n) of p, with x holding those values as f32. lo is 0
// or the start of an OPTIM_CHUNK, so an 8-bit span starts on a block.
static void update_span(const trit_optim *o, const optim_param *p, float *x, const float *g, int64_t lo, int64_t n,
                        const optim_scalars *s) {
    float *b0 = p->buf[0] ? p->buf[0] + lo : NULL, *b1 = p->buf[1] ? p->buf[1] + lo : NULL;
    if (p->code[0]) {
        const int64_t blk = lo / TRIT_OPTIM_8BIT_BLOCK;
        const optim_q8 q = {.m = p->code[0] + lo, .v = p->code[1] + lo, .am = p->absmax[0] + blk,
                            .av = p->absmax[1] + blk, .map_m = &o->maps[0], .map_v = &o->maps[1]};
        trit_optim_update_adamw8bit(x, g, &q, n, s);
        return;
    }
    switch (o->cfg.kind) {
    case TRIT_OPTIM_SGD:
        if (o->n_keys == 0)
            trit_optim_update_sgd(x, g, n, s);
        else
            trit_optim_update_momentum(x, g, b0, n, s, o->cfg.nesterov);
        break;
    case TRIT_OPTIM_RMSPROP:
        trit_optim_update_rmsprop(x, g, b0, o->n_keys > 1 ? b1 : NULL, n, s);
        break;
    case TRIT_OPTIM_ADAM:
    case TRIT_OPTIM_ADAMW:
    case TRIT_OPTIM_ADAMW8BIT:  // a parameter too small for 8-bit state: AdamW's fp32 moments
    case TRIT_OPTIM_GALORE:     // vectors and matrices outside low-rank groups
    case TRIT_OPTIM_QGALORE:
        trit_optim_update_adam(x, g, b0, b1, n, s, o->cfg.kind != TRIT_OPTIM_ADAM);
        break;
    }
}

// A 16-bit parameter (no fp32 master copy): each fixed chunk is widened to f32, updated by the
// same formulas, and rounded back, to nearest or stochastically with the bits of Philox (seed,
// stream of this parameter and step, element index), so the result does not depend on threads
// and a resumed run draws the same bits.
static void step_param_lowp(const trit_optim *o, optim_param *p, const optim_scalars *s, int64_t t) {
    const int64_t n = p->n, chunks = (n + OPTIM_CHUNK - 1) / OPTIM_CHUNK;
    char *x = trit_tensor_ptr(p->t);
    const float *g = trit_tensor_ptr(p->t->grad);
    const trit_dtype_traits *tr = trit_dtype_traits_of(p->t->dtype);
    const uint64_t stream = OPTIM_SR_STREAM + ((uint64_t)p->sr_key << 40) + (uint64_t)t;
#pragma omp parallel for schedule(static, 1) if (n >= OPTIM_PAR_MIN)
    for (int64_t c = 0; c < chunks; c++) {
        float w[OPTIM_CHUNK];
        const int64_t lo = c * OPTIM_CHUNK, m = n - lo < OPTIM_CHUNK ? n - lo : OPTIM_CHUNK;
        char *xc = x + trit_dtype_nbytes(p->t->dtype, lo);
        tr->to_f32(w, xc, m, NULL, lo);
        update_span(o, p, w, g + lo, lo, m, s);
        if (o->stochastic)
            tr->from_f32_sr(xc, w, m, NULL, p->sr_first + lo, o->sr_seed, stream);
        else
            tr->from_f32(xc, w, m, NULL, lo);
    }
}

static void step_param(const trit_optim *o, optim_param *p, const optim_scalars *s, int64_t t) {
    if (p->t->dtype != TRIT_F32) {
        step_param_lowp(o, p, s, t);
        return;
    }
    update_span(o, p, trit_tensor_ptr(p->t), trit_tensor_ptr(p->t->grad), 0, p->n, s);
}

// A GaLore basis is refreshed from the gradient: a NaN or Inf there is refused before any
// parameter changes (an SVD of it would fail half-way through the step).
static trit_status check_refresh(const trit_optim *o) {
    for (int i = 0; i < o->n_params; i++) {
        const optim_param *p = &o->params[i];
        if (!p->proj || skipped(p->t) || !trit_galore_due(&o->cfg, &p->gl, o->step)) continue;
        const float *g = trit_tensor_ptr(p->t->grad);
        float acc = 0.0f;
        for (int64_t k = 0; k < p->n; k++) acc += g[k] * 0.0f;
        if (acc != 0.0f || isnan(acc))
            return trit_error(TRIT_ERR_NUMERIC, "optimizer step: the gradient of parameter %d '%s' is not finite; "
                              "its GaLore basis cannot be refreshed from it", i, p->t->name);
    }
    return TRIT_OK;
}

trit_status trit_optim_set_rounding_key(trit_optim *o, int i, int key, int64_t first) {
    if (!o || i < 0 || i >= o->n_params || key < 0 || first < 0)
        return trit_error(TRIT_ERR_INVALID, "optimizer: rounding key of parameter %d out of range", i);
    o->params[i].sr_key = key;
    o->params[i].sr_first = first;
    return TRIT_OK;
}

void trit_optim_set_rounding(trit_optim *o, bool stochastic, uint64_t seed) {
    if (!o) return;
    o->stochastic = stochastic;
    o->sr_seed = seed;
}

trit_status trit_optim_step(trit_optim *o, double lr) {
    if (!o) return trit_error(TRIT_ERR_INVALID, "optimizer step: optimizer is NULL");
    if (!(lr >= 0.0 && isfinite(lr)))
        return trit_error(TRIT_ERR_INVALID, "optimizer step: lr must be finite and >= 0, got %g "
                          "(check the schedule with trit_lr_check)", lr);
    trit_status st = check_step(o);
    if (st != TRIT_OK) return st;
    if ((st = check_refresh(o)) != TRIT_OK) return st;
    int64_t t = o->step + 1;
    for (int gi = 0; gi < o->n_groups; gi++) {
        const optim_group *g = &o->groups[gi];
        optim_scalars s = group_scalars(&o->cfg, g, lr, t);
        for (int i = g->first; i < g->first + g->count; i++) {
            optim_param *p = &o->params[i];
            if (skipped(p->t)) continue;
            if (!p->proj)
                step_param(o, p, &s, t);
            else
                st = trit_galore_step(&o->cfg, &p->gl, &o->ws, trit_tensor_ptr(p->t), trit_tensor_ptr(p->t->grad),
                                      p->buf[0], p->buf[1], &s, o->step, i, o->sr_seed);
            trit_optim_offload_release(o, i);
            if (st != TRIT_OK) return st;
        }
    }
    o->step = t;
    return TRIT_OK;
}

void trit_optim_zero_grad(trit_optim *o) {
    if (!o) return;
    for (int i = 0; i < o->n_params; i++) {
        trit_tensor *g = o->params[i].t->grad;
        if (g && g->data) memset(trit_tensor_ptr(g), 0, trit_tensor_nbytes(g));
    }
}

const trit_optim_config *trit_optim_get_config(const trit_optim *o) { return o ? &o->cfg : NULL; }

int trit_optim_num_groups(const trit_optim *o) { return o ? o->n_groups : 0; }

trit_status trit_optim_get_group(const trit_optim *o, int group, trit_optim_group *out) {
    if (!o || !out) return trit_error(TRIT_ERR_INVALID, "optimizer: NULL argument");
    if (group < 0 || group >= o->n_groups)
        return trit_error(TRIT_ERR_RANGE, "optimizer: group %d out of range [0, %d)", group,
                          o->n_groups);
    const optim_group *g = &o->groups[group];
    *out = (trit_optim_group){o->tensors + g->first, g->count, g->lr_scale, g->weight_decay, g->low_rank};
    return TRIT_OK;
}

trit_status trit_optim_set_group(trit_optim *o, int group, double lr_scale, double weight_decay) {
    if (!o) return trit_error(TRIT_ERR_INVALID, "optimizer: NULL argument");
    if (group < 0 || group >= o->n_groups)
        return trit_error(TRIT_ERR_RANGE, "optimizer: group %d out of range [0, %d)", group,
                          o->n_groups);
    if (!(lr_scale >= 0.0 && isfinite(lr_scale)) || !(weight_decay >= 0.0 && isfinite(weight_decay)))
        return trit_error(TRIT_ERR_INVALID, "optimizer: group %d needs finite lr_scale >= 0 and "
                          "weight_decay >= 0, got %g and %g", group, lr_scale, weight_decay);
    o->groups[group].lr_scale = lr_scale;
    o->groups[group].weight_decay = weight_decay;
    return TRIT_OK;
}

int trit_optim_num_params(const trit_optim *o) { return o ? o->n_params : 0; }

trit_tensor *trit_optim_param(const trit_optim *o, int i) {
    if (!o || i < 0 || i >= o->n_params) {
        trit_error(TRIT_ERR_RANGE, "optimizer: parameter index %d out of range", i);
        return NULL;
    }
    return o->tensors[i];
}

int trit_optim_num_state(const trit_optim *o) { return o ? o->n_state : 0; }

size_t trit_optim_scratch_bytes(const trit_optim *o) { return o ? o->ws.bytes : 0; }

trit_status trit_optim_get_state(const trit_optim *o, int i, trit_optim_state_buf *out) {
    if (!o || !out) return trit_error(TRIT_ERR_INVALID, "optimizer state: NULL argument");
    if (i < 0 || i >= o->n_state)
        return trit_error(TRIT_ERR_RANGE, "optimizer state: buffer %d out of range [0, %d)", i,
                          o->n_state);
    const optim_state_entry *e = &o->state[i];
    *out = (trit_optim_state_buf){.name = e->name, .dtype = e->dtype, .data = e->data, .scales = e->scales,
                                  .num_scales = e->num_scales, .ndim = e->ndim, .count = e->count,
                                  .param = o->params[e->param].t};
    memcpy(out->shape, e->shape, sizeof out->shape);
    return TRIT_OK;
}

int64_t trit_optim_get_step(const trit_optim *o) { return o ? o->step : 0; }

trit_status trit_optim_set_step(trit_optim *o, int64_t step) {
    if (!o) return trit_error(TRIT_ERR_INVALID, "optimizer: NULL argument");
    if (step < 0)
        return trit_error(TRIT_ERR_INVALID, "optimizer: step count must be >= 0, got %lld",
                          (long long)step);
    o->step = step;
    return TRIT_OK;
}

trit_status trit_optim_clip_grads(trit_optim *o, double max_norm, double *norm) {
    if (!o) return trit_error(TRIT_ERR_INVALID, "clip_grads: optimizer is NULL");
    return trit_optim_clip_grad_norm(o->tensors, o->n_params, max_norm, norm);
}
