// Running the built `trit` binary from a test: its path is the test executable's directory's
// parent + "/trit" (tests are built in <build>/tests, the CLI in <build>), or $TRIT_BIN.
// Include after <cmocka.h>; define _GNU_SOURCE before the first include.
#ifndef TRIT_TEST_CLI_RUN_H
#define TRIT_TEST_CLI_RUN_H

#include "trit/tokenizer.h"
#include "trit/train.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static inline const char *cli_bin(void) {
    static char path[PATH_MAX + 16];
    if (path[0]) return path;
    const char *env = getenv("TRIT_BIN");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        char self[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        assert_true(n > 0);
        self[n] = 0;
        for (int i = 0; i < 2; i++) *strrchr(self, '/') = 0;  // drop "/tests/<exe>"
        snprintf(path, sizeof path, "%s/trit", self);
    }
    if (access(path, X_OK) != 0) fail_msg("no trit binary at '%s' (build the trit_cli target or set TRIT_BIN)", path);
    return path;
}

typedef struct cli_result {
    int code;     // exit status, or 128 + signal
    char *out;    // stdout (malloc'ed)
    char *err;    // stderr (malloc'ed)
} cli_result;

static inline char *cli_slurp(const char *path) {
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, fp), (size_t)n);
    s[n] = 0;
    fclose(fp);
    return s;
}

// Start `trit args...` (NULL-terminated) with stdout/stderr to files in `scratch`.
static inline pid_t cli_spawn(const char *scratch, const char *const *args) {
    char out[PATH_MAX], err[PATH_MAX];
    snprintf(out, sizeof out, "%s/.stdout", scratch);
    snprintf(err, sizeof err, "%s/.stderr", scratch);
    const char *argv[64];
    int n = 0;
    argv[n++] = "trit";
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    const char *bin = cli_bin();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(127);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static inline cli_result cli_wait(const char *scratch, pid_t pid) {
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    char out[PATH_MAX], err[PATH_MAX];
    snprintf(out, sizeof out, "%s/.stdout", scratch);
    snprintf(err, sizeof err, "%s/.stderr", scratch);
    cli_result r = {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), cli_slurp(out), cli_slurp(err)};
    return r;
}

static inline cli_result cli_run(const char *scratch, const char *const *args) {
    return cli_wait(scratch, cli_spawn(scratch, args));
}

static inline void cli_free(cli_result *r);

// Fails unless r exited with code and its stdout and stderr contain out_has and err_has (either
// NULL: anything); frees r.
static inline void cli_expect(cli_result r, int code, const char *out_has, const char *err_has) {
    if (r.code != code || (out_has && !strstr(r.out, out_has)) || (err_has && !strstr(r.err, err_has)))
        fail_msg("exit %d (want %d)\n--- stdout:\n%s\n--- stderr:\n%s\n--- wanted stdout '%s', stderr '%s'", r.code,
                 code, r.out, r.err, out_has ? out_has : "", err_has ? err_has : "");
    cli_free(&r);
}

static inline void cli_free(cli_result *r) {
    free(r->out);
    free(r->err);
}

// What `trit sample --ckpt DIR --prompt PROMPT --seed SEED --max-tokens N --temperature TEMP
// --threads 1` must print (malloc'ed): the prompt, the bytes of the N tokens trit_generate makes
// in this process from the same checkpoint (loaded as the CLI loads it) and settings, a newline.
// tests/train/test_sample.c checks trit_generate against recomputation from the logits; this
// pins the CLI's part (prompt encoding, the flags that reach the sampler, the printed tokens).
// Needs trit/trit.h and trit/train.h.
static inline char *cli_expected_sample(const char *dir, const char *prompt, uint64_t seed, int64_t n,
                                        double temperature) {
    char tok_path[PATH_MAX];
    snprintf(tok_path, sizeof tok_path, "%s/%s", dir, TRIT_CKPT_TOKENIZER);
    trit_gpt *m = trit_checkpoint_load_decoding(dir, NULL);
    trit_tokenizer *tok = trit_tokenizer_load(tok_path);
    assert_non_null(m);
    assert_non_null(tok);
    int32_t *ids = NULL, *out = malloc(sizeof(int32_t) * (size_t)n);
    size_t n_ids = 0;
    assert_non_null(out);
    assert_int_equal(trit_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &n_ids), TRIT_OK);
    assert_true(n_ids > 0);
    trit_sample_config sc = trit_sample_config_default();
    sc.seed = seed, sc.max_tokens = n, sc.temperature = temperature;
    const int threads = trit_threads_get();
    trit_threads_set(1);
    int64_t made = 0;
    assert_int_equal(trit_generate(m, ids, (int64_t)n_ids, &sc, out, &made, NULL, NULL), TRIT_OK);
    trit_threads_set(threads);
    assert_int_equal(made, n);
    size_t cap = strlen(prompt) + 2, len = strlen(prompt);
    char *text = malloc(cap);
    assert_non_null(text);
    memcpy(text, prompt, len);
    for (int64_t i = 0; i < made; i++) {
        const uint8_t *b;
        size_t k;
        assert_int_equal(trit_tokenizer_token_bytes(tok, out[i], &b, &k), TRIT_OK);
        text = realloc(text, cap += k);
        assert_non_null(text);
        memcpy(text + len, b, k);
        len += k;
    }
    text[len++] = '\n';
    text[len] = 0;
    free(ids);
    free(out);
    trit_tokenizer_free(tok);
    trit_gpt_free(m);
    return text;
}

// Fails unless `trit sample` (stdout `got`) printed `want` (from cli_expected_sample) and made
// text after the prompt; frees want.
static inline void cli_expect_sample(const char *got, char *want, const char *prompt) {
    if (strcmp(got, want) != 0)
        fail_msg("trit sample printed\n'%s'\nwhere the same checkpoint and settings generate\n'%s'", got, want);
    if (strlen(got) <= strlen(prompt) + 1) fail_msg("trit sample generated nothing after the prompt: '%s'", got);
    free(want);
}

#endif
