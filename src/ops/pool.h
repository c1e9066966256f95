// 2-d max and average pooling over NCHW tensors (square kernel, stride and padding).
#ifndef TRIT_OPS_POOL_H
#define TRIT_OPS_POOL_H

#include "ops/op_def.h"

typedef struct trit_pool2d_attr {
    int64_t kernel;   // >= 1
    int64_t stride;   // >= 1
    int64_t padding;  // 0 <= padding <= kernel / 2, as PyTorch requires
} trit_pool2d_attr;

// Input x (N, C, H, W); out (N, C, OH, OW) with OH = (H + 2 padding - kernel) / stride + 1.
// maxpool2d pads with -inf and sends the gradient to the first maximum of each window;
// avgpool2d counts the padding zeros in the mean (PyTorch's count_include_pad=True).
TRIT_DECLARE_REAL(const trit_op_def, trit_op_maxpool2d);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_avgpool2d);

#endif
