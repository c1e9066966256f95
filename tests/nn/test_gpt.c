// The GPT model: parameter count and names, initialisation statistics and reproducibility,
// config checks, incremental decoding against the graph (every layout switch), and parity with
// a PyTorch GPT built from the same weights (logits, loss, every gradient, 10 AdamW steps).
//
// The parity weights are committed in tests/reference/fixtures/gpt_<layout>.safetensors; they
// are written by this program: `test_nn_gpt --write-fixtures` (with TRIT_SOURCE_DIR set), after
// which tests/reference/make_gpt_fixtures.py writes gpt_<layout>_ref.safetensors.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- helpers -----------------------------------------------------------------------------

static trit_gpt_config small_config(bool rms, bool swiglu, bool rope, bool bias) {
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = 50;
    c.seq_len = 16;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = 32;
    c.norm = rms ? TRIT_NORM_RMS : TRIT_NORM_LAYER;
    c.mlp = swiglu ? TRIT_MLP_SWIGLU : TRIT_MLP_GELU;
    c.pos = rope ? TRIT_POS_ROPE : TRIT_POS_LEARNED;
    c.bias = bias;
    return c;
}

static double tensor_mean(const trit_tensor *t) {
    double s = 0;
    int64_t n = trit_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) s += trit_tensor_get_flat(t, i);
    return s / (double)n;
}

static double tensor_std(const trit_tensor *t) {
    double mu = tensor_mean(t), s = 0;
    int64_t n = trit_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        double d = trit_tensor_get_flat(t, i) - mu;
        s += d * d;
    }
    return sqrt(s / (double)n);
}

// Gives every parameter non-trivial values (norm gains around 1, biases around 0) so that a
// swapped or ignored tensor shows in the outputs.
static void perturb(trit_gpt *m, uint64_t seed) {
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        int64_t n = trit_tensor_numel(t);
        float *d = t->data;
        float *noise = malloc(sizeof(float) * (size_t)n);
        trit_rng_fill_normal(noise, n, seed, (uint64_t)i, 0, 0.0f, t->ndim >= 2 ? 0.05f : 0.2f);
        for (int64_t j = 0; j < n; j++) d[j] += noise[j];
        free(noise);
    }
}

static void fill_tokens(trit_tensor *t, int64_t V, uint64_t seed) {
    int32_t *d = t->data;
    int64_t n = trit_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) d[i] = (int32_t)(trit_rng_u32(seed, 3, (uint64_t)i) % (uint32_t)V);
}

// ---- parameter count, names, init ------------------------------------------------------------

