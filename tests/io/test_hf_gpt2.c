// Hugging Face GPT-2 in and out against directories transformers wrote
// (tests/reference/make_hf_gpt2_fixtures.py): logits of the imported model equal transformers'
// within 1e-5 relative for fp32, sharded, fp16 (names without "transformer.") and bf16 files;
// trit's export of a trit run is the directory transformers computed the fixture's logits from;
// every bad directory is refused with a message that says what is wrong.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "tritfix.h"
#include "trit/interop.h"
#include "trit/train.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *fixture_dir(const char *name) {
    static char buf[4][1024];
    static int k;
    const char *src = getenv("TRIT_SOURCE_DIR");
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/tests/reference/fixtures/hf_gpt2/%s", src ? src : ".", name);
    return buf[k];
}

// The logits (B, T, V) of m on the fixture's tokens record `tokens`, compared with record `want`.
static double check_logits(trit_gpt *m, const tf_file *f, const char *tokens, const char *want) {
    const tf_record *t = tf_get(f, tokens);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, t->shape[0], t->shape[1], &gg), TRIT_OK);
    int32_t *idx = gg.idx->data, *tgt = gg.targets->data;
    for (int64_t i = 0; i < t->n; i++) idx[i] = (int32_t)t->data[i], tgt[i] = -1;
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    double err = tf_compare(f, want, gg.logits, want, 1e-5);
    trit_gpt_graph_free(&gg);
    return err;
}

static void test_import_parity(void **state) {
    (void)state;
    tf_file *f = tf_open("hf_gpt2/logits.bin");
    static const char *const variants[] = {"fp32", "fp32_sharded", "fp16_sharded", "bf16"};
    for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
        trit_gpt *m = trit_import_hf_gpt2(fixture_dir(variants[i]));
        if (!m) fail_msg("%s: %s", variants[i], trit_last_error());
        char want[64];
        snprintf(want, sizeof want, "%s.logits", variants[i]);
        double err = check_logits(m, f, "tokens", want);
        print_message("hf %-13s logits max rel err %.3g\n", variants[i], err);
        trit_gpt_free(m);
    }
    // The bf16 directory's config carries n_inner and layer_norm_epsilon into the model.
    trit_gpt *m = trit_import_hf_gpt2(fixture_dir("bf16"));
    assert_int_equal(trit_gpt_mlp_hidden(trit_gpt_get_config(m)), 80);
    assert_true(trit_gpt_get_config(m)->norm_eps == 1e-6);
    trit_gpt_free(m);
    tf_close(f);
}

static bool same_file(const char *a, const char *b) {
    uint8_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    assert_int_equal(trit_file_read_all(a, &x, &nx), TRIT_OK);
    assert_int_equal(trit_file_read_all(b, &y, &ny), TRIT_OK);
    bool same = nx == ny && memcmp(x, y, nx) == 0;
    free(x), free(y);
    return same;
}

// The committed export is what transformers computed trit_export.logits from; trit exports the
// same bytes today, and its own logits of the run equal transformers'.
static void test_export_parity(void **state) {
    (void)state;
    trit_gpt *m = trit_checkpoint_load_model(fixture_dir("trit_run.safetensors"), NULL);
    assert_non_null(m);
    char out[1024];  // tfile_path's buffers rotate
    snprintf(out, sizeof out, "%s", tfile_path("export"));
    assert_int_equal(trit_export_hf_gpt2(m, out), TRIT_OK);
    assert_true(same_file(tfile_join(out, "model.safetensors"), tfile_join(fixture_dir("trit_export"), "model.safetensors")));
    assert_true(same_file(tfile_join(out, "config.json"), tfile_join(fixture_dir("trit_export"), "config.json")));
    tf_file *f = tf_open("hf_gpt2/logits.bin");
    print_message("trit -> hf logits max rel err %.3g\n", check_logits(m, f, "trit_tokens", "trit_export.logits"));
    tf_close(f);
    // Imported back, the model is the same to the bit.
    trit_gpt *back = trit_import_hf_gpt2(out);
    assert_non_null(back);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        assert_memory_equal(trit_gpt_tensor(m, i)->data, trit_gpt_tensor(back, i)->data, trit_tensor_nbytes(trit_gpt_tensor(m, i)));
    trit_gpt_free(back);
    // An export never overwrites: the directory now holds files.
    assert_int_equal(trit_export_hf_gpt2(m, out), TRIT_ERR_IO);
    assert_non_null(strstr(trit_last_error(), "not empty"));
    trit_gpt_free(m);
}

