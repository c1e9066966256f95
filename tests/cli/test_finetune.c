// `trit finetune BASE` end to end: a fine-tune with frozen attention (re-opened in block 0) and a
// recompute policy reports both; --task embed lowers its InfoNCE loss on a small pairs file and
// `trit embed` prints one vector per text, the same for the same text and different for
// different texts; each bad input exits non-zero with its message and leaves no --out directory.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "../train/train_fixture.h"
#include "cli_run.h"

static char root[512], corpus[600], base[600], pairs[600];

#define RUN(...) cli_run(root, (const char *const[]){__VA_ARGS__, NULL})
#define TINY "--steps", "4", "--batch", "4", "--eval-batches", "1", "--sample-tokens", "0", "--threads", "1"

static const char *at(const char *name) { return tfile_join(root, name); }

// n pairs of the corpus's words: "the W1 and the W2" -> "W2 the W1".
static void write_pairs(const char *path, int n, int broken_line, const char *broken) {
    static const char *words[] = {"king", "queen", "land", "sea", "wind", "night", "songs", "old"};
    char *text = malloc(64 * (size_t)n + 256);
    assert_non_null(text);
    size_t len = 0;
    for (int i = 1; i <= n; i++) {
        const char *a = words[trit_rng_u32(2, 0, (uint64_t)i) % 8], *b = words[trit_rng_u32(2, 1, (uint64_t)i) % 8];
        if (i == broken_line) len += (size_t)sprintf(text + len, "%s\n", broken);
        else len += (size_t)sprintf(text + len, "{\"anchor\": \"the %s and the %s\", \"positive\": \"%s the %s\"}\n", a, b, b, a);
    }
    tfile_write(path, text, len);
    free(text);
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "cli-finetune");
    snprintf(corpus, sizeof corpus, "%s", at("corpus.txt"));
    tf_write_corpus(corpus);
    snprintf(base, sizeof base, "%s", at("base"));
    snprintf(pairs, sizeof pairs, "%s", at("pairs.jsonl"));
    write_pairs(pairs, 40, 0, NULL);
    cli_expect(RUN("train", "--data", corpus, "--out", base, "--layers", "2", "--heads", "2", "--dim", "16", "--seq",
               "16", "--batch", "4", "--steps", "12", "--eval-batches", "2", "--sample-tokens", "0", "--threads", "1"),
           0, "done at step 12", NULL);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

static void test_finetune_text(void **state) {
    (void)state;
    cli_expect(RUN("finetune", base, "--data", corpus, "--out", at("ft"), "--freeze", "h.*.attn.*", "--unfreeze",
               "h.0.attn.*", "--recompute", "mlp", "--steps", "6", "--stop-after", "3", "--batch", "4", "--eval-batches", "1",
               "--sample-tokens", "0", "--threads", "1"),
           0, "frozen: --freeze 'h.*.attn.*' --unfreeze 'h.0.attn.*'", NULL);
    cli_expect(RUN("info", at("ft")), 0, "h.*.attn.*,!h.0.attn.*", NULL);
    // Resumable as a fine-tune (BASE may be repeated, and must be the same).
    cli_expect(RUN("finetune", "--resume", at("ft"), "--steps", "6", "--quiet", "1"), 0, "done at step 6", NULL);
    cli_expect(RUN("finetune", corpus, "--resume", at("ft")), 2, NULL, "leave BASE out");
    cli_expect(RUN("finetune", base, "--data", corpus, "--out", at("ft-rec"), "--recompute", "auto", "--memory-budget",
               "1000", TINY),
           0, "recompute: auto (block on 0 of 2 blocks", NULL);
    cli_expect(RUN("finetune", "--help"), 0, "--freeze", NULL);
}

static const char *hf_fixture(void) {
    static char buf[700];
    const char *src = getenv("TRIT_SOURCE_DIR");
    snprintf(buf, sizeof buf, "%s/tests/reference/fixtures/hf_gpt2/with_tokenizer", src ? src : ".");
    return buf;
}

