// Helpers shared by the training tests: temporary directories, a small text corpus, a tiny
// training config and recursive removal. Include after <cmocka.h>; the test file defines
// _GNU_SOURCE before its first include (mkdtemp, lstat).
#ifndef TRIT_TEST_TRAIN_FIXTURE_H
#define TRIT_TEST_TRAIN_FIXTURE_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trit/trit.h"
#include "trit/train.h"

// A fresh directory under $TMPDIR (or /tmp); path written into buf.
static inline void tf_mkdtemp(char *buf, size_t n, const char *tag) {
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, n, "%s/trit-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    assert_non_null(mkdtemp(buf));
}

// Remove a directory tree (test scratch only).
static inline void tf_rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            size_t n = strlen(path) + strlen(e->d_name) + 2;
            char *sub = malloc(n);
            assert_non_null(sub);
            snprintf(sub, n, "%s/%s", path, e->d_name);
            tf_rm_rf(sub);
            free(sub);
        }
        if (d) closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

static inline void tf_write_file(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

// About 6 KB of English-like text with enough variety that a model's loss moves.
static inline void tf_write_corpus(const char *path) {
    static const char *words[] = {"the", "king", "and", "queen", "of", "a", "small", "land", "rode",
                                  "to", "sea", "where", "wind", "sang", "old", "songs", "by", "night"};
    char *text = malloc(8192);
    assert_non_null(text);
    size_t n = 0;
    for (uint64_t i = 0; n < 6000; i++) {
        const char *w = words[trit_rng_u32(5, 1, i) % (sizeof words / sizeof words[0])];
        n += (size_t)snprintf(text + n, 8192 - n, "%s%s", w, i % 11 == 10 ? ".\n" : " ");
    }
    tf_write_file(path, text, n);
    free(text);
}

// A tiny text run: 1 layer, width 16, context 16, 1 thread, quiet.
static inline void tf_tiny_config(trit_train_config *c, const char *data, const char *out) {
    trit_train_config_init(c);
    assert_int_equal(trit_train_config_set(c, "data", data), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "out", out), TRIT_OK);
    c->layers = 1;
    c->heads = 2;
    c->dim = 16;
    c->seq = 16;
    c->batch = 4;
    c->steps = 12;
    c->warmup = 2;
    c->lr = 3e-3;
    c->eval_every = 4;
    c->eval_batches = 2;
    c->log_every = 1;
    c->ckpt_every = 0;
    c->sample_tokens = 0;
    c->threads = 1;
    c->quiet = 1;
}

static inline bool tf_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

#endif
