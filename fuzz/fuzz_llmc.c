// Fuzzes llm.c's file readers (src/io/llmc.c): the input as a model file (header checks, the
// exact length, every parameter read into a trit GPT by src/train/interop_llmc.c) and as a
// tokenizer file (token by token against the end, then the character-level rebuild).
#include "fuzz_util.h"

#include "trit/interop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_file(data, n);
    trit_gpt_free(trit_import_llmc(path));
    trit_llmc_vocab v;
    if (trit_llmc_vocab_read(path, &v) == TRIT_OK) {
        if (v.n < 1 || !v.bytes || !v.len) abort();
        for (int32_t i = 0; i < v.n; i++)
            if (v.len[i] == 0) abort();  // the reader refuses empty tokens
        trit_tokenizer_free(trit_tokenizer_from_llmc(&v));
        trit_llmc_vocab_free(&v);
    }
    return 0;
}
