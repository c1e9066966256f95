// The step list: its structure (forward steps, zeroing before a gradient buffer's first writer,
// one gradient-final event per parameter after its last writer), hooks on its events, the
// parameter groups' needed/done events (order, count, and that no step reads a group outside
// them), backward
// seeded with a tensor, gradients of inputs, and recompute steps that give the same bits with less
// memory. The model: a stack of pre-norm MLP blocks with dropout, a residual stream and a head.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 24, C = 32, F = 96, BLOCKS = 4, NP = 1 + 6 * BLOCKS };

typedef struct model {
    trit_tensor *p[NP];  // head (C, C), then per block: ln w, ln b, fc w (F, C), fc b, proj w (C, F), proj b
} model;

static trit_tensor *param(int ndim, int64_t d0, int64_t d1, double std, uint64_t stream, const char *name) {
    const int64_t s[2] = {d0, d1};
    trit_tensor *t = trit_tensor_new_param(TRIT_F32, ndim, s, name);
    assert_non_null(t);
    if (std > 0) assert_int_equal(trit_tensor_fill_normal(t, ndim == 1 ? 1.0 : 0.0, std, 7, stream), TRIT_OK);
    return t;
}

static model model_new(void) {
    model m;
    char n[64];
    m.p[0] = param(2, C, C, 0.1, 1, "head");
    for (int b = 0; b < BLOCKS; b++) {
        trit_tensor **q = &m.p[1 + 6 * b];
        snprintf(n, sizeof n, "h%d.ln.w", b), q[0] = param(1, C, 0, 0.1, 10 + 6 * b, n);
        snprintf(n, sizeof n, "h%d.ln.b", b), q[1] = param(1, C, 0, 0.1, 11 + 6 * b, n);
        snprintf(n, sizeof n, "h%d.fc.w", b), q[2] = param(2, F, C, 0.2, 12 + 6 * b, n);
        snprintf(n, sizeof n, "h%d.fc.b", b), q[3] = param(1, F, 0, 0.1, 13 + 6 * b, n);
        snprintf(n, sizeof n, "h%d.proj.w", b), q[4] = param(2, C, F, 0.2, 14 + 6 * b, n);
        snprintf(n, sizeof n, "h%d.proj.b", b), q[5] = param(1, C, 0, 0.1, 15 + 6 * b, n);
    }
    return m;
}

static void model_free(model *m) {
    for (int i = 0; i < NP; i++) trit_tensor_free(m->p[i]);
}

typedef struct built {
    trit_graph *g;
    trit_tensor *x, *out, *loss;
} built;

typedef enum { LOSS, SEEDED, NO_LOSS } root_kind;

// x (B, C) input -> x head^T -> blocks -> head -> out (B, C); loss = weighted sum of out. recompute: every
// value inside a block but its output; x_param: x is a parameter instead of an input.
static built build(model *m, bool recompute, bool fusion, root_kind root, trit_tensor *x_param) {
    built b = {0};
    b.g = trit_graph_new(TRIT_F32);
    trit_graph_set_fusion(b.g, fusion);
    const int64_t s[2] = {B, C};
    b.x = x_param ? x_param : trit_graph_input(b.g, TRIT_F32, 2, s, "x");
    trit_tensor *h = trit_linear(b.g, b.x, m->p[0], NULL);  // the head's weight read twice, like a tied embedding
    for (int k = 0; k < BLOCKS; k++) {
        trit_tensor **q = &m->p[1 + 6 * k];
        const int mark = trit_graph_mark(b.g);
        trit_tensor *y = trit_layernorm(b.g, h, q[0], q[1], 1e-5);
        y = trit_gelu(b.g, trit_linear(b.g, y, q[2], q[3]));
        y = trit_dropout_stream(b.g, y, 0.25, 100 + (uint64_t)k);
        y = trit_linear(b.g, y, q[4], q[5]);
        h = trit_add(b.g, h, y);
        if (recompute) assert_int_equal(trit_graph_recompute_since(b.g, mark, h), TRIT_OK);
    }
    b.out = trit_linear(b.g, h, m->p[0], NULL);
    if (root == LOSS) b.loss = tg_weighted_sum(b.g, b.out);
    assert_non_null(b.out);
    return b;
}

static void fill_x(trit_tensor *x) { assert_int_equal(trit_tensor_fill_normal(x, 0.0, 1.0, 3, 99), TRIT_OK); }

