// LoRA, QLoRA and bottleneck adapters end to end: `trit train --init-from RUN --lora ...` leaves
// an adapter that `trit eval --adapter` and `trit merge` agree on (a bottleneck run the same,
// unmergeable), a --quantize-base run resumes to the same losses as an uninterrupted one, and
// bad adapters and flags exit non-zero with their message and leave nothing behind.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../train/train_fixture.h"
#include "cli_run.h"

static char root[512], corpus[600], base[600], other[600];

#define RUN(...) cli_run(root, (const char *const[]){__VA_ARGS__, NULL})

static const char *at(const char *name) { return tfile_join(root, name); }

static const char *LORA = "r=4,alpha=8,dropout=0.1,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj";

static void train_base(const char *out, const char *dim) {
    cli_expect(RUN("train", "--data", corpus, "--out", out, "--layers", "2", "--heads", "2", "--dim", dim, "--seq", "16",
               "--batch", "4", "--steps", "8", "--eval-batches", "2", "--sample-tokens", "0", "--threads", "1"),
           0, "done at step 8", NULL);
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "cli-lora");
    snprintf(corpus, sizeof corpus, "%s", at("corpus.txt"));
    tf_write_corpus(corpus);
    snprintf(base, sizeof base, "%s", at("base"));
    snprintf(other, sizeof other, "%s", at("other"));
    train_base(base, "64");
    train_base(other, "32");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

// The "val loss ..." line `trit eval` prints for args, copied out.
static void eval_line(char *buf, size_t n, const char *const *args) {
    cli_result r = cli_run(root, args);
    const char *at_ = strstr(r.out, "val loss");
    if (r.code != 0 || !at_) fail_msg("trit eval: exit %d\n%s\n%s", r.code, r.out, r.err);
    snprintf(buf, n, "%.*s", (int)strcspn(at_, "\n"), at_);
    cli_free(&r);
}

static void test_lora_run(void **state) {
    (void)state;
    char lora[700], shard[800], merged[700], a[256], b[256], c[256];
    snprintf(lora, sizeof lora, "%s", at("lora"));
    snprintf(merged, sizeof merged, "%s", at("merged"));
    cli_expect(RUN("train", "--init-from", base, "--data", corpus, "--out", lora, "--lora", LORA, "--lr", "1e-2", "--steps",
               "6", "--eval-batches", "2", "--sample-tokens", "8", "--threads", "1"),
           0, "lora: r 4, alpha 8 (scale 2), dropout 0.1", NULL);
    assert_true(tfile_exists(tfile_join(lora, TRIT_PEFT_WEIGHTS)) && tfile_exists(tfile_join(lora, TRIT_PEFT_CONFIG)));
    snprintf(shard, sizeof shard, "%s/%s", lora, TRIT_DATA_VAL);
    // The run itself, the base with its adapter, and the merged run: one loss.
    eval_line(a, sizeof a, (const char *const[]){"eval", "--ckpt", lora, "--data", shard, "--batches", "2", NULL});
    eval_line(b, sizeof b, (const char *const[]){"eval", "--ckpt", base, "--adapter", lora, "--data", shard, "--batches", "2", NULL});
    cli_expect(RUN("merge", base, "--adapter", lora, "--out", merged), 0, "wrote", NULL);
    eval_line(c, sizeof c, (const char *const[]){"eval", "--ckpt", merged, "--data", shard, "--batches", "2", NULL});
    assert_string_equal(a, b);
    assert_string_equal(a, c);
    eval_line(c, sizeof c, (const char *const[]){"eval", "--ckpt", base, "--data", shard, "--batches", "2", NULL});
    assert_string_not_equal(a, c);  // the adapter changed something
    cli_expect(RUN("sample", "--ckpt", base, "--adapter", lora, "--max-tokens", "5"), 0, NULL, NULL);
    // A bottleneck run: the same conventions, but it cannot be merged.
    char bn[700];
    snprintf(bn, sizeof bn, "%s", at("bottleneck"));
    cli_expect(RUN("train", "--init-from", base, "--data", corpus, "--out", bn, "--adapter-type", "bottleneck",
               "--adapter-size", "8", "--lr", "1e-2", "--steps", "6", "--eval-batches", "2", "--sample-tokens", "0",
               "--threads", "1"),
           0, "bottleneck adapters: width 8", NULL);
    eval_line(a, sizeof a, (const char *const[]){"eval", "--ckpt", bn, "--data", shard, "--batches", "2", NULL});
    eval_line(b, sizeof b, (const char *const[]){"eval", "--ckpt", base, "--adapter", bn, "--data", shard, "--batches", "2", NULL});
    assert_string_equal(a, b);
    snprintf(merged, sizeof merged, "%s", at("bn-merged"));
    cli_expect(RUN("merge", base, "--adapter", bn, "--out", merged), 1, NULL, "cannot be merged");
    assert_false(tfile_exists(merged));
}

