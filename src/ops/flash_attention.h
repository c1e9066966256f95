// Causal multi-head self-attention computed in tiles (flash attention): the same function as
// ops/attention.h, but no T x T matrix is ever stored; forward keeps only the output and one
// log-sum-exp per (batch, head, query), and backward recomputes the probabilities from it.
#ifndef TRIT_OPS_FLASH_ATTENTION_H
#define TRIT_OPS_FLASH_ATTENTION_H

#include "ops/op_def.h"

typedef struct trit_flash_attention_attr {
    int n_head;
} trit_flash_attention_attr;

// Keys per tile (queries per tile are the TRIT_FLASH_W lanes of kernels/flash.h).
#define TRIT_FLASH_BC 64

// Inputs q, k, v: (B, T, C) whose last dim is unit-stride and whose rows are at least C apart
// (contiguous tensors, or views such as slices of a fused (B, T, 3C) qkv); out: (B, T, C).
// saved: (B, H, T) log-sum-exp of each query's scaled scores.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_flash_attention);

// True if t's layout is one the flash kernels read in place (see above); otherwise the
// constructor gives the op a contiguous copy.
static inline bool trit_flash_attention_layout_ok(const trit_tensor *t) {
    if (t->ndim != 3) return false;
    bool unit = t->shape[2] <= 1 || t->strides[2] == 1;
    bool rows = t->shape[1] <= 1 || t->strides[1] >= t->shape[2];
    return unit && rows && (t->shape[0] <= 1 || t->strides[0] >= 0);
}

#endif
