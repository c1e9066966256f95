// cast: a value converted to another float dtype (f32, f64, bf16, f16). Forward rounds to
// nearest even; backward passes the gradient through unchanged (gradients are always in the
// graph's accumulate dtype), which is the derivative of the identity the cast approximates.
#ifndef TRIT_OPS_CAST_H
#define TRIT_OPS_CAST_H

#include "ops/op_def.h"

typedef struct trit_cast_attr {
    trit_dtype dtype;
} trit_cast_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_cast);

#endif