static void test_param_count_and_names(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();  // L=4 H=4 C=128 T=64 V=65
    trit_gpt *m = trit_gpt_new(&c, 1);
    assert_non_null(m);
    const int64_t L = 4, C = 128, T = 64, V = 65;
    // wte + wpe + L * (ln_1, c_attn, c_proj, ln_2, c_fc, mlp.c_proj with biases) + ln_f
    const int64_t want = V * C + T * C + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C) + 2 * C;
    assert_int_equal(want, 809856);
    assert_int_equal(trit_gpt_num_params(m), want);
    assert_int_equal(trit_gpt_num_tensors(m), 2 + 12 * 4 + 2);
    assert_string_equal(trit_gpt_tensor(m, 0)->name, "wte.weight");
    assert_string_equal(trit_gpt_tensor(m, 1)->name, "wpe.weight");
    assert_string_equal(trit_gpt_tensor(m, 2)->name, "h.0.ln_1.weight");
    assert_string_equal(trit_gpt_tensor(m, 51)->name, "ln_f.bias");
    const trit_tensor *a = trit_gpt_find(m, "h.3.attn.c_attn.weight");
    assert_non_null(a);
    assert_int_equal(a->shape[0], 3 * C);
    assert_int_equal(a->shape[1], C);
    const trit_tensor *p = trit_gpt_find(m, "h.1.mlp.c_proj.weight");
    assert_int_equal(p->shape[0], C);
    assert_int_equal(p->shape[1], 4 * C);
    assert_null(trit_gpt_find(m, "h.4.ln_1.weight"));
    assert_non_null(strstr(trit_last_error(), "no parameter named"));
    assert_null(trit_gpt_tensor(m, 52));
    trit_gpt_free(m);

    // RMSNorm + SwiGLU + RoPE + no bias: no wpe, no biases, c_fc holds [gate; up].
    trit_gpt_config r = c;
    r.norm = TRIT_NORM_RMS;
    r.mlp = TRIT_MLP_SWIGLU;
    r.pos = TRIT_POS_ROPE;
    r.bias = false;
    m = trit_gpt_new(&r, 1);
    assert_non_null(m);
    const int64_t hid = trit_gpt_mlp_hidden(&r);
    assert_int_equal(hid, 344);  // ceil(8 * 128 / 3) = 342, rounded up to a multiple of 8
    assert_int_equal(trit_gpt_num_params(m), V * C + L * (C + 3 * C * C + C * C + C + 2 * hid * C + hid * C) + C);
    assert_int_equal(trit_gpt_num_tensors(m), 1 + 6 * 4 + 1);
    assert_null(trit_gpt_find(m, "wpe.weight"));
    assert_int_equal(trit_gpt_find(m, "h.0.mlp.c_fc.weight")->shape[0], 2 * hid);
    trit_gpt_free(m);

    // SubLN adds a norm (weight 1, bias 0) before each output projection: (C) and (hidden).
    trit_gpt_config sub = c;
    sub.subln = true;
    m = trit_gpt_new(&sub, 1);
    assert_non_null(m);
    assert_int_equal(trit_gpt_num_params(m), want + L * (2 * C + 2 * 4 * C));
    assert_int_equal(trit_gpt_num_tensors(m), 2 + 16 * 4 + 2);
    assert_string_equal(trit_gpt_tensor(m, 2 + 4)->name, "h.0.attn.sub_norm.weight");
    assert_string_equal(trit_gpt_tensor(m, 2 + 5)->name, "h.0.attn.sub_norm.bias");
    const trit_tensor *sn = trit_gpt_find(m, "h.2.mlp.sub_norm.weight");
    assert_non_null(sn);
    assert_int_equal(sn->shape[0], 4 * C);
    assert_true(((const float *)sn->data)[7] == 1.0f);
    assert_true(((const float *)trit_gpt_find(m, "h.2.mlp.sub_norm.bias")->data)[7] == 0.0f);
    trit_gpt_free(m);
}

static void test_init_statistics(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    trit_gpt *m = trit_gpt_new(&c, 1234);
    assert_non_null(m);
    const double resid = 0.02 / sqrt(2.0 * 4);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        const char *n = t->name;
        assert_non_null(t->data);
        assert_true(t->flags & TRIT_FLAG_PARAM);
        if (strstr(n, ".bias")) {
            for (int64_t j = 0; j < trit_tensor_numel(t); j++) assert_true(trit_tensor_get_flat(t, j) == 0.0);
        } else if (strstr(n, "ln_")) {
            for (int64_t j = 0; j < trit_tensor_numel(t); j++) assert_true(trit_tensor_get_flat(t, j) == 1.0);
        } else {
            double want = strstr(n, "c_proj") ? resid : 0.02, sd = tensor_std(t), mu = tensor_mean(t);
            if (fabs(sd - want) > 0.05 * want || fabs(mu) > 0.05 * want)
                fail_msg("%s: mean %.3g std %.4g, want mean 0 std %.4g", n, mu, sd, want);
        }
    }
    // The same seed gives the same values; another seed other values; a tensor's values do not
    // depend on the rest of the model (here: on the number of layers).
    trit_gpt *same = trit_gpt_new(&c, 1234), *other = trit_gpt_new(&c, 1235);
    trit_gpt_config c2 = c;
    c2.n_layer = 2;
    trit_gpt *fewer = trit_gpt_new(&c2, 1234);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        assert_memory_equal(t->data, trit_gpt_tensor(same, i)->data, trit_tensor_nbytes(t));
    }
    const trit_tensor *w = trit_gpt_find(m, "h.1.attn.c_attn.weight");
    assert_memory_equal(w->data, trit_gpt_find(fewer, "h.1.attn.c_attn.weight")->data, trit_tensor_nbytes(w));
    assert_memory_not_equal(w->data, trit_gpt_find(other, "h.1.attn.c_attn.weight")->data, trit_tensor_nbytes(w));
    assert_memory_not_equal(w->data, trit_gpt_find(m, "h.0.attn.c_attn.weight")->data, trit_tensor_nbytes(w));
    trit_gpt_free(m);
    trit_gpt_free(same);
    trit_gpt_free(other);
    trit_gpt_free(fewer);
}

