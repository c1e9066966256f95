// Paged QLoRA base loading from other programs' files: a Hugging Face GPT-2 directory (F32, and
// the same weights stored F16 and BF16) and a GGUF (f32, f16) read with a quantize spec
// (trit_import_hf_gpt2_quantizing, trit_import_gguf_quantizing, and through trit_base_load_quantizing)
// give the codes and scales of quantizing the model loaded whole (trit_gpt_quantize), keep no
// f32 values for those matrices and every other tensor as loaded; a GGUF in a block type keeps
// its own codes; a base read as a layout and then read into another model has the values of the
// base loaded whole; a truncated file, a matrix of another shape and one of an integer dtype are
// refused with a message that names the file and the tensor.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "qbase_check.h"
#include "train_fixture.h"
#include "trit/interop.h"

static char root[512], run[600], hf[600], hf16[600], hfbf[600], gguf32[600], gguf16[600];

// dst/model.safetensors: src's tensors under their names, each converted to dt (int dtypes:
// only `only`, when given); `reshape` (or NULL) is stored with its two dims swapped (a wrong shape).
static void rewrite_hf(const char *src, const char *dst, trit_dtype dt, const char *only, const char *reshape) {
    char from[700], to[700], cfg_from[700], cfg_to[700];
    snprintf(from, sizeof from, "%s/model.safetensors", src);
    snprintf(to, sizeof to, "%s/model.safetensors", dst);
    snprintf(cfg_from, sizeof cfg_from, "%s/config.json", src);
    snprintf(cfg_to, sizeof cfg_to, "%s/config.json", dst);
    assert_int_equal(mkdir(dst, 0755), 0);
    uint8_t *cfg;
    size_t cfg_n;
    assert_int_equal(trit_file_read_all(cfg_from, &cfg, &cfg_n), TRIT_OK);
    tfile_write(cfg_to, cfg, cfg_n);
    free(cfg);
    trit_safetensors *f = trit_safetensors_open(from);
    assert_non_null(f);
    const int64_t n = trit_safetensors_count(f);
    trit_safetensors_entry *e = calloc((size_t)n, sizeof *e);
    trit_tensor **t = calloc((size_t)n, sizeof *t);
    assert_non_null(e);
    assert_non_null(t);
    for (int64_t i = 0; i < n; i++) {
        const char *name = trit_safetensors_at(f, i)->name;
        trit_tensor *x = trit_safetensors_read_tensor(f, name);
        assert_non_null(x);
        const bool convert = !only || strcmp(name, only) == 0;
        int64_t shape[2] = {x->shape[0], x->ndim > 1 ? x->shape[1] : 0};
        if (reshape && strcmp(name, reshape) == 0) shape[0] = x->shape[1], shape[1] = x->shape[0];
        t[i] = trit_tensor_new(convert ? dt : x->dtype, x->ndim, shape);
        assert_non_null(t[i]);
        if (convert && dt == TRIT_I32) {
            memset(trit_tensor_ptr(t[i]), 0, trit_tensor_nbytes(t[i]));
        } else {  // converted in x's shape, then the same bytes under t's
            trit_tensor *y = trit_tensor_new(t[i]->dtype, x->ndim, x->shape);
            assert_non_null(y);
            assert_int_equal(trit_tensor_copy(y, x), TRIT_OK);
            memcpy(trit_tensor_ptr(t[i]), trit_tensor_ptr(y), trit_tensor_nbytes(y));
            trit_tensor_free(y);
        }
        e[i].name = name;
        e[i].tensor = t[i];
        trit_tensor_free(x);
    }
    const trit_safetensors_kv meta[] = {{"format", "pt"}};
    assert_int_equal(trit_safetensors_write(to, e, n, meta, 1), TRIT_OK);
    for (int64_t i = 0; i < n; i++) trit_tensor_free(t[i]);
    free(t), free(e);
    trit_safetensors_close(f);
}

