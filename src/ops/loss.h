// Losses with a scalar result: cross-entropy over class logits (fused log-softmax + NLL) and
// mean squared error.
#ifndef TRIT_OPS_LOSS_H
#define TRIT_OPS_LOSS_H

#include "ops/op_def.h"

typedef struct trit_cross_entropy_attr {
    int64_t ignore_index;  // rows whose target equals this contribute nothing
    int reduction;         // trit_reduction: TRIT_REDUCE_MEAN (over non-ignored rows) or _SUM
} trit_cross_entropy_attr;

typedef struct trit_mse_attr {
    int reduction;  // trit_reduction
} trit_mse_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_cross_entropy);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_mse);

#endif
