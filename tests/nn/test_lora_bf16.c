// Adapters stored in bf16 (trit_gpt_set_adapter_dtype): under the bf16 compute policy a training
// step over bf16 adapters gives the loss and gradients of the same step over the f32 adapters
// they were rounded from, on an f32 base and on an NF4 base; a bf16 adapter merges into W as its
// f32 widening does; the base keeps its storage; bad uses are refused.
//
// Why equality and not a tolerance: at the bf16 policy's medium matmul precision the GEMM reads
// an f32 operand by rounding it to bf16 (nearest even) while packing, and reads a bf16 operand as
// it is. trit_gpt_set_adapter_dtype rounds A and B the same way, so both graphs multiply the
// same bf16 values in the same order, and their f32 sums, losses and gradients are the same
// bits. (The two runs part after the first update: tests/train/test_lora_bf16.c bounds that.)
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

static const char *const SPEC = "r=4,alpha=8,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj";

static trit_gpt *lora_model(const char *spec) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 64, c.n_head = 2, c.seq_len = 32, c.vocab_size = V;
    if (spec) {
        assert_int_equal(trit_adapter_parse_lora(spec, &c.adapter), TRIT_OK);
    } else {
        c.adapter = trit_adapter_bottleneck(8);
    }
    trit_gpt *m = trit_gpt_new(&c, 21);
    assert_non_null(m);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {  // B (up) != 0, so A's (down's) gradients are not zero
        trit_tensor *t = trit_gpt_tensor(m, i);
        if (strstr(t->name, "lora_B") || strstr(t->name, ".adapter.up.")) trit_tensor_fill_normal(t, 0, 0.1, 2, (uint64_t)i);
    }
    const trit_compute_policy p = trit_precision_policy(TRIT_PRECISION_BF16, TRIT_MATMUL_HIGHEST);
    assert_int_equal(trit_gpt_set_policy(m, &p), TRIT_OK);
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

static bool is_adapter(const char *name) { return strstr(name, ".lora_") || strstr(name, ".adapter."); }

// The same step over f (f32 adapters) and h (the same adapters in bf16); h's adapter is the
// rounding of f's, its base untouched. exact: the loss and adapter gradients are the same bits.
// Otherwise (a bottleneck) within tol_loss of the loss and, per tensor, 4 2^-8 of its largest
// gradient (see test_bottleneck_step).
static void check_step(trit_gpt *f, trit_gpt *h, int want_adapters, bool exact, float tol_loss) {
    assert_int_equal(trit_gpt_set_adapter_dtype(h, TRIT_BF16), TRIT_OK);
    assert_int_equal(trit_gpt_attach_grads(f), TRIT_OK);
    assert_int_equal(trit_gpt_attach_grads(h), TRIT_OK);
    int adapters = 0;
    for (int i = 0; i < trit_gpt_num_tensors(h); i++) {
        const trit_tensor *a = trit_gpt_tensor(f, i), *b = trit_gpt_tensor(h, i);
        assert_string_equal(a->name, b->name);
        if (!is_adapter(a->name)) {
            assert_int_equal(b->dtype, a->dtype);  // the base keeps its storage (f32, or codes without values)
            continue;
        }
        adapters++;
        assert_int_equal(a->dtype, TRIT_F32);
        assert_int_equal(b->dtype, TRIT_BF16);
        const int64_t n = trit_tensor_numel(a);
        uint16_t *want = malloc(sizeof(uint16_t) * (size_t)n);
        trit_dtype_traits_of(TRIT_BF16)->from_f32(want, trit_tensor_ptr(a), n, NULL, 0);
        assert_memory_equal(trit_tensor_ptr(b), want, sizeof(uint16_t) * (size_t)n);
        free(want);
    }
    assert_int_equal(adapters, want_adapters);
    const float lf = step(f), lh = step(h);
    assert_true(isfinite(lf));
    if (exact) assert_memory_equal(&lf, &lh, sizeof lf);
    else assert_true(fabsf(lf - lh) <= tol_loss);
    for (int i = 0; i < trit_gpt_num_tensors(h); i++) {
        const trit_tensor *a = trit_gpt_tensor(f, i), *b = trit_gpt_tensor(h, i);
        if (!is_adapter(a->name)) continue;
        assert_non_null(b->grad);
        assert_int_equal(b->grad->dtype, TRIT_F32);  // gradients stay f32
        const float *ga = trit_tensor_ptr(a->grad), *gb = trit_tensor_ptr(b->grad);
        float most = 0, diff = 0;
        for (int64_t k = 0; k < trit_tensor_numel(a); k++) most = fmaxf(most, fabsf(ga[k])), diff = fmaxf(diff, fabsf(ga[k] - gb[k]));
        if (strstr(a->name, "weight")) assert_true(most > 0);
        if (exact) assert_memory_equal(ga, gb, trit_tensor_nbytes(a->grad));
        else assert_true(diff <= 4 * 0x1p-8f * most);
    }
}

static void test_lora_step(void **state) {
    (void)state;
    trit_gpt *f = lora_model(SPEC), *h = lora_model(SPEC);
    check_step(f, h, 2 * 4 * 2, true, 0);
    trit_gpt_free(f);
    trit_gpt_free(h);
}

