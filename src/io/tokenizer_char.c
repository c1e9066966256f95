// Character-level tokenizer: one token per distinct byte of the training text, ids in byte order.
#include "io/tokenizer_internal.h"

#include <stdlib.h>

trit_status trit_tokenizer_char_build(trit_tokenizer *tok, const uint8_t *bytes, int32_t n) {
    for (int32_t i = 1; i < n; i++)
        if (bytes[i] <= bytes[i - 1])
            return trit_error(TRIT_ERR_FORMAT, "char vocabulary is not strictly increasing at entry %d (%u after %u)",
                              (int)i, bytes[i], bytes[i - 1]);
    tok->pool = malloc((size_t)n);
    tok->off = malloc(((size_t)n + 1) * sizeof *tok->off);
    if (!tok->pool || !tok->off) return trit_error(TRIT_ERR_NOMEM, "cannot allocate a char vocabulary");
    for (int32_t i = 0; i < n; i++) {
        tok->pool[i] = bytes[i];
        tok->off[i] = i;
        tok->byte_to_id[bytes[i]] = i;
    }
    tok->off[n] = n;
    tok->vocab_size = n;
    return TRIT_OK;
}

trit_tokenizer *trit_tokenizer_train_char(const void *text, size_t len) {
    if (!text || len == 0) {
        trit_error(TRIT_ERR_INVALID, "a char tokenizer needs a non-empty training text (got %zu bytes)", len);
        return NULL;
    }
    const uint8_t *t = text;
    bool seen[256] = {false};
    for (size_t i = 0; i < len; i++) seen[t[i]] = true;
    uint8_t bytes[256];
    int32_t n = 0;
    for (int b = 0; b < 256; b++)
        if (seen[b]) bytes[n++] = (uint8_t)b;
    trit_tokenizer *tok = trit_tokenizer_alloc(TRIT_TOKENIZER_CHAR);
    if (tok && trit_tokenizer_char_build(tok, bytes, n) != TRIT_OK) {
        trit_tokenizer_free(tok);
        return NULL;
    }
    return tok;
}

trit_status trit_tokenizer_char_encode(const trit_tokenizer *tok, const uint8_t *text, size_t len,
                                       int32_t *out, size_t *n_out) {
    for (size_t i = 0; i < len; i++) {
        int32_t id = tok->byte_to_id[text[i]];
        if (id < 0) {
            uint8_t c = text[i];
            return trit_error(TRIT_ERR_RANGE,
                              "byte 0x%02x ('%c') at offset %zu is not in the char vocabulary of %d "
                              "bytes: train the tokenizer on text that contains it, or use BPE",
                              c, c >= 0x20 && c < 0x7F ? c : '?', i, (int)tok->vocab_size);
        }
        out[i] = id;
    }
    *n_out = len;
    return TRIT_OK;
}
