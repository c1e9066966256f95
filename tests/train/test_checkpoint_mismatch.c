// A checkpoint's metadata against its tensors, both ways. From a good quantized checkpoint (two
// matrices of a 1-layer model quantized, one symmetric int8, one affine int4) each case writes a copy with one
// disagreement: a quantization map entry naming a tensor the file lacks or the config does not
// call for, codes or scales of the wrong shape, length or dtype, side tensors no entry calls
// for, a config that calls for other tensors than the file holds. Each is refused with a message
// naming the tensor and what disagrees; the good file loads.
//
// `test_train_checkpoint_mismatch --write-corpus DIR` writes the malformed files into DIR (the
// seed corpus of fuzz/fuzz_safetensors) instead of testing.
#define _POSIX_C_SOURCE 200809L  // strdup
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "train_fixture.h"

static const char *Q8 = "h.0.attn.c_attn.weight", *Q4 = "h.0.mlp.c_fc.weight";
static const char *corpus_dir;  // --write-corpus

// The good checkpoint's tensors as stored (codes, scales and zero points as plain tensors) and
// its metadata, which each case edits and writes back.
typedef struct ckpt {
    int n;
    char *names[64];
    trit_tensor *t[64];
    char *format, *config, *map;
} ckpt;

static trit_tensor *quantize(const trit_tensor *w, trit_dtype dt, trit_quant_scheme scheme) {
    trit_quant_spec s = trit_quant_spec_default(dt);
    s.group_size = 16, s.scheme = scheme;
    trit_tensor *q = trit_quantize(w, &s);
    assert_non_null(q);
    return q;
}

static void good_checkpoint(const char *path) {
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = 13, c.seq_len = 8, c.n_layer = 1, c.n_head = 2, c.n_embd = 16, c.mlp_hidden = 16;  // ~7 KB
    trit_gpt *m = trit_gpt_new(&c, 5);
    assert_non_null(m);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *w = trit_gpt_tensor(m, i);
        if (strcmp(w->name, Q8) == 0) assert_int_equal(trit_gpt_attach_quantized(m, i, quantize(w, TRIT_QINT8, TRIT_QSCHEME_SYMMETRIC)), TRIT_OK);
        if (strcmp(w->name, Q4) == 0) assert_int_equal(trit_gpt_attach_quantized(m, i, quantize(w, TRIT_QINT4, TRIT_QSCHEME_AFFINE)), TRIT_OK);
    }
    assert_int_equal(trit_checkpoint_save_model(m, path, 9), TRIT_OK);
    trit_gpt_free(m);
}

static void ckpt_read(ckpt *k, const char *path) {
    memset(k, 0, sizeof *k);
    trit_safetensors *f = trit_safetensors_open(path);
    assert_non_null(f);
    k->n = (int)trit_safetensors_count(f);
    assert_true(k->n <= 64);
    for (int i = 0; i < k->n; i++) {
        const trit_safetensors_info *info = trit_safetensors_at(f, i);
        k->names[i] = strdup(info->name);
        k->t[i] = trit_tensor_new(info->dtype, info->ndim, info->shape);
        assert_non_null(k->t[i]);
        assert_int_equal(trit_safetensors_load(f, info->name, k->t[i]), TRIT_OK);
    }
    k->format = strdup(trit_safetensors_meta(f, "format"));
    k->config = strdup(trit_safetensors_meta(f, "config"));
    k->map = strdup(trit_safetensors_meta(f, "quantization"));
    trit_safetensors_close(f);
}

static void ckpt_free(ckpt *k) {
    for (int i = 0; i < k->n; i++) free(k->names[i]), trit_tensor_free(k->t[i]);
    free(k->format), free(k->config), free(k->map);
}

static int ckpt_find(const ckpt *k, const char *name) {
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->names[i], name) == 0) return i;
    fail_msg("no tensor '%s' in the checkpoint", name);
    return -1;
}

// Replaces (or, for a new name, adds) tensor `name`; k takes t.
static void ckpt_put(ckpt *k, const char *name, trit_tensor *t) {
    assert_non_null(t);
    for (int i = 0; i < k->n; i++)
        if (strcmp(k->names[i], name) == 0) {
            trit_tensor_free(k->t[i]);
            k->t[i] = t;
            return;
        }
    k->names[k->n] = strdup(name);
    k->t[k->n++] = t;
}

