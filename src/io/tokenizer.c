// The tokenizer handle: accessors, decode (the same for every kind: concatenate token bytes),
// and the versioned file format.
//
// File layout (little-endian):
//   0  "TTOK"            magic
//   4  u32 version       1
//   8  u32 kind          1 char, 2 bpe, 3 gpt2
//   12 u32 vocab_size
//   16 u32 pretokenizer  0 for char; the version of the pre-splitting rules for bpe and gpt2
//   20 u32 payload_bytes
//   24 payload           char: the vocab_size bytes in increasing order;
//                        bpe: (vocab_size - 256) merges as i32 (left, right), in rank order;
//                        gpt2: tokens, merges and special tokens (src/io/tokenizer_gpt2.c)
//   .. u32 CRC-32 of every byte before it
#include "io/tokenizer_internal.h"
#include "io/tokenizer_gpt2.h"
#include "io/io_internal.h"
#include "trit/io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOK_MAGIC "TTOK"
#define TOK_VERSION 1u
#define TOK_HEADER 24
#define TOK_TRAILER 4

trit_tokenizer *trit_tokenizer_alloc(trit_tokenizer_kind kind) {
    trit_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        trit_error(TRIT_ERR_NOMEM, "cannot allocate a tokenizer");
        return NULL;
    }
    tok->kind = kind;
    for (int b = 0; b < 256; b++) tok->byte_to_id[b] = -1;
    return tok;
}

void trit_tokenizer_free(trit_tokenizer *tok) {
    if (!tok) return;
    free(tok->pool);
    free(tok->off);
    free(tok->merges);
    if (tok->ranks.keys) trit_pair_map_free(&tok->ranks);
    trit_tokenizer_gpt2_free(tok);
    free(tok);
}

trit_tokenizer_kind trit_tokenizer_get_kind(const trit_tokenizer *tok) { return tok->kind; }

const char *trit_tokenizer_kind_name(trit_tokenizer_kind kind) {
    switch (kind) {
    case TRIT_TOKENIZER_CHAR: return "char";
    case TRIT_TOKENIZER_BPE: return "bpe";
    case TRIT_TOKENIZER_GPT2: return "gpt2";
    }
    return "unknown";
}

int32_t trit_tokenizer_vocab_size(const trit_tokenizer *tok) { return tok ? tok->vocab_size : 0; }

int32_t trit_tokenizer_num_merges(const trit_tokenizer *tok) { return tok ? tok->n_merges : 0; }

trit_status trit_tokenizer_merge(const trit_tokenizer *tok, int32_t rank, int32_t *left, int32_t *right) {
    if (!tok || !left || !right) return trit_error(TRIT_ERR_INVALID, "trit_tokenizer_merge: NULL argument");
    if (rank < 0 || rank >= tok->n_merges)
        return trit_error(TRIT_ERR_RANGE, "merge rank %d outside [0, %d) of this %s tokenizer",
                          (int)rank, (int)tok->n_merges, trit_tokenizer_kind_name(tok->kind));
    *left = tok->merges[2 * rank];
    *right = tok->merges[2 * rank + 1];
    return TRIT_OK;
}

trit_status trit_tokenizer_token_bytes(const trit_tokenizer *tok, int32_t id, const uint8_t **bytes,
                                       size_t *len) {
    if (!tok || !bytes || !len) return trit_error(TRIT_ERR_INVALID, "trit_tokenizer_token_bytes: NULL argument");
    if (id < 0 || id >= tok->vocab_size)
        return trit_error(TRIT_ERR_RANGE, "token id %d outside the vocabulary [0, %d)", (int)id,
                          (int)tok->vocab_size);
    *bytes = tok->pool + tok->off[id];
    *len = (size_t)(tok->off[id + 1] - tok->off[id]);
    return TRIT_OK;
}

