// Decoding with quantized weights: a GPT quantized to int8 (per channel, token embedding and
// head too), to int4 (groups of 64) and to symmetric int2 (groups of 64, as ternary panels)
// decodes with the integer kernels, and NF4 and FP8 with
// the weight-only kernels; its logits stay close
// to the graph's over the decoded f32 weights (the difference is the per-token activation
// quantization), agree between the portable and the x86 kernels, and come back bit for bit
// after a save and load of the quantized checkpoint.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "nn/gpt_cache.h"
#include "scratch.h"
#include "trit/trit.h"

enum { T = 16, V = 67 };

static trit_gpt *model(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 128, c.n_head = 4, c.seq_len = 32, c.vocab_size = V;
    trit_gpt *m = trit_gpt_new(&c, 11);
    assert_non_null(m);
    return m;
}

// Logits (T, V) of the tokens 0..T-1 (mod V, scrambled) by the decoder.
static void decode(const trit_gpt *m, float *out) {
    trit_gpt_cache *k = trit_gpt_cache_new(m);
    assert_non_null(k);
    for (int t = 0; t < T; t++) assert_int_equal(trit_gpt_decode(m, k, (t * 7 + 3) % V, out + t * V), TRIT_OK);
    trit_gpt_cache_free(k);
}

// The same logits by the graph (f32 weights).
static void graph(trit_gpt *m, float *out) {
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, 1, T, &gg), TRIT_OK);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets);
    for (int t = 0; t < T; t++) idx[t] = (t * 7 + 3) % V, tg[t] = 0;
    trit_graph_set_training(gg.graph, false);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    memcpy(out, trit_tensor_ptr(gg.logits), sizeof(float) * T * V);
    trit_gpt_graph_free(&gg);
}

static float max_abs(const float *a, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(a[i]));
    return m;
}

// tol: the largest difference allowed from the graph's logits and between kernels, relative to
// the largest logit (at least 2e-3 between kernels).
static void check(trit_dtype dt, int64_t group, float tol) {
    trit_gpt *m = model();
    trit_quant_spec s = trit_quant_spec_default(dt);
    s.group_size = group;
    trit_quantize_report r;
    assert_int_equal(trit_gpt_quantize(m, &s, TRIT_QUANTIZE_BLOCKS | TRIT_QUANTIZE_EMBEDDING, &r), TRIT_OK);
    assert_int_equal(r.tensors, 2 * 4 + 1);
    float *dec = malloc(sizeof(float) * T * V), *ref = malloc(sizeof(float) * T * V), *g = malloc(sizeof(float) * T * V);
    decode(m, dec);
    graph(m, g);
    float diff = 0;
    for (int i = 0; i < T * V; i++) diff = fmaxf(diff, fabsf(dec[i] - g[i]));
    print_message("%s: decode vs graph %.3g of the largest logit (tolerance %.3g)\n", trit_dtype_name(dt),
                  diff / max_abs(g, T * V), tol);
    assert_true(diff <= tol * max_abs(g, T * V));
    assert_true(diff > 0);  // the integer kernels ran (activations were quantized)
    // The portable kernels give the same to float rounding, and to what a rounding difference
    // does downstream: an activation that lands on a rounding boundary of the next layer's int8
    // codes moves by one code (seen: 7e-4 of the largest logit, int4 groups of 64).
    const trit_cpu_isa saved = trit_cpu_level();
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_REF), TRIT_OK);
    decode(m, ref);
    trit_cpu_set_level(saved);
    for (int i = 0; i < T * V; i++) assert_true(fabsf(dec[i] - ref[i]) <= fmaxf(tol, 2e-3f) * max_abs(ref, T * V));
    // Save, load: the same packed copies are attached again.
    const char *path = tfile_path("q.safetensors");
    assert_int_equal(trit_checkpoint_save_model(m, path, 3), TRIT_OK);
    trit_gpt *back = trit_checkpoint_load_model(path, NULL);
    assert_non_null(back);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        assert_int_equal(trit_gpt_quantized(m, i) != NULL, trit_gpt_quantized(back, i) != NULL);
    decode(back, ref);
    assert_memory_equal(dec, ref, sizeof(float) * T * V);
    trit_gpt_free(back);
    free(dec), free(ref), free(g);
    trit_gpt_free(m);
}

