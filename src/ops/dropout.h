// Inverted dropout with a counter-based (Philox) mask.
#ifndef TRIT_OPS_DROPOUT_H
#define TRIT_OPS_DROPOUT_H

#include "ops/op_def.h"

typedef struct trit_dropout_attr {
    double p;         // drop probability in [0, 1)
    uint64_t stream;  // fixed when the op is built (trit_dropout_stream, or the graph's counter)
} trit_dropout_attr;

// Element i of a dropout node's mask in a step is drawn from counter (step << 32) + i of the
// stream (seed, stream), so the mask depends on (seed, stream, step) only: never on threads,
// fusion, the compute policy or recompute.
#define TRIT_DROPOUT_STEP_SHIFT 32

TRIT_DECLARE_REAL(const trit_op_def, trit_op_dropout);

#endif
