// Row converters of the dtypes whose scales live beside the codes in a trit_quant_info (one
// scale, and for affine codes one zero point, per group of consecutive elements): integer codes
// of 8, 4 and 2 bits, NF4 and FP8. Used by the dtype table only.
#ifndef TRIT_TENSOR_DTYPE_SCALED_H
#define TRIT_TENSOR_DTYPE_SCALED_H

#include "trit/tensor.h"

#define TRIT_SCALED_ROWS(name)                                                                          \
    void trit_row_##name##_to_f32(float *out, const void *in, int64_t n, const trit_quant_info *q,     \
                                  int64_t first);                                                       \
    void trit_row_##name##_from_f32(void *out, const float *in, int64_t n, trit_quant_info *q,         \
                                    int64_t first);                                                     \
    void trit_row_##name##_from_f32_sr(void *out, const float *in, int64_t n, trit_quant_info *q,      \
                                       int64_t first, uint64_t seed, uint64_t stream);

TRIT_SCALED_ROWS(qint8)
TRIT_SCALED_ROWS(qint4)
TRIT_SCALED_ROWS(qint2)
TRIT_SCALED_ROWS(nf4)
TRIT_SCALED_ROWS(f8_e4m3)
TRIT_SCALED_ROWS(f8_e5m2)
TRIT_SCALED_ROWS(ternary)
TRIT_SCALED_ROWS(ternary_b3)

#endif