static void zero_grads(model *m) {
    for (int i = 0; i < NP; i++)
        if (m->p[i]->grad) memset(m->p[i]->grad->data, 0, trit_tensor_nbytes(m->p[i]->grad));
}

// Forward and backward of one micro-batch at rng step `step`.
static void run(built *b, uint64_t step) {
    trit_graph_set_rng(b->g, 5, step);
    assert_int_equal(trit_graph_forward(b->g), TRIT_OK);
    assert_int_equal(trit_graph_backward(b->g), TRIT_OK);
}

// Copies of every parameter's gradient and of the loss.
typedef struct snapshot {
    float *grads[NP];
    float loss;
} snapshot;

static snapshot snap(const model *m, const built *b) {
    snapshot s;
    for (int i = 0; i < NP; i++) {
        const size_t n = trit_tensor_nbytes(m->p[i]->grad);
        s.grads[i] = malloc(n);
        memcpy(s.grads[i], m->p[i]->grad->data, n);
    }
    s.loss = b->loss ? *(const float *)b->loss->data : 0.0f;
    return s;
}

static void assert_same(const model *m, const snapshot *a, const snapshot *b) {
    for (int i = 0; i < NP; i++) assert_memory_equal(a->grads[i], b->grads[i], trit_tensor_nbytes(m->p[i]->grad));
    assert_memory_equal(&a->loss, &b->loss, sizeof a->loss);
}

static void snap_free(snapshot *s) {
    for (int i = 0; i < NP; i++) free(s->grads[i]);
}

// ---- structure ------------------------------------------------------------------------------

static int count_steps(const trit_graph *g, trit_graph_step_kind kind) {
    int n = 0;
    trit_graph_step_info info;
    for (int i = 0; i < trit_graph_num_steps(g); i++) {
        assert_int_equal(trit_graph_step_at(g, i, &info), TRIT_OK);
        n += info.kind == kind;
    }
    return n;
}

static void test_structure(void **state) {
    (void)state;
    model m = model_new();
    built b = build(&m, false, true, LOSS, NULL);
    assert_int_equal(trit_graph_compile(b.g, b.loss), TRIT_OK);
    const int n = trit_graph_num_steps(b.g);
    trit_graph_step_info info;
    // Forward steps first, then nothing but backward-phase steps; each parameter's event comes
    // after every backward step of a node that reads it, and exactly once.
    int events[NP] = {0}, phase = 0, backward = 0;
    for (int i = 0; i < n; i++) {
        assert_int_equal(trit_graph_step_at(b.g, i, &info), TRIT_OK);
        if (info.kind == TRIT_STEP_FORWARD) assert_int_equal(phase, 0);
        else phase = 1;
        backward += info.kind == TRIT_STEP_BACKWARD;
        if (info.kind == TRIT_STEP_EVENT && info.event == TRIT_EVENT_GRAD_FINAL) {
            assert_in_range(info.param, 0, NP - 1);
            events[info.param]++;
        }
    }
    for (int p = 0; p < NP; p++) assert_int_equal(events[p], 1);
    assert_int_equal(count_steps(b.g, TRIT_STEP_RECOMPUTE), 0);
    assert_true(backward > 0 && count_steps(b.g, TRIT_STEP_ZERO) > 0);
    // The last two steps end the micro-batch and the step.
    assert_int_equal(trit_graph_step_at(b.g, n - 2, &info), TRIT_OK);
    assert_true(info.kind == TRIT_STEP_EVENT && info.event == TRIT_EVENT_MICRO_END);
    assert_int_equal(trit_graph_step_at(b.g, n - 1, &info), TRIT_OK);
    assert_true(info.kind == TRIT_STEP_EVENT && info.event == TRIT_EVENT_STEP_END);
    assert_int_equal(trit_graph_step_at(b.g, n, &info), TRIT_ERR_RANGE);
    trit_graph_free(b.g);
    model_free(&m);
}

// ---- hooks ------------------------------------------------------------------------------------

typedef struct watch {
    trit_graph *g;
    int seen[NP], micro_end, step_end;
    float *at_event[NP];  // the gradient as the event saw it
    int fail_at;          // a gradient-final event that fails (-1: none)
} watch;

