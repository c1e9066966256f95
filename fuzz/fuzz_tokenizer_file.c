// Fuzzes the tokenizer file loader (src/io/tokenizer*.c) and then the loaded tokenizer. The
// input is a tokenizer file followed by a text: the file is as long as its header's payload
// field says (24 + payload + 4 bytes, the CRC-32 recomputed), the rest is encoded and decoded
// (encode then decode must give the text back) and also decoded as raw int32 ids.
#include "fuzz_util.h"

static void exercise(const trit_tokenizer *tok, const uint8_t *text, size_t n) {
    const int32_t V = trit_tokenizer_vocab_size(tok);
    for (int32_t id = 0; id < V && id < 4096; id++) {
        const uint8_t *b;
        size_t len;
        if (trit_tokenizer_token_bytes(tok, id, &b, &len) != TRIT_OK || len == 0) abort();
    }
    for (int32_t r = 0; r < trit_tokenizer_num_merges(tok) && r < 4096; r++) {
        int32_t a, b;
        // A trained BPE's merge r joins tokens below 256 + r; GPT-2's files number tokens their own way.
        const int32_t lim = trit_tokenizer_get_kind(tok) == TRIT_TOKENIZER_BPE ? 256 + r : V;
        if (trit_tokenizer_merge(tok, r, &a, &b) != TRIT_OK || a < 0 || b < 0 || a >= lim || b >= lim) abort();
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    if (trit_tokenizer_encode(tok, text, n, &ids, &n_ids) == TRIT_OK) {
        uint8_t *back = NULL;
        size_t len = 0;
        if (trit_tokenizer_decode(tok, ids, n_ids, &back, &len) != TRIT_OK) abort();
        if (len != n || (n && memcmp(back, text, n) != 0)) abort();  // lossless round trip
        free(back);
    } else if (trit_tokenizer_get_kind(tok) != TRIT_TOKENIZER_CHAR) {
        abort();  // byte-level BPE encodes any bytes
    }
    free(ids);
    size_t k = n / 4;
    int32_t *raw = malloc((k ? k : 1) * sizeof *raw);
    if (!raw) abort();
    for (size_t i = 0; i < k; i++) raw[i] = (int32_t)trit_le32_load(text + 4 * i);
    uint8_t *out = NULL;
    size_t len = 0;
    if (trit_tokenizer_decode(tok, raw, k, &out, &len) == TRIT_OK) free(out);
    free(raw);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    size_t file_len = n;
    if (n >= 28) {
        const uint64_t want = 28 + (uint64_t)trit_le32_load(data + 20);
        if (want <= n) file_len = (size_t)want;
    }
    uint8_t *file = fuzz_with_crc(data, file_len);
    trit_tokenizer *tok = trit_tokenizer_load(fuzz_file(file, file_len));
    free(file);
    if (tok) exercise(tok, data + file_len, n - file_len);
    trit_tokenizer_free(tok);
    return 0;
}
