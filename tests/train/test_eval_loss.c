// A checkpoint's loss over a shard's windows through the training graph and through the decoder
// (one token at a time from an empty cache per window): the same up to summation order for an
// fp32 model; for an int4 one (groups of 64, which the integer kernels take) the decoder also
// rounds each token's matmul inputs to int8, which moves the loss a little; bad windows and
// shards are refused. The evaluation graph gives the training graph's forward loss with no
// gradient buffers and a smaller arena.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "trit/trit.h"

enum { T = 24, V = 61 };

static trit_gpt *model(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 64, c.n_head = 4, c.seq_len = T, c.vocab_size = V;
    trit_gpt *m = trit_gpt_new(&c, 9);
    assert_non_null(m);
    // Matrices 8x their initial size: logits far from uniform, so rounding shows in the loss.
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        float *w = t->data;
        for (int64_t j = 0; t->ndim == 2 && j < trit_tensor_numel(t); j++) w[j] *= 8;
    }
    return m;
}

// A shard of n tokens below top.
static const char *shard(const char *name, int64_t n, int32_t top) {
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    assert_non_null(tok);
    for (int64_t i = 0; i < n; i++) tok[i] = (int32_t)(trit_rng_u32(3, 0, (uint64_t)i) % (uint32_t)top);
    const char *path = tfile_path(name);
    assert_int_equal(trit_shard_write(path, tok, n), TRIT_OK);
    free(tok);
    return path;
}

static void test_decoder_matches_graph(void **state) {
    (void)state;
    const char *val = shard("val.bin", 2000, V);
    trit_gpt *m = model();
    double graph = 0, dec = 0;
    int64_t used = 0;
    assert_int_equal(trit_eval_loss(m, val, 3, 2, T, &graph, &used), TRIT_OK);
    assert_int_equal(trit_eval_decode_loss(m, val, 3, 2, T, &dec, &used), TRIT_OK);
    assert_int_equal(used, 3);
    print_message("fp32: graph %.9f, decoder %.9f (diff %.3g)\n", graph, dec, dec - graph);
    assert_true(graph > 4 && fabs(dec - graph) <= 1e-6 * graph);  // log(61) = 4.11 for uniform logits
    // int4 blocks and head: the same weights either way, int8 inputs only in the decoder.
    trit_quant_spec q = trit_quant_spec_default(TRIT_QINT4);
    q.group_size = 64;
    trit_quantize_report r;
    assert_int_equal(trit_gpt_quantize(m, &q, TRIT_QUANTIZE_BLOCKS | TRIT_QUANTIZE_EMBEDDING, &r), TRIT_OK);
    assert_int_equal(trit_eval_loss(m, val, 3, 2, T, &graph, NULL), TRIT_OK);
    assert_int_equal(trit_eval_decode_loss(m, val, 3, 2, T, &dec, NULL), TRIT_OK);
    print_message("int4: graph %.9f, decoder %.9f (diff %.3g)\n", graph, dec, dec - graph);
    assert_true(fabs(dec - graph) > 1e-5 * graph && fabs(dec - graph) <= 1e-2 * graph);
    trit_gpt_free(m);
}

// The evaluation graph against the training graph's forward on the same batch: the same loss
// (same kernels, the head and loss fused in row chunks in both), no gradient buffer made where
// the model had none, and a smaller arena (nothing is held for backward).
static void test_eval_graph_matches_training_forward(void **state) {
    (void)state;
    enum { B = 3 };
    trit_gpt *m = model();
    trit_gpt_graph ev = {0}, tr = {0};
    assert_int_equal(trit_gpt_build_eval(m, B, T, &ev), TRIT_OK);
    assert_null(ev.logits);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) assert_null(trit_gpt_tensor(m, i)->grad);
    assert_int_equal(trit_gpt_build_train(m, B, T, &tr), TRIT_OK);
    int32_t *x = tr.idx->data, *y = tr.targets->data;
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(trit_rng_u32(4, 0, (uint64_t)i) % V);
        y[i] = i % 7 == 0 ? -1 : (int32_t)(trit_rng_u32(4, 1, (uint64_t)i) % V);  // some ignored
    }
    memcpy(ev.idx->data, x, sizeof(int32_t) * B * T);
    memcpy(ev.targets->data, y, sizeof(int32_t) * B * T);
    trit_graph_set_training(tr.graph, false);
    assert_int_equal(trit_graph_forward(tr.graph), TRIT_OK);
    assert_int_equal(trit_graph_forward(ev.graph), TRIT_OK);
    const float want = *(const float *)tr.loss->data, got = *(const float *)ev.loss->data;
    print_message("training forward %.9g, eval graph %.9g\n", want, got);
    assert_true(want > 1.0f && got == want);
    trit_graph_memory me, mt;
    assert_int_equal(trit_graph_memory_report(ev.graph, &me), TRIT_OK);
    assert_int_equal(trit_graph_memory_report(tr.graph, &mt), TRIT_OK);
    print_message("arena: eval %zu bytes, training %zu\n", me.arena_bytes, mt.arena_bytes);
    assert_int_equal(me.num_backward_nodes, 0);
    assert_true(me.arena_bytes > 0 && 2 * me.arena_bytes < mt.arena_bytes);
    trit_gpt_graph_free(&tr);
    trit_gpt_graph_free(&ev);
    trit_gpt_free(m);
}

static void test_bad_input(void **state) {
    (void)state;
    const char *val = shard("val.bin", 2000, V), *wide = shard("wide.bin", 2000, V + 5);
    trit_gpt *m = model();
    double loss = -1;
    assert_int_equal(trit_eval_decode_loss(m, val, 1, 1, T + 1, &loss, NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "context"));
    assert_int_equal(trit_eval_decode_loss(m, wide, 1, 1, T, &loss, NULL), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "another tokenizer"));
    assert_int_equal(trit_eval_decode_loss(m, tfile_path("missing.bin"), 1, 1, T, &loss, NULL), TRIT_ERR_IO);
    assert_true(loss == -1);
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decoder_matches_graph),
        cmocka_unit_test(test_eval_graph_matches_training_forward),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
