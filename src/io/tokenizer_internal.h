// The tokenizer handle shared by the character-level, BPE and GPT-2 implementations.
#ifndef TRIT_IO_TOKENIZER_INTERNAL_H
#define TRIT_IO_TOKENIZER_INTERNAL_H

#include "trit/tokenizer.h"
#include "io/pair_map.h"

// Version of the BPE pre-splitting rules (src/io/pretokenize.c). A file trained under other
// rules would encode differently, so load refuses it.
#define TRIT_BPE_PRETOKENIZER 1

struct trit_tokenizer {
    trit_tokenizer_kind kind;
    int32_t vocab_size;
    // Bytes of every token back to back: token i is pool[off[i] .. off[i + 1]).
    uint8_t *pool;
    int64_t *off;               // vocab_size + 1 entries
    int32_t byte_to_id[256];    // char: id of each byte, -1 when outside the vocabulary
    int32_t n_merges;           // bpe: vocab_size - 256
    int32_t *merges;            // bpe: (left, right) of merge r at [2r], [2r + 1]
    trit_pair_map ranks;        // bpe: (left, right) -> rank
    struct trit_gpt2_data *gpt2; // gpt2: its vocabulary tables (io/tokenizer_gpt2.h)
};

trit_tokenizer *trit_tokenizer_alloc(trit_tokenizer_kind kind);

// Character level: build from `n` distinct bytes in increasing order (checked).
trit_status trit_tokenizer_char_build(trit_tokenizer *tok, const uint8_t *bytes, int32_t n);
trit_status trit_tokenizer_char_encode(const trit_tokenizer *tok, const uint8_t *text, size_t len,
                                       int32_t *out, size_t *n_out);

// BPE: take ownership of `merges` (2 * n_merges ids, malloc'ed), check that every merge only uses
// earlier tokens, and build the token bytes and the rank map.
trit_status trit_tokenizer_bpe_build(trit_tokenizer *tok, int32_t *merges, int32_t n_merges);
trit_status trit_tokenizer_bpe_encode(const trit_tokenizer *tok, const uint8_t *text, size_t len,
                                      int32_t *out, size_t *n_out);

#endif