// A transformers GPT-2 directory with its tokenizer.json is a base for `trit finetune` and for
// `trit train --init-from`; the run keeps its tokenizer (300 tokens, <|endoftext|> special).
static void test_finetune_hf(void **state) {
    (void)state;
    cli_expect(RUN("finetune", hf_fixture(), "--data", corpus, "--out", at("ft-hf"), "--seq", "32", TINY), 0,
               "done at step 4", NULL);
    cli_expect(RUN("info", at("ft-hf")), 0, "gpt2 tokenizer, 300 tokens", NULL);
    cli_expect(RUN("train", "--init-from", hf_fixture(), "--data", corpus, "--out", at("tr-hf"), "--seq", "32", TINY),
               0, "done at step 4", NULL);
}

// Exit `code`, the message, and no --out directory.
static void expect_refused(cli_result r, int code, const char *out, const char *err_has) {
    cli_expect(r, code, NULL, err_has);
    if (tfile_exists(out)) fail_msg("'%s' was made", out);
}

static void test_bad_input(void **state) {
    (void)state;
    char out[700], gguf[700], hf[700], bad[700];
    snprintf(out, sizeof out, "%s", at("refused"));
    snprintf(gguf, sizeof gguf, "%s", at("model.gguf"));
    tfile_write(gguf, "GGUF\3\0\0\0", 8);
    snprintf(hf, sizeof hf, "%s", at("hf"));
    mkdir(hf, 0755);
    tfile_write(tfile_join(hf, "config.json"), "{}", 2);
    expect_refused(RUN("finetune", "--data", corpus, "--out", out), 2, out, "no BASE given");
    expect_refused(RUN("finetune", base, "--out", out), 2, out, "no --data given");
    expect_refused(RUN("finetune", base, "--data", corpus), 2, out, "no --out given");
    expect_refused(RUN("finetune", base, "--init-from", base, "--data", corpus, "--out", out), 2, out, "--init-from is BASE");
    expect_refused(RUN("finetune", at("nowhere"), "--data", corpus, "--out", out), 1, out, "no such directory");
    expect_refused(RUN("finetune", corpus, "--data", corpus, "--out", out), 1, out, "is a file");
    expect_refused(RUN("finetune", gguf, "--data", corpus, "--out", out), 1, out, "is a GGUF file");
    expect_refused(RUN("finetune", hf, "--data", corpus, "--out", out), 1, out, "is a Hugging Face directory");
    expect_refused(RUN("finetune", base, "--data", corpus, "--out", out, "--freeze", "h.*.atn.*"), 1, out,
                   "--freeze 'h.*.atn.*' matches no parameter of the model; its names are wte.weight, wpe.weight");
    expect_refused(RUN("finetune", base, "--data", corpus, "--out", out, "--freeze", "h.*", "--unfreeze", "h.7.*"), 1,
                   out, "--unfreeze 'h.7.*' matches no parameter");
    expect_refused(RUN("finetune", base, "--data", corpus, "--out", out, "--freeze", "*"), 1, out,
                   "leaves no parameter to train");
    expect_refused(RUN("finetune", base, "--data", corpus, "--out", out, "--recompute", "sometimes"), 2, out,
                   "--recompute expects off|block|attn|mlp|auto|none, got 'sometimes'");
    expect_refused(RUN("finetune", base, "--data", corpus, "--out", out, "--recompute", "auto"), 1, out,
                   "--recompute auto chooses the blocks to recompute by --memory-budget MB");
    expect_refused(RUN("finetune", base, "--data", corpus, "--out", out, "--recompute", "auto", "--memory-budget",
                   "0.01"), 1, out, "--memory-budget 0.01 MB is too small: even recomputing every block, the run needs");
    expect_refused(RUN("finetune", base, "--data", corpus, "--out", out, "--recompute", "none", "--memory-budget", "0.01"),
                   1, out, "is too small: with --recompute none the run needs");
    // Pairs files.
    snprintf(bad, sizeof bad, "%s", at("bad.jsonl"));
    write_pairs(bad, 40, 3, "{\"anchor\": \"the king\"}");
    expect_refused(RUN("finetune", base, "--task", "embed", "--data", bad, "--out", out), 1, out,
                   "bad.jsonl line 3 has no \"positive\" field");
    write_pairs(bad, 40, 5, "{\"anchor\": \"the king\", \"positive\": 7}");
    expect_refused(RUN("finetune", base, "--task", "embed", "--data", bad, "--out", out), 1, out,
                   "line 5: \"positive\" is not a string");
    write_pairs(bad, 40, 2, "anchor,positive");
    expect_refused(RUN("finetune", base, "--task", "embed", "--data", bad, "--out", out), 1, out,
                   "line 2 is not a JSON object");
    write_pairs(bad, 40, 4, "{\"anchor\": \"\", \"positive\": \"sea\"}");
    expect_refused(RUN("finetune", base, "--task", "embed", "--data", bad, "--out", out), 1, out,
                   "line 4: the \"anchor\" text is empty");
    write_pairs(bad, 40, 6, "{\"anchor\": \"ZZZ\", \"positive\": \"sea\"}");
    expect_refused(RUN("finetune", base, "--task", "embed", "--data", bad, "--out", out), 1, out,
                   "line 6: the \"anchor\" text cannot be tokenized with the base's tokenizer");
    write_pairs(bad, 6, 0, NULL);
    expect_refused(RUN("finetune", base, "--task", "embed", "--data", bad, "--out", out, "--batch", "4"), 1, out,
                   "holds 6 pairs: 6 for training and 0 held out");
    expect_refused(RUN("finetune", base, "--task", "embed", "--data", at("none.jsonl"), "--out", out), 1, out,
                   "no such file");
    expect_refused(RUN("train", "--task", "embed", "--data", pairs, "--out", out), 1, out, "fine-tunes a base model");
}