// The last metrics line of a run (its losses and norm, without the timings).
static void last_losses(const char *run, char *buf, size_t n) {
    char path[800];
    snprintf(path, sizeof path, "%s/%s", run, TRIT_CKPT_METRICS);
    char *m = cli_slurp(path), *last = m, *p;
    while ((p = strstr(last + 1, "{\"step\"")) != NULL) last = p;
    snprintf(buf, n, "%.*s", (int)(strstr(last, ",\"ms\"") - last), last);
    free(m);
}

static void test_qlora_resume(void **state) {
    (void)state;
    char a[700], b[700], la[512], lb[512];
    snprintf(a, sizeof a, "%s", at("qa"));
    snprintf(b, sizeof b, "%s", at("qb"));
    const char *common[] = {"--init-from", base, "--data", corpus, "--lora", LORA, "--quantize-base", "nf4", "--double-quant",
                            "--steps", "4", "--eval-every", "0", "--eval-batches", "1", "--sample-tokens", "0", "--threads", "1"};
#define COMMON common[0], common[1], common[2], common[3], common[4], common[5], common[6], common[7], common[8], \
               common[9], common[10], common[11], common[12], common[13], common[14], common[15], common[16], common[17], \
               common[18]
    cli_expect(RUN("train", COMMON, "--out", a), 0, "memory:", NULL);
    cli_expect(RUN("train", COMMON, "--out", b, "--stop-after", "2"), 0, NULL, NULL);
    cli_expect(RUN("train", "--resume", b, "--threads", "1"), 0, "resuming", NULL);
#undef COMMON
    last_losses(a, la, sizeof la);
    last_losses(b, lb, sizeof lb);
    assert_string_equal(la, lb);
}

// Exit 1 (2: a flag's value is malformed), the message, and no --out directory.
static void expect_refused_code(cli_result r, int code, const char *out, const char *err_has) {
    cli_expect(r, code, NULL, err_has);
    if (tfile_exists(out)) fail_msg("'%s' was made", out);
}

static void expect_refused(cli_result r, const char *out, const char *err_has) { expect_refused_code(r, 1, out, err_has); }

static void test_bad_input(void **state) {
    (void)state;
    char out[700], lora[700];
    snprintf(out, sizeof out, "%s", at("refused"));
    snprintf(lora, sizeof lora, "%s", at("lora"));  // made by test_lora_run
    expect_refused(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--lora", "targets=q_proj,v_proj"), out,
                   "LoRA target 'q_proj' matches no module");
    expect_refused(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--lora", "r=65,targets=c_attn"), out,
                   "is larger than h.0.attn.c_attn (192 x 64) allows");
    expect_refused_code(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--lora", "r=4,scale=2"), 2, out,
                        "unknown key 'scale'");
    expect_refused(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--quantize-base", "nf4"), out,
                   "it needs --lora");
    expect_refused(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--lora-init", lora), out,
                   "--lora-init gives a LoRA adapter its first values: it needs --lora");
    expect_refused(RUN("train", "--init-from", other, "--data", corpus, "--out", out, "--lora", LORA, "--lora-init", lora),
                   out, "made for another base model");
    expect_refused(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--adapter-type", "bottleneck"), out,
                   "needs --adapter-size N");
    expect_refused(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--adapter-type", "bottleneck",
                       "--adapter-size", "65"), out, "--adapter-size 65 is larger than --dim 64");
    expect_refused(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--adapter-size", "8"), out,
                   "--adapter-size applies to --adapter-type bottleneck");
    expect_refused(RUN("train", "--init-from", base, "--data", corpus, "--out", out, "--adapter-type", "bottleneck",
                       "--adapter-size", "8", "--lora", "r=2"), out, "drop --adapter-type bottleneck or --lora");
    // An adapter made for another base: its shapes do not fit.
    expect_refused(RUN("merge", other, "--adapter", lora, "--out", out), out, "made for another base model");
    expect_refused(RUN("eval", "--ckpt", other, "--adapter", lora), out, "made for another base model");
    expect_refused(RUN("merge", base, "--adapter", at("nowhere"), "--out", out), out, "adapter_config.json");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora_run),
        cmocka_unit_test(test_qlora_resume),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
