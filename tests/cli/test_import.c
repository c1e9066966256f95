// `trit import hf|llmc` and `trit export --format hf|llmc` as a user runs them: a round trip
// through both formats gives a run that evaluates to the same loss, and every bad input exits
// non-zero with a message and leaves no run directory (nor a staging directory) behind.
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

static char root[512];
#define RUN(...) cli_run(root, (const char *const[]){__VA_ARGS__, NULL})

static const char *path(const char *name) { return tfile_join(root, name); }

static const char *fixture(const char *rel) {
    static char buf[4][PATH_MAX];
    static int k;
    const char *src = getenv("TRIT_SOURCE_DIR");
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/tests/reference/fixtures/%s", src ? src : ".", rel);
    return buf[k];
}

// No entry of root starts with `prefix` (a refused import left nothing, staging included).
static void nothing_named(const char *prefix) {
    DIR *d = opendir(root);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) fail_msg("'%s' was left behind in %s", e->d_name, root);
    closedir(d);
}

// The "val loss X" line of `trit eval` on a run and a shard.
static double eval_loss(const char *run, const char *shard) {
    cli_result r = RUN("eval", "--ckpt", run, "--data", shard, "--batches", "2", "--batch", "2", "--seq", "32");
    if (r.code != 0) fail_msg("eval %s: %s", run, r.err);
    const char *at = strstr(r.out, "val loss ");
    assert_non_null(at);
    double loss = strtod(at + 9, NULL);
    cli_free(&r);
    return loss;
}

static void test_round_trips(void **state) {
    (void)state;
    // A transformers directory in, then out again as llm.c and as transformers, then back in.
    cli_expect(RUN("import", "hf", fixture("hf_gpt2/fp32"), "--out", path("a")), 0, "wrote", NULL);
    cli_expect(RUN("export", path("a"), "--format", "llmc", "--out", path("a.bin")), 0, "llm.c, fp32", NULL);
    cli_expect(RUN("import", "llmc", path("a.bin"), "--out", path("b")), 0, "L 2, H 2, C 32, V 96, T 32", NULL);
    cli_expect(RUN("export", path("b"), "--format", "hf", "--out", path("c_hf")), 0, NULL, NULL);
    cli_expect(RUN("import", "hf", path("c_hf"), "--out", path("c")), 0, NULL, NULL);
    uint8_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    // Same weights, same config: the checkpoints are the same bytes.
    assert_int_equal(trit_file_read_all(tfile_join(path("a"), "model.safetensors"), &x, &nx), TRIT_OK);
    assert_int_equal(trit_file_read_all(tfile_join(path("c"), "model.safetensors"), &y, &ny), TRIT_OK);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx);
    free(x), free(y);
    // The tokens of a shard evaluate alike in the first and the last run.
    int32_t tokens[200];
    for (int i = 0; i < 200; i++) tokens[i] = (i * 37 + 11) % 96;
    assert_int_equal(trit_shard_write(path("s.bin"), tokens, 200), TRIT_OK);
    const double la = eval_loss(path("a"), path("s.bin")), lc = eval_loss(path("c"), path("s.bin"));
    assert_true(la > 1 && la == lc);
    // Where a checkpoint is read, a transformers directory is imported on the way.
    assert_true(eval_loss(fixture("hf_gpt2/fp32"), path("s.bin")) == la);
    // bf16 and a tokenizer file for llm.c; a trit run with its tokenizer round-trips both.
    cli_expect(RUN("export", path("a"), "--format", "llmc", "--type", "bf16", "--out", path("a5.bin")), 0, "bf16", NULL);
    cli_expect(RUN("export", path("a"), "--format", "llmc", "--out", path("t.bin"), "--tokenizer-out", path("tok.bin")), 1,
               NULL, "tokenizer.bin");  // an imported run has no tokenizer
}

