// Fuzzes the two JSON config readers: the training config saved in train_state.bin
// (trit_train_config_from_json, src/train/config.c) and the model config in a checkpoint's
// metadata (trit_checkpoint_config_from_json, src/train/checkpoint_model.c). Whatever one of
// them accepts must survive writing and reading again unchanged, resolved or not.
#include "fuzz_util.h"

static void train_config(const char *json) {
    trit_train_config c;
    if (trit_train_config_from_json(&c, json) != TRIT_OK) return;
    for (int resolved = 0; resolved < 2; resolved++) {
        char *a = trit_train_config_to_json(&c);
        trit_train_config back;
        if (!a || trit_train_config_from_json(&back, a) != TRIT_OK) abort();
        char *b = trit_train_config_to_json(&back);
        if (!b || strcmp(a, b) != 0) abort();
        free(a), free(b);
        if (trit_train_config_resolve(&c) != TRIT_OK) return;
    }
}

static void model_config(const char *json) {
    trit_gpt_config g, back;
    if (trit_checkpoint_config_from_json(&g, json) != TRIT_OK) return;
    char *a = trit_checkpoint_config_to_json(&g);
    if (!a || trit_checkpoint_config_from_json(&back, a) != TRIT_OK) abort();
    char *b = trit_checkpoint_config_to_json(&back);
    if (!b || strcmp(a, b) != 0) abort();
    free(a), free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *json = malloc(n + 1);
    if (!json) abort();
    memcpy(json, data, n);
    json[n] = 0;
    train_config(json);
    model_config(json);
    free(json);
    return 0;
}
