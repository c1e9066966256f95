// Every recompute policy (attn, mlp, block, on all blocks or the first few) gives the loss and
// gradients of no recompute bit for bit, with dropout on, in fp32 and bf16, over two
// micro-batches; each holds less activation memory than none, block the least; SwiGLU, RoPE and
// SubLN programs split into the same halves. A graph planned only reports the same memory and
// refuses to run.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <stdlib.h>
#include <string.h>

enum { B = 2, T = 16, V = 41, MICRO = 2 };

static trit_gpt *model(trit_precision p, bool variant) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 3, c.n_embd = 32, c.n_head = 4, c.seq_len = T, c.vocab_size = V, c.dropout = 0.1;
    if (variant) c.mlp = TRIT_MLP_SWIGLU, c.pos = TRIT_POS_ROPE, c.norm = TRIT_NORM_RMS, c.subln = true;
    trit_gpt *m = trit_gpt_new(&c, 5);
    assert_non_null(m);
    const trit_compute_policy pol = trit_precision_policy(p, TRIT_MATMUL_HIGHEST);
    assert_int_equal(trit_gpt_set_policy(m, &pol), TRIT_OK);
    return m;
}

static size_t grad_bytes(const trit_gpt *m) {
    size_t total = sizeof(float) * MICRO;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) total += trit_tensor_nbytes(trit_gpt_tensor(m, i)->grad);
    return total;
}

// One step of MICRO micro-batches: every gradient, then the losses (malloc'ed).
static float *step(trit_gpt *m, trit_gpt_graph *gg) {
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        memset(t->grad->data, 0, trit_tensor_nbytes(t->grad));
    }
    trit_graph_set_grad_scale(gg->graph, 1.0 / MICRO);
    float *out = malloc(grad_bytes(m));
    float *losses = (float *)((char *)out + grad_bytes(m)) - MICRO;
    for (int micro = 0; micro < MICRO; micro++) {
        int32_t *x = gg->idx->data, *y = gg->targets->data;
        for (int i = 0; i < B * T; i++) {
            x[i] = (int32_t)(trit_rng_u32(3, (uint64_t)micro, (uint64_t)i) % V);
            y[i] = (x[i] * 5 + 2) % V;
        }
        trit_graph_set_rng(gg->graph, 8, (uint64_t)micro);
        assert_int_equal(trit_graph_forward(gg->graph), TRIT_OK);
        losses[micro] = *(const float *)gg->loss->data;
        assert_int_equal(trit_graph_backward(gg->graph), TRIT_OK);
    }
    char *at = (char *)out;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *g = trit_gpt_tensor(m, i)->grad;
        memcpy(at, g->data, trit_tensor_nbytes(g));
        at += trit_tensor_nbytes(g);
    }
    return out;
}

static int recompute_steps(const trit_graph *g) {
    int n = 0;
    trit_graph_step_info info;
    for (int i = 0; i < trit_graph_num_steps(g); i++) {
        assert_int_equal(trit_graph_step_at(g, i, &info), TRIT_OK);
        n += info.kind == TRIT_STEP_RECOMPUTE;
    }
    return n;
}

typedef struct policy_case {
    trit_recompute_policy policy;
    int64_t blocks;
    const char *name;
} policy_case;

static void same_bits(trit_precision p, bool variant) {
    static const policy_case cases[] = {
        {TRIT_RECOMPUTE_ATTN, INT64_MAX, "attn"},  {TRIT_RECOMPUTE_MLP, INT64_MAX, "mlp"},
        {TRIT_RECOMPUTE_BLOCK, INT64_MAX, "block"}, {TRIT_RECOMPUTE_BLOCK, 1, "block x1"},
        {TRIT_RECOMPUTE_MLP, 2, "mlp x2"},
    };
    trit_gpt *m = model(p, variant);
    trit_gpt_graph plain;
    assert_int_equal(trit_gpt_build_train(m, B, T, &plain), TRIT_OK);
    trit_graph_memory mp;
    assert_int_equal(trit_graph_memory_report(plain.graph, &mp), TRIT_OK);
    float *ref = step(m, &plain);
    trit_gpt_graph_free(&plain);
    size_t arena[5];
    for (int k = 0; k < 5; k++) {
        assert_int_equal(trit_gpt_set_recompute_blocks(m, cases[k].policy, cases[k].blocks), TRIT_OK);
        trit_gpt_graph gg;
        assert_int_equal(trit_gpt_build_train(m, B, T, &gg), TRIT_OK);
        trit_graph_memory mr;
        assert_int_equal(trit_graph_memory_report(gg.graph, &mr), TRIT_OK);
        arena[k] = mr.arena_bytes;
        print_message("%s%s %-8s: %d recompute steps, arena %zu -> %zu bytes\n", trit_precision_name(p),
                      variant ? " swiglu/rope/subln" : "", cases[k].name, recompute_steps(gg.graph), mp.arena_bytes,
                      mr.arena_bytes);
        assert_true(recompute_steps(gg.graph) > 0);
        assert_true(mr.arena_bytes < mp.arena_bytes);
        // Planned only: the same report, no arena, and it does not run.
        trit_gpt_graph planned;
        assert_int_equal(trit_gpt_plan_train(m, B, T, &planned), TRIT_OK);
        trit_graph_memory mq;
        assert_int_equal(trit_graph_memory_report(planned.graph, &mq), TRIT_OK);
        assert_memory_equal(&mq, &mr, sizeof mq);
        assert_int_equal(trit_graph_num_steps(planned.graph), 0);
        assert_int_equal(trit_graph_forward(planned.graph), TRIT_ERR_STATE);
        assert_non_null(strstr(trit_last_error(), "plan its memory only"));
        trit_gpt_graph_free(&planned);
        float *got = step(m, &gg);
        assert_memory_equal(got, ref, grad_bytes(m));
        free(got);
        trit_gpt_graph_free(&gg);
    }
    assert_true(arena[2] < arena[0] && arena[2] < arena[1]);  // the whole block holds least
    assert_true(arena[2] < arena[3]);                          // all blocks less than one
    free(ref);
    assert_int_equal(trit_gpt_set_recompute_blocks(m, (trit_recompute_policy)9, 1), TRIT_ERR_INVALID);
    assert_int_equal(trit_gpt_set_recompute_blocks(m, TRIT_RECOMPUTE_MLP, -1), TRIT_ERR_INVALID);
    trit_gpt_free(m);
}

static void test_fp32(void **state) {
    (void)state;
    same_bits(TRIT_PRECISION_FP32, false);
}

static void test_bf16(void **state) {
    (void)state;
    same_bits(TRIT_PRECISION_BF16, false);
}

static void test_variant(void **state) {
    (void)state;
    same_bits(TRIT_PRECISION_FP32, true);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_bf16),
        cmocka_unit_test(test_variant),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
