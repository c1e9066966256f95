// Causal multi-head self-attention core (the plain version that keeps the probabilities).
#ifndef TRIT_OPS_ATTENTION_H
#define TRIT_OPS_ATTENTION_H

#include "ops/op_def.h"
#include "trit/graph.h"

typedef struct trit_attention_attr {
    int n_head;
} trit_attention_attr;

// Inputs q, k, v: (B, T, C) whose last dim is unit-stride and whose rows are at least C apart
// (contiguous tensors, or views such as slices of a fused (B, T, 3C) qkv); out: (B, T, C).
TRIT_DECLARE_REAL(const trit_op_def, trit_op_attention);

// True if t's layout is one the attention kernels read directly (see above); otherwise the
// constructor gives the op a contiguous copy. Flash attention (ops/flash_attention.h) reads the
// same layouts.
static inline bool trit_attention_layout_ok(const trit_tensor *t) {
    if (t->ndim != 3) return false;
    bool unit = t->shape[2] <= 1 || t->strides[2] == 1;
    bool rows = t->shape[1] <= 1 || t->strides[1] >= t->shape[2];
    return unit && rows && (t->shape[0] <= 1 || t->strides[0] >= 0);
}

// What trit_attention and trit_flash_attention check before their node (float build, in
// attention.c): n_head >= 1, and each of in[0..3) = q, k, v whose layout is not one the kernels
// read gets a contiguous copy. False after recording the error on the graph; op names the caller.
bool trit_attention_inputs(trit_graph *g, const char *op, int n_head, trit_tensor **in);

#endif
