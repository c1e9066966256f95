// The GPT on the step list, in fp32, bf16 and fp16, with dropout and accumulation: block recompute
// gives the same loss and gradients bit for bit with less activation memory; a hook on "gradient
// final" sees each parameter once per micro-batch holding its final gradient; and dropout masks
// depend only on the model's structure: equal with fusion on or off, in every precision, with
// and without recompute, and different between the places of the model. Gradient buffers whose
// first writer stores instead of adding to zeros give the same bits as zeroed ones, and so do the
// views whose readers write into their root's gradient.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/graph_internal.h"
#include "ops/dropout.h"
#include "trit/trit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 3, T = 24, V = 53, MICRO = 2 };

static trit_gpt *model(trit_precision p) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 3, c.n_embd = 64, c.n_head = 4, c.seq_len = T, c.vocab_size = V, c.dropout = 0.2;
    trit_gpt *m = trit_gpt_new(&c, 21);
    assert_non_null(m);
    const trit_compute_policy pol = trit_precision_policy(p, TRIT_MATMUL_HIGHEST);
    assert_int_equal(trit_gpt_set_policy(m, &pol), TRIT_OK);
    return m;
}

static void fill(trit_gpt_graph *gg, int micro) {
    int32_t *x = gg->idx->data, *y = gg->targets->data;
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(trit_rng_u32(9, (uint64_t)micro, (uint64_t)i) % V);
        y[i] = (x[i] * 3 + 1) % V;
    }
}

static void zero_grads(trit_gpt *m) {
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        if (t->grad) memset(t->grad->data, 0, trit_tensor_nbytes(t->grad));
    }
}

// One step of MICRO micro-batches; returns a copy of every gradient followed by the losses.
static float *step(trit_gpt *m, trit_gpt_graph *gg) {
    zero_grads(m);
    trit_graph_set_grad_scale(gg->graph, 1.0 / MICRO);
    float losses[MICRO];
    for (int micro = 0; micro < MICRO; micro++) {
        fill(gg, micro);
        trit_graph_set_rng(gg->graph, 4, (uint64_t)(10 + micro));
        trit_graph_set_micro(gg->graph, micro, MICRO);
        assert_int_equal(trit_graph_forward(gg->graph), TRIT_OK);
        losses[micro] = *(const float *)gg->loss->data;
        assert_int_equal(trit_graph_backward(gg->graph), TRIT_OK);
    }
    size_t total = sizeof losses;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) total += trit_tensor_nbytes(trit_gpt_tensor(m, i)->grad);
    float *out = malloc(total);
    char *at = (char *)out;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *gr = trit_gpt_tensor(m, i)->grad;
        memcpy(at, gr->data, trit_tensor_nbytes(gr));
        at += trit_tensor_nbytes(gr);
    }
    memcpy(at, losses, sizeof losses);
    return out;
}

static size_t step_bytes(const trit_gpt *m) {
    size_t total = sizeof(float) * MICRO;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) total += trit_tensor_nbytes(trit_gpt_tensor(m, i)->grad);
    return total;
}

static int count_kind(const trit_graph *g, trit_graph_step_kind kind) {
    int n = 0;
    trit_graph_step_info info;
    for (int i = 0; i < trit_graph_num_steps(g); i++) {
        assert_int_equal(trit_graph_step_at(g, i, &info), TRIT_OK);
        n += info.kind == kind;
    }
    return n;
}