static void test_export_refuses_other_shapes(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.norm = TRIT_NORM_RMS;
    trit_gpt *m = trit_gpt_new(&c, 1);
    assert_int_equal(trit_export_hf_gpt2(m, tfile_path("rms")), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "--norm rms"));
    assert_false(tfile_exists(tfile_path("rms")));
    trit_gpt_free(m);
}

// ---- the tokenizer beside the model ----------------------------------------------------------

static const char *ref_fixture(const char *name) {
    static char buf[1024];
    const char *src = getenv("TRIT_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/tests/reference/fixtures/%s", src ? src : ".", name);
    return buf;
}

static trit_gpt *tiny_gpt(int64_t vocab) {
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = vocab;
    c.seq_len = 16, c.n_layer = 1, c.n_head = 2, c.n_embd = 16;
    trit_gpt *m = trit_gpt_new(&c, 7);
    assert_non_null(m);
    return m;
}

// ids of `text` by tok; *n set.
static int32_t *ids_of(const trit_tokenizer *tok, const uint8_t *text, size_t len, size_t *n) {
    int32_t *ids = NULL;
    assert_int_equal(trit_tokenizer_encode(tok, text, len, &ids, n), TRIT_OK);
    return ids;
}

// A GPT-2 tokenizer (Hugging Face's 600-token BPE, <|endoftext|> at id 0, ahead of the bytes) is
// written beside the model as vocab.json + merges.txt + the two config files; read back from the
// export it encodes the test text (every Unicode category, CRLFs, a special token) to the same ids.
static void test_export_with_tokenizer(void **state) {
    (void)state;
    trit_tokenizer *tok = trit_tokenizer_load_gpt2(ref_fixture("hf_bpe600_tokenizer.json"));
    if (!tok) fail_msg("%s", trit_last_error());
    assert_int_equal(trit_tokenizer_vocab_size(tok), 600);
    trit_gpt *m = tiny_gpt(600);
    char out[1024];
    snprintf(out, sizeof out, "%s", tfile_path("export_tok"));
    tfile_rm_rf(out);
    assert_int_equal(trit_export_hf_gpt2_with(m, tok, out), TRIT_OK);
    static const char *const files[] = {"config.json", "model.safetensors", "vocab.json", "merges.txt",
                                        "tokenizer_config.json", "special_tokens_map.json"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) assert_true(tfile_exists(tfile_join(out, files[i])));
    trit_tokenizer *back = trit_tokenizer_load_gpt2(out);
    if (!back) fail_msg("%s", trit_last_error());
    assert_int_equal(trit_tokenizer_vocab_size(back), 600);
    assert_int_equal(trit_tokenizer_num_merges(back), trit_tokenizer_num_merges(tok));
    assert_int_equal(trit_tokenizer_special_id(back, "<|endoftext|>"), 0);
    uint8_t *text = NULL;
    size_t len = 0, na = 0, nb = 0;
    assert_int_equal(trit_file_read_all(ref_fixture("gpt2_text.txt"), &text, &len), TRIT_OK);
    uint8_t *with_eot = malloc(len + 13);
    memcpy(with_eot, text, len), memcpy(with_eot + len, "<|endoftext|>", 13);
    int32_t *a = ids_of(tok, with_eot, len + 13, &na), *b = ids_of(back, with_eot, len + 13, &nb);
    assert_true(na > 1000);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    assert_int_equal(b[nb - 1], 0);
    free(a), free(b), free(text), free(with_eot);
    // transformers' files name the special token.
    uint8_t *cfg = NULL;
    size_t ncfg = 0;
    assert_int_equal(trit_file_read_all(tfile_join(out, "special_tokens_map.json"), &cfg, &ncfg), TRIT_OK);
    assert_non_null(strstr((const char *)cfg, "\"eos_token\":\t\"<|endoftext|>\""));
    free(cfg);
    // config.json's end-of-text id is the tokenizer's (id 0 here, not the last token).
    assert_int_equal(trit_file_read_all(tfile_join(out, "config.json"), &cfg, &ncfg), TRIT_OK);
    assert_non_null(strstr((const char *)cfg, "\"eos_token_id\":\t0,"));
    free(cfg);
    trit_tokenizer_free(back);
    trit_tokenizer_free(tok);
    trit_gpt_free(m);
}

