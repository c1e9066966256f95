// The `trit` binary end to end: each verb's --help, a tiny training run and what it writes,
// info / sample / eval / plot on it, resume with a mismatched config, SIGINT, and bad input
// (missing, empty and binary data, an oversized vocabulary, a corrupt safetensors header,
// non-numeric flags): each a clear message, a non-zero exit, no crash and no partial output.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <time.h>

#include "../train/train_fixture.h"
#include "cli_run.h"

static char root[512];  // scratch directory of this test file
static char corpus[600];

#define RUN(...) cli_run(root, (const char *const[]){__VA_ARGS__, NULL})


static void path(char *buf, size_t n, const char *name) { snprintf(buf, n, "%s/%s", root, name); }

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "cli");
    path(corpus, sizeof corpus, "corpus.txt");
    tf_write_corpus(corpus);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

// Every verb `trit --help` lists (the list is read from its output, so a verb added later is
// checked too) prints its own usage on stdout, nothing on stderr, and exits 0.
static void test_help(void **state) {
    (void)state;
    cli_result top = RUN("--help");
    assert_int_equal(top.code, 0);
    const char *at = strstr(top.out, "commands:\n");
    assert_non_null(at);
    int verbs = 0;
    for (const char *line = strchr(at, '\n') + 1; strncmp(line, "  ", 2) == 0; line = strchr(line, '\n') + 1) {
        char verb[32], want[64];
        assert_int_equal(sscanf(line, " %31s", verb), 1);
        snprintf(want, sizeof want, "usage: trit %s", verb);
        cli_result r = RUN(verb, "--help");
        if (r.code != 0 || strncmp(r.out, want, strlen(want)) != 0 || r.err[0])
            fail_msg("trit %s --help: exit %d, stdout:\n%s\nstderr:\n%s\n(want exit 0 and stdout starting '%s')", verb,
                     r.code, r.out, r.err, want);
        cli_free(&r);
        verbs++;
    }
    cli_free(&top);
    print_message("%d verbs print their usage\n", verbs);
    // train finetune embed sample eval info plot prepare tokenize quantize export import merge
    // merge-shards bench
    assert_int_equal(verbs, 15);
    cli_expect(cli_run(root, (const char *const[]){NULL}), 2, NULL, "usage: trit");
    cli_expect(RUN("fly"), 2, NULL, "unknown command 'fly'");
    char version[64];
    snprintf(version, sizeof version, "trit %d.%d.%d\n", TRIT_VERSION_MAJOR, TRIT_VERSION_MINOR, TRIT_VERSION_PATCH);
    cli_expect(RUN("--version"), 0, version, NULL);
    cli_expect(RUN("train", "--help"), 0, "--total-batch-tokens", NULL);
}

// Without a wait policy of the user's, trit bounds OpenMP's spinning (it re-executes itself
// once with GOMP_SPINCOUNT set); a user's own setting is kept.
static void test_wait_policy(void **state) {
    (void)state;
    char *saved = getenv("OMP_WAIT_POLICY") ? strdup(getenv("OMP_WAIT_POLICY")) : NULL;
    unsetenv("OMP_WAIT_POLICY");
    unsetenv("GOMP_SPINCOUNT");
    setenv("TRIT_LOG", "debug", 1);
    cli_expect(RUN("info", "--help"), 0, NULL, "GOMP_SPINCOUNT=1000 (trit's default");
    setenv("GOMP_SPINCOUNT", "77", 1);
    cli_expect(RUN("info", "--help"), 0, NULL, "OMP_WAIT_POLICY=unset GOMP_SPINCOUNT=77 (from the environment)");
    unsetenv("GOMP_SPINCOUNT");
    setenv("OMP_WAIT_POLICY", "passive", 1);
    cli_expect(RUN("info", "--help"), 0, NULL, "OMP_WAIT_POLICY=passive GOMP_SPINCOUNT=unset");
    unsetenv("TRIT_LOG");
    if (saved) setenv("OMP_WAIT_POLICY", saved, 1);
    else unsetenv("OMP_WAIT_POLICY");
    free(saved);
}

