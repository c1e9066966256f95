// Unary element-wise ops: scale, add_scalar, pow, exp, ln, tanh, sigmoid, relu, gelu, silu.
// Inputs may be strided views; outputs are contiguous. Domains follow PyTorch: pow(x, p) is NaN
// for x < 0 with a non-integer p and +Inf at x = 0 with p < 0; ln is NaN below 0 and -Inf at 0.
// gelu is the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) with its exact slope.
#ifndef TRIT_OPS_UNARY_H
#define TRIT_OPS_UNARY_H

#include "ops/op_def.h"

// The scalar of scale (s * x), add_scalar (x + s) and pow (x^s); unused by the others.
typedef struct trit_unary_attr {
    double s;
} trit_unary_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_scale);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_add_scalar);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_pow);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_exp);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_ln);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_tanh);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_sigmoid);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_relu);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_gelu);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_silu);

#endif
