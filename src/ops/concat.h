// Concatenation of up to TRIT_OP_MAX_IN tensors along one axis.
#ifndef TRIT_OPS_CONCAT_H
#define TRIT_OPS_CONCAT_H

#include "ops/op_def.h"

typedef struct trit_concat_attr {
    int axis;  // 0 <= axis < ndim (the constructor resolves negative axes)
} trit_concat_attr;

// Inputs: n tensors of equal shape except along axis (any strides); out: contiguous, the sum
// of their sizes along axis.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_concat);

#endif
