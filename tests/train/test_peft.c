// LoRA adapters in PEFT's layout: against peft itself (fixtures from
// tests/reference/make_peft_fixtures.py: peft's logits with trit's adapter on transformers'
// GPT-2, and peft's own save of it), a save and load round trip, `trit merge`, and adapters that
// do not fit the base; bf16 adapters saved as BF16 and merged as their widening.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "trit/trit.h"

enum { T = 16 };

static const char *fixture(const char *name) {
    static char buf[4][1024];
    static int k;
    const char *root = getenv("TRIT_SOURCE_DIR");
    char *b = buf[k++ % 4];
    snprintf(b, sizeof buf[0], "%s/tests/reference/fixtures/peft_lora/%s", root ? root : ".", name);
    return b;
}

// Logits (T, V) of tokens by the graph.
static void logits_of(trit_gpt *m, const int32_t *tokens, float *out) {
    const int64_t V = trit_gpt_get_config(m)->vocab_size;
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, 1, T, &gg), TRIT_OK);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets);
    for (int t = 0; t < T; t++) idx[t] = tokens[t], tg[t] = 0;
    trit_graph_set_training(gg.graph, false);
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    memcpy(out, trit_tensor_ptr(gg.logits), sizeof(float) * (size_t)(T * V));
    trit_gpt_graph_free(&gg);
}

static float max_abs_diff(const float *a, const float *b, int64_t n, float *most) {
    float d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) d = fmaxf(d, fabsf(a[i] - b[i])), m = fmaxf(m, fabsf(b[i]));
    *most = m;
    return d;
}

// peft's tokens and logits.
static trit_tensor *read_fixture(const char *name) {
    trit_safetensors *f = trit_safetensors_open(fixture("logits.safetensors"));
    assert_non_null(f);
    trit_tensor *t = trit_safetensors_read_tensor(f, name);
    assert_non_null(t);
    trit_safetensors_close(f);
    return t;
}

// The base with an adapter dir, its logits against peft's: fp32 on both sides, the same
// function up to summation order (the tolerance is float rounding through two blocks).
static void check_against_peft(const char *adapter) {
    trit_gpt *m = trit_checkpoint_load_adapted(fixture("base.safetensors"), adapter, false);
    assert_non_null(m);
    trit_tensor *tok = read_fixture("tokens"), *want = read_fixture("logits");
    const int64_t V = trit_gpt_get_config(m)->vocab_size;
    assert_int_equal(want->shape[0], T);
    assert_int_equal(want->shape[1], V);
    float *got = malloc(sizeof(float) * (size_t)(T * V)), most;
    logits_of(m, trit_tensor_ptr(tok), got);
    const float d = max_abs_diff(got, trit_tensor_ptr(want), T * V, &most);
    assert_true(d <= 1e-5f * most + 1e-6f);
    // And through the decoder, which adds the same product beside its own kernels.
    trit_gpt_cache *k = trit_gpt_cache_new(m);
    float *row = malloc(sizeof(float) * (size_t)V);
    for (int t = 0; t < T; t++) {
        assert_int_equal(trit_gpt_decode(m, k, ((const int32_t *)trit_tensor_ptr(tok))[t], row), TRIT_OK);
        assert_true(max_abs_diff(row, (const float *)trit_tensor_ptr(want) + t * V, V, &most) <= 1e-5f * most + 1e-6f);
    }
    trit_gpt_cache_free(k);
    free(row);
    free(got);
    trit_tensor_free(tok);
    trit_tensor_free(want);
    trit_gpt_free(m);
}

static void test_peft_logits(void **state) {
    (void)state;
    check_against_peft(fixture("adapter_trit"));  // peft read trit's files: the same function
    check_against_peft(fixture("adapter_peft"));  // trit reads peft's own save
}

static cJSON *read_json(const char *path) {
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(path, &d, &n), TRIT_OK);
    cJSON *o = cJSON_Parse((const char *)d);
    free(d);
    assert_non_null(o);
    return o;
}

