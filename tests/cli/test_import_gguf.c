// `trit import gguf` against `trit export --format gguf`: at every type the export writes, the
// imported run has the same tokenizer (the file's bytes), exports again to the same GGUF byte for
// byte (so quantized codes come back bit-equal), and at f32 evaluates to the same loss. A GGUF of
// another architecture, a truncated one and one with a tensor type trit does not read are refused
// with a message, exit 1, and leave no run directory behind.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli_run.h"
#include "scratch.h"
#include "trit/io.h"

#include <dirent.h>
#include <math.h>

static char root[512];
#define RUN(...) cli_run(root, (const char *const[]){__VA_ARGS__, NULL})

static const char *path(const char *name) { return tfile_join(root, name); }

static void nothing_named(const char *prefix) {
    DIR *d = opendir(root);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) fail_msg("'%s' was left behind in %s", e->d_name, root);
    closedir(d);
}

static void same_bytes(const char *a, const char *b) {
    uint8_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    assert_int_equal(trit_file_read_all(a, &x, &nx), TRIT_OK);
    assert_int_equal(trit_file_read_all(b, &y, &ny), TRIT_OK);
    if (nx != ny || memcmp(x, y, nx) != 0) fail_msg("'%s' and '%s' differ (%zu and %zu bytes)", a, b, nx, ny);
    free(x), free(y);
}

static double eval_loss(const char *run, const char *shard) {
    cli_result r = RUN("eval", "--ckpt", run, "--data", shard, "--batches", "2", "--batch", "2", "--seq", "32");
    if (r.code != 0) fail_msg("eval %s: %s", run, r.err);
    const char *at = strstr(r.out, "val loss ");
    assert_non_null(at);
    const double loss = strtod(at + 9, NULL);
    cli_free(&r);
    return loss;
}

// A 1-layer run of width 256 (the ternary types' block) with a tokenizer of `kind`.
static void train(const char *out, const char *kind) {
    char text[24000];
    size_t n = 0;
    for (int i = 0; n + 80 < sizeof text; i++)
        n += (size_t)snprintf(text + n, sizeof text - n, "Line %d: the quick brown fox jumps over the lazy dog %d.\n",
                              i, i * 7 % 13);
    tfile_write(path("text.txt"), text, n);
    cli_expect(RUN("train", "--data", path("text.txt"), "--tokenizer", kind, "--vocab", "300", "--layers", "1", "--heads",
                   "2", "--dim", "256", "--seq", "32", "--steps", "2", "--warmup", "0", "--out", path(out)),
               0, NULL, NULL);
}

static void round_trip(const char *run, const char *type) {
    char gguf[64], imp[64], again[64];
    snprintf(gguf, sizeof gguf, "%s_%s.gguf", run, type);
    snprintf(imp, sizeof imp, "%s_%s", run, type);
    snprintf(again, sizeof again, "%s_%s_again.gguf", run, type);
    cli_expect(RUN("export", path(run), "--format", "gguf", "--type", type, "--out", path(gguf)), 0, NULL, NULL);
    cli_expect(RUN("import", "gguf", path(gguf), "--out", path(imp)), 0, "with tokenizer", NULL);
    same_bytes(tfile_join(path(run), "tokenizer.bin"), tfile_join(path(imp), "tokenizer.bin"));
    cli_expect(RUN("export", path(imp), "--format", "gguf", "--type", type, "--out", path(again)), 0, NULL, NULL);
    same_bytes(path(gguf), path(again));
}

static void test_round_trips(void **state) {
    (void)state;
    train("c", "char");
    static const char *const types[] = {"f32", "f16", "q8_0", "q4_0", "tq2_0", "tq1_0"};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) round_trip("c", types[i]);
    const char *val = tfile_join(path("c"), "val.bin");
    const double l = eval_loss(path("c"), val);
    assert_true(l > 1 && l == eval_loss(path("c_f32"), val));
    assert_true(eval_loss(path("c_q4_0"), val) != l);  // the codes, not the f32 weights, came back
    // trit's BPE reads back as trit's BPE.
    train("b", "bpe");
    round_trip("b", "f32");
    round_trip("b", "q8_0");
    cli_expect(RUN("info", path("b_f32")), 0, "bpe", NULL);
    const char *bval = tfile_join(path("b"), "val.bin");
    assert_true(eval_loss(path("b"), bval) == eval_loss(path("b_f32"), bval));
    // GPT-2's tokenizer (a run imported from transformers with its tokenizer files) reads back as
    // GPT-2's, through the file's byte-alphabet spellings and merge lines.
    const char *src = getenv("TRIT_SOURCE_DIR");
    char hf[PATH_MAX];
    snprintf(hf, sizeof hf, "%s/tests/reference/fixtures/hf_gpt2/with_tokenizer", src ? src : ".");
    cli_expect(RUN("import", "hf", hf, "--out", path("g")), 0, "with tokenizer", NULL);
    round_trip("g", "f32");
    round_trip("g", "q8_0");
    cli_expect(RUN("info", path("g_q8_0")), 0, "gpt2 tokenizer, 300 tokens", NULL);
    // A GGUF is a fine-tuning base: its model and tokenizer, as the import reads them.
    cli_expect(RUN("finetune", path("c_q8_0.gguf"), "--data", path("text.txt"), "--steps", "1", "--warmup", "0", "--out",
                   path("ft")),
               0, "done at step 1", NULL);
    same_bytes(tfile_join(path("c"), "tokenizer.bin"), tfile_join(path("ft"), "tokenizer.bin"));
    // An imported quantized run is a QLoRA base: the fine-tune keeps its codes (qint4, groups of 32).
    cli_expect(RUN("finetune", path("c_q4_0"), "--data", path("text.txt"), "--lora", "r=4", "--steps", "1", "--warmup",
                   "0", "--out", path("ftq")),
               0, "done at step 1", NULL);
    cli_expect(RUN("info", path("ftq")), 0, "\"dtype\":\"qint4\",\"group_size\":32", NULL);
}