// ---- config checks ---------------------------------------------------------------------------

static void expect_bad(trit_gpt_config c, const char *msg) {
    trit_gpt *m = trit_gpt_new(&c, 1);
    assert_null(m);
    if (!strstr(trit_last_error(), msg)) fail_msg("expected an error containing '%s', got '%s'", msg, trit_last_error());
    assert_int_not_equal(trit_gpt_config_check(&c), TRIT_OK);
}

// expect_bad on a copy b of config c changed by `change` (an expression on b).
#define BAD(c, change, msg)      \
    do {                         \
        trit_gpt_config b = (c); \
        (void)(change);          \
        expect_bad(b, msg);      \
    } while (0)

static void test_bad_configs(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    assert_int_equal(trit_gpt_config_check(&c), TRIT_OK);
    BAD(c, b.n_head = 3, "not divisible by n_head");
    BAD(c, (b.pos = TRIT_POS_ROPE, b.n_embd = 12, b.n_head = 4), "must be even");  // head size 3
    BAD(c, (b.pos = TRIT_POS_ROPE, b.rope_theta = 0), "rope_theta");
    // Learned positions do not use it, but it is saved with the config (fuzz finding: a
    // checkpoint config with rope_theta 1e308000 loaded, then did not read back as written).
    BAD(c, b.rope_theta = INFINITY, "rope_theta");
    BAD(c, b.vocab_size = 0, "vocab_size");
    BAD(c, b.n_layer = -1, "n_layer");
    BAD(c, b.seq_len = 0, "seq_len");
    BAD(c, b.n_embd = 0, "n_embd");
    BAD(c, b.dropout = 1.0, "dropout");
    BAD(c, b.norm_eps = 0, "norm_eps");
    BAD(c, b.mlp_hidden = -5, "mlp_hidden");
    BAD(c, b.norm = (trit_norm_kind)7, "norm kind");
    assert_int_not_equal(trit_gpt_config_check(NULL), TRIT_OK);
    assert_int_equal(trit_gpt_mlp_hidden(NULL), 0);

    // Build and decode misuse.
    trit_gpt_config s = small_config(false, false, false, true);
    trit_gpt *m = trit_gpt_new(&s, 1);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, 2, 17, &gg), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "seq_len"));
    assert_null(gg.graph);
    assert_int_equal(trit_gpt_build(m, 0, 4, &gg), TRIT_ERR_INVALID);
    trit_gpt_cache *k = trit_gpt_cache_new(m);
    float logits[50];
    assert_int_equal(trit_gpt_decode(m, k, 50, logits), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "vocabulary"));
    assert_int_equal(trit_gpt_decode(m, k, -1, logits), TRIT_ERR_RANGE);
    for (int i = 0; i < 16; i++) assert_int_equal(trit_gpt_decode(m, k, i, logits), TRIT_OK);
    assert_int_equal(trit_gpt_decode(m, k, 0, logits), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "seq_len"));
    trit_gpt_cache_reset(k);
    assert_int_equal(trit_gpt_cache_len(k), 0);
    assert_int_equal(trit_gpt_decode(m, k, 3, logits), TRIT_OK);
    trit_gpt *m2 = trit_gpt_new(&s, 2);
    assert_int_equal(trit_gpt_decode(m2, k, 3, logits), TRIT_ERR_INVALID);
    assert_int_equal(trit_gpt_decode(m, k, 3, NULL), TRIT_ERR_INVALID);
    trit_gpt_cache_free(k);
    trit_gpt_free(m2);
    trit_gpt_free(m);
}

// ---- decoding against the graph --------------------------------------------------------------