static bool in_list(const cJSON *list, const char *s) {
    for (const cJSON *x = list->child; x; x = x->next)
        if (cJSON_IsString(x) && strcmp(x->valuestring, s) == 0) return true;
    return false;
}

// What trit writes for the adapter it loaded from peft's save: the same tensor names and
// shapes, and the same settings in adapter_config.json.
static void test_layout_matches_peft(void **state) {
    (void)state;
    trit_gpt *m = trit_checkpoint_load_adapted(fixture("base.safetensors"), fixture("adapter_peft"), false);
    assert_non_null(m);
    char dir[512];
    tfile_mkdtemp(dir, sizeof dir, "peft");
    assert_int_equal(trit_peft_save(m, dir, "base"), TRIT_OK);
    trit_safetensors *ours = trit_safetensors_open(tfile_join(dir, TRIT_PEFT_WEIGHTS));
    trit_safetensors *theirs = trit_safetensors_open(fixture("adapter_peft/" TRIT_PEFT_WEIGHTS));
    assert_non_null(ours);
    assert_non_null(theirs);
    assert_int_equal(trit_safetensors_count(ours), trit_safetensors_count(theirs));
    assert_int_equal(trit_safetensors_count(ours), 2 * 4 * 2);  // 2 layers x 4 matrices x (A, B)
    for (int64_t i = 0; i < trit_safetensors_count(theirs); i++) {
        const trit_safetensors_info *b = trit_safetensors_at(theirs, i), *a = trit_safetensors_find(ours, b->name);
        assert_non_null(a);
        assert_int_equal(a->ndim, b->ndim);
        for (int d = 0; d < a->ndim; d++) assert_int_equal(a->shape[d], b->shape[d]);
        assert_int_equal(a->dtype, b->dtype);
    }
    const trit_safetensors_info *qa = trit_safetensors_find(theirs, "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
    assert_non_null(qa);
    assert_int_equal(qa->shape[0], 4), assert_int_equal(qa->shape[1], 32);  // (r, in)
    trit_safetensors_close(ours);
    trit_safetensors_close(theirs);
    cJSON *a = read_json(tfile_join(dir, TRIT_PEFT_CONFIG)), *b = read_json(fixture("adapter_peft/" TRIT_PEFT_CONFIG));
    const char *same[] = {"peft_type", "r", "lora_alpha", "lora_dropout", "use_rslora", "fan_in_fan_out", "bias", "use_dora"};
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, same[i]), *y = cJSON_GetObjectItemCaseSensitive(b, same[i]);
        assert_non_null(x);
        assert_non_null(y);
        assert_true(cJSON_Compare(x, y, true));
    }
    const cJSON *ta = cJSON_GetObjectItemCaseSensitive(a, "target_modules"), *tb = cJSON_GetObjectItemCaseSensitive(b, "target_modules");
    assert_int_equal(cJSON_GetArraySize(ta), cJSON_GetArraySize(tb));  // peft keeps a set: order aside
    for (const cJSON *x = ta->child; x; x = x->next) assert_true(in_list(tb, x->valuestring));
    cJSON_Delete(a);
    cJSON_Delete(b);
    tfile_rm_rf(dir);
    trit_gpt_free(m);
}

// A model with an adapter, saved and loaded onto the same base: the same bits.
static void test_round_trip(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.seq_len = T, c.vocab_size = 40;
    trit_gpt *plain = trit_gpt_new(&c, 8);
    assert_int_equal(trit_adapter_parse_lora("r=3,alpha=6,targets=c_fc,attn.c_proj,rslora", &c.adapter), TRIT_OK);
    trit_gpt *m = trit_gpt_new(&c, 8);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        if (strstr(trit_gpt_tensor(m, i)->name, "lora_B")) trit_tensor_fill_normal(trit_gpt_tensor(m, i), 0, 0.1, 1, (uint64_t)i);
    char dir[512];
    tfile_mkdtemp(dir, sizeof dir, "peft");
    assert_int_equal(trit_peft_save(m, dir, NULL), TRIT_OK);
    assert_int_equal(trit_peft_load(plain, dir), TRIT_OK);
    assert_int_equal(trit_gpt_num_tensors(plain), trit_gpt_num_tensors(m));
    const trit_adapter_config *x = &trit_gpt_get_config(plain)->adapter, *y = &c.adapter;
    assert_true(x->r == y->r && x->alpha == y->alpha && x->rslora && strcmp(x->targets, y->targets) == 0);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *a = trit_gpt_tensor(m, i), *b = trit_gpt_tensor(plain, i);
        assert_string_equal(a->name, b->name);
        assert_memory_equal(trit_tensor_ptr(a), trit_tensor_ptr(b), sizeof(float) * (size_t)trit_tensor_numel(a));
    }
    tfile_rm_rf(dir);
    trit_gpt_free(plain);
    trit_gpt_free(m);
}