static trit_status encode(const trit_tokenizer *tok, const void *text, size_t len, bool ordinary,
                          int32_t **tokens, size_t *n_tokens) {
    if (!tok || !tokens || !n_tokens || (!text && len))
        return trit_error(TRIT_ERR_INVALID, "trit_tokenizer_encode: NULL argument");
    *tokens = NULL;
    *n_tokens = 0;
    // No kind makes more tokens than bytes.
    if (len > SIZE_MAX / sizeof(int32_t) - 1)
        return trit_error(TRIT_ERR_RANGE, "text of %zu bytes is too long to encode", len);
    int32_t *out = malloc((len ? len : 1) * sizeof *out);
    if (!out) return trit_error(TRIT_ERR_NOMEM, "cannot allocate %zu tokens to encode a text", len);
    size_t n = 0;
    trit_status s = tok->kind == TRIT_TOKENIZER_CHAR   ? trit_tokenizer_char_encode(tok, text, len, out, &n)
                    : tok->kind == TRIT_TOKENIZER_GPT2 ? trit_tokenizer_gpt2_encode(tok, text, len, ordinary, out, &n)
                                                       : trit_tokenizer_bpe_encode(tok, text, len, out, &n);
    if (s != TRIT_OK) {
        free(out);
        return s;
    }
    if (n < len) {
        int32_t *shrunk = realloc(out, (n ? n : 1) * sizeof *out);
        if (shrunk) out = shrunk;
    }
    *tokens = out;
    *n_tokens = n;
    return TRIT_OK;
}

trit_status trit_tokenizer_encode(const trit_tokenizer *tok, const void *text, size_t len,
                                  int32_t **tokens, size_t *n_tokens) {
    return encode(tok, text, len, false, tokens, n_tokens);
}

trit_status trit_tokenizer_encode_ordinary(const trit_tokenizer *tok, const void *text, size_t len,
                                           int32_t **tokens, size_t *n_tokens) {
    return encode(tok, text, len, true, tokens, n_tokens);
}

int32_t trit_tokenizer_special_id(const trit_tokenizer *tok, const char *text) {
    return tok && text && tok->gpt2 ? trit_tokenizer_gpt2_special_id(tok, text) : -1;
}

trit_status trit_tokenizer_decode(const trit_tokenizer *tok, const int32_t *tokens, size_t n,
                                  uint8_t **bytes, size_t *len) {
    if (!tok || !bytes || !len || (!tokens && n))
        return trit_error(TRIT_ERR_INVALID, "trit_tokenizer_decode: NULL argument");
    *bytes = NULL;
    *len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = tokens[i];
        if (id < 0 || id >= tok->vocab_size)
            return trit_error(TRIT_ERR_RANGE,
                              "token %d at position %zu is outside the vocabulary [0, %d): the ids "
                              "were made by another tokenizer or model",
                              (int)id, i, (int)tok->vocab_size);
        total += (size_t)(tok->off[id + 1] - tok->off[id]);
    }
    uint8_t *out = malloc(total + 1);
    if (!out) return trit_error(TRIT_ERR_NOMEM, "cannot allocate %zu bytes to decode", total + 1);
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)(tok->off[tokens[i] + 1] - tok->off[tokens[i]]);
        memcpy(out + pos, tok->pool + tok->off[tokens[i]], k);
        pos += k;
    }
    out[total] = 0;
    *bytes = out;
    *len = total;
    return TRIT_OK;
}

// ---- save / load -------------------------------------------------------------------------

static size_t payload_bytes(const trit_tokenizer *tok) {
    if (tok->kind == TRIT_TOKENIZER_GPT2) return trit_tokenizer_gpt2_payload(tok, NULL);
    return tok->kind == TRIT_TOKENIZER_CHAR ? (size_t)tok->vocab_size : (size_t)tok->n_merges * 8;
}