// A tokenizer of another kind or size is refused before anything is written.
static void test_export_tokenizer_refused(void **state) {
    (void)state;
    trit_tokenizer *tok = trit_tokenizer_load_gpt2(ref_fixture("hf_bpe600_tokenizer.json"));
    assert_non_null(tok);
    trit_gpt *m = tiny_gpt(601);
    assert_int_equal(trit_export_hf_gpt2_with(m, tok, tfile_path("bad_vocab")), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "600 tokens"));
    assert_false(tfile_exists(tfile_path("bad_vocab")));
    trit_gpt_free(m);
    trit_tokenizer_free(tok);
    trit_tokenizer *chr = trit_tokenizer_train_char("abcab", 5);
    m = tiny_gpt(3);
    assert_int_equal(trit_export_hf_gpt2_with(m, chr, tfile_path("bad_kind")), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "char"));
    assert_false(tfile_exists(tfile_path("bad_kind")));
    assert_int_equal(trit_tokenizer_save_gpt2_hf(chr, tfile_path(".")), TRIT_ERR_UNSUPPORTED);
    trit_gpt_free(m);
    trit_tokenizer_free(chr);
}

// ---- bad directories -----------------------------------------------------------------------

// A scratch copy of fixture directory `name` (its regular files), less `skip` (may be NULL).
static const char *copy_dir(const char *name, const char *as, const char *skip) {
    static char dst[1024];
    snprintf(dst, sizeof dst, "%s", tfile_path(as));
    tfile_rm_rf(dst);
    assert_int_equal(mkdir(dst, 0755), 0);
    DIR *d = opendir(fixture_dir(name));
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || (skip && strcmp(e->d_name, skip) == 0)) continue;
        char src[2048], to[2048];
        snprintf(src, sizeof src, "%s/%s", fixture_dir(name), e->d_name);
        snprintf(to, sizeof to, "%s/%s", dst, e->d_name);
        assert_int_equal(trit_file_copy(src, to), TRIT_OK);
    }
    closedir(d);
    return dst;
}

// Replaces the first `from` in dir/config.json with `to`.
static void edit_config(const char *dir, const char *from, const char *to) {
    char path[2048];
    snprintf(path, sizeof path, "%s/config.json", dir);
    uint8_t *text = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(path, &text, &n), TRIT_OK);
    char *at = strstr((char *)text, from);
    if (!at) fail_msg("config.json has no '%s'", from);
    char *out = malloc(n + strlen(to) + 1);
    size_t k = (size_t)(at - (char *)text);
    memcpy(out, text, k);
    strcpy(out + k, to);
    strcat(out, at + strlen(from));
    tfile_write(path, out, strlen(out));
    free(out), free(text);
}

static void expect_refused(const char *dir, const char *says) {
    trit_gpt *m = trit_import_hf_gpt2(dir);
    if (m) fail_msg("'%s' was imported; expected a message with '%s'", dir, says);
    print_message("refused: %s\n", trit_last_error());
    if (!strstr(trit_last_error(), says)) fail_msg("message '%s' lacks '%s'", trit_last_error(), says);
}

