// Fuzzes the safetensors reader (src/io/safetensors.c): open, list, look up and read every
// tensor, the metadata, the "quantization" map against the tensors, and every tensor the map
// names through the quantized path (src/io/safetensors_quant.c). A file with format=trit-gpt metadata also goes through
// the model checkpoint loader (src/train/checkpoint_model.c).
#include "fuzz_util.h"

#include <cjson/cJSON.h>

static void read_all(const trit_safetensors *f) {
    for (int64_t i = 0; i < trit_safetensors_count(f); i++) {
        const trit_safetensors_info *t = trit_safetensors_at(f, i);
        if (trit_safetensors_find(f, t->name) != t) abort();  // names are unique after open
        trit_safetensors_is_quantized(f, t->name);
        trit_tensor_free(trit_safetensors_read_tensor(f, t->name));
    }
    for (int64_t i = 0; i < trit_safetensors_meta_count(f); i++) {
        const char *k = NULL, *v = NULL;
        if (trit_safetensors_meta_at(f, i, &k, &v) != TRIT_OK || !k || !v) abort();
        trit_safetensors_meta(f, k);
    }
    trit_safetensors_check_quantized(f);
    // Map entries that name no tensor of the file must fail cleanly too.
    cJSON *map = cJSON_Parse(trit_safetensors_meta(f, "quantization"));
    const cJSON *e;
    cJSON_ArrayForEach(e, map) {
        if (e->string) trit_tensor_free(trit_safetensors_read_tensor(f, e->string));
    }
    cJSON_Delete(map);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
    const char *path = fuzz_file(data, n);
    trit_safetensors *f = trit_safetensors_open(path);
    if (!f) return 0;
    read_all(f);
    const char *format = trit_safetensors_meta(f, "format");
    const bool model = format && strcmp(format, "trit-gpt") == 0;
    trit_safetensors_close(f);
    if (model) trit_gpt_free(trit_checkpoint_load_model(path, NULL));
    return 0;
}
