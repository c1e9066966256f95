// Fuzzes the readers of GPT-2's tokenizer files (src/io/tokenizer_gpt2_files.c), the vocabulary
// checks (tokenizer_gpt2.c) and then encoding with the result. Input: a mode byte, then
// NUL-separated parts. Mode 'H': tokenizer.json, then a text; otherwise: encoder.json (or
// vocab.json), vocab.bpe (or merges.txt), then a text. A loaded tokenizer must encode the text
// (with and without special tokens) and decode it back exactly, and decode raw ids safely.
#include "fuzz_util.h"
#include "io/tokenizer_gpt2.h"

// The next NUL-terminated part of data[*at..n) (its length in *len); the rest if no NUL.
static const char *part(const uint8_t *data, size_t n, size_t *at, size_t *len) {
    const char *p = (const char *)data + *at;
    const uint8_t *nul = memchr(data + *at, 0, n - *at);
    *len = nul ? (size_t)(nul - (data + *at)) : n - *at;
    *at += *len + (nul ? 1 : 0);
    return p;
}

static void round_trip(const trit_tokenizer *tok, const uint8_t *text, size_t n, bool ordinary) {
    int32_t *ids = NULL;
    size_t n_ids = 0;
    const trit_status s = ordinary ? trit_tokenizer_encode_ordinary(tok, text, n, &ids, &n_ids)
                                   : trit_tokenizer_encode(tok, text, n, &ids, &n_ids);
    if (s != TRIT_OK) abort();  // a byte-level BPE encodes any bytes
    uint8_t *back = NULL;
    size_t len = 0;
    if (trit_tokenizer_decode(tok, ids, n_ids, &back, &len) != TRIT_OK) abort();
    if (len != n || (n && memcmp(back, text, n) != 0)) abort();
    free(back);
    free(ids);
}

static void exercise(const trit_tokenizer *tok, const uint8_t *text, size_t n) {
    const int32_t V = trit_tokenizer_vocab_size(tok);
    for (int32_t id = 0; id < V && id < 4096; id++) {
        const uint8_t *b;
        size_t len;
        if (trit_tokenizer_token_bytes(tok, id, &b, &len) != TRIT_OK || len == 0) abort();
    }
    for (int32_t r = 0; r < trit_tokenizer_num_merges(tok) && r < 4096; r++) {
        int32_t a, b;
        if (trit_tokenizer_merge(tok, r, &a, &b) != TRIT_OK || a < 0 || b < 0 || a >= V || b >= V) abort();
    }
    round_trip(tok, text, n, false);
    round_trip(tok, text, n, true);
    const size_t k = n / 4;
    int32_t *raw = malloc((k ? k : 1) * sizeof *raw);
    if (!raw) abort();
    for (size_t i = 0; i < k; i++) raw[i] = (int32_t)trit_le32_load(text + 4 * i);
    uint8_t *out = NULL;
    size_t len = 0;
    if (trit_tokenizer_decode(tok, raw, k, &out, &len) == TRIT_OK) free(out);
    free(raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    if (n < 1) return 0;
    size_t at = 1, l1, l2 = 0, lt;
    const char *p1 = part(data, n, &at, &l1), *p2 = NULL;
    trit_tokenizer *tok;
    if (data[0] == 'H') {
        tok = trit_tokenizer_gpt2_parse_hf(p1, l1, "tokenizer.json");
    } else {
        p2 = part(data, n, &at, &l2);
        tok = trit_tokenizer_gpt2_parse(p1, l1, "encoder.json", p2, l2, "vocab.bpe");
    }
    const char *text = part(data, n, &at, &lt);
    if (tok) exercise(tok, (const uint8_t *)text, lt);
    trit_tokenizer_free(tok);
    return 0;
}
