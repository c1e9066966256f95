// The SwiGLU gate of gated MLPs: out = silu(gate) * up.
#ifndef TRIT_OPS_SWIGLU_H
#define TRIT_OPS_SWIGLU_H

#include "ops/op_def.h"

// Inputs gate, up: one shape (..., N), any strides (e.g. halves of a fused (..., 2N) tensor);
// out: that shape, contiguous.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_swiglu);

#endif
