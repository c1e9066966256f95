// Fuzzes encoding and decoding of arbitrary bytes with fixed tokenizers (a BPE trained at start
// up, its saved-and-loaded copy, and a char tokenizer): BPE must encode anything and give it
// back exactly, the copy must encode identically, and char must either round-trip or refuse.
#include "fuzz_util.h"

static trit_tokenizer *bpe, *bpe_loaded, *chr;

static const char train_text[] =
    "The quick brown fox jumps over the lazy dog. 123 + 456 = 579; it's don't we'll I'm\n"
    "  tabs\tand    spaces, UTF-8: caf\xc3\xa9 na\xc3\xafve \xe2\x82\xac 100 \xf0\x9f\x98\x80 \xce\xb1\xce\xb2\xce\xb3\n"
    "the the the then there their other brother 2024-05-20 fox fox foxes jumped jumping\n";

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    bpe = trit_tokenizer_train_bpe(train_text, sizeof train_text - 1, 400);
    chr = trit_tokenizer_train_char("abc xyz\n0123", 12);
    char path[64];
    snprintf(path, sizeof path, "/tmp/trit-fuzz-tok-%ld.bin", (long)getpid());
    if (!bpe || !chr || trit_tokenizer_save(bpe, path) != TRIT_OK) abort();
    bpe_loaded = trit_tokenizer_load(path);
    unlink(path);
    if (!bpe_loaded) abort();
    return 0;
}

static void round_trip(const trit_tokenizer *tok, const uint8_t *data, size_t n, int32_t **ids, size_t *n_ids) {
    *ids = NULL;
    if (trit_tokenizer_encode(tok, data, n, ids, n_ids) != TRIT_OK) {
        if (trit_tokenizer_get_kind(tok) == TRIT_TOKENIZER_BPE) abort();
        return;
    }
    if (*n_ids > n) abort();
    uint8_t *back = NULL;
    size_t len = 0;
    if (trit_tokenizer_decode(tok, *ids, *n_ids, &back, &len) != TRIT_OK) abort();
    if (len != n || (n && memcmp(back, data, n) != 0)) abort();
    free(back);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    int32_t *a, *b, *c;
    size_t na = 0, nb = 0, nc = 0;
    round_trip(bpe, data, n, &a, &na);
    round_trip(bpe_loaded, data, n, &b, &nb);
    if (na != nb || (na && memcmp(a, b, na * sizeof *a) != 0)) abort();
    round_trip(chr, data, n, &c, &nc);
    free(a), free(b), free(c);
    return 0;
}
