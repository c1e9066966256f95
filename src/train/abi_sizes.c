// The sizes of the structs other languages lay out for themselves (python/trit/_lib.py mirrors
// them with ctypes): a binding checks its copies against these when it loads the library, so a
// field added on one side only is a clear error at import instead of memory written past a
// buffer that is too small.
#include "trit/quant.h"
#include "trit/tensor.h"
#include "trit/train.h"

#include <stddef.h>
#include <string.h>

size_t trit_abi_struct_size(const char *name) {
    static const struct {
        const char *name;
        size_t size;
    } sizes[] = {
        {"trit_tensor head", offsetof(trit_tensor, name) + sizeof(((trit_tensor *)0)->name)},
        {"trit_train_step_info", sizeof(trit_train_step_info)},
        {"trit_train_hooks", sizeof(trit_train_hooks)},
        {"trit_train_result", sizeof(trit_train_result)},
        {"trit_sample_config", sizeof(trit_sample_config)},
        {"trit_quant_spec", sizeof(trit_quant_spec)},
        {"trit_quantize_report", sizeof(trit_quantize_report)},
    };
    for (size_t i = 0; name && i < sizeof sizes / sizeof sizes[0]; i++)
        if (strcmp(name, sizes[i].name) == 0) return sizes[i].size;
    return 0;
}