static double metric_loss(const char *line) {
    const char *p = strstr(line, "\"loss\":");
    assert_non_null(p);
    return strtod(p + 7, NULL);
}

static void test_embed(void **state) {
    (void)state;
    char emb[700];
    snprintf(emb, sizeof emb, "%s", at("emb"));
    cli_expect(RUN("finetune", base, "--task", "embed", "--data", pairs, "--out", emb, "--steps", "30", "--batch", "8",
               "--val-fraction", "0.2", "--lr", "3e-3", "--warmup", "0", "--log-every", "1", "--eval-every", "0",
               "--eval-batches", "1", "--threads", "1"),
           0, "data: 32 train pairs, 8 held out", NULL);
    char path[800];
    snprintf(path, sizeof path, "%s/%s", emb, TRIT_CKPT_METRICS);
    char *m = cli_slurp(path);
    const double first = metric_loss(m);
    const char *last = m + strlen(m) - 2;
    while (last > m && *last != '\n') last--;
    const double final = metric_loss(last);
    print_message("InfoNCE over 8 pairs: %.4f (log 8 = 2.0794) -> %.4f after 30 steps\n", first, final);
    assert_true(first > 1.9 && first < 2.3);  // near log B at the start: no pair is told apart yet
    assert_true(final < 0.5 * first);
    free(m);
    cli_result r = RUN("embed", emb, "--text", "the king and the sea", "--text", "the king and the sea", "--text",
                       "old songs by night");
    assert_int_equal(r.code, 0);
    char *l1 = r.out, *l2 = strchr(l1, '\n'), *l3;
    assert_non_null(l2);
    *l2++ = 0;
    assert_non_null(l3 = strchr(l2, '\n'));
    *l3++ = 0;
    assert_non_null(strchr(l3, '\n'));
    int n = 0;
    for (char *tok = l1; *tok; tok++) n += *tok == ' ';
    assert_int_equal(n + 1, 16);  // C numbers
    assert_string_equal(l1, l2);
    assert_true(strncmp(l1, l3, strlen(l1)) != 0);
    cli_free(&r);
    cli_expect(RUN("info", emb), 0, "(sentence embeddings)", NULL);
    cli_expect(RUN("embed", emb), 2, NULL, "no --text given");
    cli_expect(RUN("embed", "--text", "x"), 2, NULL, "no RUN given");
    cli_expect(RUN("embed", at("nowhere"), "--text", "x"), 1, NULL, "not a run directory");
    cli_expect(RUN("embed", emb, "--text", ""), 1, NULL, "--text 1: embed: the text is empty");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finetune_text),
        cmocka_unit_test(test_finetune_hf),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_embed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
