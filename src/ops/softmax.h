// Softmax and log-softmax over the last dim. Both keep their output, which is all backward needs.
#ifndef TRIT_OPS_SOFTMAX_H
#define TRIT_OPS_SOFTMAX_H

#include "ops/op_def.h"

TRIT_DECLARE_REAL(const trit_op_def, trit_op_softmax);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_log_softmax);

#endif