// QLoRA's setup (the QLoRA paper's: an NF4 base with double-quantized scales, bf16 compute, bf16
// adapters): the base as codes only, the adapters in bf16.
static void test_qlora_step(void **state) {
    (void)state;
    trit_gpt *f = lora_model(SPEC), *h = lora_model(SPEC);
    trit_quant_spec s = trit_quant_spec_default(TRIT_NF4);
    s.double_quant_block = 256;
    trit_quantize_report r;
    for (int k = 0; k < 2; k++) {
        trit_gpt *m = k ? h : f;
        assert_int_equal(trit_gpt_quantize(m, &s, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
        assert_int_equal(trit_gpt_use_quantized_base(m), TRIT_OK);
    }
    check_step(f, h, 2 * 4 * 2, true, 0);
    assert_null(trit_gpt_find(h, "h.1.mlp.c_fc.weight")->data);  // still codes only
    trit_gpt_free(f);
    trit_gpt_free(h);
}

// A bottleneck reads the sub-layer's f32 output x. The f32 adapter's GEMM rounds x to bf16 with
// its weight (both operands f32 at medium precision); against a bf16 weight, the mixed GEMM reads
// x in f32. So the graphs differ by one rounding of x, at most 2^-8 of each element (bf16's 8
// significant bits), and the adapter's output, which is Lipschitz in x with its own weights' size,
// by about as much relative to itself. To first order the loss then moves by at most 2^-8 times
// the adapter's whole effect on it, |L - L0| (L0: the same model with the adapter at identity,
// up = 0), and each gradient, a sum of products with one factor so rounded, by 2^-8 of its sum of
// magnitudes. Bounds: 4 2^-8 |L - L0| and 4 2^-8 of the tensor's largest gradient. Seen: |L - L0|
// = 0.0134, the loss 3.7e-5 apart (0.7 2^-8 |L - L0|, bound 2.1e-4); gradients at most 0.0058 of
// the largest apart (1.5 2^-8, bound 0.0156).
static void test_bottleneck_step(void **state) {
    (void)state;
    trit_gpt *f = lora_model(NULL), *h = lora_model(NULL), *id = lora_model(NULL);
    for (int i = 0; i < trit_gpt_num_tensors(id); i++) {
        trit_tensor *t = trit_gpt_tensor(id, i);
        if (strstr(t->name, ".adapter.up.")) memset(trit_tensor_ptr(t), 0, trit_tensor_nbytes(t));
    }
    const float l0 = step(id), l = step(f);
    assert_true(fabsf(l - l0) > 1e-3f);  // the adapter does something to bound against
    check_step(f, h, 2 * 2 * 4, false, 4 * 0x1p-8f * fabsf(l - l0));
    trit_gpt_free(id);
    trit_gpt_free(f);
    trit_gpt_free(h);
}

// A bf16 adapter folds into W as its f32 widening does (the same bits); unmerging it restores W
// within the double sum's one rounding per element.
static void test_merge(void **state) {
    (void)state;
    trit_gpt *h = lora_model(SPEC), *w = lora_model(SPEC);
    assert_int_equal(trit_gpt_set_adapter_dtype(h, TRIT_BF16), TRIT_OK);
    assert_int_equal(trit_gpt_set_adapter_dtype(w, TRIT_BF16), TRIT_OK);
    assert_int_equal(trit_gpt_set_adapter_dtype(w, TRIT_F32), TRIT_OK);  // widened: exact
    assert_int_equal(trit_gpt_find(w, "h.0.attn.c_attn.lora_B.weight")->dtype, TRIT_F32);
    const trit_tensor *w0 = trit_gpt_find(h, "h.1.mlp.c_proj.weight");
    const int64_t n = trit_tensor_numel(w0);
    float *before = malloc(sizeof(float) * (size_t)n);
    memcpy(before, trit_tensor_ptr(w0), sizeof(float) * (size_t)n);
    assert_int_equal(trit_gpt_merge_adapters(h), TRIT_OK);
    assert_int_equal(trit_gpt_merge_adapters(w), TRIT_OK);
    int compared = 0;
    for (int i = 0; i < trit_gpt_num_tensors(h); i++) {
        const trit_tensor *a = trit_gpt_tensor(h, i), *b = trit_gpt_tensor(w, i);
        if (is_adapter(a->name) || a->ndim != 2 || strncmp(a->name, "h.", 2) != 0) continue;
        assert_memory_equal(trit_tensor_ptr(a), trit_tensor_ptr(b), trit_tensor_nbytes(a));
        compared++;
    }
    assert_int_equal(compared, 2 * 4);
    float moved = 0;
    for (int64_t k = 0; k < n; k++) moved = fmaxf(moved, fabsf(((const float *)trit_tensor_ptr(w0))[k] - before[k]));
    assert_true(moved > 1e-3f);  // the adapter did change W
    // W + d - d in f32: two roundings of at most 2^-24 |W + d| each; |W + d| < 1 here.
    assert_int_equal(trit_gpt_unmerge_adapters(h), TRIT_OK);
    for (int64_t k = 0; k < n; k++) assert_true(fabsf(((const float *)trit_tensor_ptr(w0))[k] - before[k]) <= 2 * 0x1p-24f);
    free(before);
    trit_gpt_free(h);
    trit_gpt_free(w);
}

// Only f32 or bf16, only a model with an adapter.
static void test_refused(void **state) {
    (void)state;
    trit_gpt *m = lora_model(SPEC);
    assert_int_equal(trit_gpt_set_adapter_dtype(m, TRIT_F16), TRIT_ERR_DTYPE);
    assert_non_null(strstr(trit_last_error(), "f32 or bf16, not f16"));
    trit_gpt_free(m);
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 1, c.n_embd = 64, c.n_head = 2, c.seq_len = 16, c.vocab_size = V;
    m = trit_gpt_new(&c, 1);
    assert_int_equal(trit_gpt_set_adapter_dtype(m, TRIT_BF16), TRIT_ERR_STATE);
    assert_non_null(strstr(trit_last_error(), "no adapter"));
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora_step), cmocka_unit_test(test_qlora_step), cmocka_unit_test(test_bottleneck_step),
        cmocka_unit_test(test_merge),     cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
