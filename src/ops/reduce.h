// Reductions over a set of axes (sum, mean, max), and the strided sum that broadcast
// gradients use to fold a full-shape gradient back onto a broadcast input.
#ifndef TRIT_OPS_REDUCE_H
#define TRIT_OPS_REDUCE_H

#include "ops/op_def.h"

#include <stdbool.h>

typedef struct trit_reduce_attr {
    uint32_t mask;  // bit d set: axis d is reduced (axes already made non-negative)
    bool keepdim;
} trit_reduce_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_sum);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_mean);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_max);

// dst (+)= scale * sum of src over the dims where dst_strides is 0.
// shape: (ndim dims), the full shape; src_strides, dst_strides: aligned to shape.
// Each sum runs in double, in row-major order of the summed dims, whatever the thread count.
void trit_reduce_sum_strided_f32(float *dst, const int64_t *dst_strides, const float *src,
                                 const int64_t *src_strides, int ndim, const int64_t *shape, double scale,
                                 bool accumulate);
void trit_reduce_sum_strided_f64(double *dst, const int64_t *dst_strides, const double *src,
                                 const int64_t *src_strides, int ndim, const int64_t *shape, double scale,
                                 bool accumulate);

#endif