// TRIT_CPU names a level trit has, or trit refuses to start: amx has no kernel of its own (it
// would run the AVX-512 ones), and an unknown value is not quietly replaced by the best level.
static void test_trit_cpu_env(void **state) {
    (void)state;
    setenv("TRIT_CPU", "amx", 1);
    cli_expect(RUN("info", "--help"), 2, NULL, "TRIT_CPU=amx is refused: trit has no AMX kernel yet");
    setenv("TRIT_CPU", "avx3", 1);
    cli_expect(RUN("info", "--help"), 2, NULL, "TRIT_CPU=avx3 is not one of ref|avx2|avx512");
    setenv("TRIT_CPU", "ref", 1);
    cli_expect(RUN("info", "--help"), 0, NULL, NULL);
    cli_expect(RUN("info", "--cpu"), 0, "dispatch level: ref", NULL);
    unsetenv("TRIT_CPU");
    char want[64];
    snprintf(want, sizeof want, "detected level: %s\n", trit_cpu_level_name(trit_cpu_detected_level()));
    cli_expect(RUN("info", "--cpu"), 0, want, NULL);
    cli_expect(RUN("info", "--cpu", "run"), 2, NULL, "--cpu takes no FILE or DIR");
}

static void test_bad_flags(void **state) {
    (void)state;
    char out[700];
    path(out, sizeof out, "never");
    cli_expect(RUN("train", "--steps", "abc", "--out", out), 2, NULL, "--steps expects an integer, got 'abc'");
    cli_expect(RUN("train", "--lr", "1e-3x", "--out", out), 2, NULL, "--lr expects a number, got '1e-3x'");
    cli_expect(RUN("train", "--frobnicate", "1"), 2, NULL, "unknown option '--frobnicate'");
    cli_expect(RUN("train", "--steps"), 2, NULL, "--steps needs a value");
    cli_expect(RUN("train", "--tokenizer", "words"), 2, NULL, "char|bpe");
    cli_expect(RUN("train", "--optimizer", "lion", "--out", out), 2, NULL,
               "--optimizer expects adamw|adamw8bit|galore|qgalore, got 'lion'");
    // A rank above the blocks' matrices' smaller side (--dim 16): refused before anything is written.
    cli_expect(RUN("train", "--data", corpus, "--out", out, "--layers", "1", "--heads", "2", "--dim", "16", "--seq",
                   "16", "--batch", "4", "--steps", "2", "--optimizer", "galore", "--galore-rank", "17"),
               1, NULL, "galore: rank 17 is larger than parameter 0 'h.0.attn.c_attn.weight' (48 x 16) allows");
    cli_expect(RUN("sample", "--ckpt", out, "--temperature", "hot"), 2, NULL, "--temperature expects a number");
    cli_expect(RUN("sample", "--ckpt", out, "--top-k", "3.5"), 2, NULL, "--top-k expects an integer");
    cli_expect(RUN("eval", "--ckpt", out, "--batches", ""), 2, NULL, "empty");
    cli_expect(RUN("prepare", "--data", corpus, "--out", out, "--vocab", "1k"), 2, NULL, "--vocab expects an integer");
    assert_false(tfile_exists(out));
}