static trit_status on_final(void *ctx, const trit_graph_event *e) {
    watch *w = ctx;
    assert_int_equal(e->kind, TRIT_EVENT_GRAD_FINAL);
    assert_ptr_equal(e->tensor, trit_graph_param(w->g, e->param));
    w->seen[e->param]++;
    const size_t n = trit_tensor_nbytes(e->tensor->grad);
    free(w->at_event[e->param]);
    w->at_event[e->param] = malloc(n);
    memcpy(w->at_event[e->param], e->tensor->grad->data, n);
    if (e->param == w->fail_at) return trit_error(TRIT_ERR_INVALID, "the exchange of '%s' failed", e->tensor->name);
    return TRIT_OK;
}

static trit_status on_end(void *ctx, const trit_graph_event *e) {
    watch *w = ctx;
    if (e->kind == TRIT_EVENT_MICRO_END) w->micro_end++;
    if (e->kind == TRIT_EVENT_STEP_END) {
        assert_int_equal(e->micro, e->num_micro - 1);
        w->step_end++;
    }
    return TRIT_OK;
}

// Each gradient-final event sees its parameter once per micro-batch, holding the gradient the
// whole backward ends with (so nothing writes it after the event), with accumulation too.
static void test_hooks(void **state) {
    (void)state;
    model m = model_new();
    built b = build(&m, false, true, LOSS, NULL);
    watch w = {.g = b.g, .fail_at = -1};
    assert_int_equal(trit_graph_add_hook(b.g, TRIT_EVENT_GRAD_FINAL, on_final, &w), TRIT_OK);
    assert_int_equal(trit_graph_compile(b.g, b.loss), TRIT_OK);
    assert_int_equal(trit_graph_add_hook(b.g, TRIT_EVENT_MICRO_END, on_end, &w), TRIT_OK);
    assert_int_equal(trit_graph_add_hook(b.g, TRIT_EVENT_STEP_END, on_end, &w), TRIT_OK);
    fill_x(b.x);
    zero_grads(&m);
    for (int micro = 0; micro < 3; micro++) {
        trit_graph_set_micro(b.g, micro, 3);
        run(&b, (uint64_t)micro);
        for (int i = 0; i < trit_graph_num_params(b.g); i++) {
            const trit_tensor *p = trit_graph_param(b.g, i);
            assert_int_equal(w.seen[i], micro + 1);
            assert_memory_equal(w.at_event[i], p->grad->data, trit_tensor_nbytes(p->grad));
        }
        assert_int_equal(w.micro_end, micro + 1);
        assert_int_equal(w.step_end, micro == 2 ? 1 : 0);
    }
    // A hook that fails stops backward with its message.
    w.fail_at = 0;
    trit_graph_set_micro(b.g, 0, 1);
    assert_int_equal(trit_graph_forward(b.g), TRIT_OK);
    assert_int_equal(trit_graph_backward(b.g), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "the exchange of"));
    for (int i = 0; i < NP; i++) free(w.at_event[i]);
    assert_int_equal(trit_graph_add_hook(b.g, TRIT_EVENT_GRAD_FINAL, NULL, NULL), TRIT_ERR_INVALID);
    trit_graph_free(b.g);
    model_free(&m);
}

// ---- recompute --------------------------------------------------------------------------------

// Recomputing every block's inside gives the same loss and gradients bit for bit (dropout masks
// included), with recompute steps in the list and a smaller arena; fused or not.
static void test_recompute_same_bits(void **state) {
    (void)state;
    for (int fusion = 0; fusion <= 1; fusion++) {
        model m = model_new();
        built plain = build(&m, false, fusion, LOSS, NULL), rec = build(&m, true, fusion, LOSS, NULL);
        assert_int_equal(trit_graph_compile(plain.g, plain.loss), TRIT_OK);
        assert_int_equal(trit_graph_compile(rec.g, rec.loss), TRIT_OK);
        assert_int_equal(count_steps(plain.g, TRIT_STEP_RECOMPUTE), 0);
        const int nrec = count_steps(rec.g, TRIT_STEP_RECOMPUTE);
        assert_true(nrec >= 3 * BLOCKS);
        trit_graph_memory mp, mr;
        assert_int_equal(trit_graph_memory_report(plain.g, &mp), TRIT_OK);
        assert_int_equal(trit_graph_memory_report(rec.g, &mr), TRIT_OK);
        print_message("fusion %d: %d recompute steps, arena %zu -> %zu bytes\n", fusion, nrec, mp.arena_bytes,
                      mr.arena_bytes);
        assert_true(mr.arena_bytes < mp.arena_bytes * 3 / 4);
        fill_x(plain.x);
        fill_x(rec.x);
        for (int step = 0; step < 2; step++) {
            zero_grads(&m);
            run(&plain, (uint64_t)step);
            snapshot a = snap(&m, &plain);
            zero_grads(&m);
            run(&rec, (uint64_t)step);
            snapshot c = snap(&m, &rec);
            assert_same(&m, &a, &c);
            snap_free(&a);
            snap_free(&c);
        }
        trit_graph_free(plain.g);
        trit_graph_free(rec.g);
        model_free(&m);
    }
}

