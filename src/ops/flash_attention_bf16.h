// Flash attention on bf16 q, k, v and output with bf16 pair kernels (kernels/flash_bf16.h): the
// body of one (batch, head), which ops/flash_attention.c runs in place of widening the head to
// f32 when the CPU has the kernels. The algorithm is the f32 one (ops/flash_attention.c); the
// matmul operands are bf16 (q, k, v as stored; the probabilities, the score gradients and the
// output gradient rounded to bf16, as a bf16 GEMM takes an f32 operand), every sum is f32, and
// the softmax, log-sum-exp and D = rowsum(dO * O) stay f32.
#ifndef TRIT_OPS_FLASH_ATTENTION_BF16_H
#define TRIT_OPS_FLASH_ATTENTION_BF16_H

#include "kernels/flash_bf16.h"

#include <stddef.h>
#include <stdint.h>

// One head's operands. q, k, v: (T, hs) bf16 rows ldq, ldk, ldv elements apart (even: rows are
// read as words), o: the bf16 output (T, hs) rows ldo apart.
typedef struct trit_flash_bf16_head {
    int64_t T, hs;
    const uint16_t *q, *k, *v;
    int64_t ldq, ldk, ldv;
} trit_flash_bf16_head;

// Bytes of per-thread work either pass below needs for a head of (T, hs).
size_t trit_flash_bf16_work_bytes(int64_t T, int64_t hs);

// Forward: acc (T, hs) f32 becomes the head's output (before rounding to bf16), lse (T) its
// log-sum-exp. work: trit_flash_bf16_work_bytes, 64-byte aligned.
void trit_flash_bf16_forward(const trit_flash_bf16_kernels *kn, const trit_flash_bf16_head *h, float *acc,
                             float *lse, void *work);

// Backward: o (T, hs) the bf16 output rows ldo apart, go its f32 gradient rows ldg apart; g[0..2],
// the gradients of q, k and v (T, hs) f32 with rows ldgi[i] apart (or NULL), are added to, or
// stored (written as adding to zeros would) where store bit i is set.
void trit_flash_bf16_backward(const trit_flash_bf16_kernels *kn, const trit_flash_bf16_head *h, const uint16_t *o,
                              int64_t ldo, const float *go, int64_t ldg, float *const g[3], const int64_t ldgi[3],
                              const float *lse, uint32_t store, void *work);

#endif
