// Row normalisations over the last dim: layernorm (PyTorch semantics) and rmsnorm.
#ifndef TRIT_OPS_NORM_H
#define TRIT_OPS_NORM_H

#include "ops/op_def.h"

// Inputs: x, then weight if has_weight, then bias if has_bias (rmsnorm has no bias).
typedef struct trit_norm_attr {
    double eps;
    int has_weight, has_bias;
} trit_norm_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_layernorm);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_rmsnorm);

#endif