static void test_recompute_bad_input(void **state) {
    (void)state;
    model m = model_new();
    built b = build(&m, false, true, LOSS, NULL);
    assert_int_equal(trit_graph_recompute(b.g, m.p[0]), TRIT_ERR_INVALID);  // a parameter
    assert_int_equal(trit_graph_recompute(b.g, b.x), TRIT_ERR_INVALID);     // an input
    assert_int_equal(trit_graph_recompute_since(b.g, trit_graph_mark(b.g) + 1, NULL), TRIT_ERR_RANGE);
    // Marking the loss (or a kept value) is allowed and ignored: it stays held.
    assert_int_equal(trit_graph_recompute(b.g, b.loss), TRIT_OK);
    assert_int_equal(trit_graph_compile(b.g, b.loss), TRIT_OK);
    assert_int_equal(trit_graph_recompute(b.g, b.out), TRIT_ERR_STATE);
    fill_x(b.x);
    run(&b, 0);
    trit_graph_free(b.g);
    model_free(&m);
}

// ---- seeded backward and input gradients --------------------------------------------------------

// Backward seeded with r equals backward from the loss sum(out * r), whose gradient at out is r;
// the input's gradient equals the gradient of the same values held as a parameter.
static void test_seeded_and_input_grad(void **state) {
    (void)state;
    model m = model_new();
    built lossy = build(&m, false, true, LOSS, NULL);
    assert_int_equal(trit_graph_keep(lossy.g, lossy.out), TRIT_OK);
    assert_int_equal(trit_graph_compile(lossy.g, lossy.loss), TRIT_OK);
    fill_x(lossy.x);
    zero_grads(&m);
    run(&lossy, 0);
    snapshot want = snap(&m, &lossy);
    const trit_tensor *r = trit_graph_grad(lossy.g, lossy.out);  // d loss / d out: the weights
    assert_non_null(r);

    built seeded = build(&m, true, true, SEEDED, NULL);
    assert_int_equal(trit_graph_input_requires_grad(seeded.g, seeded.x), TRIT_OK);
    assert_int_equal(trit_graph_compile_output(seeded.g, seeded.out), TRIT_OK);
    fill_x(seeded.x);
    zero_grads(&m);
    trit_graph_set_rng(seeded.g, 5, 0);
    assert_int_equal(trit_graph_forward(seeded.g), TRIT_OK);
    assert_int_equal(trit_graph_backward(seeded.g), TRIT_ERR_STATE);  // needs its seed
    const int64_t wrong[2] = {B, C + 1};
    trit_tensor *bad = trit_tensor_new(TRIT_F32, 2, wrong);
    assert_int_equal(trit_graph_backward_seed(seeded.g, bad), TRIT_ERR_SHAPE);
    trit_tensor_free(bad);
    assert_int_equal(trit_graph_backward_seed(seeded.g, r), TRIT_OK);
    snapshot got = snap(&m, &seeded);
    got.loss = want.loss;
    assert_same(&m, &want, &got);
    trit_tensor *dx = trit_graph_grad(seeded.g, seeded.x);
    assert_non_null(dx);

    // The same values as a parameter: its gradient is the input's.
    const int64_t s[2] = {B, C};
    trit_tensor *xp = trit_tensor_new_param(TRIT_F32, 2, s, "x");
    fill_x(xp);
    built asparam = build(&m, false, true, LOSS, xp);
    assert_int_equal(trit_graph_compile(asparam.g, asparam.loss), TRIT_OK);
    zero_grads(&m);
    run(&asparam, 0);
    assert_memory_equal(dx->data, xp->grad->data, trit_tensor_nbytes(dx));

    // Bad uses: an input that is an integer, a parameter marked as an input, a second compile.
    const int64_t one[1] = {4};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *idx = trit_graph_input(g, TRIT_I32, 1, one, "idx");
    assert_int_equal(trit_graph_input_requires_grad(g, idx), TRIT_ERR_DTYPE);
    assert_int_equal(trit_graph_input_requires_grad(g, m.p[0]), TRIT_ERR_INVALID);
    trit_graph_free(g);
    assert_int_equal(trit_graph_input_requires_grad(seeded.g, seeded.x), TRIT_ERR_STATE);
    snap_free(&want);
    snap_free(&got);
    trit_graph_free(lossy.g);
    trit_graph_free(seeded.g);
    trit_graph_free(asparam.g);
    trit_tensor_free(xp);
    model_free(&m);
}

