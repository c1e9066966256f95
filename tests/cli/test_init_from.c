// `trit train --init-from RUN` end to end: the new run's first logged loss is `trit eval`'s loss
// of RUN on the same windows, a `trit quantize`d RUN is a valid start, and each bad input
// (a missing RUN, a file, another shape, another tokenizer, --resume beside it) exits 1 with its
// message and leaves no --out directory.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../train/train_fixture.h"
#include "cli_run.h"

static char root[512], corpus[600], run_dir[600];

#define RUN(...) cli_run(root, (const char *const[]){__VA_ARGS__, NULL})


static const char *at(const char *name) { return tfile_join(root, name); }

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "cli-init");
    snprintf(corpus, sizeof corpus, "%s", at("corpus.txt"));
    tf_write_corpus(corpus);
    snprintf(run_dir, sizeof run_dir, "%s", at("run"));
    cli_expect(RUN("train", "--data", corpus, "--out", run_dir, "--layers", "2", "--heads", "2", "--dim", "16", "--seq",
               "16", "--batch", "4", "--steps", "12", "--eval-batches", "2", "--sample-tokens", "0", "--threads", "1"),
           0, "done at step 12", NULL);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

// A run from `from` whose first step is the first 4 sequential windows of its train.bin; its
// logged step-1 loss must print as `trit eval` prints from's loss on those windows.
static void expect_first_loss(const char *from, const char *out) {
    char from_s[700], out_s[700], shard[800], metrics[800];
    snprintf(from_s, sizeof from_s, "%s", from);
    snprintf(out_s, sizeof out_s, "%s", out);
    cli_expect(RUN("train", "--init-from", from_s, "--data", corpus, "--out", out_s, "--steps", "2", "--batch", "4",
               "--order", "sequential", "--warmup", "0", "--log-every", "1", "--eval-batches", "1", "--sample-tokens",
               "0", "--threads", "1"),
           0, "initialised from", NULL);
    snprintf(metrics, sizeof metrics, "%s/%s", out_s, TRIT_CKPT_METRICS);
    char *m = cli_slurp(metrics);
    double loss = 0;
    assert_int_equal(sscanf(m, "{\"step\":1,\"loss\":%lf", &loss), 1);
    free(m);
    char want[64];
    snprintf(want, sizeof want, "val loss %.4f ", loss);
    snprintf(shard, sizeof shard, "%s/%s", out_s, TRIT_DATA_TRAIN);
    cli_expect(RUN("eval", "--ckpt", from_s, "--data", shard, "--batches", "1", "--batch", "4"), 0, want, NULL);
}

static void test_first_loss_is_runs(void **state) {
    (void)state;
    expect_first_loss(run_dir, at("from-run"));
    cli_expect(RUN("info", at("from-run")), 0, "init-from", NULL);
    // From a quantized copy of RUN, as `trit quantize` writes it.
    cli_expect(RUN("quantize", run_dir, "--format", "int4", "--group", "16", "--batches", "0", "--out", at("q")), 0, NULL,
           NULL);
    expect_first_loss(at("q"), at("from-q"));
    cli_expect(RUN("train", "--help"), 0, "--init-from", NULL);
}

// Exit 1, the message, and no --out directory.
static void expect_refused(cli_result r, const char *out, const char *err_has) {
    cli_expect(r, 1, NULL, err_has);
    if (tfile_exists(out)) fail_msg("'%s' was made", out);
}

static void test_bad_input(void **state) {
    (void)state;
    char out[700];
    snprintf(out, sizeof out, "%s", at("refused"));
    expect_refused(RUN("train", "--init-from", at("nowhere"), "--data", corpus, "--out", out), out,
                   "no such directory");
    expect_refused(RUN("train", "--init-from", corpus, "--data", corpus, "--out", out), out, "is a file");
    expect_refused(RUN("train", "--init-from", run_dir, "--data", corpus, "--out", out, "--layers", "6"), out,
                   "has 2 layers, --layers says 6: drop --layers or start from another run");
    expect_refused(RUN("train", "--init-from", run_dir, "--data", corpus, "--out", out, "--dim", "32"), out,
                   "has width 16, --dim says 32");
    expect_refused(RUN("train", "--init-from", run_dir, "--resume", run_dir), out, "pass one of them");
    cli_expect(RUN("prepare", "--data", corpus, "--tokenizer", "bpe", "--vocab", "300", "--out", at("bpe")), 0, NULL, NULL);
    expect_refused(RUN("train", "--init-from", run_dir, "--data", at("bpe"), "--out", out), out,
                   "(bpe, 300 tokens) is not the tokenizer of");
    expect_refused(RUN("train", "--init-from", run_dir, "--out", out), out, "the addition task's tokenizer");
    expect_refused(RUN("train", "--init-from", at("bpe"), "--data", corpus, "--out", out), out,
                   "has no model.safetensors");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_loss_is_runs),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
