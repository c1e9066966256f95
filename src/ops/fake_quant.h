// Fake quantization outside a graph, for the decoder of a model trained with it.
#ifndef TRIT_OPS_FAKE_QUANT_H
#define TRIT_OPS_FAKE_QUANT_H

#include "trit/ops.h"

// y (R, K) = the fake quantization of x (R, K) with one scale per row, as the op's forward
// computes it in TRIT_FQ_TOKEN mode (s's dtype; the mode is taken as per row). y may be x.
void trit_fake_quant_rows_f32(const float *x, float *y, int64_t R, int64_t K, const trit_fake_quant_spec *s);

// BitNet's absmean scale of w (n): the scale TRIT_FQ_TERNARY gives one group of n values.
float trit_fake_quant_ternary_scale_f32(const float *w, int64_t n);

// The int8 codes q (K) and scale of one row x (K) as TRIT_FQ_TOKEN mode quantizes it (absmax /
// 127, nearest even of clamp(x / s, -127, 127)): code * *scale is the op's output, bit for bit.
// A row holding a NaN or Inf (whose fake quantization is NaN) gets *scale NaN and returns false.
bool trit_fake_quant_row_codes_f32(const float *x, int64_t K, int8_t *q, float *scale);

#endif
