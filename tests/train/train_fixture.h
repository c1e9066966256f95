// Helpers shared by the training tests: a small text corpus and a tiny training config (scratch
// directories come from scratch.h). Include after <cmocka.h>.
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
#include "scratch.h"

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
    tfile_write(path, text, n);
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

#endif