// A transformers directory with its tokenizer.json comes in with that tokenizer and goes out
// with vocab.json + merges.txt, which read back to the same tokens.
static void test_round_trip_with_tokenizer(void **state) {
    (void)state;
    cli_expect(RUN("import", "hf", fixture("hf_gpt2/with_tokenizer"), "--out", path("w")), 0, "V 300, T 32, with tokenizer",
               NULL);
    cli_expect(RUN("info", path("w")), 0, "gpt2 tokenizer, 300 tokens", NULL);
    cli_expect(RUN("export", path("w"), "--format", "hf", "--out", path("w_hf")), 0, "GPT-2's tokenizer files beside it",
               NULL);
    assert_true(tfile_exists(tfile_join(path("w_hf"), "vocab.json")));
    assert_true(tfile_exists(tfile_join(path("w_hf"), "merges.txt")));
    cli_expect(RUN("import", "hf", path("w_hf"), "--out", path("w2")), 0, "with tokenizer", NULL);
    uint8_t *x = NULL, *y = NULL;
    size_t nx = 0, ny = 0;
    assert_int_equal(trit_file_read_all(tfile_join(path("w"), "model.safetensors"), &x, &nx), TRIT_OK);
    assert_int_equal(trit_file_read_all(tfile_join(path("w2"), "model.safetensors"), &y, &ny), TRIT_OK);
    assert_int_equal(nx, ny);
    assert_memory_equal(x, y, nx);
    free(x), free(y);
    // A run with trit's own tokenizer exports the model without tokenizer files.
    cli_expect(RUN("export", path("a"), "--format", "hf", "--out", path("a_hf")), 0, "no tokenizer files", NULL);
    assert_false(tfile_exists(tfile_join(path("a_hf"), "vocab.json")));
}

static void test_refusals(void **state) {
    (void)state;
    cli_expect(RUN("import", "hf", fixture("hf_gpt2/untied"), "--out", path("u")), 1, NULL, "untied lm_head.weight");
    nothing_named("u");
    cli_expect(RUN("import", "hf", fixture("llmc"), "--out", path("u")), 1, NULL, "config.json");
    nothing_named("u");
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(fixture("llmc/model_fp32.bin"), &d, &n), TRIT_OK);
    tfile_write(path("cut.bin"), d, n / 2);
    free(d);
    cli_expect(RUN("import", "llmc", path("cut.bin"), "--out", path("u")), 1, NULL, "truncated");
    nothing_named("u");
    cli_expect(RUN("import", "llmc", fixture("llmc/model_fp32.bin"), "--out", path("u"), "--tokenizer-file",
                   fixture("llmc/tokenizer.bin")), 1, NULL, "merges");
    nothing_named("u");
    cli_expect(RUN("import", "onnx", "x", "--out", path("u")), 2, NULL, "hf, llmc or gguf");
    cli_expect(RUN("train", "--init-from", fixture("hf_gpt2/fp32"), "--out", path("u"), "--steps", "1"), 1, NULL,
               "make a run of it first with `trit import hf");
    nothing_named("u");
    cli_expect(RUN("import", "hf", fixture("hf_gpt2/fp32")), 2, NULL, "--out RUN is required");
    // A directory with half of GPT-2's tokenizer files is refused, naming the missing one.
    assert_int_equal(mkdir(path("part"), 0755), 0);
    for (const char *const *f = (const char *const[]){"config.json", "model.safetensors", NULL}; *f; f++) {
        char rel[128];
        snprintf(rel, sizeof rel, "hf_gpt2/with_tokenizer/%s", *f);
        assert_int_equal(trit_file_read_all(fixture(rel), &d, &n), TRIT_OK);
        tfile_write(tfile_join(path("part"), *f), d, n);
        free(d);
    }
    tfile_write(tfile_join(path("part"), "merges.txt"), "#version: 0.2\n", 14);
    cli_expect(RUN("import", "hf", path("part"), "--out", path("u")), 1, NULL, "has merges.txt but not vocab.json");
    nothing_named("u");
    // A run directory that holds files is never overwritten.
    cli_expect(RUN("import", "llmc", fixture("llmc/model_fp32.bin"), "--out", path("full")), 0, NULL, NULL);
    cli_expect(RUN("import", "llmc", fixture("llmc/model_fp32.bin"), "--out", path("full")), 1, NULL, "not empty");
    cli_expect(RUN("export", path("full"), "--format", "hf", "--type", "bf16", "--out", path("h")), 2, NULL, "must be f32");
    cli_expect(RUN("export", path("full"), "--format", "onnx", "--out", path("h")), 2, NULL, "gguf, hf or llmc");
    nothing_named("h");
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "cli-import");
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
        cmocka_unit_test(test_round_trip_with_tokenizer),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
