// Fuzzes the training-state reader (train_state.bin, src/train/checkpoint_state.c): the header
// peek `trit info` and resume planning use, and the full load into a small model and its AdamW
// moments. The trailing CRC-32 is recomputed so inputs reach the header and the tensor table.
#include "fuzz_util.h"
#include "train/train_internal.h"

static trit_gpt *model;
static trit_optim *opt;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    fuzz_tiny_model(&model, &opt);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    uint8_t *b = fuzz_with_crc(data, n);
    const char *path = fuzz_file(b, n);
    free(b);
    trit_train_state st;
    const bool peek_ok = trit_state_peek(path, &st) == TRIT_OK;
    if (peek_ok) trit_state_load(path, &st, model, opt);
    return 0;
}
