// Batch normalisation over all dims of x (N, C, ...) but C.
#ifndef TRIT_OPS_BATCHNORM_H
#define TRIT_OPS_BATCHNORM_H

#include "ops/op_def.h"

// Inputs of trit_op_batchnorm_tracked: x, running_mean, running_var, [weight], [bias];
// of trit_op_batchnorm (no running statistics): x, [weight], [bias].
typedef struct trit_batchnorm_attr {
    double momentum, eps;
    int has_weight, has_bias, has_running;
} trit_batchnorm_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_batchnorm);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_batchnorm_tracked);

#endif
