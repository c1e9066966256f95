// GPT-2's byte-level BPE read from its files: the vocabulary, its merges, and encoding the way
// tiktoken's gpt2 encoding does (src/io/tokenizer_gpt2.c, the readers in tokenizer_gpt2_files.c).
#ifndef TRIT_IO_TOKENIZER_GPT2_H
#define TRIT_IO_TOKENIZER_GPT2_H

#include "io/bytes_map.h"
#include "io/pair_map.h"
#include "trit/tokenizer.h"

// GPT-2's byte alphabet: each byte spelled by one printable code point (bytes 33-126, 161-172
// and 174-255 as themselves, the other 68 as U+0100.. in byte order); the readers and writers of
// its vocabulary files and of a GGUF's tokenizer share it (tokenizer_gpt2_files.c).
unsigned trit_gpt2_byte_code_point(uint8_t b);
// The bytes s[0..n) spells in the alphabet (UTF-8) into out (n bytes at most; NULL: counted
// only); their count, or -1 when s is not spelled in the alphabet.
int64_t trit_gpt2_unspell(const char *s, size_t n, uint8_t *out);

// Version of the pre-tokenization (src/io/pretokenize_gpt2.c) stored in a tokenizer file.
#define TRIT_GPT2_PRETOKENIZER 1

typedef struct trit_gpt2_data {
    int32_t *rank;            // (V) merge rank of a token made by a merge, -1 for bytes and specials
    int32_t *merge_result;    // (n_merges) id of the token merge r makes
    int32_t *special;         // (n_special) ids of the special tokens, longest first
    int32_t n_special;
    bool special_first[256];  // first bytes of the special tokens
    trit_bytes_map by_bytes;  // token bytes -> id (specials included)
    trit_pair_map pairs;      // (left, right) -> id of the mergeable token spelling left + right
} trit_gpt2_data;

// What the readers hand to trit_tokenizer_gpt2_build; every array is malloc'ed and is owned by
// the tokenizer from the call on, whatever it returns.
typedef struct trit_gpt2_spec {
    int32_t vocab;
    uint8_t *pool;     // token i is pool[off[i] .. off[i + 1])
    int64_t *off;      // (vocab + 1)
    int32_t n_merges;
    int32_t *merges;   // (n_merges, 3): left, right, result, in rank order
    int32_t n_special;
    int32_t *special;  // (n_special) ids
} trit_gpt2_spec;

// Checks the vocabulary (every byte a token, no two tokens spelled alike, each merge spelling
// its result, every other token a special) and makes tok a GPT-2 tokenizer.
trit_status trit_tokenizer_gpt2_build(trit_tokenizer *tok, trit_gpt2_spec *spec);
void trit_tokenizer_gpt2_free(trit_tokenizer *tok);

// Id of the special token spelled `text`, or -1.
int32_t trit_tokenizer_gpt2_special_id(const trit_tokenizer *tok, const char *text);

// Special tokens in the text are matched unless `ordinary`.
trit_status trit_tokenizer_gpt2_encode(const trit_tokenizer *tok, const uint8_t *text, size_t len, bool ordinary,
                                       int32_t *out, size_t *n_out);

// The tokenizer file's payload: bytes needed (out NULL) or written.
size_t trit_tokenizer_gpt2_payload(const trit_tokenizer *tok, uint8_t *out);
trit_status trit_tokenizer_gpt2_load_payload(trit_tokenizer *tok, uint32_t vocab, const uint8_t *payload, size_t pay);

// End (exclusive) of the pre-tokenized chunk that starts at text[i], i < n.
size_t trit_pretokenize_gpt2_next(const uint8_t *text, size_t n, size_t i);

// The readers on buffers (the file readers and the fuzz harness use these). `vocab_name` and
// `merges_name` name the sources in messages.
trit_tokenizer *trit_tokenizer_gpt2_parse(const char *vocab_json, size_t vocab_len, const char *vocab_name,
                                          const char *merges, size_t merges_len, const char *merges_name);
trit_tokenizer *trit_tokenizer_gpt2_parse_hf(const char *json, size_t len, const char *name);

#endif
