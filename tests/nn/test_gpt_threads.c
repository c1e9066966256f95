// A GPT's training is independent of the thread count: 20 AdamW steps (flash attention, fused
// head and loss, clipping, dropout) give bit-identical losses and weights with 1 and 2 threads.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

// Sizes large enough that GEMMs and row kernels really split across threads.
enum { B = 8, T = 64, STEPS = 20 };

static void train(int threads, trit_pos_kind pos, double *losses, float **wte_out) {
    omp_set_num_threads(threads);
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2;
    c.n_embd = 128;
    c.n_head = 4;
    c.seq_len = T;
    c.vocab_size = 67;
    c.dropout = 0.1;
    c.pos = pos;
    trit_gpt *m = trit_gpt_new(&c, 7);
    assert_non_null(m);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, B, T, &gg), TRIT_OK);
    int n = trit_gpt_num_tensors(m);
    trit_tensor **params = calloc((size_t)n, sizeof *params);
    for (int i = 0; i < n; i++) params[i] = trit_gpt_tensor(m, i);
    trit_optim_config oc = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *opt = trit_optim_new_gpt2(&oc, params, n, 0.1);
    assert_non_null(opt);
    int32_t *x = gg.idx->data, *y = gg.targets->data;
    for (int s = 0; s < STEPS; s++) {
        for (int i = 0; i < B * T; i++) {  // a learnable rule: the next token is (t * 3 + 1) mod V
            x[i] = (int32_t)(trit_rng_u32(11, (uint64_t)s, (uint64_t)i) % 67);
            y[i] = (x[i] * 3 + 1) % 67;
        }
        trit_graph_set_rng(gg.graph, 99, (uint64_t)s);
        trit_optim_zero_grad(opt);
        assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
        assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
        double norm;
        assert_int_equal(trit_optim_clip_grads(opt, 1.0, &norm), TRIT_OK);
        assert_int_equal(trit_optim_step(opt, 3e-3), TRIT_OK);
        losses[s] = trit_tensor_get_flat(gg.loss, 0);
    }
    trit_tensor *wte = trit_gpt_find(m, "wte.weight");
    *wte_out = malloc(trit_tensor_nbytes(wte));
    memcpy(*wte_out, wte->data, trit_tensor_nbytes(wte));
    trit_optim_free(opt);
    free(params);
    trit_gpt_graph_free(&gg);
    trit_gpt_free(m);
}

static void check(trit_pos_kind pos) {
    double l1[STEPS], l2[STEPS];
    float *w1, *w2;
    train(1, pos, l1, &w1);
    train(2, pos, l2, &w2);
    assert_memory_equal(l1, l2, sizeof l1);
    assert_memory_equal(w1, w2, sizeof(float) * 67 * 128);
    assert_true(l1[STEPS - 1] < l1[0] - 0.5);  // it learns the rule
    free(w1);
    free(w2);
}

static void test_learned_positions(void **state) {
    (void)state;
    check(TRIT_POS_LEARNED);
}

static void test_rope(void **state) {
    (void)state;
    check(TRIT_POS_ROPE);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_learned_positions), cmocka_unit_test(test_rope)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
