// Inverted dropout with a counter-based (Philox) mask.
#ifndef TRIT_OPS_DROPOUT_H
#define TRIT_OPS_DROPOUT_H

#include "ops/op_def.h"

typedef struct trit_dropout_attr {
    double p;  // drop probability in [0, 1)
} trit_dropout_attr;

// Element i of a dropout node's mask in a step is drawn from counter (step << 32) + i of the
// stream (seed, node), so the mask depends on (seed, node, step) only, never on threads.
#define TRIT_DROPOUT_STEP_SHIFT 32

TRIT_DECLARE_REAL(const trit_op_def, trit_op_dropout);

#endif