// ---- parameter groups -----------------------------------------------------------------------------

// Groups: the head (read first and last, like a tied embedding) 0, block k's six k + 1.
static void set_groups(model *m, trit_graph *g) {
    int group[NP];
    assert_int_equal(trit_graph_num_params(g), NP);
    for (int i = 0; i < NP; i++) {
        int j = 0;
        while (m->p[j] != trit_graph_param(g, i)) j++;
        group[i] = j == 0 ? 0 : 1 + (j - 1) / 6;
    }
    assert_int_equal(trit_graph_set_param_groups(g, group, NP), TRIT_OK);
}

// A stand-in for sharded parameters: a group's values are NaN except between its needed and done
// events, so a step that read one outside them would make the loss or a gradient NaN.
typedef struct sharded {
    model *m;
    float *kept[NP];
    int needed[2][BLOCKS + 1], done[2][BLOCKS + 1];
    int order[2][4 * (BLOCKS + 1)], n_order[2];  // +1 + group: needed, -1 - group: done
} sharded;

static void swap_group(sharded *sh, int group, bool release) {
    for (int j = 0; j < NP; j++) {
        if ((j == 0 ? 0 : 1 + (j - 1) / 6) != group) continue;
        float *v = sh->m->p[j]->data;
        const int64_t n = trit_tensor_numel(sh->m->p[j]);
        if (release) {
            memcpy(sh->kept[j], v, sizeof(float) * (size_t)n);
            for (int64_t i = 0; i < n; i++) v[i] = NAN;
        } else {
            memcpy(v, sh->kept[j], sizeof(float) * (size_t)n);
        }
    }
}

static trit_status on_params(void *ctx, const trit_graph_event *e) {
    sharded *sh = ctx;
    assert_in_range(e->group, 0, BLOCKS);
    assert_int_equal(e->param, -1);
    const int ph = e->backward;
    const bool need = e->kind == TRIT_EVENT_PARAMS_NEEDED;
    // Needed once a phase, before done.
    assert_int_equal(sh->needed[ph][e->group], need ? 0 : 1);
    assert_int_equal(sh->done[ph][e->group], 0);
    if (need) sh->needed[ph][e->group]++;
    else sh->done[ph][e->group]++;
    sh->order[ph][sh->n_order[ph]++] = need ? 1 + e->group : -1 - e->group;
    swap_group(sh, e->group, !need);
    return TRIT_OK;
}