static int setup(void **state) {
    (void)state;
    char text[600];
    tfile_mkdtemp(root, sizeof root, "qlora-base-import");
    snprintf(text, sizeof text, "%s/corpus.txt", root);
    snprintf(run, sizeof run, "%s/run", root);
    snprintf(hf, sizeof hf, "%s/hf", root);
    snprintf(hf16, sizeof hf16, "%s/hf16", root);
    snprintf(hfbf, sizeof hfbf, "%s/hfbf16", root);
    snprintf(gguf32, sizeof gguf32, "%s/f32.gguf", root);
    snprintf(gguf16, sizeof gguf16, "%s/f16.gguf", root);
    tf_write_corpus(text);
    trit_train_config c;
    tf_tiny_config(&c, text, run);
    c.layers = 2;
    c.dim = 64;
    c.steps = 2;
    assert_int_equal(trit_train_run(&c, NULL, NULL), TRIT_OK);
    trit_gpt *m = trit_checkpoint_load_model(run, NULL);
    assert_non_null(m);
    assert_int_equal(trit_export_hf_gpt2(m, hf), TRIT_OK);
    assert_int_equal(trit_export_gguf(m, NULL, TRIT_F32, gguf32), TRIT_OK);
    assert_int_equal(trit_export_gguf(m, NULL, TRIT_F16, gguf16), TRIT_OK);
    trit_gpt_free(m);
    rewrite_hf(hf, hf16, TRIT_F16, NULL, NULL);
    rewrite_hf(hf, hfbf, TRIT_BF16, NULL, NULL);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

static void check_hf(const char *dir, const trit_quant_spec *spec) {
    trit_gpt *ref = trit_import_hf_gpt2(dir);
    qb_quantize_whole(ref, spec, 2);
    trit_gpt *m = trit_import_hf_gpt2_quantizing(dir, spec);
    if (!m) fail_msg("%s: %s", dir, trit_last_error());
    assert_int_equal(qb_expect_model(m, ref), 4 * trit_gpt_get_config(m)->n_layer);  // c_attn, attn.c_proj, c_fc, mlp.c_proj
    trit_gpt_free(m);
    trit_gpt_free(ref);
}

static void check_gguf(const char *path, const trit_quant_spec *spec) {
    trit_gpt *ref = trit_import_gguf(path, NULL);
    qb_quantize_whole(ref, spec, 2);
    bool made = false;
    trit_gpt *m = trit_import_gguf_quantizing(path, spec, NULL, &made);
    if (!m) fail_msg("%s: %s", path, trit_last_error());
    assert_true(made);
    assert_int_equal(qb_expect_model(m, ref), 4 * trit_gpt_get_config(m)->n_layer);  // c_attn, attn.c_proj, c_fc, mlp.c_proj
    trit_gpt_free(m);
    trit_gpt_free(ref);
}

static const struct {
    trit_dtype dt;
    int64_t group, dq_block;
} specs[] = {
    {TRIT_NF4, 0, 256},  // QLoRA's NF4 with double quantization
    {TRIT_NF4, 0, 0},
    {TRIT_QINT8, 0, 0},
    {TRIT_QINT4, 64, 0},
    {TRIT_TERNARY, 0, 0},
};
enum { N_SPECS = sizeof specs / sizeof specs[0] };

static void test_hf_codes_equal_quantizing_the_loaded_base(void **state) {
    (void)state;
    for (int k = 0; k < N_SPECS; k++) {
        const trit_quant_spec spec = qb_spec(specs[k].dt, specs[k].group, specs[k].dq_block);
        check_hf(hf, &spec);
        check_hf(hf16, &spec);
        check_hf(hfbf, &spec);
    }
}

static void test_gguf_codes_equal_quantizing_the_loaded_base(void **state) {
    (void)state;
    for (int k = 0; k < N_SPECS; k++) {
        const trit_quant_spec spec = qb_spec(specs[k].dt, specs[k].group, specs[k].dq_block);
        check_gguf(gguf32, &spec);
        check_gguf(gguf16, &spec);
    }
    // A GGUF with q8_0 matrices keeps its own codes: the spec is not applied.
    char q8[700];
    snprintf(q8, sizeof q8, "%s/q8.gguf", root);
    trit_gpt *m = trit_checkpoint_load_model(run, NULL);
    assert_non_null(m);
    assert_int_equal(trit_export_gguf(m, NULL, TRIT_Q8_0, q8), TRIT_OK);
    trit_gpt_free(m);
    const trit_quant_spec nf4 = qb_spec(TRIT_NF4, 0, 0);
    bool made = true;
    m = trit_import_gguf_quantizing(q8, &nf4, NULL, &made);
    assert_non_null(m);
    assert_false(made);
    int coded = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        if (trit_gpt_quantized(m, i)) assert_int_equal(trit_gpt_quantized(m, i)->dtype, TRIT_QINT8), coded++;
    assert_int_equal(coded, 9);  // the 8 block matrices and the token embedding, as the file has them
    trit_gpt_free(m);
}

// The reader a fine-tune uses: a Hugging Face directory with GPT-2's tokenizer files (the
// transformers fixture of tests/train/test_base_hf.c) and a GGUF with the run's tokenizer are
// quantized as read; without a spec nothing is.
static void check_base(const char *path, const trit_quant_spec *spec, const trit_gpt *ref) {
    trit_base b;
    if (trit_base_load_quantizing(path, spec, &b) != TRIT_OK) fail_msg("%s: %s", path, trit_last_error());
    assert_true(b.quantized_on_load);
    assert_non_null(b.tok);
    assert_int_equal(qb_expect_model(b.model, ref), 4 * trit_gpt_get_config(ref)->n_layer);
    trit_base_free(&b);
    assert_int_equal(trit_base_load(path, &b), TRIT_OK);
    assert_false(b.quantized_on_load);
    for (int i = 0; i < trit_gpt_num_tensors(b.model); i++) assert_null(trit_gpt_quantized(b.model, i));
    trit_base_free(&b);
}

static void test_base_reader(void **state) {
    (void)state;
    const trit_quant_spec q8 = qb_spec(TRIT_QINT8, 0, 0), spec = qb_spec(TRIT_NF4, 0, 256);  // the fixture's width is 32
    char dir[1024], tokfile[800], path[800];
    const char *src = getenv("TRIT_SOURCE_DIR");
    snprintf(dir, sizeof dir, "%s/tests/reference/fixtures/hf_gpt2/with_tokenizer", src ? src : ".");
    trit_gpt *ref = trit_import_hf_gpt2(dir);
    if (!ref) fail_msg("%s: %s (run from the build directory with TRIT_SOURCE_DIR set)", dir, trit_last_error());
    trit_quantize_report r;
    assert_int_equal(trit_gpt_quantize(ref, &q8, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    assert_int_equal(r.tensors, 4 * trit_gpt_get_config(ref)->n_layer);
    check_base(dir, &q8, ref);
    trit_gpt_free(ref);

    snprintf(tokfile, sizeof tokfile, "%s/%s", run, TRIT_CKPT_TOKENIZER);
    snprintf(path, sizeof path, "%s/tok.gguf", root);
    trit_tokenizer *tok = trit_tokenizer_load(tokfile);
    assert_non_null(tok);
    ref = trit_checkpoint_load_model(run, NULL);
    assert_non_null(ref);
    if (trit_export_gguf(ref, tok, TRIT_F32, path) != TRIT_OK) fail_msg("%s", trit_last_error());
    trit_tokenizer_free(tok);
    assert_int_equal(trit_gpt_quantize(ref, &spec, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    check_base(path, &spec, ref);
    trit_gpt_free(ref);
}

// A base read as a layout (trit_base_load_layout) has no float values, and trit_base_read_values
// fills another model with exactly the values of the base loaded whole: a run directory, a
// Hugging Face directory (the Conv1D matrices transposed as read) and a GGUF; with a spec the
// block matrices come as codes and only the rest is read later.
static void check_layout(const char *path, const trit_quant_spec *spec) {
    trit_base whole, lay;
    if (trit_base_load(path, &whole) != TRIT_OK || trit_base_load_layout(path, spec, &lay) != TRIT_OK)
        fail_msg("%s: %s", path, trit_last_error());
    assert_true(lay.values_deferred);
    assert_int_equal(lay.quantized_on_load, spec != NULL);
    trit_gpt *dst = trit_gpt_new_zeroed_without(trit_gpt_get_config(whole.model), 0, NULL, NULL);
    assert_non_null(dst);
    int read = 0;
    for (int i = 0; i < trit_gpt_num_tensors(lay.model); i++) {
        assert_null(trit_gpt_tensor(lay.model, i)->data);
        assert_int_equal(trit_gpt_quantized(lay.model, i) != NULL, spec && trit_gpt_tensor(lay.model, i)->ndim == 2 &&
                                                                       strncmp(trit_gpt_tensor(lay.model, i)->name, "h.", 2) == 0);
        read += !trit_gpt_quantized(lay.model, i);
    }
    assert_int_equal(trit_base_read_values(path, &lay, dst), TRIT_OK);
    for (int i = 0; i < trit_gpt_num_tensors(dst); i++) {
        const trit_tensor *t = trit_gpt_tensor(dst, i), *u = trit_gpt_tensor(whole.model, i);
        if (trit_gpt_quantized(lay.model, i)) continue;  // codes: compared by the tests above
        assert_memory_equal(trit_tensor_ptr(t), trit_tensor_ptr(u), trit_tensor_nbytes(t));
    }
    assert_true(read >= 4);  // wte, wpe, the norms and biases at least
    trit_gpt_free(dst);
    trit_base_free(&lay);
    trit_base_free(&whole);
}

static void test_layout_then_values(void **state) {
    (void)state;
    const trit_quant_spec nf4 = qb_spec(TRIT_NF4, 0, 256);
    char dir[1024];
    const char *src = getenv("TRIT_SOURCE_DIR");
    snprintf(dir, sizeof dir, "%s/tests/reference/fixtures/hf_gpt2/with_tokenizer", src ? src : ".");
    check_layout(run, NULL);
    check_layout(run, &nf4);
    check_layout(dir, NULL);
    char gguf[700];
    snprintf(gguf, sizeof gguf, "%s/tok.gguf", root);  // made by test_base_reader
    check_layout(gguf, NULL);
    check_layout(gguf, &nf4);
    // A layout checks shapes without reading: a matrix of another shape is refused there.
    char shape[700];
    snprintf(shape, sizeof shape, "%s/shape-layout", root);
    rewrite_hf(hf, shape, TRIT_F32, NULL, "transformer.h.0.attn.c_attn.weight");
    assert_null(trit_import_hf_gpt2_layout(shape, NULL));
    assert_non_null(strstr(trit_last_error(), "'transformer.h.0.attn.c_attn.weight' is (192, 64)"));
}

// Bad files through the quantizing reader: the message names the file and the tensor.
static void expect_refused(const char *dir, const char *want1, const char *want2) {
    const trit_quant_spec spec = qb_spec(TRIT_NF4, 0, 256);
    trit_gpt *m = trit_import_hf_gpt2_quantizing(dir, &spec);
    if (m) fail_msg("'%s' loaded", dir);
    const char *e = trit_last_error();
    if (!strstr(e, want1) || !strstr(e, want2)) fail_msg("'%s': expected '%s' and '%s' in: %s", dir, want1, want2, e);
}

static void test_bad_files(void **state) {
    (void)state;
    char cut[700], shape[700], ints[700], path[800];
    snprintf(cut, sizeof cut, "%s/cut", root);
    snprintf(shape, sizeof shape, "%s/shape", root);
    snprintf(ints, sizeof ints, "%s/ints", root);
    rewrite_hf(hf, cut, TRIT_F32, NULL, NULL);
    snprintf(path, sizeof path, "%s/model.safetensors", cut);
    uint8_t *b;
    size_t n;
    assert_int_equal(trit_file_read_all(path, &b, &n), TRIT_OK);
    tfile_write(path, b, n - 1000);  // the last tensors' bytes cut off
    free(b);
    expect_refused(cut, path, "outside the");
    rewrite_hf(hf, shape, TRIT_F32, NULL, "transformer.h.1.mlp.c_fc.weight");
    expect_refused(shape, "'transformer.h.1.mlp.c_fc.weight' is (256, 64), config.json", "calls for (64, 256)");
    rewrite_hf(hf, ints, TRIT_I32, "transformer.h.0.attn.c_attn.weight", NULL);
    expect_refused(ints, "transformer.h.0.attn.c_attn.weight' is I32", "trit reads F32, F16 and BF16");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_codes_equal_quantizing_the_loaded_base),
        cmocka_unit_test(test_gguf_codes_equal_quantizing_the_loaded_base),
        cmocka_unit_test(test_base_reader),
        cmocka_unit_test(test_layout_then_values),
        cmocka_unit_test(test_bad_files),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