// A prompt fed at once gives the logits of feeding it token by token (to float rounding: the
// matrix products run as GEMMs of several rows), f32 and quantized, across a chunk boundary.
static void test_prefill_matches_decode(void **state) {
    (void)state;
    for (int q = 0; q < 2; q++) {
        trit_gpt_config c = trit_gpt_config_default();
        c.n_layer = 2, c.n_embd = 128, c.n_head = 4, c.seq_len = TRIT_DECODE_ROWS + 96, c.vocab_size = V;
        trit_gpt *m = trit_gpt_new(&c, 11);
        trit_quantize_report r;
        trit_quant_spec s = trit_quant_spec_default(TRIT_QINT8);
        if (q) assert_int_equal(trit_gpt_quantize(m, &s, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
        enum { N = TRIT_DECODE_ROWS + 36 };  // a whole chunk and part of the next
        int32_t toks[N];
        for (int i = 0; i < N; i++) toks[i] = (i * 17 + 5) % V;
        float a[V], b[V];
        trit_gpt_cache *k = trit_gpt_cache_new(m);
        for (int i = 0; i < N; i++) assert_int_equal(trit_gpt_decode(m, k, toks[i], a), TRIT_OK);
        trit_gpt_cache_reset(k);
        assert_int_equal(trit_gpt_prefill(m, k, toks, N, b), TRIT_OK);
        assert_int_equal(trit_gpt_cache_len(k), N);
        for (int v = 0; v < V; v++) assert_true(fabsf(a[v] - b[v]) <= 1e-4f * max_abs(a, V));
        assert_int_equal(trit_gpt_prefill(m, k, toks, 61, b), TRIT_ERR_RANGE);  // N + 61 > seq_len
        trit_gpt_cache_free(k);
        trit_gpt_free(m);
    }
}

// The integer kernels multiply the graph's own (decoded) weights by each token's inputs rounded
// to int8 codes (scale amax/127: half a step is u = 1/254 of the token's largest |x|), exactly in
// integers, so only that rounding moves the logits: by about two u of the largest logit (seen
// 2.35 u for int8, 1.85 u for int4, 2.0 u for int2, 0.7 u for base-3 ternary; the same at every
// level: the products are exact, the activation codes bit-identical, tests/kernels/test_qgemm.c,
// and the model is seeded): 3 u.
#define INT_ACT_TOL (3.0f / 254)

static void test_int8_per_channel(void **state) {
    (void)state;
    check(TRIT_QINT8, TRIT_QGROUP_CHANNEL, INT_ACT_TOL);
}

static void test_int4_groups(void **state) {
    (void)state;
    check(TRIT_QINT4, 64, INT_ACT_TOL);
}

// Symmetric int2 codes are ternary with group scales: the decoder repacks them into ternary panels
// (groups of 64, which only panels take) and multiplies with integer kernels, so its logits are
// not the f32 path's (activations are quantized) yet within int4's tolerance of the graph.
static void test_int2_groups(void **state) {
    (void)state;
    check(TRIT_QINT2, 64, INT_ACT_TOL);
    trit_gpt *m = model();
    trit_quant_spec s = trit_quant_spec_default(TRIT_QINT2);
    trit_quantize_report r;
    assert_int_equal(trit_gpt_quantize(m, &s, TRIT_QUANTIZE_BLOCKS | TRIT_QUANTIZE_EMBEDDING, &r), TRIT_OK);
    float *d = malloc(sizeof(float) * T * V), *g = malloc(sizeof(float) * T * V);
    decode(m, d);
    graph(m, g);
    float diff = 0;
    for (int i = 0; i < T * V; i++) diff = fmaxf(diff, fabsf(d[i] - g[i]));
    assert_true(diff > 1e-5f * max_abs(g, T * V));
    free(d), free(g);
    trit_gpt_free(m);
}

// The weight-only kernels' distance from the graph over the decoded weights, relative to the
// largest logit, from the arithmetic of the kernel the dispatch picks for dt:
// - f32 products (the portable NF4 kernel, FP8 at every level: codes decode exactly): the order
//   of the sums and one rounding of each group's scaling differ from the graph; the decoder
//   itself is within 1.5e-6 of it (test_gpt.c): 2e-6 (seen at most 9.7e-7).
// - NF4 on AVX2, 14-bit fixed point: the codebook and each x rounded to 2^-15 of their largest
//   magnitude (1, and the token's largest |x|), about 2^-13 of a typical activation.
// - NF4 on AVX512-BF16: the codebook and x rounded to bf16, 2^-8 of each value.
// Independent roundings of two factors of u move each product's sum by about u sqrt(2/3) of its
// terms' norm, and through two blocks and the head the logits by under one u of the largest
// (seen: 0.64 u for bf16, 2.5e-3; 0.61 u for fixed point, 7.5e-5): two units, 2^-7 and 2^-12.
static float weight_only_tol(trit_dtype dt) {
    const uint32_t u = trit_cpu_usable_features();
    if (dt != TRIT_NF4 || !(u & TRIT_FEAT_AVX2)) return 2e-6f;
    return u & TRIT_FEAT_AVX512_BF16 ? 0x1p-7f : 0x1p-12f;
}

static void test_nf4_weight_only(void **state) {
    (void)state;
    check(TRIT_NF4, 64, weight_only_tol(TRIT_NF4));
}

static void test_fp8_weight_only(void **state) {
    (void)state;
    check(TRIT_F8_E4M3, TRIT_QGROUP_CHANNEL, weight_only_tol(TRIT_F8_E4M3));
    check(TRIT_F8_E5M2, TRIT_QGROUP_CHANNEL, weight_only_tol(TRIT_F8_E5M2));
}

// Base-3 ternary weights (1.6 bits as stored) decode through the 2-bit ternary kernels after a
// lossless repack: the same logits, bit for bit, as the 2-bit model; and not the f32 path's
// (which would match the graph to rounding: the integer path quantizes activations).
static void test_base3_decodes_as_2bit(void **state) {
    (void)state;
    trit_gpt *two = model(), *three = model();
    trit_quantize_report r;
    trit_quant_spec s2 = trit_quant_spec_default(TRIT_TERNARY), s3 = trit_quant_spec_default(TRIT_TERNARY_B3);
    assert_int_equal(trit_gpt_quantize(two, &s2, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    assert_int_equal(trit_gpt_quantize(three, &s3, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    float *a = malloc(sizeof(float) * T * V), *b = malloc(sizeof(float) * T * V), *g = malloc(sizeof(float) * T * V);
    decode(two, a);
    decode(three, b);
    assert_memory_equal(a, b, sizeof(float) * T * V);
    graph(three, g);
    float diff = 0;
    for (int i = 0; i < T * V; i++) diff = fmaxf(diff, fabsf(b[i] - g[i]));
    print_message("ternary_b3: decode vs graph %.3g of the largest logit (tolerance %.3g)\n", diff / max_abs(g, T * V),
                  INT_ACT_TOL);
    assert_true(diff > 1e-5f * max_abs(g, T * V));
    assert_true(diff <= INT_ACT_TOL * max_abs(g, T * V));
    free(a), free(b), free(g);
    trit_gpt_free(two);
    trit_gpt_free(three);
}

// A model under quantization-aware training decodes as it trains: the decoder freezes the block
// matrices by the freeze rule and quantizes their inputs per token, so its logits are the QAT
// graph's (the fake-quantized model), to the activation codes' rounding where integer kernels run
// and to float rounding where a matrix takes the f32 path (int4 in groups of 32, which no kernel
// takes) — and far from what the latent weights give.
static void test_qat_decodes_as_trained(void **state) {
    (void)state;
    const struct {
        trit_fake_quant_spec w;
        float tol;
    } cases[] = {
        {{.dtype = TRIT_QINT8, .group_size = -1, .mode = TRIT_FQ_GROUPS}, 2e-3f},
        {{.dtype = TRIT_QINT4, .group_size = 64, .mode = TRIT_FQ_GROUPS}, 2e-3f},
        {{.dtype = TRIT_QINT4, .group_size = 32, .mode = TRIT_FQ_GROUPS}, 1e-5f},
        {{.dtype = TRIT_QINT2, .mode = TRIT_FQ_TERNARY}, 2e-3f},
    };
    const trit_fake_quant_spec acts = {.dtype = TRIT_QINT8, .mode = TRIT_FQ_TOKEN};
    float *d = malloc(sizeof(float) * T * V), *g = malloc(sizeof(float) * T * V), *lat = malloc(sizeof(float) * T * V);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        trit_gpt *m = model();
        decode(m, lat);  // the latent weights, no QAT
        assert_int_equal(trit_gpt_set_qat(m, &cases[k].w, &acts), TRIT_OK);
        decode(m, d);
        graph(m, g);
        float diff = 0, off = 0;
        for (int i = 0; i < T * V; i++) diff = fmaxf(diff, fabsf(d[i] - g[i])), off = fmaxf(off, fabsf(lat[i] - g[i]));
        const float mx = max_abs(g, T * V);
        print_message("QAT %s group %lld: decode vs the QAT graph %.3g, the latent weights' decode %.3g of the largest logit\n",
                      cases[k].w.mode == TRIT_FQ_TERNARY ? "ternary" : trit_dtype_name(cases[k].w.dtype),
                      (long long)cases[k].w.group_size, diff / mx, off / mx);
        assert_true(diff <= cases[k].tol * mx);
        assert_true(off > 10 * diff && off > 5e-3f * mx);
        trit_gpt_free(m);
    }
    free(d), free(g), free(lat);
}

// A decode-only model keeps each weight only as its kernel reads it (no f32 values, panels in
// place of codes, embedding rows decoded from them) and decodes the same logits, bit for bit,
// token by token and for a prompt (weight-only formats: the f32 GEMM over the values decoded per
// block, which are the full model's f32 values). Graphs and saves refuse it.
// A prompt runs a block at a time over its chunks of TRIT_DECODE_ROWS positions: the logits of a
// prompt of two chunks and 22 positions fed at once equal, bit for bit, those of the same prompt
// fed a chunk per call, for an f32 model and decode-only integer and weight-only ones.
static void test_prefill_by_blocks(void **state) {
    (void)state;
    enum { P = 2 * TRIT_DECODE_ROWS + 22 };
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 128, c.n_head = 4, c.seq_len = P + 10, c.vocab_size = V;
    const trit_dtype dts[] = {TRIT_F32, TRIT_TERNARY, TRIT_QINT8, TRIT_NF4, TRIT_F8_E4M3};
    int32_t prompt[P];
    for (int t = 0; t < P; t++) prompt[t] = (t * 13 + 5) % V;
    float a[V], b[V];
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        const trit_quant_spec s = trit_quant_spec_default(dts[k]);
        trit_gpt *m = trit_gpt_new_quantized(&c, 5, dts[k] == TRIT_F32 ? NULL : &s, NULL);
        assert_non_null(m);
        trit_gpt_cache *ka = trit_gpt_cache_new(m), *kb = trit_gpt_cache_new(m);
        assert_int_equal(trit_gpt_prefill(m, ka, prompt, P, a), TRIT_OK);
        for (int at = 0; at < P; at += TRIT_DECODE_ROWS)
            assert_int_equal(trit_gpt_prefill(m, kb, prompt + at, P - at < TRIT_DECODE_ROWS ? P - at : TRIT_DECODE_ROWS, b),
                             TRIT_OK);
        assert_memory_equal(a, b, sizeof a);
        // The next token sees the same cache.
        assert_int_equal(trit_gpt_decode(m, ka, 7, a), TRIT_OK);
        assert_int_equal(trit_gpt_decode(m, kb, 7, b), TRIT_OK);
        assert_memory_equal(a, b, sizeof a);
        trit_gpt_cache_free(ka);
        trit_gpt_cache_free(kb);
        trit_gpt_free(m);
    }
}

static void test_decode_only(void **state) {
    (void)state;
    const trit_dtype dts[] = {TRIT_QINT8, TRIT_QINT4, TRIT_QINT2, TRIT_TERNARY, TRIT_TERNARY_B3, TRIT_NF4, TRIT_F8_E4M3};
    float *a = malloc(sizeof(float) * T * V), *b = malloc(sizeof(float) * T * V);
    int32_t prompt[T];
    for (int t = 0; t < T; t++) prompt[t] = (t * 7 + 3) % V;
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        trit_gpt *full = model(), *lean = model();
        const trit_quant_spec s = trit_quant_spec_default(dts[k]);
        // Made in pieces (rows at a time, never whole in f32): the same model.
        trit_gpt *pieces = trit_gpt_new_quantized(trit_gpt_get_config(full), 11, &s, &s);
        assert_non_null(pieces);
        trit_quantize_report r;
        assert_int_equal(trit_gpt_quantize(full, &s, TRIT_QUANTIZE_BLOCKS | TRIT_QUANTIZE_EMBEDDING, &r), TRIT_OK);
        assert_int_equal(trit_gpt_quantize(lean, &s, TRIT_QUANTIZE_BLOCKS | TRIT_QUANTIZE_EMBEDDING, &r), TRIT_OK);
        size_t before = 0, after = 0;
        trit_flat_block(trit_gpt_flat(lean), TRIT_F32, &before);
        assert_int_equal(trit_gpt_make_decode_only(lean), TRIT_OK);
        assert_true(trit_gpt_decode_only(lean) && !trit_gpt_decode_only(full));
        trit_flat_block(trit_gpt_flat(lean), TRIT_F32, &after);
        assert_null(trit_gpt_find(lean, "wte.weight")->data);
        decode(full, a);
        decode(lean, b);
        assert_memory_equal(a, b, sizeof(float) * T * V);
        decode(pieces, b);
        assert_memory_equal(a, b, sizeof(float) * T * V);
        trit_gpt_free(pieces);
        trit_gpt_cache *ka = trit_gpt_cache_new(full), *kb = trit_gpt_cache_new(lean);
        assert_int_equal(trit_gpt_prefill(full, ka, prompt, T, a), TRIT_OK);
        assert_int_equal(trit_gpt_prefill(lean, kb, prompt, T, b), TRIT_OK);
        float diff = 0;
        for (int v = 0; v < V; v++) diff = fmaxf(diff, fabsf(a[v] - b[v]));
        print_message("decode-only %s: f32 parameter bytes %zu -> %zu, prompt logits differ by %.3g of the largest\n",
                      trit_dtype_name(dts[k]), before, after, diff / max_abs(a, V));
        assert_true(after * 20 < before);  // norms, biases and positions are all that stay f32
        assert_true(diff == 0);
        trit_gpt_cache_free(ka);
        trit_gpt_cache_free(kb);
        trit_gpt_graph gg;
        assert_int_equal(trit_gpt_build(lean, 1, T, &gg), TRIT_ERR_STATE);
        assert_non_null(strstr(trit_last_error(), "decodes only"));
        assert_int_equal(trit_checkpoint_save_model(lean, tfile_path("lean.safetensors"), 1), TRIT_ERR_STATE);
        assert_int_equal(trit_gpt_quantize(lean, &s, TRIT_QUANTIZE_BLOCKS, &r), TRIT_ERR_STATE);
        trit_gpt_free(full);
        trit_gpt_free(lean);
    }
    // A quantized checkpoint loaded to decode only never widens its codes: the same logits as the
    // full load, and no f32 values for the quantized tensors (ternary blocks, int8 head here, and
    // affine int4 blocks, which no kernel takes and which are decoded from their codes once).
    const trit_quant_spec specs[2][2] = {{trit_quant_spec_default(TRIT_TERNARY), trit_quant_spec_default(TRIT_QINT8)},
                                         {trit_quant_spec_default(TRIT_QINT4), trit_quant_spec_default(TRIT_QINT8)}};
    for (int k = 0; k < 2; k++) {
        trit_gpt *m = model();
        trit_quant_spec blocks = specs[k][0];
        if (k == 1) blocks.scheme = TRIT_QSCHEME_AFFINE;
        trit_quantize_report r;
        assert_int_equal(trit_gpt_quantize(m, &blocks, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
        assert_int_equal(trit_gpt_quantize(m, &specs[k][1], TRIT_QUANTIZE_EMBEDDING, &r), TRIT_OK);
        const char *path = tfile_path("lean.safetensors");
        assert_int_equal(trit_checkpoint_save_model(m, path, 3), TRIT_OK);
        trit_gpt *full = trit_checkpoint_load_model(path, NULL), *lean = trit_checkpoint_load_decoder(path, NULL);
        assert_non_null(full);
        assert_non_null(lean);
        assert_true(trit_gpt_decode_only(lean));
        assert_null(trit_gpt_find(lean, "h.0.mlp.c_fc.weight")->data);
        assert_null(trit_gpt_find(lean, "wte.weight")->data);
        assert_non_null(trit_gpt_find(lean, "h.0.ln_1.weight")->data);
        decode(full, a);
        decode(lean, b);
        assert_memory_equal(a, b, sizeof(float) * T * V);
        trit_gpt_free(full);
        trit_gpt_free(lean);
        trit_gpt_free(m);
    }
    free(a), free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefill_by_blocks),
        cmocka_unit_test(test_decode_only),
        cmocka_unit_test(test_qat_decodes_as_trained),
        cmocka_unit_test(test_prefill_matches_decode),
        cmocka_unit_test(test_base3_decodes_as_2bit),
        cmocka_unit_test(test_int8_per_channel),
        cmocka_unit_test(test_int4_groups),
        cmocka_unit_test(test_int2_groups),
        cmocka_unit_test(test_nf4_weight_only),
        cmocka_unit_test(test_fp8_weight_only),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