// --lora-init: an adapter's values read into a model that has the same adapter from another seed
// give it the saved bits, every tensor; an adapter of another rank is refused by its shapes.
static void test_read_values(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.seq_len = T, c.vocab_size = 40;
    assert_int_equal(trit_adapter_parse_lora("r=4,alpha=8,targets=c_attn,c_proj,c_fc", &c.adapter), TRIT_OK);
    trit_gpt *saved = trit_gpt_new(&c, 8), *fresh = trit_gpt_new(&c, 9);
    int lora = 0;
    for (int i = 0; i < trit_gpt_num_tensors(saved); i++)
        if (strstr(trit_gpt_tensor(saved, i)->name, "lora_B")) {
            trit_tensor_fill_normal(trit_gpt_tensor(saved, i), 0, 0.1, 1, (uint64_t)i);
            lora++;
        }
    assert_int_equal(lora, 8);  // 2 blocks x c_attn, attn.c_proj, c_fc, mlp.c_proj
    char dir[512];
    tfile_mkdtemp(dir, sizeof dir, "peft-init");
    assert_int_equal(trit_peft_save(saved, dir, NULL), TRIT_OK);
    const trit_tensor *a0 = trit_gpt_find(fresh, "h.0.attn.c_attn.lora_A.weight");
    assert_non_null(a0);
    assert_memory_not_equal(trit_tensor_ptr(a0), trit_tensor_ptr(trit_gpt_find(saved, "h.0.attn.c_attn.lora_A.weight")),
                            trit_tensor_nbytes(a0));  // another seed: other values before reading
    assert_int_equal(trit_peft_read_values(fresh, dir), TRIT_OK);
    for (int i = 0; i < trit_gpt_num_tensors(saved); i++) {
        const trit_tensor *a = trit_gpt_tensor(saved, i), *b = trit_gpt_tensor(fresh, i);
        assert_string_equal(a->name, b->name);
        if (strstr(a->name, ".lora_")) assert_memory_equal(trit_tensor_ptr(a), trit_tensor_ptr(b), trit_tensor_nbytes(a));
    }
    assert_int_equal(trit_adapter_parse_lora("r=2,alpha=8,targets=c_attn,c_proj,c_fc", &c.adapter), TRIT_OK);
    trit_gpt *other = trit_gpt_new(&c, 9);
    assert_int_not_equal(trit_peft_read_values(other, dir), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "made for another base model"));
    tfile_rm_rf(dir);
    trit_gpt_free(other);
    trit_gpt_free(fresh);
    trit_gpt_free(saved);
}