static uint32_t pretokenizer_version(trit_tokenizer_kind kind) {
    return kind == TRIT_TOKENIZER_BPE ? TRIT_BPE_PRETOKENIZER : kind == TRIT_TOKENIZER_GPT2 ? TRIT_GPT2_PRETOKENIZER : 0;
}

trit_status trit_tokenizer_save(const trit_tokenizer *tok, const char *path) {
    if (!tok || !path) return trit_error(TRIT_ERR_INVALID, "trit_tokenizer_save: NULL argument");
    size_t pay = payload_bytes(tok);
    if (pay > UINT32_MAX) return trit_error(TRIT_ERR_RANGE, "a tokenizer of %zu bytes does not fit the file format", pay);
    size_t total = TOK_HEADER + pay + TOK_TRAILER;
    uint8_t *buf = malloc(total);
    if (!buf) return trit_error(TRIT_ERR_NOMEM, "cannot allocate %zu bytes to save a tokenizer", total);
    memcpy(buf, TOK_MAGIC, 4);
    trit_le32_store(buf + 4, TOK_VERSION);
    trit_le32_store(buf + 8, (uint32_t)tok->kind);
    trit_le32_store(buf + 12, (uint32_t)tok->vocab_size);
    trit_le32_store(buf + 16, pretokenizer_version(tok->kind));
    trit_le32_store(buf + 20, (uint32_t)pay);
    uint8_t *p = buf + TOK_HEADER;
    if (tok->kind == TRIT_TOKENIZER_CHAR) {
        memcpy(p, tok->pool, pay); // each char token is its one byte, in increasing order
    } else if (tok->kind == TRIT_TOKENIZER_GPT2) {
        trit_tokenizer_gpt2_payload(tok, p);
    } else {
        for (int32_t i = 0; i < 2 * tok->n_merges; i++) trit_le32_store(p + 4 * i, (uint32_t)tok->merges[i]);
    }
    trit_le32_store(buf + TOK_HEADER + pay, trit_crc32(0, buf, TOK_HEADER + pay));
    trit_status s = trit_file_write_atomic(path, buf, total);
    free(buf);
    return s;
}

// Check the fixed header and the checksum; on success *kind, *vocab and the payload are set.
static trit_status check_header(const char *path, const uint8_t *buf, size_t len, uint32_t *kind,
                                uint32_t *vocab, const uint8_t **payload, size_t *pay) {
    if (len < 4 || memcmp(buf, TOK_MAGIC, 4) != 0)
        return trit_error(TRIT_ERR_FORMAT,
                          "'%s' is not a trit tokenizer file (expected magic \"TTOK\" at the start, "
                          "found %s): pass a file written by trit_tokenizer_save",
                          path, len < 4 ? "a file shorter than 4 bytes" : "other bytes");
    if (len < TOK_HEADER + TOK_TRAILER)
        return trit_error(TRIT_ERR_FORMAT, "tokenizer file '%s' is truncated: %zu bytes, the header alone is %d",
                          path, len, TOK_HEADER + TOK_TRAILER);
    uint32_t version = trit_le32_load(buf + 4);
    if (version != TOK_VERSION)
        return trit_error(TRIT_ERR_FORMAT, "tokenizer file '%s' has version %u, this build reads version %u",
                          path, version, TOK_VERSION);
    *pay = trit_le32_load(buf + 20);
    if (*pay != len - TOK_HEADER - TOK_TRAILER)
        return trit_error(TRIT_ERR_FORMAT,
                          "tokenizer file '%s' is truncated or padded: header says %zu payload bytes, "
                          "the file has room for %zu",
                          path, *pay, len - TOK_HEADER - TOK_TRAILER);
    uint32_t want = trit_le32_load(buf + len - TOK_TRAILER);
    uint32_t got = trit_crc32(0, buf, len - TOK_TRAILER);
    if (want != got)
        return trit_error(TRIT_ERR_FORMAT,
                          "tokenizer file '%s' is corrupt: CRC-32 is %08x, the file says %08x; "
                          "recreate it from the training text",
                          path, got, want);
    *kind = trit_le32_load(buf + 8);
    *vocab = trit_le32_load(buf + 12);
    *payload = buf + TOK_HEADER;
    return TRIT_OK;
}

