// LoRA on the GPT: the adapter's parameters (names, shapes, Kaiming-uniform A, zero B, the base
// frozen), the spec parser, the product in the graph and in the decoder (also over a quantized
// base), merge and unmerge, gradients reaching only the adapter, and bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trit/trit.h"

enum { T = 12, V = 61, C = 32, L = 2 };

static trit_gpt_config config(const char *lora) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = L, c.n_embd = C, c.n_head = 2, c.seq_len = 32, c.vocab_size = V;
    if (lora) assert_int_equal(trit_adapter_parse_lora(lora, &c.adapter), TRIT_OK);
    return c;
}

static const char *ALL = "r=4,alpha=8,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj";

// B of every LoRA pair drawn normal(0, std), so the adapter changes the outputs.
static void randomize_b(trit_gpt *m, double std) {
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        if (strstr(t->name, "lora_B")) assert_int_equal(trit_tensor_fill_normal(t, 0.0, std, 5, (uint64_t)i), TRIT_OK);
    }
}

static int32_t token(int t) { return (t * 7 + 3) % V; }

static void graph_logits(trit_gpt *m, float *out) {
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, 1, T, &gg), TRIT_OK);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets);
    for (int t = 0; t < T; t++) idx[t] = token(t), tg[t] = token(t + 1);
    trit_graph_set_training(gg.graph, false);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    memcpy(out, trit_tensor_ptr(gg.logits), sizeof(float) * T * V);
    trit_gpt_graph_free(&gg);
}

static void decode_logits(const trit_gpt *m, float *out) {
    trit_gpt_cache *k = trit_gpt_cache_new(m);
    assert_non_null(k);
    for (int t = 0; t < T; t++) assert_int_equal(trit_gpt_decode(m, k, token(t), out + t * V), TRIT_OK);
    trit_gpt_cache_free(k);
}

static float max_abs(const float *a, int64_t n) {
    float r = 0;
    for (int64_t i = 0; i < n; i++) r = fmaxf(r, fabsf(a[i]));
    return r;
}

static float max_diff(const float *a, const float *b, int64_t n) {
    float r = 0;
    for (int64_t i = 0; i < n; i++) r = fmaxf(r, fabsf(a[i] - b[i]));
    return r;
}

static void test_parameters(void **state) {
    (void)state;
    trit_gpt_config pc = config(NULL), lc = config(ALL);
    trit_gpt *plain = trit_gpt_new(&pc, 3), *m = trit_gpt_new(&lc, 3);
    assert_non_null(plain);
    assert_non_null(m);
    const int base = trit_gpt_num_tensors(plain);
    assert_int_equal(trit_gpt_num_tensors(m), base + L * 4 * 2);
    int64_t trainable = 0;
    for (int i = 0; i < base; i++) {  // the base: same names, same values, frozen
        const trit_tensor *a = trit_gpt_tensor(plain, i), *b = trit_gpt_tensor(m, i);
        assert_string_equal(a->name, b->name);
        assert_memory_equal(trit_tensor_ptr(a), trit_tensor_ptr(b), sizeof(float) * (size_t)trit_tensor_numel(a));
        assert_true(b->flags & TRIT_FLAG_FROZEN);
    }
    const trit_tensor *A = trit_gpt_find(m, "h.1.mlp.c_proj.lora_A.weight"), *B = trit_gpt_find(m, "h.1.mlp.c_proj.lora_B.weight");
    assert_non_null(A);
    assert_non_null(B);
    assert_int_equal(A->shape[0], 4), assert_int_equal(A->shape[1], 4 * C);  // (r, in)
    assert_int_equal(B->shape[0], C), assert_int_equal(B->shape[1], 4);      // (out, r)
    const trit_tensor *qa = trit_gpt_find(m, "h.0.attn.c_attn.lora_B.weight");
    assert_int_equal(qa->shape[0], 3 * C);
    // A: uniform in +-1 / sqrt(in) (kaiming_uniform_, a = sqrt 5), spread over the range; B zero.
    const float bound = 1.0f / sqrtf(4.0f * C), *a = trit_tensor_ptr(A), *b = trit_tensor_ptr(B);
    float lo = 1, hi = -1;
    for (int64_t i = 0; i < trit_tensor_numel(A); i++) lo = fminf(lo, a[i]), hi = fmaxf(hi, a[i]);
    assert_true(lo >= -bound && hi <= bound && lo < -0.9f * bound && hi > 0.9f * bound);
    for (int64_t i = 0; i < trit_tensor_numel(B); i++) assert_true(b[i] == 0.0f);
    for (int i = base; i < trit_gpt_num_tensors(m); i++) {
        assert_false(trit_gpt_tensor(m, i)->flags & TRIT_FLAG_FROZEN);
        trainable += trit_tensor_numel(trit_gpt_tensor(m, i));
    }
    assert_int_equal(trit_gpt_num_trainable(m), trainable);
    assert_int_equal(trainable, L * 4 * (C + 3 * C + C + C + C + 4 * C + 4 * C + C));
    trit_gpt_free(plain);
    trit_gpt_free(m);
}