static void test_block_recompute_same_bits(void **state) {
    (void)state;
    for (int p = 0; p < 3; p++) {
        trit_gpt *m = model((trit_precision)p);
        trit_gpt_graph plain, rec;
        assert_int_equal(trit_gpt_build_train(m, B, T, &plain), TRIT_OK);
        assert_int_equal(trit_gpt_set_recompute(m, TRIT_RECOMPUTE_BLOCK), TRIT_OK);
        assert_int_equal(trit_gpt_build_train(m, B, T, &rec), TRIT_OK);
        assert_int_equal(count_kind(plain.graph, TRIT_STEP_RECOMPUTE), 0);
        const int nrec = count_kind(rec.graph, TRIT_STEP_RECOMPUTE);
        trit_graph_memory mp, mr;
        assert_int_equal(trit_graph_memory_report(plain.graph, &mp), TRIT_OK);
        assert_int_equal(trit_graph_memory_report(rec.graph, &mr), TRIT_OK);
        print_message("%s: %d recompute steps, arena %zu -> %zu bytes\n", trit_precision_name((trit_precision)p), nrec,
                      mp.arena_bytes, mr.arena_bytes);
        assert_true(nrec >= 8 * 3);
        assert_true(mr.arena_bytes < mp.arena_bytes);
        float *a = step(m, &plain), *b = step(m, &rec);
        assert_memory_equal(a, b, step_bytes(m));
        free(a);
        free(b);
        trit_gpt_graph_free(&plain);
        trit_gpt_graph_free(&rec);
        assert_int_equal(trit_gpt_set_recompute(m, (trit_recompute_policy)7), TRIT_ERR_INVALID);
        trit_gpt_free(m);
    }
}

// Two steps of `got` give the same gradients and losses, bit for bit, as two of `want`, with got's
// arena filled with NaN before each (an element left unwritten would hold NaN or a stale value).
static void assert_same_steps(trit_gpt *m, trit_gpt_graph *want_g, trit_gpt_graph *got_g) {
    for (int k = 0; k < 2; k++) {
        float *want = step(m, want_g);
        memset(got_g->graph->arena.base, 0xff, got_g->graph->arena.size);  // NaN in every f32 and 16-bit slot
        float *got = step(m, got_g);
        const size_t n = step_bytes(m) / sizeof(float);
        for (size_t i = 0; i < n; i++) assert_true(isfinite(got[i]));
        assert_memory_equal(want, got, n * sizeof(float));
        free(want);
        free(got);
    }
}

// ---- first writers that store ---------------------------------------------------------------------

// A gradient buffer whose first writer stores into it is not zeroed, so that op must write every
// element. Against the same model with every buffer zeroed and added to (TRIT_GRAD_STORE=0), the
// gradients and losses must come out bit for bit, with the storing graph's arena filled with NaN
// before each step (an element left unwritten would hold NaN or a stale value), in each
// precision, with and without block recompute; and most first writers of the GPT's gradient
// buffers store (the matmuls, the norms, the fused head, attention).
static void check_stores(trit_gpt *m, const char *what) {
    trit_gpt_graph stores, zeroes;
    assert_int_equal(setenv("TRIT_GRAD_STORE", "0", 1), 0);
    assert_int_equal(trit_gpt_build_train(m, B, T, &zeroes), TRIT_OK);
    assert_int_equal(unsetenv("TRIT_GRAD_STORE"), 0);
    assert_int_equal(trit_gpt_build_train(m, B, T, &stores), TRIT_OK);
    int storing = 0;
    for (int i = 0; i < stores.graph->n_nodes; i++) storing += stores.graph->nodes[i].bwd.store_inputs != 0;
    for (int i = 0; i < zeroes.graph->n_nodes; i++) assert_int_equal(zeroes.graph->nodes[i].bwd.store_inputs, 0);
    const int zs = count_kind(stores.graph, TRIT_STEP_ZERO), zz = count_kind(zeroes.graph, TRIT_STEP_ZERO);
    print_message("%s: %d backward steps store a gradient; %d buffers zeroed instead of %d\n", what, storing, zs, zz);
    assert_true(storing >= 4 * 3);  // per block: the q, k, v projection, attention, c_proj, c_fc, the norms
    assert_true(zs + storing <= zz);
    assert_same_steps(m, &zeroes, &stores);
    trit_gpt_graph_free(&stores);
    trit_gpt_graph_free(&zeroes);
}

