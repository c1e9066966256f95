// Bottleneck (Houlsby) adapters on the GPT: their parameters (down Kaiming-uniform, up zero, the
// base frozen), the identity at initialisation, graph and decoder agreeing once up is not zero,
// gradients reaching only the adapters, and what is refused (a width above the model's, merge).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trit/trit.h"

enum { T = 12, V = 53, C = 32, L = 2, R = 8 };

static trit_gpt_config config(bool adapter) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = L, c.n_embd = C, c.n_head = 2, c.seq_len = 32, c.vocab_size = V;
    if (adapter) c.adapter = trit_adapter_bottleneck(R);
    return c;
}

static int32_t token(int t) { return (t * 5 + 2) % V; }

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

static void test_parameters_and_identity(void **state) {
    (void)state;
    trit_gpt_config pc = config(false), bc = config(true);
    trit_gpt *plain = trit_gpt_new(&pc, 4), *m = trit_gpt_new(&bc, 4);
    assert_non_null(m);
    const int base = trit_gpt_num_tensors(plain);
    assert_int_equal(trit_gpt_num_tensors(m), base + L * 2 * 4);
    for (int i = 0; i < base; i++) assert_true(trit_gpt_tensor(m, i)->flags & TRIT_FLAG_FROZEN);
    const trit_tensor *down = trit_gpt_find(m, "h.1.mlp.adapter.down.weight"), *up = trit_gpt_find(m, "h.0.attn.adapter.up.weight");
    const trit_tensor *ub = trit_gpt_find(m, "h.0.attn.adapter.up.bias"), *db = trit_gpt_find(m, "h.0.attn.adapter.down.bias");
    assert_true(down->shape[0] == R && down->shape[1] == C && up->shape[0] == C && up->shape[1] == R);
    assert_true(ub->ndim == 1 && ub->shape[0] == C && db->ndim == 1 && db->shape[0] == R);
    const float bound = 1.0f / sqrtf((float)C), *d = trit_tensor_ptr(down), *u = trit_tensor_ptr(up);
    float lo = 1, hi = -1;
    for (int64_t i = 0; i < trit_tensor_numel(down); i++) lo = fminf(lo, d[i]), hi = fmaxf(hi, d[i]);
    assert_true(lo >= -bound && hi <= bound && hi - lo > bound);
    for (int64_t i = 0; i < trit_tensor_numel(up); i++) assert_true(u[i] == 0.0f);
    assert_int_equal(trit_gpt_num_trainable(m), L * 2 * (R * C + R + C * R + C));
    float *a = malloc(sizeof(float) * T * V), *b = malloc(sizeof(float) * T * V);
    graph_logits(plain, a);
    graph_logits(m, b);
    assert_true(max_diff(a, b, T * V) <= 1e-6f * max_abs(a, T * V));  // a fresh adapter is the identity
    free(a), free(b);
    trit_gpt_free(plain);
    trit_gpt_free(m);
}

static void test_graph_decoder_gradients(void **state) {
    (void)state;
    trit_gpt_config bc = config(true);
    trit_gpt *m = trit_gpt_new(&bc, 5);
    // Gradients first (up = 0): only up's weight and bias receive any, down's are zero.
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, 1, T, &gg), TRIT_OK);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets);
    for (int t = 0; t < T; t++) idx[t] = token(t), tg[t] = token(t + 1);
    trit_graph_zero_grad(gg.graph);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        if (!strstr(t->name, ".adapter.")) {
            assert_null(t->grad);
            continue;
        }
        const float g = max_abs(trit_tensor_ptr(t->grad), trit_tensor_numel(t));
        if (strstr(t->name, ".up.")) assert_true(g > 0);
        else assert_true(g == 0);
    }
    trit_gpt_graph_free(&gg);
    // With up drawn, the adapter acts, and the decoder computes what the graph does.
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        if (strstr(trit_gpt_tensor(m, i)->name, ".adapter.up.")) trit_tensor_fill_normal(trit_gpt_tensor(m, i), 0, 0.3, 3, (uint64_t)i);
    float *g = malloc(sizeof(float) * T * V), *d = malloc(sizeof(float) * T * V);
    graph_logits(m, g);
    trit_gpt_cache *k = trit_gpt_cache_new(m);
    for (int t = 0; t < T; t++) assert_int_equal(trit_gpt_decode(m, k, token(t), d + t * V), TRIT_OK);
    trit_gpt_cache_free(k);
    assert_true(max_diff(g, d, T * V) <= 1e-5f * max_abs(g, T * V));
    trit_gpt_config pc = config(false);
    trit_gpt *plain = trit_gpt_new(&pc, 5);
    graph_logits(plain, d);
    assert_true(max_diff(g, d, T * V) > 0.05f * max_abs(d, T * V));
    free(g), free(d);
    trit_gpt_free(plain);
    trit_gpt_free(m);
}

static void test_refused(void **state) {
    (void)state;
    trit_gpt_config c = config(false);
    c.adapter = trit_adapter_bottleneck(C + 1);
    assert_null(trit_gpt_new(&c, 1));
    assert_non_null(strstr(trit_last_error(), "its size must be in [1, 32]"));
    c.adapter = trit_adapter_bottleneck(0);
    assert_null(trit_gpt_new(&c, 1));
    c = config(true);
    trit_gpt *m = trit_gpt_new(&c, 1);
    assert_int_equal(trit_gpt_merge_adapters(m), TRIT_ERR_STATE);
    assert_non_null(strstr(trit_last_error(), "cannot be merged"));
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parameters_and_identity),
        cmocka_unit_test(test_graph_decoder_gradients),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