// Runs the graph forward on B = 2 sequences of T tokens and decodes each sequence token by token
// (or, with prefill, feeds each prefix at once); returns the max over positions of
// max|decode - graph| / max|graph logits| of that position. kv: how the decoder caches keys and values.
static double decode_vs_graph_as(trit_gpt *m, int64_t T, bool eval_mode, trit_dtype kv, bool prefill) {
    const trit_gpt_config *c = trit_gpt_get_config(m);
    const int64_t V = c->vocab_size, B = 2;
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, B, T, &gg), TRIT_OK);
    if (eval_mode) trit_graph_set_training(gg.graph, false);
    fill_tokens(gg.idx, V, 77);
    fill_tokens(gg.targets, V, 78);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    const float *lg = gg.logits->data;
    const int32_t *idx = gg.idx->data;
    trit_gpt_cache *k = trit_gpt_cache_new_kv(m, kv);
    assert_non_null(k);
    float *out = malloc(sizeof(float) * (size_t)V);
    double worst = 0;
    for (int64_t b = 0; b < B; b++) {
        trit_gpt_cache_reset(k);
        for (int64_t t = 0; t < T; t++) {
            if (prefill) trit_gpt_cache_reset(k);
            if (prefill) assert_int_equal(trit_gpt_prefill(m, k, idx + b * T, t + 1, out), TRIT_OK);
            else assert_int_equal(trit_gpt_decode(m, k, idx[b * T + t], out), TRIT_OK);
            assert_int_equal(trit_gpt_cache_len(k), t + 1);
            const float *want = lg + (b * T + t) * V;
            double mx = 0, err = 0;
            for (int64_t v = 0; v < V; v++) {
                mx = fmax(mx, fabs(want[v]));
                err = fmax(err, fabs((double)out[v] - want[v]));
            }
            worst = fmax(worst, err / mx);
        }
    }
    free(out);
    trit_gpt_cache_free(k);
    trit_gpt_graph_free(&gg);
    return worst;
}

static double decode_vs_graph(trit_gpt *m, int64_t T, bool eval_mode, trit_dtype kv) {
    return decode_vs_graph_as(m, T, eval_mode, kv, false);
}

// The decoder attends with a full-row softmax, as the straightforward attention op does: against
// a graph with that op the logits differ only by the order of sums (GEMV or a chunk's GEMM against
// the graph's batch GEMM, the attention kernel's key blocks, the row kernels' vector widths). A
// logit's path holds about 20 reductions whose order differs (per block: norm, qkv, scores,
// softmax, values, proj, norm, fc, proj; then the final norm and the head); each moves its result
// by about the unit roundoff u = 2^-24 relative to the largest logit (its roundings are a random
// walk over a few partial sums of length C / width, not the worst case C u), so about 20 u, and
// the normalisations' division by the row's scale can grow that: the bound is 32 u = 1.9e-6
// (measured at most 9.9e-7 on AMD EPYC Zen 3 at every level, 1.08e-6 on Zen 4 with AVX-512).
// Flash attention's online softmax rescales its partial sums once per key tile, one more
// rounding of the attention output per block: 36 u = 2.1e-6 (measured at most 1.12e-6).
static void test_decode_matches_graph(void **state) {
    (void)state;
    for (int layout = 0; layout < 32; layout++) {
        bool rms = layout & 1, swiglu = layout & 2, rope = layout & 4, bias = !(layout & 8), subln = layout & 16;
        trit_gpt_config c = small_config(rms, swiglu, rope, bias);
        c.subln = subln;
        trit_gpt *m = trit_gpt_new(&c, 100 + (uint64_t)layout);
        c.naive_attention = true;
        trit_gpt *mn = trit_gpt_new(&c, 100 + (uint64_t)layout);
        assert_non_null(m);
        assert_non_null(mn);
        perturb(m, 7);
        perturb(mn, 7);
        double e = decode_vs_graph(m, 16, false, TRIT_F32), e16 = decode_vs_graph(m, 16, false, TRIT_F16);
        double en = decode_vs_graph(mn, 16, false, TRIT_F32), enp = decode_vs_graph_as(mn, 16, false, TRIT_F32, true);
        print_message("decode vs graph (%s, %s, %s, %s%s): max rel error %.3g (straightforward attention: %.3g, "
                      "prefill %.3g), with an f16 KV cache %.3g\n", rms ? "rms" : "layernorm", swiglu ? "swiglu" : "gelu",
                      rope ? "rope" : "learned pos", bias ? "bias" : "no bias", subln ? ", subln" : "", e, en, enp, e16);
        const double u = 0x1p-24;
        if (!(en <= 32 * u && enp <= 32 * u))
            fail_msg("layout %d: decode differs from the graph by %.3g, prefill by %.3g > 32 u", layout, en, enp);
        if (!(e <= 36 * u)) fail_msg("layout %d: decode differs from the flash-attention graph by %.3g > 36 u", layout, e);
        // Keys and values rounded to f16 (relative error <= 2^-11) move the logits by about that
        // much; they must move them (the cache really is f16) and not by more than 4e-3.
        if (!(e16 > e && e16 <= 4e-3))
            fail_msg("layout %d: with an f16 KV cache decode differs from the graph by %.3g (f32 cache %.3g)", layout,
                     e16, e);
        trit_gpt_free(m);
        trit_gpt_free(mn);
    }
    // With dropout configured, the graph in eval mode is the model decoding computes: the same
    // bound as without dropout (flash attention, 1.5e-6).
    trit_gpt_config c = small_config(false, false, false, true);
    c.dropout = 0.2;
    trit_gpt *m = trit_gpt_new(&c, 5);
    perturb(m, 8);
    double e = decode_vs_graph(m, 11, true, TRIT_F32);
    print_message("decode vs the eval-mode graph of a model with dropout: %.3g\n", e);
    if (!(e <= 1.5e-6)) fail_msg("with dropout configured, decode differs from the eval-mode graph by %.3g > 1.5e-6", e);
    assert_true(decode_vs_graph(m, 11, false, TRIT_F32) > 1e-3);  // training mode drops activations
    assert_null(trit_gpt_cache_new_kv(m, TRIT_BF16));
    assert_non_null(strstr(trit_last_error(), "f32 or f16"));
    trit_gpt_free(m);
}