static void test_stored_gradients_cover_their_buffers(void **state) {
    (void)state;
    char what[64];
    for (int p = 0; p < 3; p++) {
        for (int rec = 0; rec < 2; rec++) {
            trit_gpt *m = model((trit_precision)p);
            if (rec) assert_int_equal(trit_gpt_set_recompute(m, TRIT_RECOMPUTE_BLOCK), TRIT_OK);
            snprintf(what, sizeof what, "%s%s", trit_precision_name((trit_precision)p), rec ? " + recompute" : "");
            check_stores(m, what);
            trit_gpt_free(m);
        }
    }
    // Ternary training on the integer kernels: the input gradient from int8 dY or in fp32, the
    // weight gradient on bf16 products (where the CPU has them) or in fp32.
    const trit_fake_quant_spec w = {.dtype = TRIT_QINT2, .mode = TRIT_FQ_TERNARY}, a = {.dtype = TRIT_QINT8, .mode = TRIT_FQ_TOKEN};
    const trit_ternary_matmul modes[3] = {TRIT_TERNARY_MATMUL_INT8, TRIT_TERNARY_MATMUL_INT8_F32_DX,
                                          TRIT_TERNARY_MATMUL_INT8_F32_DW};
    const char *names[3] = {"ternary, int8 dY", "ternary, fp32 dX", "ternary, fp32 dW"};
    for (int k = 0; k < 3; k++) {
        trit_gpt *m = model(TRIT_PRECISION_FP32);
        assert_int_equal(trit_gpt_set_qat(m, &w, &a), TRIT_OK);
        assert_int_equal(trit_gpt_set_ternary_matmul(m, modes[k]), TRIT_OK);
        check_stores(m, names[k]);
        trit_gpt_free(m);
    }
    trit_gpt *m = model(TRIT_PRECISION_FP32);
    assert_int_equal(trit_gpt_set_ternary_matmul(m, (trit_ternary_matmul)4), TRIT_ERR_INVALID);
    trit_gpt_free(m);
}

// ---- views' gradients -------------------------------------------------------------------------------

// Flash attention writes q, k and v's gradients through their strides, so the q, k, v views of
// each block's c_attn output get no gradient of their own: flash writes straight into the
// parent's gradient, storing all of it (the three views tile it), so the parent needs no zeroing,
// and the views' backward steps (strided adds) are left out. Against the same
// model with a gradient per view (TRIT_VIEW_GRADS=0), gradients and losses must come out bit for
// bit, with the arena filled with NaN before each step, in each precision, with and without
// block recompute, in no larger an arena (the parent's gradient now lives from flash's step,
// where the three views' did).
static int aliased_views(const trit_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n_values; i++) {
        const trit_value *v = &g->values[i];
        if (!v->grad_alias) continue;
        const trit_tensor *root = g->values[v->root].grad;
        assert_ptr_equal(v->grad->data, root->data);
        assert_true(v->grad->offset > 0 || v->grad->strides[1] != v->t->shape[2]);  // a strided view
        n++;
    }
    return n;
}

static void test_view_gradients_same_bits(void **state) {
    (void)state;
    for (int p = 0; p < 3; p++)
        for (int rec = 0; rec < 2; rec++) {
            trit_gpt *m = model((trit_precision)p);
            if (rec) assert_int_equal(trit_gpt_set_recompute(m, TRIT_RECOMPUTE_BLOCK), TRIT_OK);
            trit_gpt_graph alias, own;
            assert_int_equal(setenv("TRIT_VIEW_GRADS", "0", 1), 0);
            assert_int_equal(trit_gpt_build_train(m, B, T, &own), TRIT_OK);
            assert_int_equal(unsetenv("TRIT_VIEW_GRADS"), 0);
            assert_int_equal(trit_gpt_build_train(m, B, T, &alias), TRIT_OK);
            assert_int_equal(aliased_views(own.graph), 0);
            assert_int_equal(aliased_views(alias.graph), 3 * 3);  // q, k, v of each of 3 blocks
            const int bwd_own = count_kind(own.graph, TRIT_STEP_BACKWARD);
            assert_int_equal(bwd_own - count_kind(alias.graph, TRIT_STEP_BACKWARD), 9);
            // and the parent's zeroing: attention stores all of it through the three views
            assert_int_equal(count_kind(own.graph, TRIT_STEP_ZERO) - count_kind(alias.graph, TRIT_STEP_ZERO), 3);
            assert_true(alias.graph->arena.size <= own.graph->arena.size);
            assert_same_steps(m, &own, &alias);
            trit_gpt_graph_free(&alias);
            trit_gpt_graph_free(&own);
            trit_gpt_free(m);
        }
}

// ---- gradient-final hooks -------------------------------------------------------------------------

