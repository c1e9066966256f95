// Rotary position embedding (RoPE), rotate-half form.
#ifndef TRIT_OPS_ROPE_H
#define TRIT_OPS_ROPE_H

#include "ops/op_def.h"

typedef struct trit_rope_attr {
    int n_head;
    double theta;  // base of the frequencies, > 0 (10000 in most models)
    int64_t pos0;  // position of time step 0 (0 in a training graph)
} trit_rope_attr;

// Input x: (B, T, C) any strides, C = n_head * hs with hs even; out: (B, T, C) contiguous.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_rope);

#endif