// The same seed gives the same shared tensors with and without SubLN (init is keyed by name), so
// any difference in the logits is the sub-norms' doing: they must be in both the graph and the
// decoder (decode_vs_graph checks that the two agree), and a prompt fed at once (prefill) must
// match token-by-token decoding.
static void test_subln_changes_output(void **state) {
    (void)state;
    trit_gpt_config c = small_config(false, false, false, true);
    trit_gpt *plain = trit_gpt_new(&c, 9);
    c.subln = true;
    trit_gpt *sub = trit_gpt_new(&c, 9);
    assert_non_null(plain);
    assert_non_null(sub);
    const int64_t V = c.vocab_size;
    trit_gpt_cache *kp = trit_gpt_cache_new(plain), *ks = trit_gpt_cache_new(sub), *kf = trit_gpt_cache_new(sub);
    float *lp = malloc(sizeof(float) * (size_t)V), *ls = malloc(sizeof(float) * (size_t)V),
          *lf = malloc(sizeof(float) * (size_t)V);
    const int32_t prompt[6] = {1, 5, 2, 7, 3, 0};
    for (int t = 0; t < 6; t++) {
        assert_int_equal(trit_gpt_decode(plain, kp, prompt[t], lp), TRIT_OK);
        assert_int_equal(trit_gpt_decode(sub, ks, prompt[t], ls), TRIT_OK);
    }
    assert_int_equal(trit_gpt_prefill(sub, kf, prompt, 6, lf), TRIT_OK);
    double diff = 0, pre = 0;
    for (int64_t i = 0; i < V; i++) {
        diff = fmax(diff, fabs((double)lp[i] - ls[i]));
        pre = fmax(pre, fabs((double)lf[i] - ls[i]));
    }
    print_message("subln: max |logit change| %.3g, prefill vs decode %.3g\n", diff, pre);
    assert_true(diff > 1e-3);
    assert_true(pre <= 1e-5);
    free(lp);
    free(ls);
    free(lf);
    trit_gpt_cache_free(kp);
    trit_gpt_cache_free(ks);
    trit_gpt_cache_free(kf);
    trit_gpt_free(plain);
    trit_gpt_free(sub);
}

// ---- PyTorch parity --------------------------------------------------------------------------

typedef struct layout {
    const char *name;
    bool rms, swiglu, rope, bias;
} layout;

