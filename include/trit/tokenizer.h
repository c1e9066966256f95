// trit tokenizers: a character-level vocabulary (the distinct bytes of a text), a byte-level
// BPE (256 byte tokens + learned merges, GPT-2 style pre-splitting) and GPT-2's own tokenizer
// read from its files, behind one handle. All decode any token sequence back to bytes; BPE and
// GPT-2 encode any byte string (invalid UTF-8 and NUL included) and decoding gives back exactly
// the input.
#ifndef TRIT_TOKENIZER_H
#define TRIT_TOKENIZER_H

#include "trit/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum trit_tokenizer_kind {
    TRIT_TOKENIZER_CHAR = 1, // one token per distinct byte of the training text
    TRIT_TOKENIZER_BPE = 2,  // byte-level BPE: ids 0..255 are bytes, 256.. are merges by rank
    TRIT_TOKENIZER_GPT2 = 3, // GPT-2's byte-level BPE from its files, ids as the files give them
} trit_tokenizer_kind;

typedef struct trit_tokenizer trit_tokenizer;

// Longest BPE vocabulary trit trains or loads (merges are indexed by 24-bit ids).
#define TRIT_BPE_MAX_VOCAB (1 << 24)

// Character level: the vocabulary is the sorted distinct bytes of `text` (len > 0).
trit_tokenizer *trit_tokenizer_train_char(const void *text, size_t len);

// Byte-level BPE with `vocab_size` >= 256 tokens: the text is cut into chunks (letters, digits,
// other symbols and whitespace runs, an optional leading space joining the next word, as GPT-2
// does) and the most frequent adjacent pair inside chunks is merged until the vocabulary is full.
// Ties go to the smallest (left id, right id). If the text runs out of pairs first, the vocabulary
// is smaller than asked (a warning is logged; check trit_tokenizer_vocab_size).
trit_tokenizer *trit_tokenizer_train_bpe(const void *text, size_t len, int32_t vocab_size);

// GPT-2's tokenizer from `path`: a directory with OpenAI's encoder.json + vocab.bpe, or Hugging
// Face's vocab.json + merges.txt, or tokenizer.json (byte-level BPE); or that tokenizer.json
// itself. It pre-tokenizes with GPT-2's pattern (Unicode letter, number and space classes from
// ICU), treats "<|...|>" tokens of the vocabulary (tokenizer.json: its special added tokens) as
// special tokens, and gives the ids tiktoken's gpt2 encoding gives (with every special allowed).
// A missing file, a malformed line or a merge of unknown tokens is an error naming the file.
trit_tokenizer *trit_tokenizer_load_gpt2(const char *path);

// GPT-2's tokenizer (a TRIT_TOKENIZER_GPT2 one) written into the existing directory `dir` in
// Hugging Face's layout: vocab.json + merges.txt, and tokenizer_config.json +
// special_tokens_map.json naming the special tokens (<|endoftext|> as transformers' bos, eos and
// unk token when the vocabulary has it), which GPT2TokenizerFast.from_pretrained loads and
// trit_tokenizer_load_gpt2 reads back to the same ids. Another kind is refused.
trit_status trit_tokenizer_save_gpt2_hf(const trit_tokenizer *tok, const char *dir);

void trit_tokenizer_free(trit_tokenizer *tok);

trit_tokenizer_kind trit_tokenizer_get_kind(const trit_tokenizer *tok);
const char *trit_tokenizer_kind_name(trit_tokenizer_kind kind);
int32_t trit_tokenizer_vocab_size(const trit_tokenizer *tok);

// Encode `len` bytes. On success *tokens is a malloc'ed array of *n_tokens ids (never NULL; free
// it with free()). A character-level tokenizer fails on a byte outside its vocabulary.
trit_status trit_tokenizer_encode(const trit_tokenizer *tok, const void *text, size_t len,
                                  int32_t **tokens, size_t *n_tokens);

// The same, but the text of special tokens is encoded as ordinary text (for a tokenizer without
// special tokens, the same as trit_tokenizer_encode).
trit_status trit_tokenizer_encode_ordinary(const trit_tokenizer *tok, const void *text, size_t len,
                                           int32_t **tokens, size_t *n_tokens);

// Id of the special token spelled `text` (e.g. "<|endoftext|>"), or -1 if there is none.
int32_t trit_tokenizer_special_id(const trit_tokenizer *tok, const char *text);

// Decode `n` ids. On success *bytes is a malloc'ed buffer of *len bytes plus a terminating NUL
// that is not counted (free it with free()). An id outside [0, vocab) is an error.
trit_status trit_tokenizer_decode(const trit_tokenizer *tok, const int32_t *tokens, size_t n,
                                  uint8_t **bytes, size_t *len);

// The bytes of one token (valid while the tokenizer lives), e.g. for streaming sampled text.
trit_status trit_tokenizer_token_bytes(const trit_tokenizer *tok, int32_t id, const uint8_t **bytes,
                                       size_t *len);

// BPE merges in rank order: merge `rank` joins (left, right); in a trained BPE it makes token
// 256 + rank (in GPT-2's own files too, whose byte tokens are not ids 0..255 though).
// A character-level tokenizer has none.
int32_t trit_tokenizer_num_merges(const trit_tokenizer *tok);
trit_status trit_tokenizer_merge(const trit_tokenizer *tok, int32_t rank, int32_t *left, int32_t *right);

// Save atomically to a versioned file (magic "TTOK", version, kind, CRC-32). Load detects the
// kind and rejects truncated, foreign or corrupt files with a message saying which.
trit_status trit_tokenizer_save(const trit_tokenizer *tok, const char *path);
trit_tokenizer *trit_tokenizer_load(const char *path);

#ifdef __cplusplus
}
#endif
#endif