static void test_bad_directories(void **state) {
    (void)state;
    const char *d = copy_dir("fp32", "wide", NULL);
    edit_config(d, "\"n_embd\": 32", "\"n_embd\": 64");
    expect_refused(d, "config.json and the weights disagree");
    d = copy_dir("fp32", "deep", NULL);
    edit_config(d, "\"n_layer\": 2", "\"n_layer\": 3");
    expect_refused(d, "has no tensor 'h.2.ln_1.weight'");
    d = copy_dir("fp32", "shallow", NULL);
    edit_config(d, "\"n_layer\": 2", "\"n_layer\": 1");
    expect_refused(d, "'h.1.attn.c_attn.bias', which a GPT-2 of its config.json (n_layer 1) does not have");
    d = copy_dir("fp32", "inner", NULL);  // a tensor of the wrong shape for the config
    edit_config(d, "\"n_inner\": null", "\"n_inner\": 64");
    expect_refused(d, "calls for (32, 64)");
    d = copy_dir("fp32", "relu", NULL);
    edit_config(d, "\"gelu_new\"", "\"relu\"");
    expect_refused(d, "activation_function is relu");
    d = copy_dir("fp32", "erf", NULL);
    edit_config(d, "\"gelu_new\"", "\"gelu\"");
    expect_refused(d, "tanh form only");
    d = copy_dir("fp32", "pickle", "model.safetensors");
    tfile_write(tfile_join(d, "pytorch_model.bin"), "PK", 2);
    expect_refused(d, "convert it to safetensors");
    d = copy_dir("fp32", "none", "model.safetensors");
    expect_refused(d, "neither model.safetensors nor");
    d = copy_dir("fp32", "noconfig", "config.json");
    expect_refused(d, "has no config.json");
    d = copy_dir("fp32_sharded", "missing", "model-00002-of-00004.safetensors");
    expect_refused(d, "lists the shard 'model-00002-of-00004.safetensors', which is missing");
    expect_refused(fixture_dir("untied"), "untied lm_head.weight");
    d = copy_dir("untied", "untied_no_head", NULL);  // tie_word_embeddings false and no head
    tfile_rm_rf(tfile_join(d, "model.safetensors"));
    assert_int_equal(trit_file_copy(tfile_join(fixture_dir("fp32"), "model.safetensors"), tfile_join(d, "model.safetensors")), TRIT_OK);
    expect_refused(d, "no lm_head.weight");
}

// fp32's tensors rewritten into dir/model.safetensors plus `extra` (name, tensor), names renamed
// by dropping the "transformer." prefix when `strip`.
static void rewrite(const char *dir, bool strip, const char *extra_name, const trit_tensor *extra) {
    char src[1024];
    snprintf(src, sizeof src, "%s/model.safetensors", fixture_dir("fp32"));
    trit_safetensors *f = trit_safetensors_open(src);
    assert_non_null(f);
    const int64_t n = trit_safetensors_count(f);
    trit_safetensors_entry *e = calloc((size_t)n + 1, sizeof *e);
    trit_tensor **t = calloc((size_t)n, sizeof *t);
    for (int64_t i = 0; i < n; i++) {
        const char *name = trit_safetensors_at(f, i)->name;
        t[i] = trit_safetensors_read_tensor(f, name);
        assert_non_null(t[i]);
        e[i].name = strip && strncmp(name, "transformer.", 12) == 0 ? name + 12 : name;
        e[i].tensor = t[i];
    }
    e[n].name = extra_name, e[n].tensor = extra;
    const trit_safetensors_kv meta[] = {{"format", "pt"}};
    assert_int_equal(trit_safetensors_write(tfile_join(dir, "model.safetensors"), e, n + (extra ? 1 : 0), meta, 1), TRIT_OK);
    for (int64_t i = 0; i < n; i++) trit_tensor_free(t[i]);
    free(t), free(e);
    trit_safetensors_close(f);
}

