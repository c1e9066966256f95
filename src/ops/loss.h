// Losses with a scalar result: cross-entropy over class logits (fused log-softmax + NLL), mean
// squared error and Huber.
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

typedef struct trit_huber_attr {
    double delta;   // > 0: quadratic within, linear beyond
    int reduction;  // trit_reduction
} trit_huber_attr;

// Checks every cross-entropy target (a bad label is the user's data, so it is an error, not a
// crash) and returns the number of rows not ignored, or -1 after trit_error naming `op`.
static inline int64_t trit_ce_count_targets(const char *op, const trit_tensor *targets /* (rows) */,
                                            int64_t V, int64_t ignore_index) {
    const int64_t rows = trit_tensor_numel(targets);
    int64_t count = 0;
    for (int64_t r = 0; r < rows; r++) {
        const int64_t t = trit_op_index_at(targets, r);
        if (t == ignore_index) continue;
        if (t < 0 || t >= V) {
            trit_error(TRIT_ERR_RANGE,
                       "%s: target %lld at row %lld is outside [0, %lld) and is not ignore_index (%lld); "
                       "check the labels against the vocabulary size",
                       op, (long long)t, (long long)r, (long long)V, (long long)ignore_index);
            return -1;
        }
        count++;
    }
    return count;
}

TRIT_DECLARE_REAL(const trit_op_def, trit_op_cross_entropy);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_mse);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_huber);

#endif
