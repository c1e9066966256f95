// Fuzzes `trit train`'s command line (trit_cli_train_parse in cli/train.c, over the flag table
// of src/train/config.c): the input split on NUL bytes is argv after "train". A parsed config
// is resolved, and both must survive the JSON round trip a checkpoint puts them through.
#include "fuzz_util.h"
#include "cli.h"

#define MAX_ARGS 128

static void round_trip(const trit_train_config *c) {
    char *a = trit_train_config_to_json(c);
    trit_train_config back;
    if (!a || trit_train_config_from_json(&back, a) != TRIT_OK) abort();
    char *b = trit_train_config_to_json(&back);
    if (!b || strcmp(a, b) != 0) abort();
    free(a), free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    char *buf = malloc(n + 1);
    if (!buf) abort();
    memcpy(buf, data, n);
    buf[n] = 0;
    char *argv[MAX_ARGS + 2];
    int argc = 0;
    argv[argc++] = "train";
    for (size_t i = 0; i < n && argc <= MAX_ARGS; i += strlen(buf + i) + 1) argv[argc++] = buf + i;
    argv[argc] = NULL;
    trit_train_config c;
    if (trit_cli_train_parse(argc, argv, &c) < 0) {
        round_trip(&c);
        if (trit_train_config_resolve(&c) == TRIT_OK) round_trip(&c);
    }
    free(buf);
    return 0;
}