static const layout LAYOUTS[2] = {
    {"gpt2", false, false, false, true},
    {"rms_swiglu_rope", true, true, true, false},
};

static void fixture_path(char *buf, size_t n, const char *name, const char *suffix) {
    const char *root = getenv("TRIT_SOURCE_DIR");
    snprintf(buf, n, "%s/tests/reference/fixtures/gpt_%s%s.safetensors", root ? root : ".", name, suffix);
}

// Writes the weights the PyTorch script loads (see the file comment).
static int write_fixtures(void) {
    for (int i = 0; i < 2; i++) {
        const layout *l = &LAYOUTS[i];
        trit_gpt_config c = small_config(l->rms, l->swiglu, l->rope, l->bias);
        trit_gpt *m = trit_gpt_new(&c, 2024 + (uint64_t)i);
        if (!m) return 1;
        perturb(m, 99);
        int n = trit_gpt_num_tensors(m);
        trit_safetensors_entry *e = calloc((size_t)n, sizeof *e);
        for (int j = 0; j < n; j++) e[j] = (trit_safetensors_entry){trit_gpt_tensor(m, j)->name, trit_gpt_tensor(m, j)};
        char buf[8][32], path[1024];
        snprintf(buf[0], 32, "%lld", (long long)c.vocab_size);
        snprintf(buf[1], 32, "%lld", (long long)c.seq_len);
        snprintf(buf[2], 32, "%lld", (long long)c.n_layer);
        snprintf(buf[3], 32, "%lld", (long long)c.n_head);
        snprintf(buf[4], 32, "%lld", (long long)c.n_embd);
        snprintf(buf[5], 32, "%lld", (long long)trit_gpt_mlp_hidden(&c));
        snprintf(buf[6], 32, "%.17g", c.rope_theta);
        snprintf(buf[7], 32, "%.17g", c.norm_eps);
        const trit_safetensors_kv meta[12] = {
            {"vocab_size", buf[0]}, {"seq_len", buf[1]}, {"n_layer", buf[2]}, {"n_head", buf[3]},
            {"n_embd", buf[4]}, {"mlp_hidden", buf[5]}, {"rope_theta", buf[6]}, {"norm_eps", buf[7]},
            {"norm", l->rms ? "rms" : "layer"}, {"mlp", l->swiglu ? "swiglu" : "gelu"},
            {"pos", l->rope ? "rope" : "learned"}, {"bias", l->bias ? "true" : "false"},
        };
        fixture_path(path, sizeof path, l->name, "");
        trit_status s = trit_safetensors_write(path, e, n, meta, 12);
        free(e);
        trit_gpt_free(m);
        if (s != TRIT_OK) {
            fprintf(stderr, "%s\n", trit_last_error());
            return 1;
        }
        printf("wrote %s\n", path);
    }
    return 0;
}

// max|got - want| / max|want| over a tensor, against a float32 reference tensor of the file.
static double rel_err(const float *got, const trit_safetensors *ref, const char *name, int64_t n) {
    const trit_safetensors_info *info = trit_safetensors_find(ref, name);
    if (!info) fail_msg("reference tensor %s missing: rerun tests/reference/make_gpt_fixtures.py", name);
    trit_tensor *want = trit_tensor_new(TRIT_F32, info->ndim, info->shape);
    assert_int_equal(trit_safetensors_load(ref, name, want), TRIT_OK);
    assert_int_equal(trit_tensor_numel(want), n);
    const float *w = want->data;
    double mx = 0, err = 0;
    for (int64_t i = 0; i < n; i++) {
        mx = fmax(mx, fabs(w[i]));
        err = fmax(err, fabs((double)got[i] - w[i]));
    }
    trit_tensor_free(want);
    return mx > 0 ? err / mx : err;
}

static void load_tokens(const trit_safetensors *ref, const char *name, trit_tensor *dst) {
    assert_int_equal(trit_safetensors_load(ref, name, dst), TRIT_OK);
}