// -1 is a value like any other: refused with the flag's range, never taken as "use the default".
// Every verb checks its numbers before it opens a file, so none of these touch the disk.
static void test_flag_ranges(void **state) {
    (void)state;
    char out[700];
    path(out, sizeof out, "never");
    cli_expect(RUN("train", "--layers", "-1", "--out", out), 2, NULL, "--layers must be in [1, 1024], got -1");
    cli_expect(RUN("train", "--seed", "-1", "--out", out), 2, NULL, "--seed must be in [0, 9223372036854775807], got -1");
    cli_expect(RUN("train", "--warmup", "-1", "--out", out), 2, NULL, "--warmup must be in [0, 1000000000], got -1");
    cli_expect(RUN("train", "--batch", "9223372036854775807", "--out", out), 2, NULL,
           "--batch must be in [1, 1048576], got 9223372036854775807");
    cli_expect(RUN("train", "--lr", "nan", "--out", out), 2, NULL, "--lr expects a finite number, got 'nan'");
    // Each within its range, but B x T x 4C is beyond any machine: a message, not a crash.
    cli_expect(RUN("train", "--batch", "1048576", "--seq", "1048576", "--out", out), 1, NULL,
           "--batch 1048576 x --seq 1048576 x 4 --dim 128");
    cli_expect(RUN("sample", "--ckpt", out, "--seed", "-1"), 2, NULL, "--seed must be in [0, 9223372036854775807], got -1");
    cli_expect(RUN("sample", "--ckpt", out, "--max-tokens", "-1"), 2, NULL, "--max-tokens must be in [0, 100000000], got -1");
    cli_expect(RUN("sample", "--ckpt", out, "--threads", "5000"), 2, NULL, "--threads must be in [0, 4096], got 5000");
    cli_expect(RUN("sample", "--ckpt", out, "--temperature", "inf"), 2, NULL, "--temperature expects a finite number");
    cli_expect(RUN("eval", "--ckpt", out, "--batch", "-1"), 2, NULL, "--batch must be in [1, 1048576], got -1");
    cli_expect(RUN("eval", "--ckpt", out, "--batch", "99999999999"), 2, NULL, "--batch must be in [1, 1048576]");
    cli_expect(RUN("eval", "--ckpt", out, "--seq", "-1"), 2, NULL, "--seq must be in [0, 1048576], got -1");
    cli_expect(RUN("eval", "--ckpt", out, "--batches", "-1"), 2, NULL, "--batches must be in [0, 1000000], got -1");
    cli_expect(RUN("bench", "--steps", "-1"), 2, NULL, "--steps must be in [1, 1000000], got -1");
    cli_expect(RUN("bench", "--warmup", "-1"), 2, NULL, "--warmup must be in [0, 1000000], got -1");
    cli_expect(RUN("bench", "--threads", "-1"), 2, NULL, "--threads must be in [0, 4096], got -1");
    cli_expect(RUN("bench", "--decode", "--kv-cache", "bf16"), 2, NULL, "--kv-cache expects f32 or f16, got 'bf16'");
    cli_expect(RUN("bench", "--accum", "0"), 2, NULL, "--accum must be in [1, 1024], got 0");
    cli_expect(RUN("bench", "--ternary", "--ternary-matmul", "int4"), 2, NULL,
               "--ternary-matmul expects fake, int8, int8-fp32-dw or int8-fp32-dx, got 'int4'");
    cli_expect(RUN("bench", "--config", "baby", "--steps", "1", "--warmup", "0", "--threads", "1", "--ternary",
                   "--ternary-matmul", "int8-fp32-dw", "--json"),
               0, "\"config\": \"baby\"", NULL);
    cli_expect(RUN("bench", "--decode", "--accum", "2"), 2, NULL, "--accum times training steps: leave it out with --decode");
    cli_expect(RUN("bench", "--peak", "--accum", "2"), 2, NULL, "--accum times training steps: leave it out with --peak");
    cli_expect(RUN("bench", "--peak", "--decode"), 2, NULL,
               "--decode, --scaling and --peak are separate benchmarks: pass one");
    // The fp32 loop is measured at every level (the portable one at ref), and the read bandwidth.
    cli_expect(RUN("bench", "--peak", "--threads", "1", "--json"), 0, "{\"what\":\"fp32 FMA, ", NULL);
    cli_expect(RUN("bench", "--peak", "--threads", "1", "--json"), 0,
               "{\"what\":\"read (streaming sum)\",\"kernel\":\"read\",\"threads\":1,\"bytes_per_s\":", NULL);
    cli_expect(RUN("sample", "--ckpt", out, "--kv-cache", "f8"), 2, NULL, "--kv-cache expects f32 or f16, got 'f8'");
    cli_expect(RUN("bench", "--decode", "--config", "baby", "--format", "int8", "--kv-cache", "f16", "--tokens", "8",
               "--threads", "1", "--json"),
           0, "\"kv_cache\":\"f16\"", NULL);
    cli_expect(RUN("prepare", "--data", corpus, "--out", out, "--vocab", "-1"), 2, NULL,
           "--vocab must be in [257, 65536], got -1");
    cli_expect(RUN("prepare", "--data", corpus, "--out", out, "--val-fraction", "1"), 2, NULL,
           "--val-fraction must be in (0, 1), got 1");
    cli_expect(RUN("prepare", "--data", corpus, "--out", out, "--val-fraction", "nan"), 2, NULL,
           "--val-fraction expects a finite number");
    assert_false(tfile_exists(out));
}

