// Rotary position embedding: the op (ops/rope.c) and the two pieces it shares with the KV-cache
// decoder (nn/gpt_decode.c), so both rotate by the same angles in the same arithmetic.
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

// cs, sn (T, hs / 2): cos and sin of the angle (pos0 + t) theta^(-2i / hs), in double.
void trit_rope_table(double *cs, double *sn, int64_t pos0, int64_t T, int64_t hs, double theta);

// y (H hs) = x (H hs values, sx apart) with each head's pairs (i, i + hs / 2) rotated by the
// angles whose cos and sin are cs, sn (hs / 2). y may be x itself (sx = 1).
void trit_rope_row_f32(float *y, const float *x, int64_t sx, const double *cs, const double *sn, int64_t H, int64_t hs);
void trit_rope_row_f64(double *y, const double *x, int64_t sx, const double *cs, const double *sn, int64_t H,
                       int64_t hs);

#endif