static void test_spec(void **state) {
    (void)state;
    trit_adapter_config a, b;
    assert_int_equal(trit_adapter_parse_lora("r=16,alpha=32,dropout=0.05,targets=c_attn,attn.c_proj,c_fc,rslora", &a), TRIT_OK);
    assert_int_equal(a.r, 16);
    assert_true(a.alpha == 32 && a.dropout == 0.05 && a.rslora);
    assert_string_equal(a.targets, "c_attn,attn.c_proj,c_fc");
    assert_true(fabs(trit_adapter_scale(&a) - 32 / 4.0) < 1e-12);  // rslora: alpha / sqrt(r)
    char buf[256];
    assert_int_equal(trit_adapter_format_lora(&a, buf, sizeof buf), TRIT_OK);
    assert_int_equal(trit_adapter_parse_lora(buf, &b), TRIT_OK);
    assert_memory_equal(&a, &b, sizeof a);
    assert_int_equal(trit_adapter_parse_lora("", &a), TRIT_OK);  // PEFT's defaults
    assert_true(a.r == 8 && a.alpha == 8 && a.dropout == 0 && !a.rslora && strcmp(a.targets, "c_attn") == 0);
    assert_true(fabs(trit_adapter_scale(&a) - 1.0) < 1e-12);
    // PEFT's matching: the name, or its tail after a dot; "c_proj" takes both projections.
    assert_int_equal(trit_adapter_parse_lora("targets=c_proj", &a), TRIT_OK);
    assert_true(trit_adapter_targets(&a, "h.0.attn.c_proj") && trit_adapter_targets(&a, "h.3.mlp.c_proj"));
    assert_false(trit_adapter_targets(&a, "h.0.attn.c_attn"));
    assert_int_equal(trit_adapter_parse_lora("targets=h.1.attn.c_attn,transformer.h.0.mlp.c_fc", &a), TRIT_OK);
    assert_true(trit_adapter_targets(&a, "h.1.attn.c_attn") && trit_adapter_targets(&a, "h.0.mlp.c_fc"));
    assert_false(trit_adapter_targets(&a, "h.0.attn.c_attn") || trit_adapter_targets(&a, "h.1.mlp.c_fc"));
    assert_false(trit_adapter_targets(&a, "h.11.attn.c_attn"));  // "h.1.attn.c_attn" is not a tail of it after a dot
    const char *bad[] = {"r=0", "r=2.5", "r=1e60", "alpha=-1", "dropout=1", "foo=3", "r=x", "targets=", "c_attn"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(trit_adapter_parse_lora(bad[i], &a), TRIT_OK);
        assert_non_null(strstr(trit_last_error(), "--lora"));
    }
}

// Bad adapters are refused when the model is made, with what to do.
static void test_bad_adapters(void **state) {
    (void)state;
    trit_gpt_config c = config("targets=q_proj");
    assert_null(trit_gpt_new(&c, 1));
    assert_non_null(strstr(trit_last_error(), "'q_proj' matches no module"));
    c = config("r=33,targets=c_fc");  // c_fc is (4C, C) = (128, 32): r <= 32
    assert_null(trit_gpt_new(&c, 1));
    assert_non_null(strstr(trit_last_error(), "larger than h.0.mlp.c_fc (128 x 32)"));
    c = config("r=32,targets=c_fc");
    trit_gpt *m = trit_gpt_new(&c, 1);
    assert_non_null(m);
    trit_adapter_config again;
    assert_int_equal(trit_adapter_parse_lora("r=2", &again), TRIT_OK);
    assert_int_equal(trit_gpt_add_adapter(m, &again, 1), TRIT_ERR_STATE);  // one adapter per model
    trit_gpt_free(m);
}

// With B = 0 the adapted model computes the base's logits; with B drawn, the graph and the
// decoder (one token at a time and a prompt at once) agree.
static void test_graph_and_decoder(void **state) {
    (void)state;
    trit_gpt_config pc = config(NULL), lc = config(ALL);
    trit_gpt *plain = trit_gpt_new(&pc, 9), *m = trit_gpt_new(&lc, 9);
    float *base = malloc(sizeof(float) * T * V), *g = malloc(sizeof(float) * T * V), *d = malloc(sizeof(float) * T * V);
    graph_logits(plain, base);
    graph_logits(m, g);
    assert_true(max_diff(base, g, T * V) <= 1e-6f * max_abs(base, T * V));
    randomize_b(m, 0.2);
    graph_logits(m, g);
    assert_true(max_diff(base, g, T * V) > 0.05f * max_abs(base, T * V));  // the adapter acts
    decode_logits(m, d);
    assert_true(max_diff(g, d, T * V) <= 1e-5f * max_abs(g, T * V));
    int32_t toks[T];
    for (int t = 0; t < T; t++) toks[t] = token(t);
    float last[V];
    trit_gpt_cache *k = trit_gpt_cache_new(m);
    assert_int_equal(trit_gpt_prefill(m, k, toks, T, last), TRIT_OK);
    assert_true(max_diff(last, d + (T - 1) * V, V) <= 1e-5f * max_abs(last, V));
    trit_gpt_cache_free(k);
    free(base), free(g), free(d);
    trit_gpt_free(plain);
    trit_gpt_free(m);
}