typedef struct watch {
    trit_graph *g;
    int *seen;
    float **copy;
} watch;

static trit_status on_final(void *ctx, const trit_graph_event *e) {
    watch *w = ctx;
    w->seen[e->param]++;
    const size_t n = trit_tensor_nbytes(e->tensor->grad);
    free(w->copy[e->param]);
    w->copy[e->param] = malloc(n);
    memcpy(w->copy[e->param], e->tensor->grad->data, n);
    return TRIT_OK;
}

static void test_grad_final_hook(void **state) {
    (void)state;
    for (int p = 0; p < 3; p++) {
        trit_gpt *m = model((trit_precision)p);
        trit_gpt_graph gg;
        assert_int_equal(trit_gpt_build_train(m, B, T, &gg), TRIT_OK);
        const int np = trit_graph_num_params(gg.graph);
        watch w = {.g = gg.graph, .seen = calloc((size_t)np, sizeof(int)), .copy = calloc((size_t)np, sizeof(float *))};
        assert_int_equal(trit_graph_add_hook(gg.graph, TRIT_EVENT_GRAD_FINAL, on_final, &w), TRIT_OK);
        float *all = step(m, &gg);
        for (int i = 0; i < np; i++) {
            const trit_tensor *t = trit_graph_param(gg.graph, i);
            assert_int_equal(w.seen[i], MICRO);
            assert_memory_equal(w.copy[i], t->grad->data, trit_tensor_nbytes(t->grad));
            free(w.copy[i]);
        }
        free(w.seen);
        free(w.copy);
        free(all);
        trit_gpt_graph_free(&gg);
        trit_gpt_free(m);
    }
}

// ---- dropout streams ------------------------------------------------------------------------------

typedef struct masks {
    int n;
    uint64_t stream[16];
    uint8_t *bits[16];  // (B T C) bytes each
    int64_t count[16];
} masks;

// The masks the graph's dropout nodes drew in its last forward, by stream.
static masks masks_of(const trit_graph *g) {
    masks k = {0};
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        if (strcmp(n->def->name, "dropout") != 0) continue;
        assert_true(k.n < 16);
        const uint8_t *saved = n->fwd.saved;
        assert_int_equal(saved[0], 1);  // a mask was applied
        k.stream[k.n] = ((const trit_dropout_attr *)n->attr)->stream;
        k.count[k.n] = trit_tensor_numel(g->values[n->out].t);
        k.bits[k.n] = malloc((size_t)k.count[k.n]);
        memcpy(k.bits[k.n], saved + 64, (size_t)k.count[k.n]);
        k.n++;
    }
    return k;
}

static void masks_free(masks *k) {
    for (int i = 0; i < k->n; i++) free(k->bits[i]);
}

static masks forward_masks(trit_precision p, bool fusion) {
    trit_gpt *m = model(p);
    if (!fusion) setenv("TRIT_FUSE", "0", 1);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, B, T, &gg), TRIT_OK);
    unsetenv("TRIT_FUSE");
    fill(&gg, 0);
    trit_graph_set_rng(gg.graph, 4, 3);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    masks k = masks_of(gg.graph);
    trit_gpt_graph_free(&gg);
    trit_gpt_free(m);
    return k;
}

static void test_masks_follow_structure(void **state) {
    (void)state;
    masks ref = forward_masks(TRIT_PRECISION_FP32, true);
    assert_int_equal(ref.n, 1 + 2 * 3);  // embedding, then attention and MLP of each block
    for (int i = 0; i < ref.n; i++)
        for (int j = 0; j < i; j++) {
            assert_true(ref.stream[i] != ref.stream[j]);
            assert_true(ref.count[i] != ref.count[j] || memcmp(ref.bits[i], ref.bits[j], (size_t)ref.count[i]) != 0);
        }
    // (Under recompute a forward's masks are not kept for backward, which draws them again: that
    // they are the same masks is test_block_recompute_same_bits's equal gradients.)
    for (int p = 0; p < 3; p++)
        for (int fusion = 0; fusion <= 1; fusion++) {
            masks k = forward_masks((trit_precision)p, fusion);
            assert_int_equal(k.n, ref.n);
            for (int i = 0; i < ref.n; i++) {
                int j = 0;
                while (j < k.n && k.stream[j] != ref.stream[i]) j++;
                assert_true(j < k.n);
                assert_int_equal(k.count[j], ref.count[i]);
                assert_memory_equal(k.bits[j], ref.bits[i], (size_t)ref.count[i]);
            }
            masks_free(&k);
        }
    masks_free(&ref);
}