// 10 AdamW steps on the same batch, clipped at global norm 1: the loss before each step and
// after the last against the reference's "adamw_losses", within tol relative.
static void check_adamw(const char *what, trit_gpt *m, trit_gpt_graph *gg, const trit_safetensors *ref, double tol) {
    trit_tensor *params[64];
    int n = trit_gpt_num_tensors(m);
    assert_true(n <= 64);
    for (int i = 0; i < n; i++) params[i] = trit_gpt_tensor(m, i);
    trit_optim_config oc = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *o = trit_optim_new_gpt2(&oc, params, n, 0.1);
    assert_non_null(o);
    const trit_safetensors_info *li = trit_safetensors_find(ref, "adamw_losses");
    assert_non_null(li);
    const int64_t steps = li->shape[0];
    float *losses = malloc(sizeof(float) * (size_t)steps);
    for (int64_t s = 0; s < steps; s++) {
        trit_optim_zero_grad(o);
        assert_int_equal(trit_graph_forward(gg->graph), TRIT_OK);
        losses[s] = *(const float *)gg->loss->data;
        if (s + 1 == steps) break;  // the last entry is the loss after the final update
        assert_int_equal(trit_graph_backward(gg->graph), TRIT_OK);
        double norm;
        assert_int_equal(trit_optim_clip_grads(o, 1.0, &norm), TRIT_OK);
        assert_int_equal(trit_optim_step(o, 1e-3), TRIT_OK);
    }
    trit_tensor *got = trit_tensor_wrap(TRIT_F32, 1, &steps, losses);
    trit_tensor *want = trit_tensor_new(TRIT_F32, 1, &steps);
    assert_int_equal(trit_safetensors_load(ref, "adamw_losses", want), TRIT_OK);
    double e_steps = 0;
    for (int64_t s = 0; s < steps; s++)
        e_steps = fmax(e_steps, fabs((double)losses[s] - ((float *)want->data)[s]) / fabs(((float *)want->data)[s]));
    print_message("%s: AdamW losses %.5f -> %.5f, max rel error vs PyTorch %.3g\n", what, losses[0],
                  losses[steps - 1], e_steps);
    assert_true(losses[steps - 1] < losses[0] - 0.05);
    if (!(e_steps <= tol)) fail_msg("%s: AdamW losses differ from PyTorch by %.3g > %.3g", what, e_steps, tol);
    trit_tensor_free(got);
    trit_tensor_free(want);
    free(losses);
    trit_optim_free(o);
}

// The layout's model with the weights the fixture scripts read.
static trit_gpt *fixture_model(const layout *l, trit_gpt_config *c) {
    char path[1024];
    *c = small_config(l->rms, l->swiglu, l->rope, l->bias);
    trit_gpt *m = trit_gpt_new(c, 1);
    assert_non_null(m);
    fixture_path(path, sizeof path, l->name, "");
    trit_safetensors *w = trit_safetensors_open(path);
    if (!w) fail_msg("%s", trit_last_error());
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        if (trit_safetensors_load(w, t->name, t) != TRIT_OK) fail_msg("%s", trit_last_error());
    }
    trit_safetensors_close(w);
    return m;
}

static void parity(const layout *l) {
    char path[1024];
    trit_gpt_config c;
    trit_gpt *m = fixture_model(l, &c);
    fixture_path(path, sizeof path, l->name, "_ref");
    trit_safetensors *ref = trit_safetensors_open(path);
    if (!ref) fail_msg("%s", trit_last_error());

    trit_gpt_graph gg;
    const int64_t B = 2, T = c.seq_len, V = c.vocab_size;
    assert_int_equal(trit_gpt_build(m, B, T, &gg), TRIT_OK);
    load_tokens(ref, "idx", gg.idx);
    load_tokens(ref, "targets", gg.targets);
    trit_graph_zero_grad(gg.graph);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
    double e_logits = rel_err(gg.logits->data, ref, "logits", B * T * V);
    double e_loss = rel_err(gg.loss->data, ref, "loss", 1);
    double e_grad = 0;
    const char *worst = "";
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        char name[128];
        snprintf(name, sizeof name, "grad.%s", t->name);
        assert_non_null(t->grad);
        double e = rel_err(t->grad->data, ref, name, trit_tensor_numel(t));
        if (e > 1e-5) fail_msg("%s: gradient of %s differs from PyTorch by %.3g of its max > 1e-5", l->name, t->name, e);
        if (e > e_grad) {
            e_grad = e;
            worst = t->name;
        }
    }
    print_message("%s vs PyTorch: logits %.3g, loss %.3g, worst gradient %.3g (%s)\n", l->name, e_logits, e_loss,
                  e_grad, worst);
    if (!(e_logits <= 1e-5 && e_loss <= 1e-5)) fail_msg("%s: logits or loss differ from PyTorch", l->name);

    check_adamw(l->name, m, &gg, ref, 1e-5);
    trit_gpt_graph_free(&gg);
    trit_safetensors_close(ref);
    trit_gpt_free(m);
}

