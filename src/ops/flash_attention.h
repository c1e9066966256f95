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
// (contiguous tensors, or views such as slices of a fused (B, T, 3C) qkv): the layouts of
// trit_attention_layout_ok in ops/attention.h, since both attention ops read their inputs alike.
// out: (B, T, C). saved: (B, H, T) log-sum-exp of each query's scaled scores.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_flash_attention);

#endif