static void ckpt_drop(ckpt *k, const char *name) {
    const int i = ckpt_find(k, name);
    free(k->names[i]), trit_tensor_free(k->t[i]);
    k->n--;
    k->names[i] = k->names[k->n], k->t[i] = k->t[k->n];
}

// s with the first `from` replaced by `to` (a new string; the test fails if `from` is absent).
static char *replaced(const char *s, const char *from, const char *to) {
    const char *at = strstr(s, from);
    if (!at) fail_msg("'%s' not in '%s'", from, s);
    char *r = malloc(strlen(s) + strlen(to) + 1);
    assert_non_null(r);
    sprintf(r, "%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    return r;
}

static void edit_map(ckpt *k, const char *from, const char *to) {
    char *r = replaced(k->map, from, to);
    free(k->map);
    k->map = r;
}

static void edit_config(ckpt *k, const char *from, const char *to) {
    char *r = replaced(k->config, from, to);
    free(k->config);
    k->config = r;
}

static void ckpt_write(const ckpt *k, const char *path) {
    trit_safetensors_entry e[64];
    for (int i = 0; i < k->n; i++) e[i] = (trit_safetensors_entry){k->names[i], k->t[i]};
    const trit_safetensors_kv meta[3] = {{"format", k->format}, {"config", k->config}, {"quantization", k->map}};
    assert_int_equal(trit_safetensors_write(path, e, k->n, meta, 3), TRIT_OK);
}

static trit_tensor *vec(trit_dtype dt, int64_t n) { return trit_tensor_new(dt, 1, &n); }

// Writes the case, checks both readers refuse it with `msg`, and adds it to the corpus when asked.
static void expect_refused(const ckpt *k, const char *name, const char *msg) {
    char path[700];
    snprintf(path, sizeof path, "%s/mismatch-%s.safetensors", corpus_dir ? corpus_dir : tfile_dir(), name);
    ckpt_write(k, path);
    if (corpus_dir) return;
    trit_clear_error();
    trit_gpt *m = trit_checkpoint_load_model(path, NULL);
    if (m) fail_msg("%s: loaded", name);
    if (!strstr(trit_last_error(), msg)) fail_msg("%s: message '%s' lacks '%s'", name, trit_last_error(), msg);
}

// Each case starts from the good checkpoint again.
static void run_cases(const char *good) {
    ckpt k;
    ckpt_read(&k, good);
    const int64_t groups8 = trit_tensor_numel(k.t[ckpt_find(&k, Q8)]) / 16;
    ckpt_find(&k, Q4);
    ckpt_free(&k);
#define CASE(name, msg, ...)            \
    do {                                \
        ckpt_read(&k, good);            \
        __VA_ARGS__;                    \
        expect_refused(&k, name, msg);  \
        ckpt_free(&k);                  \
    } while (0)
    // A map entry naming a tensor the file does not hold.
    CASE("entry-without-tensor", "the quantization map lists 'h.0.ghost' but the file lacks it",
         edit_map(&k, "{\"h.0.attn", "{\"h.0.ghost\":{\"dtype\":\"qint8\",\"shape\":[48,16],\"group_size\":16,"
                                    "\"scheme\":\"symmetric\",\"double_quant_block\":0,\"scales_mean\":0},\"h.0.attn"));
    // A map entry (with its codes and scales) for a tensor the config does not call for.
    CASE("entry-not-in-config", "'h.9.extra.weight' that its config does not call for",
         edit_map(&k, "{\"h.0.attn", "{\"h.9.extra.weight\":{\"dtype\":\"qint8\",\"shape\":[2,16],\"group_size\":16,"
                                    "\"scheme\":\"symmetric\",\"double_quant_block\":0,\"scales_mean\":0},\"h.0.attn");
         ckpt_put(&k, "h.9.extra.weight", trit_tensor_new(TRIT_I8, 2, (const int64_t[]){2, 16}));
         ckpt_put(&k, "h.9.extra.weight.scales", vec(TRIT_F32, 2)));
    // Codes whose shape is not the map entry's.
    CASE("codes-shape", "the file's tensor is I8 [16, 48]",
         ckpt_put(&k, Q8, trit_tensor_new(TRIT_I8, 2, (const int64_t[]){16, 48})));
    // Map entry and codes agree with each other, not with the config.
    CASE("entry-shape-vs-config", "the quantization map gives 'h.0.attn.c_attn.weight' the shape (16, 48), its config (48, 16)",
         edit_map(&k, "\"shape\":[48,16]", "\"shape\":[16,48]");
         ckpt_put(&k, Q8, trit_tensor_new(TRIT_I8, 2, (const int64_t[]){16, 48})));
    // Scales one short, and scales of another dtype (which used to be converted silently).
    CASE("scales-length", "calls for 'h.0.attn.c_attn.weight.scales' as F32 [48], but the file's is F32 [47]",
         ckpt_put(&k, "h.0.attn.c_attn.weight.scales", vec(TRIT_F32, groups8 - 1)));
    CASE("scales-dtype", "calls for 'h.0.attn.c_attn.weight.scales' as F32 [48], but the file's is F16 [48]",
         ckpt_put(&k, "h.0.attn.c_attn.weight.scales", vec(TRIT_F16, groups8)));
    // Zero points an affine entry needs, missing; and beside a symmetric entry, not called for.
    CASE("zero-points-missing", "lacks its 'h.0.mlp.c_fc.weight.zero_points' tensor",
         ckpt_drop(&k, "h.0.mlp.c_fc.weight.zero_points"));
    CASE("zero-points-stray", "calls for no .zero_points tensor",
         ckpt_put(&k, "h.0.attn.c_attn.weight.zero_points", vec(TRIT_F32, groups8)));
    // A plain tensor the config does not call for, and side tensors of a plain tensor.
    CASE("plain-not-in-config", "holds a tensor 'h.0.attn.extra' that its config does not call for",
         ckpt_put(&k, "h.0.attn.extra", vec(TRIT_F32, 4)));
    CASE("scales-of-plain", "holds a tensor 'h.0.ln_1.weight.scales' that its config does not call for",
         ckpt_put(&k, "h.0.ln_1.weight.scales", vec(TRIT_F32, 1)));
    // A plain tensor of a dtype that is neither float nor in the map, or of another shape.
    CASE("plain-dtype", "tensor 'h.0.ln_1.weight' is I8, neither a float dtype",
         ckpt_put(&k, "h.0.ln_1.weight", vec(TRIT_I8, 16)));
    CASE("plain-shape", "tensor 'h.0.ln_1.weight' is (15,) in the file, its config gives (16,)",
         ckpt_put(&k, "h.0.ln_1.weight", vec(TRIT_F32, 15)));
    // The config without biases, the file with them.
    CASE("config-no-bias", "holds a tensor 'h.0.ln_1.bias' that its config does not call for",
         edit_config(&k, "\"bias\":true", "\"bias\":false"));
#undef CASE
}

static void test_good_checkpoint_loads(void **state) {
    (void)state;
    const char *good = tfile_path("good.safetensors");
    good_checkpoint(good);
    ckpt k;
    ckpt_read(&k, good);  // written back unchanged by the test's own writer: still good
    ckpt_write(&k, tfile_path("rewritten.safetensors"));
    ckpt_free(&k);
    for (int i = 0; i < 2; i++) {
        trit_gpt *m = trit_checkpoint_load_model(i ? tfile_path("rewritten.safetensors") : good, NULL);
        if (!m) fail_msg("%s", trit_last_error());
        int quantized = 0;
        for (int j = 0; j < trit_gpt_num_tensors(m); j++) quantized += trit_gpt_quantized(m, j) != NULL;
        assert_int_equal(quantized, 2);
        trit_gpt_free(m);
    }
    trit_safetensors *f = trit_safetensors_open(good);
    assert_non_null(f);
    assert_int_equal(trit_safetensors_check_quantized(f), TRIT_OK);
    trit_safetensors_close(f);
}

static void test_mismatches_refused(void **state) {
    (void)state;
    const char *good = tfile_path("good.safetensors");
    good_checkpoint(good);
    run_cases(good);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) {
        corpus_dir = argv[2];
        char good[700];
        snprintf(good, sizeof good, "%s/quant-model.safetensors", corpus_dir);
        good_checkpoint(good);
        run_cases(good);
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_checkpoint_loads),
        cmocka_unit_test(test_mismatches_refused),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