// Older transformers saved the causal mask buffers (attn.bias, attn.masked_bias): they are not
// weights and are skipped; the prefix may be there or not, but not both for one tensor.
static void test_mask_buffers_and_prefixes(void **state) {
    (void)state;
    const int64_t mshape[4] = {1, 1, 32, 32};
    trit_tensor *mask = trit_tensor_new(TRIT_F32, 4, mshape);
    for (int64_t i = 0; i < 32; i++)
        for (int64_t j = 0; j <= i; j++) ((float *)mask->data)[i * 32 + j] = 1;
    tf_file *f = tf_open("hf_gpt2/logits.bin");
    const char *d = copy_dir("fp32", "masks", "model.safetensors");
    rewrite(d, true, "h.1.attn.bias", mask);
    trit_gpt *m = trit_import_hf_gpt2(d);
    if (!m) fail_msg("%s", trit_last_error());
    check_logits(m, f, "tokens", "fp32.logits");
    trit_gpt_free(m);
    d = copy_dir("fp32", "masked_bias", "model.safetensors");
    rewrite(d, false, "transformer.h.0.attn.masked_bias", mask);
    m = trit_import_hf_gpt2(d);
    if (!m) fail_msg("%s", trit_last_error());
    trit_gpt_free(m);
    d = copy_dir("fp32", "twice", "model.safetensors");
    rewrite(d, false, "h.0.ln_1.weight", mask);
    expect_refused(d, "'h.0.ln_1.weight' is stored twice");
    d = copy_dir("fp32", "stray", "model.safetensors");
    rewrite(d, false, "transformer.h.0.attn.rotary", mask);
    expect_refused(d, "holds 'h.0.attn.rotary'");
    trit_tensor_free(mask);
    tf_close(f);
}

static void test_config_parse(void **state) {
    (void)state;
    trit_hf_gpt2_config c;
    const char *ok = "{\"n_layer\": 12, \"n_head\": 12, \"n_embd\": 768, \"n_positions\": 1024, \"vocab_size\": 50257}";
    assert_int_equal(trit_hf_gpt2_parse_config(ok, strlen(ok), "t", &c), TRIT_OK);
    assert_true(c.tie_word_embeddings);
    assert_true(c.layer_norm_epsilon == 1e-5);
    assert_int_equal(c.n_inner, 0);
    static const char *const bad[] = {
        "[]", "{\"n_layer\": 2}", "{\"n_layer\": 2.5, \"n_head\": 1, \"n_embd\": 4, \"n_positions\": 4, \"vocab_size\": 4}",
        "{\"n_layer\": 2, \"n_head\": 3, \"n_embd\": 4, \"n_positions\": 4, \"vocab_size\": 4}",
        "{\"n_layer\": 2, \"n_head\": 1, \"n_embd\": 4, \"n_positions\": 4, \"vocab_size\": 4, \"model_type\": \"llama\"}",
        "{\"n_layer\": 2, \"n_head\": 1, \"n_embd\": 4, \"n_positions\": 4, \"vocab_size\": 4, \"scale_attn_by_inverse_layer_idx\": true}",
        "{\"n_layer\": 2, \"n_head\": 1, \"n_embd\": 4, \"n_positions\": 4, \"vocab_size\": 4, \"layer_norm_epsilon\": -1}",
        "{\"n_layer\": 2, \"n_head\": 1, \"n_embd\": 4, \"n_positions\": 4, \"vocab_size\": 4, \"tie_word_embeddings\": 1}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_not_equal(trit_hf_gpt2_parse_config(bad[i], strlen(bad[i]), "t", &c), TRIT_OK);
    assert_true(trit_hf_gpt2_is_conv1d("h.11.mlp.c_fc.weight"));
    assert_false(trit_hf_gpt2_is_conv1d("h.11.mlp.c_fc.bias"));
    assert_false(trit_hf_gpt2_is_conv1d("wte.weight"));
    assert_false(trit_hf_gpt2_is_conv1d("h.x.attn.c_attn.weight"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_parse),
        cmocka_unit_test(test_import_parity),
        cmocka_unit_test(test_export_parity),
        cmocka_unit_test(test_export_refuses_other_shapes),
        cmocka_unit_test(test_export_with_tokenizer),
        cmocka_unit_test(test_export_tokenizer_refused),
        cmocka_unit_test(test_bad_directories),
        cmocka_unit_test(test_mask_buffers_and_prefixes),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