// A bottleneck adapter in the same files (trit's own peft_type): the same bits back; onto a base
// of another width it is refused.
static void test_bottleneck_files(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.seq_len = T, c.vocab_size = 40;
    trit_gpt *plain = trit_gpt_new(&c, 8);
    trit_gpt_config wide = c;
    wide.n_embd = 64;
    trit_gpt *other = trit_gpt_new(&wide, 8);
    c.adapter = trit_adapter_bottleneck(6);
    trit_gpt *m = trit_gpt_new(&c, 8);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        if (strstr(trit_gpt_tensor(m, i)->name, ".adapter.up")) trit_tensor_fill_normal(trit_gpt_tensor(m, i), 0, 0.1, 1, (uint64_t)i);
    char dir[512];
    tfile_mkdtemp(dir, sizeof dir, "bottleneck");
    assert_int_equal(trit_peft_save(m, dir, NULL), TRIT_OK);
    trit_safetensors *f = trit_safetensors_open(tfile_join(dir, TRIT_PEFT_WEIGHTS));
    assert_non_null(trit_safetensors_find(f, "base_model.model.transformer.h.1.mlp.adapter.up.weight"));
    assert_int_equal(trit_safetensors_count(f), 2 * 2 * 4);
    trit_safetensors_close(f);
    assert_int_equal(trit_peft_load(plain, dir), TRIT_OK);
    assert_int_equal(trit_gpt_get_config(plain)->adapter.kind, TRIT_ADAPTER_BOTTLENECK);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *a = trit_gpt_tensor(m, i), *b = trit_gpt_tensor(plain, i);
        assert_string_equal(a->name, b->name);
        assert_memory_equal(trit_tensor_ptr(a), trit_tensor_ptr(b), sizeof(float) * (size_t)trit_tensor_numel(a));
    }
    assert_int_equal(trit_peft_load(other, dir), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "made for another base model"));
    tfile_rm_rf(dir);
    trit_gpt_free(plain);
    trit_gpt_free(other);
    trit_gpt_free(m);
}

// `trit merge`: the merged run computes the adapted model's logits; a bad adapter leaves no run.
static void test_merge_run(void **state) {
    (void)state;
    char dir[512], out[600];
    tfile_mkdtemp(dir, sizeof dir, "merge");
    snprintf(out, sizeof out, "%s/merged", dir);
    assert_int_equal(trit_merge_adapter_run(fixture("base.safetensors"), fixture("adapter_trit"), out), TRIT_OK);
    trit_gpt *merged = trit_checkpoint_load_model(out, NULL);
    assert_non_null(merged);
    assert_int_equal(trit_gpt_get_config(merged)->adapter.kind, TRIT_ADAPTER_NONE);
    trit_tensor *tok = read_fixture("tokens"), *want = read_fixture("logits");
    const int64_t V = trit_gpt_get_config(merged)->vocab_size;
    float *got = malloc(sizeof(float) * (size_t)(T * V)), most;
    logits_of(merged, trit_tensor_ptr(tok), got);
    assert_true(max_abs_diff(got, trit_tensor_ptr(want), T * V, &most) <= 1e-5f * most + 1e-6f);
    assert_int_not_equal(trit_merge_adapter_run(fixture("base.safetensors"), fixture("adapter_trit"), out), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "holds a model already"));
    free(got);
    trit_tensor_free(tok);
    trit_tensor_free(want);
    trit_gpt_free(merged);
    tfile_rm_rf(dir);
}

// A copy of the fixture adapter with its config's text edited (from -> to), in dir.
static void edited_adapter(const char *dir, const char *from, const char *to) {
    uint8_t *d = NULL, *w = NULL;
    size_t n = 0, nw = 0;
    assert_int_equal(trit_file_read_all(fixture("adapter_trit/" TRIT_PEFT_CONFIG), &d, &n), TRIT_OK);
    char *at = strstr((char *)d, from);
    assert_non_null(at);
    char *text = malloc(n + strlen(to) + 1);
    snprintf(text, n + strlen(to) + 1, "%.*s%s%s", (int)(at - (char *)d), (char *)d, to, at + strlen(from));
    tfile_write(tfile_join(dir, TRIT_PEFT_CONFIG), text, strlen(text));
    assert_int_equal(trit_file_read_all(fixture("adapter_trit/" TRIT_PEFT_WEIGHTS), &w, &nw), TRIT_OK);
    tfile_write(tfile_join(dir, TRIT_PEFT_WEIGHTS), w, nw);
    free(text), free(d), free(w);
}

