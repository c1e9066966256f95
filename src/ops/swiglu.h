// SwiGLU: the op (ops/swiglu.c) and its row, which the KV-cache decoder (nn/gpt_decode.c)
// applies too, so both compute silu(gate) * up in the same arithmetic.
#ifndef TRIT_OPS_SWIGLU_H
#define TRIT_OPS_SWIGLU_H

#include "ops/op_def.h"

// Inputs gate, up: one shape (..., N), any strides (e.g. halves of a fused (..., 2N) tensor);
// out: that shape, contiguous.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_swiglu);

// y (N) = silu(g) * u for N values of g and u, gs and us apart.
void trit_swiglu_row_f32(float *y, const float *g, int64_t gs, const float *u, int64_t us, int64_t N);
void trit_swiglu_row_f64(double *y, const double *g, int64_t gs, const double *u, int64_t us, int64_t N);

#endif
