// `trit quantize` end to end: a tiny run quantized to every format writes a run directory whose
// val loss `trit eval` reproduces exactly, that `trit sample` runs, and whose checkpoint holds
// packed tensors; bad formats, groups and runs are refused with a message and no output.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "../train/train_fixture.h"
#include "cli_run.h"

static char root[512], corpus[600], run[600];

#define RUN(...) cli_run(root, (const char *const[]){__VA_ARGS__, NULL})

static cli_result expect(cli_result r, int code, const char *out_has, const char *err_has) {
    if (r.code != code || (out_has && !strstr(r.out, out_has)) || (err_has && !strstr(r.err, err_has)))
        fail_msg("exit %d (want %d)\n--- stdout:\n%s\n--- stderr:\n%s\n--- wanted stdout '%s', stderr '%s'", r.code,
                 code, r.out, r.err, out_has ? out_has : "", err_has ? err_has : "");
    return r;
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "cliq");
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", root);
    snprintf(run, sizeof run, "%s/run", root);
    tf_write_corpus(corpus);
    cli_result r = expect(RUN("train", "--data", corpus, "--out", run, "--layers", "1", "--heads", "2", "--dim", "32",
                              "--seq", "16", "--batch", "4", "--steps", "30", "--eval-every", "30", "--eval-batches", "2",
                              "--sample-tokens", "0", "--threads", "1"),
                          0, NULL, NULL);
    cli_free(&r);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

// The loss after quantization as printed by quantize ("-> <fmt> X.XXXX") and by eval.
static double after_loss(const char *out, const char *fmt) {
    char key[64];
    snprintf(key, sizeof key, "-> %s ", fmt);
    const char *p = strstr(out, key);
    assert_non_null(p);
    return strtod(p + strlen(key), NULL);
}

static void test_every_format(void **state) {
    (void)state;
    const char *fmts[] = {"int8", "int4", "int2", "nf4", "fp8", "fp8-e5m2"};
    for (int i = 0; i < 6; i++) {
        char dir[700];
        snprintf(dir, sizeof dir, "%s/q-%s", root, fmts[i]);
        cli_result r = expect(RUN("quantize", run, "--format", fmts[i], "--group", "16", "--out", dir, "--batches", "4",
                                  "--batch", "2", "--threads", "1"),
                              0, "bits/param", NULL);
        const double q = after_loss(r.out, fmts[i]);
        cli_free(&r);
        r = expect(RUN("eval", "--ckpt", dir, "--batches", "4", "--batch", "2", "--threads", "1"), 0, "val loss", NULL);
        assert_true(fabs(strtod(strstr(r.out, "val loss ") + 9, NULL) - q) < 1e-4);
        cli_free(&r);
        r = expect(RUN("sample", "--ckpt", dir, "--prompt", "the ", "--max-tokens", "10", "--threads", "1"), 0, "the ", NULL);
        cli_free(&r);
        r = expect(RUN("info", dir), 0, "h.0.attn.c_attn.weight.scales", NULL);
        cli_free(&r);
    }
    // int8 per channel with double quantization and stochastic rounding; the embedding too.
    char dir[700];
    snprintf(dir, sizeof dir, "%s/q-mix", root);
    cli_result r = expect(RUN("quantize", run, "--format", "int8", "--double-quant", "--stochastic", "--affine",
                              "--embeddings", "--out", dir, "--batches", "2", "--threads", "1"),
                          0, "double quant", NULL);
    cli_free(&r);
    r = expect(RUN("info", dir), 0, "wte.weight.qscales", NULL);
    cli_free(&r);
}