// GGUFs the `gguf` Python package wrote from the transformers fixture
// (tests/reference/make_gguf_gpt2_fixture.py): at f32 the import is the transformers import,
// model and tokenizer byte for byte; at q8_0 its matrices stay codes and it evaluates close to
// it, not equal.
static void test_files_the_gguf_package_wrote(void **state) {
    (void)state;
    const char *src = getenv("TRIT_SOURCE_DIR");
    char hf[PATH_MAX], f32[PATH_MAX], q8[PATH_MAX];
    snprintf(hf, sizeof hf, "%s/tests/reference/fixtures/hf_gpt2/with_tokenizer", src ? src : ".");
    snprintf(f32, sizeof f32, "%s/tests/reference/fixtures/gguf_gpt2/f32.gguf", src ? src : ".");
    snprintf(q8, sizeof q8, "%s/tests/reference/fixtures/gguf_gpt2/q8_0.gguf", src ? src : ".");
    cli_expect(RUN("import", "hf", hf, "--out", path("ph")), 0, "V 300, T 32, with tokenizer", NULL);
    cli_expect(RUN("import", "gguf", f32, "--out", path("pf")), 0, "V 300, T 32, with tokenizer", NULL);
    // The embedding and the 2 x 4 block matrices stay q8_0's codes.
    cli_expect(RUN("import", "gguf", q8, "--out", path("pq")), 0, "V 300, T 32, with tokenizer, 9 matrices kept quantized",
               NULL);
    same_bytes(tfile_join(path("ph"), "model.safetensors"), tfile_join(path("pf"), "model.safetensors"));
    same_bytes(tfile_join(path("ph"), "tokenizer.bin"), tfile_join(path("pf"), "tokenizer.bin"));
    same_bytes(tfile_join(path("ph"), "tokenizer.bin"), tfile_join(path("pq"), "tokenizer.bin"));
    int32_t tokens[200];
    for (int i = 0; i < 200; i++) tokens[i] = (i * 37 + 11) % 300;
    assert_int_equal(trit_shard_write(path("p.bin"), tokens, 200), TRIT_OK);
    const double lh = eval_loss(path("ph"), path("p.bin")), lq = eval_loss(path("pq"), path("p.bin"));
    assert_true(lh > 1 && lh == eval_loss(path("pf"), path("p.bin")));
    assert_true(lq != lh && fabs(lq - lh) < 0.01 * lh);
}

// A GGUF with one key and one tensor, written by trit's writer.
static void write_gguf(const char *name, const char *arch, uint32_t type) {
    trit_gguf *g = trit_gguf_new();
    static uint8_t bytes[1024];
    const uint64_t ne[1] = {256};
    trit_gguf_kv_str(g, "general.architecture", arch);
    assert_int_equal(trit_gguf_add_tensor(g, "token_embd.weight", type, 1, ne, bytes, type == 12 ? 144 : 1024), TRIT_OK);
    assert_int_equal(trit_gguf_write(g, path(name)), TRIT_OK);
    trit_gguf_free(g);
}

static void test_refusals(void **state) {
    (void)state;
    write_gguf("llama.gguf", "llama", TRIT_GGML_F32);
    cli_expect(RUN("import", "gguf", path("llama.gguf"), "--out", path("u")), 1, NULL, "architecture 'llama'");
    nothing_named("u");
    write_gguf("k.gguf", "gpt2", 12);
    cli_expect(RUN("import", "gguf", path("k.gguf"), "--out", path("u")), 1, NULL, "ggml type 12");
    nothing_named("u");
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(path("c_q8_0.gguf"), &d, &n), TRIT_OK);  // from test_round_trips
    tfile_write(path("cut.gguf"), d, n - 100);
    tfile_write(path("head.gguf"), d, 200);
    free(d);
    cli_expect(RUN("import", "gguf", path("cut.gguf"), "--out", path("u")), 1, NULL, "truncated");
    nothing_named("u");
    cli_expect(RUN("import", "gguf", path("head.gguf"), "--out", path("u")), 1, NULL, "truncated");
    nothing_named("u");
    cli_expect(RUN("import", "gguf", path("absent.gguf"), "--out", path("u")), 1, NULL, "absent.gguf");
    nothing_named("u");
    cli_expect(RUN("import", "onnx", path("c_q8_0.gguf"), "--out", path("u")), 2, NULL, "hf, llmc or gguf");
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "cli-import-gguf");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trips),
        cmocka_unit_test(test_files_the_gguf_package_wrote),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