// Adapters that do not fit the base: refused with the reason, and `trit merge` writes nothing.
static void test_bad_adapters(void **state) {
    (void)state;
    char dir[512], out[600];
    tfile_mkdtemp(dir, sizeof dir, "bad");
    snprintf(out, sizeof out, "%s/merged", dir);
    const trit_gpt_config *bc;
    trit_gpt *base = trit_checkpoint_load_model(fixture("base.safetensors"), NULL);
    assert_non_null(base);
    bc = trit_gpt_get_config(base);
    // Another base: a wider model (shapes), and one with one layer (names the file has extra).
    trit_gpt_config wide = *bc, shallow = *bc;
    wide.n_embd = 64;
    shallow.n_layer = 1;
    trit_gpt *w = trit_gpt_new(&wide, 1), *s = trit_gpt_new(&shallow, 1);
    assert_int_equal(trit_peft_load(w, fixture("adapter_trit")), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "made for another base model"));
    assert_int_equal(trit_peft_load(s, fixture("adapter_trit")), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "h.1.attn.c_attn.lora_A.weight"));
    trit_gpt_free(w), trit_gpt_free(s);
    // A target matching nothing; a rank larger than a layer; a regex target; a DoRA adapter.
    const char *edits[][3] = {{"\"c_fc\"", "\"q_proj\"", "matches no module"},
                              {"\"r\":\t4", "\"r\":\t33", "larger than"},
                              {"[\"c_attn\", \"attn.c_proj\", \"c_fc\", \"mlp.c_proj\"]", "\".*c_attn\"", "regular expression"},
                              {"\"use_dora\":\tfalse", "\"use_dora\":\ttrue", "use_dora"}};
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        char ad[600];
        snprintf(ad, sizeof ad, "%s/ad%zu", dir, i);
        assert_int_equal(trit_make_dir(ad, NULL), TRIT_OK);
        edited_adapter(ad, edits[i][0], edits[i][1]);
        assert_int_not_equal(trit_merge_adapter_run(fixture("base.safetensors"), ad, out), TRIT_OK);
        assert_non_null(strstr(trit_last_error(), edits[i][2]));
        assert_false(tfile_exists(out));
    }
    trit_gpt_free(base);
    tfile_rm_rf(dir);
}

// A bf16 adapter (--adapter-dtype bf16) is saved as BF16 tensors, its trained bits: read back
// into a bf16 adapter they are the same bits, into an f32 one (`--adapter`, `trit merge`) their
// exact widening.
static void test_bf16_round_trip(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.seq_len = T, c.vocab_size = 40;
    trit_gpt *plain = trit_gpt_new(&c, 8);
    assert_int_equal(trit_adapter_parse_lora("r=3,alpha=6,targets=c_attn,c_fc", &c.adapter), TRIT_OK);
    trit_gpt *m = trit_gpt_new(&c, 8), *back = trit_gpt_new(&c, 9);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        if (strstr(trit_gpt_tensor(m, i)->name, "lora_B")) trit_tensor_fill_normal(trit_gpt_tensor(m, i), 0, 0.1, 1, (uint64_t)i);
    assert_int_equal(trit_gpt_set_adapter_dtype(m, TRIT_BF16), TRIT_OK);
    assert_int_equal(trit_gpt_set_adapter_dtype(back, TRIT_BF16), TRIT_OK);
    char dir[512];
    tfile_mkdtemp(dir, sizeof dir, "peft-bf16");
    assert_int_equal(trit_peft_save(m, dir, NULL), TRIT_OK);
    trit_safetensors *f = trit_safetensors_open(tfile_join(dir, TRIT_PEFT_WEIGHTS));
    assert_non_null(f);
    assert_int_equal(trit_safetensors_count(f), 2 * 2 * 2);
    for (int64_t i = 0; i < trit_safetensors_count(f); i++) assert_string_equal(trit_safetensors_at(f, i)->dtype_name, "BF16");
    trit_safetensors_close(f);
    assert_int_equal(trit_peft_read_values(back, dir), TRIT_OK);
    assert_int_equal(trit_peft_load(plain, dir), TRIT_OK);
    int adapters = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *a = trit_gpt_tensor(m, i), *b = trit_gpt_tensor(back, i), *w = trit_gpt_tensor(plain, i);
        if (!strstr(a->name, ".lora_")) continue;
        adapters++;
        assert_int_equal(b->dtype, TRIT_BF16);
        assert_memory_equal(trit_tensor_ptr(a), trit_tensor_ptr(b), trit_tensor_nbytes(a));
        assert_int_equal(w->dtype, TRIT_F32);
        const uint16_t *h = trit_tensor_ptr(a);
        const float *x = trit_tensor_ptr(w);
        for (int64_t k = 0; k < trit_tensor_numel(a); k++) {
            const uint32_t bits = (uint32_t)h[k] << 16;  // bf16 is the top half of an f32
            float want;
            memcpy(&want, &bits, sizeof want);
            assert_memory_equal(&x[k], &want, sizeof want);
        }
    }
    assert_int_equal(adapters, 2 * 2 * 2);
    tfile_rm_rf(dir);
    trit_gpt_free(plain);
    trit_gpt_free(back);
    trit_gpt_free(m);
}

