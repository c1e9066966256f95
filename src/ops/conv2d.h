// 2-d convolution over NCHW tensors with a square stride and zero padding.
#ifndef TRIT_OPS_CONV2D_H
#define TRIT_OPS_CONV2D_H

#include "ops/op_def.h"

typedef struct trit_conv2d_attr {
    int64_t stride;   // >= 1, both spatial dims
    int64_t padding;  // >= 0 zeros on every side
} trit_conv2d_attr;

// Inputs: x (N, Cin, H, W), w (Cout, Cin, KH, KW), optionally b (Cout);
// out: (N, Cout, OH, OW) with OH = (H + 2 padding - KH) / stride + 1, likewise OW.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_conv2d);

#endif