static trit_status load_payload(trit_tokenizer *tok, const char *path, uint32_t vocab, uint32_t pretok,
                                const uint8_t *payload, size_t pay) {
    if (tok->kind == TRIT_TOKENIZER_CHAR) {
        if (vocab < 1 || vocab > 256 || pay != vocab)
            return trit_error(TRIT_ERR_FORMAT, "char tokenizer file '%s': vocab %u with %zu payload bytes (expected 1..256, equal)",
                              path, vocab, pay);
        return trit_tokenizer_char_build(tok, payload, (int32_t)vocab);
    }
    if (tok->kind == TRIT_TOKENIZER_GPT2) {
        if (pretok != TRIT_GPT2_PRETOKENIZER)
            return trit_error(TRIT_ERR_FORMAT, "GPT-2 tokenizer file '%s' uses pre-tokenization v%u, this build has v%d",
                              path, pretok, TRIT_GPT2_PRETOKENIZER);
        return trit_tokenizer_gpt2_load_payload(tok, vocab, payload, pay);
    }
    if (pretok != TRIT_BPE_PRETOKENIZER)
        return trit_error(TRIT_ERR_FORMAT,
                          "BPE tokenizer file '%s' uses pre-splitting rules v%u, this build has v%d: retrain it",
                          path, pretok, TRIT_BPE_PRETOKENIZER);
    if (vocab < 256 || vocab > TRIT_BPE_MAX_VOCAB || pay != (size_t)(vocab - 256) * 8)
        return trit_error(TRIT_ERR_FORMAT,
                          "BPE tokenizer file '%s': vocab %u with %zu payload bytes (expected 256..%d, 8 bytes per merge)",
                          path, vocab, pay, TRIT_BPE_MAX_VOCAB);
    int32_t n = (int32_t)(vocab - 256);
    int32_t *merges = malloc((size_t)(n ? n : 1) * 2 * sizeof *merges);
    if (!merges) return trit_error(TRIT_ERR_NOMEM, "cannot allocate %d merges", (int)n);
    for (int32_t i = 0; i < 2 * n; i++) merges[i] = (int32_t)trit_le32_load(payload + 4 * i);
    return trit_tokenizer_bpe_build(tok, merges, n);
}

trit_tokenizer *trit_tokenizer_load(const char *path) {
    if (!path) {
        trit_error(TRIT_ERR_INVALID, "trit_tokenizer_load: NULL path");
        return NULL;
    }
    uint8_t *buf;
    size_t len;
    if (trit_file_read_all(path, &buf, &len) != TRIT_OK) return NULL;
    uint32_t kind = 0, vocab = 0;
    const uint8_t *payload = NULL;
    size_t pay = 0;
    trit_tokenizer *tok = NULL;
    if (check_header(path, buf, len, &kind, &vocab, &payload, &pay) != TRIT_OK) goto done;
    if (kind != TRIT_TOKENIZER_CHAR && kind != TRIT_TOKENIZER_BPE && kind != TRIT_TOKENIZER_GPT2) {
        trit_error(TRIT_ERR_FORMAT, "tokenizer file '%s' has kind %u (known: 1 char, 2 bpe, 3 gpt2)", path, kind);
        goto done;
    }
    tok = trit_tokenizer_alloc((trit_tokenizer_kind)kind);
    if (tok && load_payload(tok, path, vocab, trit_le32_load(buf + 16), payload, pay) != TRIT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", trit_last_error());
        trit_error(TRIT_ERR_FORMAT, "tokenizer file '%s' is invalid: %s", path, why);
        trit_tokenizer_free(tok);
        tok = NULL;
    }
done:
    free(buf);
    return tok;
}