// The model files of two `trit merge` runs hold the same bits.
static void same_runs(const char *a, const char *b) {
    trit_gpt *x = trit_checkpoint_load_model(a, NULL), *y = trit_checkpoint_load_model(b, NULL);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(trit_gpt_num_tensors(x), trit_gpt_num_tensors(y));
    for (int i = 0; i < trit_gpt_num_tensors(x); i++)
        assert_memory_equal(trit_tensor_ptr(trit_gpt_tensor(x, i)), trit_tensor_ptr(trit_gpt_tensor(y, i)),
                            trit_tensor_nbytes(trit_gpt_tensor(x, i)));
    trit_gpt_free(x);
    trit_gpt_free(y);
}

// `trit merge` from a BF16 adapter file gives the run that its F32 widening gives, and not the one
// of the F32 adapter it was rounded from (the rounding reaches W).
static void test_bf16_merge_run(void **state) {
    (void)state;
    char dir[512], bf[600], wide[600], ob[700], ow[700], of[700];
    tfile_mkdtemp(dir, sizeof dir, "merge-bf16");
    snprintf(bf, sizeof bf, "%s/bf16", dir), snprintf(wide, sizeof wide, "%s/wide", dir);
    snprintf(ob, sizeof ob, "%s/from-bf16", dir), snprintf(ow, sizeof ow, "%s/from-wide", dir);
    snprintf(of, sizeof of, "%s/from-f32", dir);
    trit_gpt *m = trit_checkpoint_load_adapted(fixture("base.safetensors"), fixture("adapter_trit"), false);
    assert_non_null(m);
    assert_int_equal(trit_make_dir(bf, NULL), TRIT_OK);
    assert_int_equal(trit_make_dir(wide, NULL), TRIT_OK);
    assert_int_equal(trit_gpt_set_adapter_dtype(m, TRIT_BF16), TRIT_OK);
    assert_int_equal(trit_peft_save(m, bf, NULL), TRIT_OK);
    assert_int_equal(trit_gpt_set_adapter_dtype(m, TRIT_F32), TRIT_OK);
    assert_int_equal(trit_peft_save(m, wide, NULL), TRIT_OK);
    trit_gpt_free(m);
    assert_int_equal(trit_merge_adapter_run(fixture("base.safetensors"), bf, ob), TRIT_OK);
    assert_int_equal(trit_merge_adapter_run(fixture("base.safetensors"), wide, ow), TRIT_OK);
    assert_int_equal(trit_merge_adapter_run(fixture("base.safetensors"), fixture("adapter_trit"), of), TRIT_OK);
    same_runs(ob, ow);
    trit_gpt *x = trit_checkpoint_load_model(ob, NULL), *y = trit_checkpoint_load_model(of, NULL);
    const trit_tensor *wx = trit_gpt_find(x, "h.0.attn.c_attn.weight"), *wy = trit_gpt_find(y, "h.0.attn.c_attn.weight");
    assert_memory_not_equal(trit_tensor_ptr(wx), trit_tensor_ptr(wy), trit_tensor_nbytes(wx));
    trit_gpt_free(x);
    trit_gpt_free(y);
    tfile_rm_rf(dir);
}

