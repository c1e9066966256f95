// A GPT under a compute policy and with 16-bit parameters: the model keeps its policy for every
// graph it builds, 16-bit parameters decode exactly like f32 ones holding the same values, and a
// bf16 training graph's loss stays near the f32 one (stated tolerance).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { B = 4, T = 32, V = 61 };

static trit_gpt *small_model(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2;
    c.n_embd = 64;
    c.n_head = 4;
    c.seq_len = T;
    c.vocab_size = V;
    trit_gpt *m = trit_gpt_new(&c, 3);
    assert_non_null(m);
    return m;
}

// Every parameter rounded to bf16 in place (still f32 storage).
static void round_params(trit_gpt *m) {
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        float *d = t->data;
        for (int64_t j = 0; j < trit_tensor_numel(t); j++) d[j] = trit_bf16_to_f32(trit_f32_to_bf16(d[j]));
    }
}

static void decode_logits(trit_gpt *m, float *logits /* (T, V) */) {
    trit_gpt_cache *c = trit_gpt_cache_new(m);
    assert_non_null(c);
    for (int t = 0; t < 12; t++) assert_int_equal(trit_gpt_decode(m, c, (int32_t)(t * 7 % V), logits + t * V), TRIT_OK);
    trit_gpt_cache_free(c);
}

static void test_bf16_params_decode_like_f32(void **state) {
    (void)state;
    trit_gpt *a = small_model(), *b = small_model();
    assert_int_equal(trit_gpt_set_param_dtype(a, TRIT_BF16), TRIT_OK);
    assert_int_equal(trit_gpt_tensor(a, 0)->dtype, TRIT_BF16);
    round_params(b);
    static float la[12 * V], lb[12 * V];
    decode_logits(a, la);
    decode_logits(b, lb);
    assert_memory_equal(la, lb, sizeof la);
    assert_int_equal(trit_gpt_set_param_dtype(a, TRIT_I8), TRIT_ERR_DTYPE);
    trit_gpt_free(a);
    trit_gpt_free(b);
}

static double train_loss(trit_gpt *m) {
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, B, T, &gg), TRIT_OK);
    int32_t *x = gg.idx->data, *y = gg.targets->data;
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(trit_rng_u32(5, 0, (uint64_t)i) % V);
        y[i] = (x[i] * 5 + 2) % V;
    }
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    const double loss = trit_tensor_get_flat(gg.loss, 0);
    trit_gpt_graph_free(&gg);
    return loss;
}

// bf16 matmul inputs round each operand to 8 significant bits; on a random-init model the loss
// (about ln V) moves by far less than 1%.
static void test_policy_reaches_the_graph(void **state) {
    (void)state;
    trit_gpt *m = small_model();
    const double f32 = train_loss(m);
    const trit_compute_policy bf16 = {TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM};
    assert_int_equal(trit_gpt_set_policy(m, &bf16), TRIT_OK);
    assert_int_equal(trit_gpt_get_policy(m).activation, TRIT_BF16);
    const double low = train_loss(m);
    printf("  loss f32 %.6f, bf16 %.6f (rel %.1e)\n", f32, low, fabs(low - f32) / f32);
    assert_true(low != f32 && fabs(low - f32) / f32 < 1e-2);
    const trit_compute_policy bad = {TRIT_F64, TRIT_F64, TRIT_MATMUL_HIGHEST};
    assert_int_equal(trit_gpt_set_policy(m, &bad), TRIT_ERR_DTYPE);
    trit_gpt_free(m);
}

// Loss and every parameter gradient of one forward/backward under `policy` on `threads` threads;
// the model is large enough that the 16-bit row blocks, conversions and GEMMs run in parallel.
static double grads_at(const trit_compute_policy *policy, int threads, float **grads, int64_t *sizes) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 1;
    c.n_embd = 128;
    c.n_head = 4;
    c.seq_len = 128;
    c.vocab_size = V;
    trit_gpt *m = trit_gpt_new(&c, 9);
    assert_non_null(m);
    assert_int_equal(trit_gpt_set_policy(m, policy), TRIT_OK);
    trit_threads_set(threads);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, 2, 128, &gg), TRIT_OK);
    int32_t *x = gg.idx->data, *y = gg.targets->data;
    for (int i = 0; i < 2 * 128; i++) {
        x[i] = (int32_t)(trit_rng_u32(6, 0, (uint64_t)i) % V);
        y[i] = (x[i] * 3 + 1) % V;
    }
    trit_graph_zero_grad(gg.graph);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
    const double loss = trit_tensor_get_flat(gg.loss, 0);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *g = trit_gpt_tensor(m, i)->grad;
        assert_true(i < 63);
        sizes[i] = trit_tensor_numel(g);
        grads[i] = malloc(sizeof(float) * (size_t)trit_tensor_numel(g));
        memcpy(grads[i], g->data, sizeof(float) * (size_t)trit_tensor_numel(g));
    }
    trit_gpt_graph_free(&gg);
    trit_gpt_free(m);
    trit_threads_set(0);
    return loss;
}

// 16-bit activations: 1 and 2 threads give the same loss and gradients, bit for bit.
static void test_lowp_thread_count_independent(void **state) {
    (void)state;
    const trit_compute_policy pols[2] = {{TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM}, {TRIT_F32, TRIT_F16, TRIT_MATMUL_HIGHEST}};
    for (int p = 0; p < 2; p++) {
        float *one[64] = {0}, *two[64] = {0};
        int64_t n1[64], n2[64];
        const double l1 = grads_at(&pols[p], 1, one, n1), l2 = grads_at(&pols[p], 2, two, n2);
        assert_true(l1 == l2);
        int checked = 0;
        for (int i = 0; i < 64 && one[i]; i++, checked++) {
            assert_non_null(two[i]);
            assert_int_equal(n1[i], n2[i]);
            assert_memory_equal(one[i], two[i], sizeof(float) * (size_t)n1[i]);
            free(one[i]);
            free(two[i]);
        }
        assert_true(checked > 8);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_params_decode_like_f32),
        cmocka_unit_test(test_policy_reaches_the_graph),
        cmocka_unit_test(test_lowp_thread_count_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
