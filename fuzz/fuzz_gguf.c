// Fuzzes the GGUF reader (src/io/gguf_read.c) on the buffer itself (every key-value and tensor
// read back through the accessors, each within the buffer), then as a file through `trit import
// gguf`'s path (src/train/import_gguf.c, src/io/tokenizer_gguf.c): config, tensor checks, the
// decoding of every block type and the tokenizer rebuilt from tokenizer.ggml.*.
#include "fuzz_util.h"

#include "trit/interop.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    trit_gguf_file *f = trit_gguf_parse(data, n, "fuzz");
    if (f) {
        for (int64_t i = 0; i < trit_gguf_num_tensors(f); i++) {
            const trit_gguf_tensor *t = trit_gguf_tensor_at(f, i);
            if (t->data < data || t->nbytes > n || t->data + t->nbytes > data + n) abort();
        }
        uint64_t k = 0;
        if (trit_gguf_get_arr(f, "tokenizer.ggml.tokens", TRIT_GGUF_TYPE_STRING, &k) == TRIT_OK)
            for (uint64_t i = 0; i < k; i++) {
                const char *s;
                size_t len;
                trit_gguf_arr_str(f, "tokenizer.ggml.tokens", i, &s, &len);
                if ((const uint8_t *)s < data || len > n || (const uint8_t *)s + len > data + n) abort();
            }
        trit_gguf_close(f);
    }
    trit_tokenizer *tok = NULL;
    trit_gpt_free(trit_import_gguf(fuzz_file(data, n), &tok));
    trit_tokenizer_free(tok);
    return 0;
}
