// Element types: sizes and names.
#include "trit/tensor.h"

size_t trit_dtype_size(trit_dtype dt) {
    switch (dt) {
    case TRIT_F32: return 4;
    case TRIT_F64: return 8;
    case TRIT_BF16: return 2;
    case TRIT_F16: return 2;
    case TRIT_I32: return 4;
    case TRIT_I64: return 8;
    case TRIT_I8: return 1;
    case TRIT_U8: return 1;
    default: return 0;
    }
}

const char *trit_dtype_name(trit_dtype dt) {
    static const char *names[] = {"f32", "f64", "bf16", "f16", "i32", "i64", "i8", "u8"};
    return (unsigned)dt < TRIT_DTYPE_COUNT ? names[dt] : "invalid";
}

bool trit_dtype_is_float(trit_dtype dt) {
    return dt == TRIT_F32 || dt == TRIT_F64 || dt == TRIT_BF16 || dt == TRIT_F16;
}
