// Fuzzes the Hugging Face GPT-2 reader (src/io/hf_gpt2.c) and import (src/train/interop_hf.c):
// the input is config.json, then a NUL byte, then model.safetensors (no NUL: config.json only),
// written into a directory of this process; the config parser also sees the input alone.
#include "fuzz_util.h"

#include "trit/interop.h"

#include <sys/stat.h>

static char d[64];

static void remove_dir(void) {
    char p[128];
    snprintf(p, sizeof p, "%s/config.json", d);
    unlink(p);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    unlink(p);
    rmdir(d);
}

static const char *dir(void) {
    if (!d[0]) {
        snprintf(d, sizeof d, "/tmp/trit-fuzz-hf-XXXXXX");
        if (!mkdtemp(d)) abort();
        atexit(remove_dir);
    }
    return d;
}

static void put(const char *name, const uint8_t *data, size_t n) {
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir(), name);
    if (!data) {
        unlink(p);
        return;
    }
    FILE *fp = fopen(p, "wb");
    if (!fp || fwrite(data, 1, n, fp) != n || fclose(fp) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    trit_hf_gpt2_config c;
    trit_hf_gpt2_parse_config((const char *)data, n, "fuzz", &c);
    const uint8_t *nul = memchr(data, 0, n);
    const size_t k = nul ? (size_t)(nul - data) : n;
    put("config.json", data, k);
    put("model.safetensors", nul ? nul + 1 : NULL, nul ? n - k - 1 : 0);
    trit_gpt_free(trit_import_hf_gpt2(dir()));
    return 0;
}