// An adapter file whose tensor has the right name and shape but is not floating point, or a BF16
// one of another base's shape: refused with the tensor's name and what was expected.
static void test_bad_dtype(void **state) {
    (void)state;
    char dir[512], out[600];
    tfile_mkdtemp(dir, sizeof dir, "bad-dtype");
    snprintf(out, sizeof out, "%s/merged", dir);
    trit_gpt *m = trit_checkpoint_load_adapted(fixture("base.safetensors"), fixture("adapter_trit"), false);
    assert_non_null(m);
    const char *bad = "h.1.mlp.c_fc.lora_B.weight";
    const int n = trit_gpt_num_tensors(m);
    trit_safetensors_entry *e = calloc((size_t)n, sizeof *e);
    char (*names)[TRIT_NAME_MAX + 32] = calloc((size_t)n, sizeof *names);
    trit_tensor *ints = NULL;
    int k = 0;
    for (int i = 0; i < n; i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        if (!strstr(t->name, ".lora_")) continue;
        snprintf(names[k], sizeof names[k], "base_model.model.transformer.%s", t->name);
        if (strcmp(t->name, bad) == 0) ints = trit_tensor_new(TRIT_I32, t->ndim, t->shape);
        e[k] = (trit_safetensors_entry){names[k], strcmp(t->name, bad) == 0 ? ints : t};
        k++;
    }
    assert_non_null(ints);
    uint8_t *cfg = NULL;
    size_t len = 0;
    assert_int_equal(trit_file_read_all(fixture("adapter_trit/" TRIT_PEFT_CONFIG), &cfg, &len), TRIT_OK);
    tfile_write(tfile_join(dir, TRIT_PEFT_CONFIG), cfg, len);
    assert_int_equal(trit_safetensors_write(tfile_join(dir, TRIT_PEFT_WEIGHTS), e, k, NULL, 0), TRIT_OK);
    trit_gpt *base = trit_checkpoint_load_model(fixture("base.safetensors"), NULL);
    assert_int_equal(trit_peft_load(base, dir), TRIT_ERR_DTYPE);
    assert_non_null(strstr(trit_last_error(), "'base_model.model.transformer.h.1.mlp.c_fc.lora_B.weight' is I32; an "
                                              "adapter's tensors are floating point"));
    assert_int_not_equal(trit_merge_adapter_run(fixture("base.safetensors"), dir, out), TRIT_OK);
    assert_false(tfile_exists(out));
    trit_gpt_free(base);
    // A BF16 adapter of rank 4 read into a rank-2 adapter's tensors: the shapes say another base.
    assert_int_equal(trit_gpt_set_adapter_dtype(m, TRIT_BF16), TRIT_OK);
    assert_int_equal(trit_peft_save(m, dir, NULL), TRIT_OK);
    trit_gpt_config c = *trit_gpt_get_config(m);
    assert_int_equal(trit_adapter_parse_lora("r=2,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj", &c.adapter), TRIT_OK);
    trit_gpt *other = trit_gpt_new(&c, 3);
    assert_int_equal(trit_gpt_set_adapter_dtype(other, TRIT_BF16), TRIT_OK);
    assert_int_equal(trit_peft_read_values(other, dir), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "is (4, 32), the base model needs (2, 32): the adapter was made for another"));
    trit_gpt_free(other);
    trit_tensor_free(ints);
    free(cfg), free(names), free(e);
    trit_gpt_free(m);
    tfile_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peft_logits), cmocka_unit_test(test_layout_matches_peft), cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_read_values),
        cmocka_unit_test(test_merge_run),   cmocka_unit_test(test_bad_adapters), cmocka_unit_test(test_bottleneck_files),
        cmocka_unit_test(test_bf16_round_trip), cmocka_unit_test(test_bf16_merge_run), cmocka_unit_test(test_bad_dtype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
