// Results do not depend on the thread count: a few training steps of a small model that uses
// most op families give bit-identical losses and parameters with 1 and 2 threads.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <omp.h>
#include <string.h>

enum { B = 4, T = 16, C = 32, V = 29, H = 4, STEPS = 4 };

typedef struct net {
    trit_tensor *emb, *ln_w, *ln_b, *qkv, *proj, *fc, *fc_b, *conv;
} net;

static net make_net(void) {
    net n = {
        trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){V, C}, "emb"),
        trit_tensor_new_param(TRIT_F32, 1, (int64_t[]){C}, "ln_w"),
        trit_tensor_new_param(TRIT_F32, 1, (int64_t[]){C}, "ln_b"),
        trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){3 * C, C}, "qkv"),
        trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){C, C}, "proj"),
        trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){V, C}, "fc"),
        trit_tensor_new_param(TRIT_F32, 1, (int64_t[]){V}, "fc_b"),
        trit_tensor_new_param(TRIT_F32, 4, (int64_t[]){4, 1, 3, 3}, "conv"),
    };
    trit_tensor *all[8] = {n.emb, n.ln_w, n.ln_b, n.qkv, n.proj, n.fc, n.fc_b, n.conv};
    for (int i = 0; i < 8; i++) trit_tensor_fill_normal(all[i], i == 1 ? 1.0 : 0.0, 0.1, 99, (uint64_t)i);
    return n;
}

// Runs STEPS AdamW steps with the given thread count; writes the losses.
static void run(int threads, double *losses, float *final_fc /* (V, C) */) {
    omp_set_num_threads(threads);
    net n = make_net();
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *idx = trit_graph_input(g, TRIT_I32, 2, (int64_t[]){B, T}, "idx");
    trit_tensor *tgt = trit_graph_input(g, TRIT_I32, 2, (int64_t[]){B, T}, "tgt");
    trit_tensor *x = trit_embedding(g, n.emb, idx);                         // (B, T, C)
    trit_tensor *h = trit_layernorm(g, x, n.ln_w, n.ln_b, 1e-5);
    trit_tensor *qkv = trit_linear(g, h, n.qkv, NULL), *parts[3];
    trit_split(g, qkv, -1, 3, (int64_t[]){C, C, C}, parts);
    trit_tensor *a = trit_linear(g, trit_attention(g, parts[0], parts[1], parts[2], H), n.proj, NULL);
    x = trit_add(g, x, trit_dropout(g, a, 0.1));
    // A convolution over the (T, C) plane of each sequence, as a second path.
    trit_tensor *img = trit_reshape(g, x, 4, (int64_t[]){B, 1, T, C});
    trit_tensor *cv = trit_maxpool2d(g, trit_conv2d(g, img, n.conv, NULL, 1, 1), 2, 2, 0);  // (B, 4, T/2, C/2)
    cv = trit_reshape(g, cv, 3, (int64_t[]){B, T, C});
    x = trit_add(g, trit_gelu(g, x), cv);
    trit_tensor *logits = trit_linear(g, x, n.fc, n.fc_b);
    trit_tensor *loss = trit_cross_entropy(g, logits, tgt, -1, TRIT_REDUCE_MEAN);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    trit_tensor *params[8] = {n.emb, n.ln_w, n.ln_b, n.qkv, n.proj, n.fc, n.fc_b, n.conv};
    trit_optim_config cfg = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *opt = trit_optim_new_gpt2(&cfg, params, 8, 0.1);
    assert_non_null(opt);
    int32_t *id = idx->data, *tg = tgt->data;
    for (int i = 0; i < B * T; i++) {
        id[i] = (int32_t)(trit_rng_u32(5, 1, (uint64_t)i) % V);
        tg[i] = (int32_t)(trit_rng_u32(5, 2, (uint64_t)i) % V);
    }
    for (int s = 0; s < STEPS; s++) {
        trit_graph_set_rng(g, 1234, (uint64_t)s);
        trit_optim_zero_grad(opt);
        assert_int_equal(trit_graph_forward(g), TRIT_OK);
        assert_int_equal(trit_graph_backward(g), TRIT_OK);
        double norm;
        assert_int_equal(trit_optim_clip_grads(opt, 1.0, &norm), TRIT_OK);
        assert_int_equal(trit_optim_step(opt, 1e-2), TRIT_OK);
        losses[s] = trit_tensor_get_flat(loss, 0);
    }
    memcpy(final_fc, n.fc->data, sizeof(float) * V * C);
    trit_optim_free(opt);
    trit_graph_free(g);
    for (int i = 0; i < 8; i++) trit_tensor_free(params[i]);
}

static void test_one_and_two_threads_agree(void **state) {
    (void)state;
    double l1[STEPS], l2[STEPS];
    static float f1[V * C], f2[V * C];
    run(1, l1, f1);
    run(2, l2, f2);
    assert_memory_equal(l1, l2, sizeof l1);
    assert_memory_equal(f1, f2, sizeof f1);
    assert_true(l1[STEPS - 1] < l1[0]);  // and it learns
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_one_and_two_threads_agree)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