static void test_bad_data(void **state) {
    (void)state;
    char out[700], empty[700], bin[700], missing[700];
    path(out, sizeof out, "bad-run");
    path(empty, sizeof empty, "empty.txt");
    path(bin, sizeof bin, "random.bin");
    path(missing, sizeof missing, "missing.txt");
    tfile_write(empty, "", 0);
    uint8_t noise[4096];
    for (int i = 0; i < 4096; i++) noise[i] = (uint8_t)trit_rng_u32(3, 3, (uint64_t)i);
    tfile_write(bin, noise, sizeof noise);
    cli_expect(RUN("train", "--data", missing, "--out", out), 1, NULL, "cannot open");
    cli_expect(RUN("train", "--data", empty, "--out", out), 1, NULL, "is empty");
    cli_expect(RUN("train", "--data", bin, "--out", out), 1, NULL, "looks binary");
    cli_expect(RUN("train", "--data", corpus, "--tokenizer", "bpe", "--vocab", "70000", "--out", out), 2, NULL,
           "uint16");
    cli_expect(RUN("prepare", "--data", corpus, "--tokenizer", "bpe", "--vocab", "70000", "--out", out), 2, NULL,
           "--vocab must be in [257, 65536], got 70000");
    cli_expect(RUN("prepare", "--data", bin, "--out", out), 1, NULL, "looks binary");
    // The corpus is shorter than one window of this context: the run fails and cleans up.
    cli_expect(RUN("train", "--data", corpus, "--seq", "100000", "--out", out), 1, NULL, "fewer than one window");
    assert_false(tfile_exists(out));
}

static void tiny_run(const char *out, const char *steps) {
    cli_expect(RUN("train", "--data", corpus, "--out", out, "--layers", "1", "--heads", "2", "--dim", "16", "--seq",
               "16", "--batch", "4", "--steps", steps, "--eval-every", "5", "--eval-batches", "2", "--log-every",
               "2", "--sample-tokens", "20", "--threads", "1"),
           0, "val ", NULL);
}

static void test_train_and_inspect(void **state) {
    (void)state;
    char out[700], f[800];
    path(out, sizeof out, "tiny");
    tiny_run(out, "10");
    const char *files[] = {TRIT_CKPT_MODEL, TRIT_CKPT_STATE, TRIT_CKPT_TOKENIZER, TRIT_CKPT_METRICS, "train.bin",
                           "val.bin"};
    for (int i = 0; i < 6; i++) {
        snprintf(f, sizeof f, "%s/%s", out, files[i]);
        if (!tfile_exists(f)) fail_msg("missing %s", f);
    }
    snprintf(f, sizeof f, "%s/%s", out, TRIT_CKPT_METRICS);
    char *m = cli_slurp(f);
    assert_non_null(strstr(m, "{\"step\":2,\"loss\":"));
    assert_non_null(strstr(m, "\"val_loss\":"));
    assert_non_null(strstr(m, "\"tokens_per_s\":"));
    free(m);

    cli_expect(RUN("info", out), 0, "wte.weight", NULL);
    cli_expect(RUN("info", out), 0, "parameters", NULL);
    snprintf(f, sizeof f, "%s/%s", out, TRIT_CKPT_MODEL);
    cli_expect(RUN("info", f), 0, "F32", NULL);
    snprintf(f, sizeof f, "%s/val.bin", out);
    cli_expect(RUN("info", f), 0, "token shard", NULL);

    // A seed fixes the text: the continuation the library makes from this checkpoint with seed 3
    // (and not seed 4's), greedy too; the default temperature is 0.8.
    cli_result a = RUN("sample", "--ckpt", out, "--prompt", "the ", "--max-tokens", "30", "--seed", "3", "--threads", "1");
    cli_result b = RUN("sample", "--ckpt", out, "--prompt", "the ", "--max-tokens", "30", "--seed", "4", "--threads", "1");
    cli_result g = RUN("sample", "--ckpt", out, "--prompt", "the ", "--max-tokens", "30", "--temperature", "0",
                       "--threads", "1");
    assert_int_equal(a.code, 0);
    assert_int_equal(b.code, 0);
    assert_int_equal(g.code, 0);
    cli_expect_sample(a.out, cli_expected_sample(out, "the ", 3, 30, 0.8), "the ");
    cli_expect_sample(b.out, cli_expected_sample(out, "the ", 4, 30, 0.8), "the ");
    cli_expect_sample(g.out, cli_expected_sample(out, "the ", 1, 30, 0), "the ");
    assert_string_not_equal(a.out, b.out);
    cli_free(&a);
    cli_free(&b);
    cli_free(&g);
    // A byte the char vocabulary lacks: the message names it and what to do; nothing is printed.
    a = RUN("sample", "--ckpt", out, "--prompt", "thZ", "--max-tokens", "3");
    if (a.code != 2 || a.out[0] || !strstr(a.err, "byte 0x5a ('Z') at offset 2 is not in the char vocabulary") ||
        !strstr(a.err, "train the tokenizer on text that contains it"))
        fail_msg("exit %d, stdout '%s', stderr '%s'", a.code, a.out, a.err);
    cli_free(&a);

    cli_expect(RUN("eval", "--ckpt", out), 0, "val loss", NULL);
    cli_expect(RUN("plot", out), 0, "loss.svg", NULL);
    snprintf(f, sizeof f, "%s/loss.svg", out);
    assert_true(tfile_exists(f));
    cli_expect(RUN("plot", out, out), 2, NULL, "--out");  // several runs need a file for the plot
    snprintf(f, sizeof f, "%s/both.svg", out);
    cli_expect(RUN("plot", out, out, "--out", f), 0, "both.svg", NULL);

    // Resume with another model config: refused with the hint, nothing changed.
    cli_expect(RUN("train", "--resume", out, "--layers", "3"), 1, NULL, "pass --layers 1");
    // Resume to more... the same steps: the run is complete.
    cli_expect(RUN("train", "--resume", out), 0, "complete", NULL);
}

