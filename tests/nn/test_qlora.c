// QLoRA: a LoRA model whose frozen base is kept only as codes (trit_gpt_use_quantized_base). A
// training step's loss and adapter gradients equal those of the same step over the dequantized
// base (f32 parameters holding the decoded values), the base matrices hold no f32 values, and
// bad uses are refused.
//
// Tolerance: both graphs multiply by the same decoded values (qweight.h decodes the codes a chunk
// of rows at a time into the GEMM's operand), so the only difference is the order of fp32 sums:
// in backward, dx = dy W sums over W's rows chunk by chunk. A sum of n terms reordered moves by at
// most (n - 1) u sum|terms| (u = 2^-24); with n <= 4C = 256 that is 1.5e-5 of the sum of
// magnitudes, which, carried through two blocks, we bound by 1e-4 of the largest gradient (and
// 1e-5 of the loss, whose forward sums run over K in the same order in both graphs). At these
// sizes every matrix decodes in one chunk and the results are bit-identical (measured); the
// bound is for matrices of more than TRIT_QW_CHUNK_BYTES decoded.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trit/trit.h"

enum { B = 2, T = 12, V = 61 };

static trit_gpt *lora_model(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 64, c.n_head = 2, c.seq_len = 32, c.vocab_size = V;
    assert_int_equal(trit_adapter_parse_lora("r=4,alpha=8,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj", &c.adapter), TRIT_OK);
    trit_gpt *m = trit_gpt_new(&c, 21);
    assert_non_null(m);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)  // B != 0, so A's gradients are not zero
        if (strstr(trit_gpt_tensor(m, i)->name, "lora_B")) trit_tensor_fill_normal(trit_gpt_tensor(m, i), 0, 0.1, 2, (uint64_t)i);
    return m;
}

// One forward and backward; the loss.
static float step(trit_gpt *m) {
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, B, T, &gg), TRIT_OK);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets);
    for (int t = 0; t < B * T; t++) idx[t] = (t * 13 + 5) % V, tg[t] = (t * 13 + 18) % V;
    trit_graph_zero_grad(gg.graph);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
    const float loss = *(const float *)trit_tensor_ptr(gg.loss);
    trit_gpt_graph_free(&gg);
    return loss;
}

static void check(trit_dtype dt, int64_t group, int64_t dq) {
    trit_gpt *q = lora_model(), *f = lora_model();
    trit_quant_spec s = trit_quant_spec_default(dt);
    s.group_size = group;
    s.double_quant_block = dq;
    trit_quantize_report r;
    assert_int_equal(trit_gpt_quantize(q, &s, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    assert_int_equal(trit_gpt_quantize(f, &s, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);  // f: the decoded values in f32
    size_t before = 0, after = 0;
    trit_flat_block(trit_gpt_flat(q), TRIT_F32, &before);
    assert_int_equal(trit_gpt_use_quantized_base(q), TRIT_OK);
    trit_flat_block(trit_gpt_flat(q), TRIT_F32, &after);
    const trit_tensor *w = trit_gpt_find(q, "h.1.mlp.c_fc.weight");
    assert_null(w->data);  // no f32 copy of the base kept
    assert_true(before - after >= sizeof(float) * 2 * (3 + 1 + 4 + 4) * 64 * 64);
    const float lq = step(q), lf = step(f);
    assert_true(fabsf(lq - lf) <= 1e-5f * fabsf(lf));
    int grads = 0;
    for (int i = 0; i < trit_gpt_num_tensors(q); i++) {
        const trit_tensor *a = trit_gpt_tensor(q, i), *b = trit_gpt_tensor(f, i);
        assert_string_equal(a->name, b->name);
        if (!strstr(a->name, ".lora_")) {
            assert_null(a->grad);
            continue;
        }
        const float *ga = trit_tensor_ptr(a->grad), *gb = trit_tensor_ptr(b->grad);
        float most = 0, diff = 0;
        for (int64_t k = 0; k < trit_tensor_numel(a); k++) most = fmaxf(most, fabsf(gb[k])), diff = fmaxf(diff, fabsf(ga[k] - gb[k]));
        assert_true(most > 0);
        assert_true(diff <= 1e-4f * most);
        grads++;
    }
    assert_int_equal(grads, 2 * 4 * 2);
    trit_gpt_free(q);
    trit_gpt_free(f);
}

static void test_nf4_double_quant(void **state) {
    (void)state;
    check(TRIT_NF4, 64, 256);
}

static void test_int8(void **state) {
    (void)state;
    check(TRIT_QINT8, TRIT_QGROUP_CHANNEL, 0);
}

static void test_int4(void **state) {
    (void)state;
    check(TRIT_QINT4, 64, 0);
}

static void test_ternary(void **state) {
    (void)state;
    check(TRIT_TERNARY, TRIT_QGROUP_TENSOR, 0);
}

// Without an adapter the base would need gradients; a format no decoding kernel takes is refused.
static void test_refused(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 1, c.n_embd = 64, c.n_head = 2, c.seq_len = 16, c.vocab_size = V;
    trit_gpt *m = trit_gpt_new(&c, 1);
    trit_quant_spec s = trit_quant_spec_default(TRIT_NF4);
    trit_quantize_report r;
    assert_int_equal(trit_gpt_quantize(m, &s, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    assert_int_equal(trit_gpt_use_quantized_base(m), TRIT_ERR_STATE);
    assert_non_null(strstr(trit_last_error(), "give the model an adapter first"));
    trit_gpt_free(m);
    assert_int_equal(trit_adapter_parse_lora("r=2", &c.adapter), TRIT_OK);
    m = trit_gpt_new(&c, 1);
    s = trit_quant_spec_default(TRIT_QINT4);
    s.scheme = TRIT_QSCHEME_AFFINE;  // zero points: no integer kernel
    s.group_size = 64;
    assert_int_equal(trit_gpt_quantize(m, &s, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    assert_int_equal(trit_gpt_use_quantized_base(m), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "no decoding kernel"));
    assert_non_null(trit_gpt_find(m, "h.0.attn.c_attn.weight")->data);  // nothing dropped
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nf4_double_quant), cmocka_unit_test(test_int8), cmocka_unit_test(test_int4),
        cmocka_unit_test(test_ternary),          cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