// With groups: forward needs the head, then each block in turn (done before the next is needed),
// and is done with the head last; backward needs the head first, the blocks in reverse, and is done
// with the head last. Each group's events come once a phase, and the loss and gradients are the
// bits of the graph without groups while every group is NaN outside its events, fused or not,
// recomputed or not. Groups set after compile give the same list as before it.
static void test_param_groups(void **state) {
    (void)state;
    for (int variant = 0; variant < 3; variant++) {
        const bool fusion = variant != 0, recompute = variant == 2;
        model m = model_new();
        built plain = build(&m, recompute, fusion, LOSS, NULL), grouped = build(&m, recompute, fusion, LOSS, NULL);
        set_groups(&m, grouped.g);
        assert_int_equal(trit_graph_compile(plain.g, plain.loss), TRIT_OK);
        assert_int_equal(trit_graph_compile(grouped.g, grouped.loss), TRIT_OK);
        // 4 events a group: needed and done in forward and in the backward phase.
        assert_int_equal(count_steps(grouped.g, TRIT_STEP_EVENT), count_steps(plain.g, TRIT_STEP_EVENT) + 4 * (BLOCKS + 1));
        assert_int_equal(trit_graph_num_steps(grouped.g), trit_graph_num_steps(plain.g) + 4 * (BLOCKS + 1));
        // The same list when the groups come after compile.
        built late = build(&m, recompute, fusion, LOSS, NULL);
        assert_int_equal(trit_graph_compile(late.g, late.loss), TRIT_OK);
        set_groups(&m, late.g);
        assert_int_equal(trit_graph_num_steps(late.g), trit_graph_num_steps(grouped.g));
        for (int i = 0; i < trit_graph_num_steps(late.g); i++) {
            trit_graph_step_info a, c;
            assert_int_equal(trit_graph_step_at(late.g, i, &a), TRIT_OK);
            assert_int_equal(trit_graph_step_at(grouped.g, i, &c), TRIT_OK);
            assert_true(a.kind == c.kind && a.node == c.node && a.event == c.event && a.group == c.group);
            if (a.kind == TRIT_STEP_EVENT && a.event >= TRIT_EVENT_PARAMS_NEEDED) assert_int_equal(a.param, -1);
        }
        trit_graph_free(late.g);

        sharded sh = {.m = &m};
        for (int j = 0; j < NP; j++) sh.kept[j] = malloc(trit_tensor_nbytes(m.p[j]));
        assert_int_equal(trit_graph_add_hook(grouped.g, TRIT_EVENT_PARAMS_NEEDED, on_params, &sh), TRIT_OK);
        assert_int_equal(trit_graph_add_hook(grouped.g, TRIT_EVENT_PARAMS_DONE, on_params, &sh), TRIT_OK);
        fill_x(plain.x);
        fill_x(grouped.x);
        zero_grads(&m);
        run(&plain, 3);
        snapshot want = snap(&m, &plain);
        zero_grads(&m);
        for (int gr = 0; gr <= BLOCKS; gr++) swap_group(&sh, gr, true);
        run(&grouped, 3);
        snapshot got = snap(&m, &grouped);
        for (int gr = 0; gr <= BLOCKS; gr++) swap_group(&sh, gr, false);
        assert_same(&m, &want, &got);
        const int fwd[] = {1, 2, -2, 3, -3, 4, -4, 5, -5, -1}, bwd[] = {1, 5, -5, 4, -4, 3, -3, 2, -2, -1};
        for (int ph = 0; ph < 2; ph++) {
            assert_int_equal(sh.n_order[ph], 2 * (BLOCKS + 1));
            assert_memory_equal(sh.order[ph], ph ? bwd : fwd, sizeof fwd);
            for (int gr = 0; gr <= BLOCKS; gr++) assert_true(sh.needed[ph][gr] == 1 && sh.done[ph][gr] == 1);
        }
        print_message("variant %d: %d steps, %d with groups\n", variant, trit_graph_num_steps(plain.g),
                      trit_graph_num_steps(grouped.g));
        snap_free(&want);
        snap_free(&got);
        for (int j = 0; j < NP; j++) free(sh.kept[j]);
        trit_graph_free(plain.g);
        trit_graph_free(grouped.g);
        model_free(&m);
    }
}

static void test_param_groups_bad_input(void **state) {
    (void)state;
    model m = model_new();
    built b = build(&m, false, true, LOSS, NULL);
    int group[NP + 1] = {0};
    assert_int_equal(trit_graph_set_param_groups(b.g, group, NP + 1), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "26 groups given for the graph's 25 parameters"));
    group[3] = -2;
    assert_int_equal(trit_graph_set_param_groups(b.g, group, NP), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "has group -2"));
    assert_int_equal(trit_graph_set_param_groups(NULL, group, NP), TRIT_ERR_INVALID);
    // Cleared: no parameter events.
    group[3] = 0;
    assert_int_equal(trit_graph_set_param_groups(b.g, group, NP), TRIT_OK);
    assert_int_equal(trit_graph_set_param_groups(b.g, NULL, 0), TRIT_OK);
    assert_int_equal(trit_graph_compile(b.g, b.loss), TRIT_OK);
    trit_graph_step_info info;
    for (int i = 0; i < trit_graph_num_steps(b.g); i++) {
        assert_int_equal(trit_graph_step_at(b.g, i, &info), TRIT_OK);
        assert_true(info.kind != TRIT_STEP_EVENT || info.event < TRIT_EVENT_PARAMS_NEEDED);
    }
    trit_graph_free(b.g);
    model_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_structure),
        cmocka_unit_test(test_hooks),
        cmocka_unit_test(test_recompute_same_bits),
        cmocka_unit_test(test_recompute_bad_input),
        cmocka_unit_test(test_seeded_and_input_grad),
        cmocka_unit_test(test_param_groups),
        cmocka_unit_test(test_param_groups_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
