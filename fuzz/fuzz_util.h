// Helpers shared by the libFuzzer harnesses: the readers under test take a path, so the input
// goes to a memfd (no disk traffic, one per process) reached through /proc/self/fd/N; and the
// formats that end in a CRC-32 get theirs recomputed, or the fuzzer would never get past it.
#ifndef TRIT_FUZZ_UTIL_H
#define TRIT_FUZZ_UTIL_H

#define _GNU_SOURCE  // memfd_create
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/io_internal.h"
#include "trit/trit.h"

// Replaces the file behind the returned path with data[0..n); the path stays the same for the
// life of the process.
static inline const char *fuzz_file(const uint8_t *data, size_t n) {
    static int fd = -1;
    static char path[64];
    if (fd < 0) {
        fd = memfd_create("trit-fuzz", 0);
        if (fd < 0) abort();
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) != 0) abort();
    for (size_t off = 0; off < n;) {
        ssize_t k = pwrite(fd, data + off, n - off, (off_t)off);
        if (k <= 0) abort();
        off += (size_t)k;
    }
    return path;
}

// A copy of data[0..n) whose last 4 bytes are the little-endian CRC-32 of the bytes before
// them (n >= 4), as the tokenizer and training-state formats end.
static inline uint8_t *fuzz_with_crc(const uint8_t *data, size_t n) {
    uint8_t *b = malloc(n ? n : 1);
    if (!b) abort();
    if (n) memcpy(b, data, n);
    if (n >= 4) trit_le32_store(b + n - 4, trit_crc32(0, b, n - 4));
    return b;
}

// The model and AdamW optimizer whose training state the train_state seeds hold
// (make_corpus.c writes them, fuzz_train_state.c loads into them): small, so a load is fast.
static inline trit_gpt_config fuzz_tiny_gpt_config(void) {
    trit_gpt_config g = trit_gpt_config_default();
    g.vocab_size = 12;
    g.seq_len = 8;
    g.n_layer = 1;
    g.n_head = 2;
    g.n_embd = 4;
    return g;
}

static inline void fuzz_tiny_model(trit_gpt **m, trit_optim **o) {
    const trit_gpt_config g = fuzz_tiny_gpt_config();
    *m = trit_gpt_new(&g, 1);
    if (!*m) abort();
    const int n = trit_gpt_num_tensors(*m);
    trit_tensor *params[64];
    if (n > 64) abort();
    for (int i = 0; i < n; i++) params[i] = trit_gpt_tensor(*m, i);
    const trit_optim_config oc = trit_optim_adamw(0.9, 0.95, 1e-8);
    *o = trit_optim_new_gpt2(&oc, params, n, 0.1);
    if (!*o) abort();
}

#endif
