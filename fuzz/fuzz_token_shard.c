// Fuzzes the token-shard reader (src/io/token_shard.c): the header-only count, the full read,
// and the data loader over it (src/train/data.c).
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_file(data, n);
    int64_t count = -1, got = -1;
    const bool head_ok = trit_shard_read_count(path, &count) == TRIT_OK;
    uint16_t *tokens = NULL;
    const bool read_ok = trit_shard_read(path, &tokens, &got) == TRIT_OK;
    if (head_ok != read_ok || (read_ok && (got != count || !tokens))) abort();  // the two must agree
    free(tokens);
    trit_data *d = trit_data_open(path, 4);
    if (d) {
        if (trit_data_num_tokens(d) != count) abort();
        for (int64_t w = 0; w < 4; w++) {
            int64_t s = trit_data_window_start(d, TRIT_DATA_RANDOM, 1, w);
            int64_t q = trit_data_window_start(d, TRIT_DATA_SEQUENTIAL, 1, w);
            if (s < 0 || s + 5 > count || q < 0 || q + 5 > count) abort();
        }
        trit_data_free(d);
    }
    return 0;
}