// `trit train --ternary` (a switch: no value) trains through BitNet's quantizers, and its weights
// frozen to 2-bit ternary give the loss the ternary graph gave (weights only: --qat-acts off).
static void test_ternary_train_and_freeze(void **state) {
    (void)state;
    char run2[700], dir[700];
    snprintf(run2, sizeof run2, "%s/tern", root);
    snprintf(dir, sizeof dir, "%s/tern-q", root);
    cli_result r = expect(RUN("train", "--ternary", "--qat-acts", "off", "--data", corpus, "--out", run2, "--layers", "1",
                              "--heads", "2", "--dim", "32", "--seq", "16", "--batch", "4", "--steps", "20",
                              "--eval-every", "20", "--eval-batches", "2", "--sample-tokens", "0", "--threads", "1"),
                          0, "val loss", NULL);
    cli_free(&r);
    r = expect(RUN("eval", "--ckpt", run2, "--batches", "4", "--batch", "2", "--threads", "1"), 0, "val loss", NULL);
    const double trained = strtod(strstr(r.out, "val loss ") + 9, NULL);
    cli_free(&r);
    r = expect(RUN("quantize", run2, "--format", "ternary", "--out", dir, "--batches", "4", "--batch", "2", "--threads",
                   "1"),
               0, "2.0", NULL);  // about 2 bits per parameter
    // "Before" is the run as eval sees it (quantized as trained), and freezing loses nothing.
    const char *b = strstr(r.out, "before ");
    assert_non_null(b);
    assert_true(fabs(strtod(b + 7, NULL) - trained) < 1e-4);
    assert_true(fabs(after_loss(r.out, "ternary") - trained) < 1e-4);
    cli_free(&r);
    // Ternary blocks with an int8 head (the tied embedding): its loss is what eval and the decoder see.
    snprintf(dir, sizeof dir, "%s/tern-q8", root);
    r = expect(RUN("quantize", run2, "--format", "ternary", "--head", "int8", "--out", dir, "--batches", "4", "--batch",
                   "2", "--threads", "1"),
               0, "token embedding (tied head) to int8", NULL);
    const double q = after_loss(r.out, "ternary/int8");
    cli_free(&r);
    r = expect(RUN("eval", "--ckpt", dir, "--batches", "4", "--batch", "2", "--threads", "1"), 0, "val loss", NULL);
    assert_true(fabs(strtod(strstr(r.out, "val loss ") + 9, NULL) - q) < 1e-4);
    cli_free(&r);
    r = expect(RUN("eval", "--ckpt", dir, "--decoder", "--batches", "4", "--batch", "2", "--threads", "1"), 0,
               "through the decoder", NULL);
    assert_true(fabs(strtod(strstr(r.out, "val loss ") + 9, NULL) - q) < 1e-3);
    cli_free(&r);
    r = expect(RUN("info", dir), 0, "wte.weight.scales", NULL);
    cli_free(&r);
    r = expect(RUN("sample", "--ckpt", dir, "--prompt", "the ", "--max-tokens", "10", "--threads", "1"), 0, "the ", NULL);
    cli_free(&r);
    r = expect(RUN("train", "--ternary", "1", "--data", corpus), 2, NULL, "unexpected argument '1'");
    cli_free(&r);
}

static void test_bad_input(void **state) {
    (void)state;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/bad", root);
    cli_result r = expect(RUN("quantize", run, "--format", "int3", "--out", dir), 2, NULL, "--format must be");
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int8", "--head", "int3", "--out", dir), 2, NULL, "--head must be");
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int8", "--head", "int8", "--embeddings", "--out", dir), 2, NULL,
               "not both");
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int4", "--group", "7", "--out", dir), 1, NULL, "group size 7");
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int4", "--out", dir), 1, NULL, "must divide");  // 128 > width 32
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int4", "--group", "-2", "--out", dir), 2, NULL, "--group");
    cli_free(&r);
    r = expect(RUN("quantize", "--format", "int8"), 2, NULL, "RUN");
    cli_free(&r);
    r = expect(RUN("quantize", dir, "--format", "int8"), 1, NULL, NULL);  // no such run
    cli_free(&r);
    assert_false(tfile_exists(dir));
    // A run whose tokenizer cannot be copied: the model was already written, and is removed with
    // the directory, so no half-made output is left.
    char broken[700], f[800], g[800];
    snprintf(broken, sizeof broken, "%s/broken", root);
    mkdir(broken, 0755);
    const char *files[2] = {TRIT_CKPT_MODEL, TRIT_DATA_VAL};
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof f, "%s/%s", run, files[i]);
        snprintf(g, sizeof g, "%s/%s", broken, files[i]);
        FILE *in = fopen(f, "rb");
        assert_non_null(in);
        fseek(in, 0, SEEK_END);
        const long n = ftell(in);
        fclose(in);
        char *data = cli_slurp(f);
        tfile_write(g, data, (size_t)n);
        free(data);
    }
    snprintf(g, sizeof g, "%s/%s", broken, TRIT_CKPT_TOKENIZER);
    mkdir(g, 0755);  // a directory where the tokenizer file should be
    r = expect(RUN("quantize", broken, "--format", "int8", "--out", dir, "--batches", "1", "--threads", "1"), 1, NULL, NULL);
    cli_free(&r);
    assert_false(tfile_exists(dir));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_format),
        cmocka_unit_test(test_ternary_train_and_freeze),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