// The bf16 policy (matmul inputs bf16, fp32 accumulation, norms/softmax/loss fp32) against
// torch.autocast("cpu", bfloat16) on the same weights and batch. The two round different
// values (PyTorch's CPU autocast also rounds linear outputs and runs attention's matmuls in
// bf16), so they agree only to bf16's resolution: the limits below are a few bf16 steps
// (2^-8 = 3.9e-3), two to three times what was measured (logits 6.2e-3, loss 1.5e-4,
// gradients 1.6e-2); PyTorch's own autocast logits differ from its fp32 ones by 5e-3 to 6e-3
// of their max on these models.
static void parity_bf16(const layout *l) {
    char path[1024];
    trit_gpt_config c;
    trit_gpt *m = fixture_model(l, &c);
    const trit_compute_policy bf16 = {TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM};
    assert_int_equal(trit_gpt_set_policy(m, &bf16), TRIT_OK);
    fixture_path(path, sizeof path, l->name, "_ref");
    trit_safetensors *tok = trit_safetensors_open(path);
    fixture_path(path, sizeof path, l->name, "_autocast_bf16");
    trit_safetensors *ref = trit_safetensors_open(path);
    if (!tok || !ref) fail_msg("%s", trit_last_error());
    trit_gpt_graph gg;
    const int64_t B = 2, T = c.seq_len, V = c.vocab_size;
    assert_int_equal(trit_gpt_build(m, B, T, &gg), TRIT_OK);
    load_tokens(tok, "idx", gg.idx);
    load_tokens(tok, "targets", gg.targets);
    trit_graph_zero_grad(gg.graph);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
    const double e_logits = rel_err(gg.logits->data, ref, "logits", B * T * V);
    const double e_loss = rel_err(gg.loss->data, ref, "loss", 1);
    double e_grad = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        char name[128];
        snprintf(name, sizeof name, "grad.%s", t->name);
        e_grad = fmax(e_grad, rel_err(t->grad->data, ref, name, trit_tensor_numel(t)));
    }
    print_message("%s bf16 vs PyTorch bf16 autocast: logits %.3g, loss %.3g, worst gradient %.3g\n", l->name,
                  e_logits, e_loss, e_grad);
    if (!(e_logits <= 1.5e-2 && e_loss <= 1e-3 && e_grad <= 4e-2))
        fail_msg("%s: bf16 differs from PyTorch's bf16 autocast beyond 1.5e-2 (logits), 1e-3 (loss), 4e-2 "
                 "(gradients)", l->name);
    char what[64];
    snprintf(what, sizeof what, "%s bf16", l->name);
    check_adamw(what, m, &gg, ref, 1e-3);  // measured 1.5e-4
    trit_gpt_graph_free(&gg);
    trit_safetensors_close(tok);
    trit_safetensors_close(ref);
    trit_gpt_free(m);
}

static void test_pytorch_parity_bf16_autocast(void **state) {
    (void)state;
    parity_bf16(&LAYOUTS[0]);
    parity_bf16(&LAYOUTS[1]);
}

static void test_pytorch_parity_gpt2(void **state) {
    (void)state;
    parity(&LAYOUTS[0]);
}

static void test_pytorch_parity_rms_swiglu_rope(void **state) {
    (void)state;
    parity(&LAYOUTS[1]);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--write-fixtures") == 0) return write_fixtures();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_param_count_and_names),
        cmocka_unit_test(test_init_statistics),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_decode_matches_graph),
        cmocka_unit_test(test_subln_changes_output),
        cmocka_unit_test(test_pytorch_parity_gpt2),
        cmocka_unit_test(test_pytorch_parity_rms_swiglu_rope),
        cmocka_unit_test(test_pytorch_parity_bf16_autocast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
