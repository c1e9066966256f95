// Quantization-aware training: the GPT graph fake-quantizes each block matrix (and its input
// per token); freezing with trit_gpt_quantize gives a model whose graph computes exactly the
// QAT graph's loss (weights-only QAT); `trit train --qat` trains, resumes bit-exactly, and
// rejects a group that does not divide the rows.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "graph/graph_internal.h"
#include "scratch.h"
#include "trit/trit.h"

enum { B = 2, T = 16, V = 50 };

static trit_gpt *model(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 64, c.n_head = 4, c.seq_len = T, c.vocab_size = V;
    trit_gpt *m = trit_gpt_new(&c, 5);
    assert_non_null(m);
    return m;
}

static double loss_of(trit_gpt *m, int *fq_nodes) {
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, B, T, &gg), TRIT_OK);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets);
    for (int i = 0; i < B * T; i++) idx[i] = (i * 13 + 1) % V, tg[i] = (i * 7 + 2) % V;
    trit_graph_set_training(gg.graph, false);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    const double l = trit_tensor_get_flat(gg.loss, 0);
    if (fq_nodes) *fq_nodes = trit_graph_count_op(gg.graph, "fake_quant");
    trit_gpt_graph_free(&gg);
    return l;
}

static void test_freeze_gives_the_qat_loss(void **state) {
    (void)state;
    const trit_dtype dts[3] = {TRIT_QINT8, TRIT_QINT4, TRIT_F8_E4M3};
    for (int d = 0; d < 3; d++) {
        trit_gpt *m = model();
        const double plain = loss_of(m, NULL);
        trit_quant_spec q = trit_quant_spec_default(dts[d]);
        if (dts[d] == TRIT_QINT4) q.group_size = 32;
        const trit_fake_quant_spec w = {.dtype = dts[d], .group_size = q.group_size, .mode = TRIT_FQ_GROUPS};
        const trit_fake_quant_spec a = {.dtype = TRIT_QINT8, .mode = TRIT_FQ_TOKEN};
        assert_int_equal(trit_gpt_set_qat(m, &w, &a), TRIT_OK);
        int nodes = 0;
        const double both = loss_of(m, &nodes);
        assert_int_equal(nodes, 2 * 2 * 4);  // layers x (weight + input) x matrices
        assert_int_equal(trit_gpt_set_qat(m, &w, NULL), TRIT_OK);
        const double qat = loss_of(m, &nodes);
        assert_int_equal(nodes, 2 * 4);
        assert_true(qat != plain && both != qat);
        assert_int_equal(trit_gpt_set_qat(m, NULL, NULL), TRIT_OK);
        trit_quantize_report r;
        assert_int_equal(trit_gpt_quantize(m, &q, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
        assert_true(loss_of(m, &nodes) == qat);  // frozen weights: the very values QAT trained through
        assert_int_equal(nodes, 0);
        trit_gpt_free(m);
    }
}

// A ternary (BitNet) model frozen for inference decodes the tokens the QAT graph's argmax
// gives: the decoder's integer kernels see the weights and per-token int8 inputs the fake
// quantization computed.
static void test_frozen_ternary_decodes_like_the_graph(void **state) {
    (void)state;
    trit_gpt_config g = trit_gpt_config_default();
    g.n_layer = 2, g.n_embd = 128, g.n_head = 4, g.seq_len = T, g.vocab_size = V;
    trit_gpt *m = trit_gpt_new(&g, 21);
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "data", "x.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "ternary", "1"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&c), TRIT_OK);
    assert_int_equal(trit_train_set_qat(m, &c), TRIT_OK);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, 1, T, &gg), TRIT_OK);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets), tokens[T];
    for (int i = 0; i < T; i++) tokens[i] = idx[i] = (i * 13 + 1) % V, tg[i] = 0;
    trit_graph_set_training(gg.graph, false);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    int want[T];
    const float *lg = trit_tensor_ptr(gg.logits);
    for (int t = 0; t < T; t++) {
        want[t] = 0;
        for (int v = 1; v < V; v++)
            if (lg[t * V + v] > lg[t * V + want[t]]) want[t] = v;
    }
    trit_gpt_graph_free(&gg);
    assert_int_equal(trit_train_freeze_qat(m, &c), TRIT_OK);
    int frozen = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *q = trit_gpt_quantized(m, i);
        if (q) frozen++, assert_int_equal(q->dtype, TRIT_TERNARY);
    }
    assert_int_equal(frozen, 2 * 4);
    trit_gpt_cache *k = trit_gpt_cache_new(m);
    float out[V];
    for (int t = 0; t < T; t++) {
        assert_int_equal(trit_gpt_decode(m, k, tokens[t], out), TRIT_OK);
        int best = 0;
        for (int v = 1; v < V; v++)
            if (out[v] > out[best]) best = v;
        assert_int_equal(best, want[t]);
    }
    trit_gpt_cache_free(k);
    trit_gpt_free(m);
}

static void test_train_flags(void **state) {
    (void)state;
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "qat", "int4"), TRIT_OK);
    assert_int_equal(c.qat, TRIT_QAT_INT4);
    assert_int_not_equal(trit_train_config_set(&c, "qat", "int3"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "qat-acts", "off"), TRIT_OK);
    assert_int_equal(c.qat_acts, 0);
    assert_int_not_equal(trit_train_config_set(&c, "qat-acts", "channel"), TRIT_OK);
}

// --ternary is the BitNet recipe: ternary QAT, lr 4e-3, two stages, no decay in the second; each
// part can still be set on its own.
static void test_ternary_recipe(void **state) {
    (void)state;
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "data", "x.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "ternary", "1"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&c), TRIT_OK);
    assert_int_equal(c.qat, TRIT_QAT_TERNARY);
    assert_true(c.lr == 4e-3);
    assert_int_equal(c.schedule, TRIT_SCHEDULE_TWO_STAGE);
    assert_true(c.stage2_at == 0.5 && c.stage2_lr == 0.5 && c.stage2_weight_decay == 0.0 && c.weight_decay == 0.1);
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "data", "x.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "ternary", "1"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "lr", "3e-3"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "schedule", "cosine"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&c), TRIT_OK);
    assert_true(c.lr == 3e-3);
    assert_int_equal(c.schedule, TRIT_SCHEDULE_COSINE);
    trit_train_config_init(&c);  // plain runs keep their defaults
    assert_int_equal(trit_train_config_set(&c, "data", "x.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&c), TRIT_OK);
    assert_true(c.lr == 1e-3 && c.schedule == TRIT_SCHEDULE_COSINE && c.stage2_weight_decay == c.weight_decay);
    assert_int_not_equal(trit_train_config_set(&c, "stage2-at", "1.5"), TRIT_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_freeze_gives_the_qat_loss),
        cmocka_unit_test(test_frozen_ternary_decodes_like_the_graph),
        cmocka_unit_test(test_train_flags),
        cmocka_unit_test(test_ternary_recipe),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