// ---- flat storage --------------------------------------------------------------------------------

typedef struct order {
    const trit_flat *flat;
    int64_t last;  // grad offset of the previous event of this micro-batch
    int64_t micro;
    int events;
} order;

static trit_status on_final_offset(void *ctx, const trit_graph_event *e) {
    order *o = ctx;
    int i = 0;
    while (trit_flat_tensor(o->flat, i) != e->tensor) i++;
    const int64_t off = trit_flat_grad_offset(o->flat, i);
    if (e->micro != o->micro) o->micro = e->micro, o->last = -1;
    if (!(off > o->last)) fail_msg("'%s' is final after a gradient placed behind it", e->tensor->name);
    o->last = off;
    o->events++;
    return TRIT_OK;
}

// Parameters and gradients live in one block each, in reverse order of first use: a backward
// finishes the gradients in increasing address order, so finished gradients form one growing
// prefix of the block (what bucketed exchange wants). Converting the parameters' dtype keeps
// the layout, and the values survive a checkpoint.
static void test_flat_layout(void **state) {
    (void)state;
    trit_gpt *m = model(TRIT_PRECISION_FP32);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, B, T, &gg), TRIT_OK);
    const trit_flat *f = trit_gpt_flat(m);
    const int n = trit_flat_count(f);
    assert_int_equal(n, trit_gpt_num_tensors(m));
    assert_string_equal(trit_flat_tensor(f, n - 1)->name, "wte.weight");
    assert_string_equal(trit_flat_tensor(f, n - 2)->name, "wpe.weight");
    assert_string_equal(trit_flat_tensor(f, 0)->name, "ln_f.bias");
    size_t bytes = 0;
    const char *block = trit_flat_block(f, TRIT_F32, &bytes);
    int64_t gcount = 0;
    const float *grads = trit_flat_grads(f, &gcount);
    for (int i = 0; i < n; i++) {
        const trit_tensor *t = trit_flat_tensor(f, i);
        assert_true((const char *)t->data >= block && (const char *)t->data + trit_tensor_nbytes(t) <= block + bytes);
        assert_true(((uintptr_t)t->data & 63) == 0);
        assert_ptr_equal(t->grad->data, grads + trit_flat_grad_offset(f, i));
        assert_true(i == 0 || trit_flat_grad_offset(f, i) > trit_flat_grad_offset(f, i - 1));
    }
    order o = {.flat = f, .last = -1, .micro = 0};
    assert_int_equal(trit_graph_add_hook(gg.graph, TRIT_EVENT_GRAD_FINAL, on_final_offset, &o), TRIT_OK);
    float *all = step(m, &gg);
    assert_int_equal(o.events, MICRO * n);
    free(all);
    trit_gpt_graph_free(&gg);
    // bf16 storage: a block of bf16 in the same order, values rounded.
    const float first = ((const float *)trit_flat_tensor(f, n - 1)->data)[3];
    assert_int_equal(trit_gpt_set_param_dtype(m, TRIT_BF16), TRIT_OK);
    f = trit_gpt_flat(m);
    assert_null(trit_flat_block(f, TRIT_F32, NULL));
    assert_string_equal(trit_flat_tensor(f, n - 1)->name, "wte.weight");
    const uint16_t *w = trit_flat_tensor(f, n - 1)->data;
    assert_true(trit_bf16_to_f32(w[3]) == trit_bf16_to_f32(trit_f32_to_bf16(first)));
    assert_non_null(trit_flat_tensor(f, 0)->grad);  // gradients came along
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_flat_layout),
        cmocka_unit_test(test_block_recompute_same_bits),
        cmocka_unit_test(test_stored_gradients_cover_their_buffers),
        cmocka_unit_test(test_view_gradients_same_bits),
        cmocka_unit_test(test_grad_final_hook),
        cmocka_unit_test(test_masks_follow_structure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
