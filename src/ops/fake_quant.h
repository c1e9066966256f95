// Fake quantization outside a graph, for the decoder of a model trained with it.
#ifndef TRIT_OPS_FAKE_QUANT_H
#define TRIT_OPS_FAKE_QUANT_H

#include "trit/ops.h"

// y (R, K) = the fake quantization of x (R, K) with one scale per row, as the op's forward
// computes it in TRIT_FQ_TOKEN mode (s's dtype; the mode is taken as per row). y may be x.
void trit_fake_quant_rows_f32(const float *x, float *y, int64_t R, int64_t K, const trit_fake_quant_spec *s);

#endif