// Merging adds s B A into each W: the same outputs without the adapter's product; unmerging
// gives the weights and outputs back (within 1e-6).
static void test_merge_unmerge(void **state) {
    (void)state;
    trit_gpt_config lc = config("r=4,alpha=16,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj,rslora");
    trit_gpt *m = trit_gpt_new(&lc, 4);
    randomize_b(m, 0.1);
    const trit_tensor *w = trit_gpt_find(m, "h.0.mlp.c_fc.weight");
    const int64_t n = trit_tensor_numel(w);
    float *w0 = malloc(sizeof(float) * (size_t)n);
    memcpy(w0, trit_tensor_ptr(w), sizeof(float) * (size_t)n);
    float *a = malloc(sizeof(float) * T * V), *b = malloc(sizeof(float) * T * V), *d = malloc(sizeof(float) * T * V);
    graph_logits(m, a);
    assert_int_equal(trit_gpt_merge_adapters(m), TRIT_OK);
    assert_true(trit_gpt_adapters_merged(m));
    assert_int_equal(trit_gpt_merge_adapters(m), TRIT_ERR_STATE);
    assert_true(max_diff(w0, trit_tensor_ptr(w), n) > 1e-3f);
    graph_logits(m, b);
    assert_true(max_diff(a, b, T * V) <= 1e-5f * max_abs(a, T * V));
    decode_logits(m, d);  // the decoder skips a merged adapter too
    assert_true(max_diff(a, d, T * V) <= 1e-5f * max_abs(a, T * V));
    assert_int_equal(trit_gpt_unmerge_adapters(m), TRIT_OK);
    assert_false(trit_gpt_adapters_merged(m));
    assert_true(max_diff(w0, trit_tensor_ptr(w), n) <= 1e-6f);
    graph_logits(m, b);
    assert_true(max_diff(a, b, T * V) <= 1e-6f);
    free(w0), free(a), free(b), free(d);
    trit_gpt_free(m);
}

// A training step's gradients reach only the adapter: the base has no gradient buffer; with B =
// 0 every A gets a zero gradient and every B a non-zero one.
static void test_gradients(void **state) {
    (void)state;
    trit_gpt_config lc = config("r=4,alpha=8,dropout=0.1,targets=c_attn,mlp.c_proj");
    trit_gpt *m = trit_gpt_new(&lc, 2);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, 2, T, &gg), TRIT_OK);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets);
    for (int t = 0; t < 2 * T; t++) idx[t] = token(t), tg[t] = token(t + 1);
    trit_graph_set_rng(gg.graph, 1, 0);
    trit_graph_zero_grad(gg.graph);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
    int pairs = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        const bool lora_a = strstr(t->name, "lora_A") != NULL, lora_b = strstr(t->name, "lora_B") != NULL;
        if (!lora_a && !lora_b) {
            assert_null(t->grad);
            continue;
        }
        assert_non_null(t->grad);
        float most = max_abs(trit_tensor_ptr(t->grad), trit_tensor_numel(t));
        if (lora_a) assert_true(most == 0.0f);
        else assert_true(most > 0.0f), pairs++;
    }
    assert_int_equal(pairs, 2 * L);
    trit_gpt_graph_free(&gg);
    trit_gpt_free(m);
}

// Over a quantized base the decoder runs the integer kernels plus the low-rank product: its
// logits stay within int8's tolerance of the graph's (decoded weights + adapter) and far from
// the base's alone.
static void test_quantized_base(void **state) {
    (void)state;
    trit_gpt_config lc = config(ALL);
    lc.n_embd = 64;  // the integer kernels take groups of 64
    trit_gpt *m = trit_gpt_new(&lc, 6);
    trit_quant_spec s = trit_quant_spec_default(TRIT_QINT8);
    trit_quantize_report r;
    assert_int_equal(trit_gpt_quantize(m, &s, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    assert_int_equal(r.tensors, 4 * L);  // the base's matrices, not the adapter's
    float *base = malloc(sizeof(float) * T * V), *g = malloc(sizeof(float) * T * V), *d = malloc(sizeof(float) * T * V);
    decode_logits(m, base);
    randomize_b(m, 0.3);
    graph_logits(m, g);
    decode_logits(m, d);
    const float tol = 0.03f * max_abs(g, T * V);
    assert_true(max_diff(g, d, T * V) <= tol);
    assert_true(max_diff(base, d, T * V) > 10 * tol);
    assert_true(max_diff(g, d, T * V) > 0);  // the integer kernels ran
    free(base), free(g), free(d);
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parameters),        cmocka_unit_test(test_spec),
        cmocka_unit_test(test_bad_adapters),      cmocka_unit_test(test_graph_and_decoder),
        cmocka_unit_test(test_merge_unmerge),     cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_quantized_base),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