// prepare -> train on the prepared directory -> eval finds its val.bin; BPE tokenizer.
static void test_prepare_then_train(void **state) {
    (void)state;
    char data[700], out[700], f[800];
    path(data, sizeof data, "prepared");
    path(out, sizeof out, "from-prepared");
    cli_expect(RUN("prepare", "--data", corpus, "--tokenizer", "bpe", "--vocab", "300", "--out", data), 0,
           "bpe tokenizer with 300 tokens", NULL);
    snprintf(f, sizeof f, "%s/%s", data, TRIT_CKPT_TOKENIZER);
    cli_expect(RUN("info", f), 0, "bpe tokenizer, 300 tokens", NULL);
    cli_expect(RUN("train", "--data", data, "--out", out, "--layers", "1", "--dim", "16", "--seq", "16", "--batch", "2",
               "--steps", "4", "--threads", "1"),
           0, "done at step 4", NULL);
    snprintf(f, sizeof f, "%s/train.bin", out);
    assert_false(tfile_exists(f));  // the shards stay in the prepared directory
    cli_expect(RUN("eval", "--ckpt", out, "--batches", "2"), 0, "prepared/val.bin", NULL);
    cli_expect(RUN("sample", "--ckpt", out, "--max-tokens", "5", "--temperature", "0"), 0, NULL, NULL);
    // Bad sampler settings are command-line mistakes: usage exit code, the value named.
    cli_expect(RUN("sample", "--ckpt", out, "--top-p", "0"), 2, NULL, "--top-p must be in (0, 1], got 0");
    cli_expect(RUN("sample", "--ckpt", out, "--temperature", "-1"), 2, NULL, "--temperature must be in [0, 100], got -1");
    cli_expect(RUN("sample", "--ckpt", out, "--top-k", "-3"), 2, NULL, "--top-k must be in [0, 65536], got -3");
}

static void test_corrupt_safetensors(void **state) {
    (void)state;
    char f[700];
    path(f, sizeof f, "corrupt.safetensors");
    uint8_t junk[40] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '"'};
    tfile_write(f, junk, sizeof junk);
    cli_expect(RUN("info", f), 1, NULL, "safetensors");
    cli_expect(RUN("sample", "--ckpt", f, "--tokenizer-file", corpus), 1, NULL, "safetensors");
    cli_expect(RUN("eval", "--ckpt", f, "--data", corpus), 1, NULL, "safetensors");
    // A header that is JSON in shape but not UTF-8 (a Latin-1 tensor name).
    static const char hdr[] = "{\"caf\xE9\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    uint8_t file[8 + sizeof hdr + 4] = {(uint8_t)(sizeof hdr - 1)};
    memcpy(file + 8, hdr, sizeof hdr - 1);
    path(f, sizeof f, "latin1.safetensors");
    tfile_write(f, file, 8 + sizeof hdr - 1 + 4);
    cli_expect(RUN("info", f), 1, NULL, "not valid UTF-8 (byte 0xe9 at offset 5");
    path(f, sizeof f, "nothing-here");
    cli_expect(RUN("info", f), 1, NULL, "cannot open");
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// SIGINT and SIGTERM: the step finishes, a checkpoint is written, exit 0, and --resume continues.
static void interrupt_with(int sig, const char *name) {
    char out[700], f[800];
    path(out, sizeof out, name);
    pid_t pid = cli_spawn(root, (const char *const[]){"train", "--data", corpus, "--out", out, "--layers", "1",
                                                      "--dim", "16", "--seq", "16", "--batch", "4", "--steps",
                                                      "1000000", "--log-every", "1", "--threads", "1", NULL});
    snprintf(f, sizeof f, "%s/%s", out, TRIT_CKPT_METRICS);
    for (int i = 0; i < 2000; i++) {  // wait for the first logged step
        struct stat st;
        if (stat(f, &st) == 0 && st.st_size > 0) break;
        sleep_ms(10);
    }
    assert_int_equal(kill(pid, sig), 0);
    cli_result r = cli_wait(root, pid);
    const char *at = strstr(r.out, "stopped at step ");
    if (r.code != 0 || !at) fail_msg("exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.out, r.err);
    long step = strtol(at + 16, NULL, 10);
    cli_free(&r);
    snprintf(f, sizeof f, "%s/%s", out, TRIT_CKPT_STATE);
    assert_true(tfile_exists(f));
    char next[32], want[800];
    snprintf(next, sizeof next, "%ld", step + 1);
    snprintf(want, sizeof want, "resuming %s at step %ld", out, step);
    cli_expect(RUN("train", "--resume", out, "--stop-after", next, "--threads", "1"), 0, want, NULL);
}

static void test_sigint_sigterm(void **state) {
    (void)state;
    interrupt_with(SIGINT, "interrupted-int");
    interrupt_with(SIGTERM, "interrupted-term");
}

static void test_addition_default(void **state) {
    (void)state;
    char out[700];
    path(out, sizeof out, "add");
    cli_expect(RUN("train", "--out", out, "--steps", "5", "--layers", "1", "--dim", "16", "--task-test", "20",
               "--threads", "1"),
           0, "held-out exact match", NULL);
    cli_expect(RUN("eval", "--ckpt", out, "--task-test", "20"), 0, "exact match", NULL);
    cli_expect(RUN("info", out), 0, "addition task", NULL);
}

// The run header's size is the parameters' real bytes: 2 a parameter for bf16 weights without
// master copies, 4 for fp32 ones.
static void test_header_bytes(void **state) {
    (void)state;
    const char *precision[2] = {"fp32", "bf16"}, *master[2] = {"on", "off"};
    for (int k = 0; k < 2; k++) {
        char out[700];
        path(out, sizeof out, k ? "header-bf16" : "header-fp32");
        cli_result r = RUN("train", "--data", corpus, "--out", out, "--layers", "1", "--heads", "2", "--dim", "32",
                           "--seq", "16", "--batch", "2", "--steps", "1", "--eval-batches", "1", "--sample-tokens",
                           "0", "--threads", "1", "--precision", precision[k], "--master-weights", master[k]);
        assert_int_equal(r.code, 0);
        const char *line = strstr(r.out, "model: ");
        assert_non_null(line);
        const char *at = strstr(line, "vocab ");
        long long vocab = 0, n = 0;
        double mb = 0;
        assert_non_null(at);
        assert_int_equal(sscanf(at, "vocab %lld: %lld parameters (%lf MB)", &vocab, &n, &mb), 3);
        char want[32], got[32];
        snprintf(want, sizeof want, "%.2f", (double)n * (k ? 2.0 : 4.0) / 1e6);
        snprintf(got, sizeof got, "%.2f", mb);
        if (strcmp(want, got) != 0) fail_msg("%s: %lld parameters shown as %s MB, want %s", precision[k], n, got, want);
        cli_free(&r);
        tfile_rm_rf(out);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help),
        cmocka_unit_test(test_wait_policy),
        cmocka_unit_test(test_trit_cpu_env),
        cmocka_unit_test(test_bad_flags), cmocka_unit_test(test_flag_ranges),
        cmocka_unit_test(test_bad_data),
        cmocka_unit_test(test_train_and_inspect),
        cmocka_unit_test(test_prepare_then_train),
        cmocka_unit_test(test_corrupt_safetensors),
        cmocka_unit_test(test_sigint_sigterm),
        cmocka_unit_test(test_addition_default),
        cmocka_unit_test(test_header_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
