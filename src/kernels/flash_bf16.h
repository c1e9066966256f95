// Flash-attention tile kernels on bf16 pairs, for attention whose q, k, v and output are bf16
// (ops/flash_attention_bf16.c has the algorithm). The two products run on dot products of bf16
// pairs (vdpbf16ps): their operands hold 32-bit words, each two bf16 values that are neighbours
// along the summed dimension (the first in the low half), and every word contributes
// lo * lo' + hi * hi' to an f32 sum. A bf16 row of even length already is such a run of words
// and is read in place; the pack kernels below build the other operands (pairs of rows, words
// transposed, f32 rounded to bf16). Score tiles are the (nr, W) f32 tiles of kernels/flash.h, so
// the softmax steps are the f32 kernels'.
//
// Like vdpbf16ps itself, the sums treat subnormal bf16 inputs as zero and flush subnormal
// results; rounding to bf16 is to nearest even. Results do not depend on the thread count.
#ifndef TRIT_KERNELS_FLASH_BF16_H
#define TRIT_KERNELS_FLASH_BF16_H

#include "kernels/flash.h"
#include "trit/tensor.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct trit_flash_bf16_kernels {
    // st (nr, W) = x (nr, hp words; rows ldx words apart) . yt (hp, W words).
    void (*scores)(int64_t nr, int64_t hp, const uint32_t *x, int64_t ldx, const uint32_t *yt, float *st);
    // acc (nr, hs) = acc * rowscale[r] (rowscale NULL: acc; !accumulate: 0)
    //              + sum_{p < np} coef[r * rs + p * ks] . y[p * ldy + c]     for columns c < hs;
    // acc's rows are ldacc floats apart, y's rows of hs words ldy words apart.
    void (*accum)(int64_t nr, int64_t np, int64_t hs, const uint32_t *coef, int64_t rs, int64_t ks,
                  const uint32_t *y, int64_t ldy, float *acc, int64_t ldacc, const float *rowscale, bool accumulate);
    // dst (ceil(n / 2), w) words: word c of pair row p joins element c of rows 2p (low) and
    // 2p + 1 (high; zero when n is odd and 2p + 1 = n) of src, n rows of w values ld elements
    // apart, bf16 (dt TRIT_BF16) or f32 rounded to bf16 (TRIT_F32).
    void (*pair_rows)(uint32_t *dst, const void *src, trit_dtype dt, int64_t ld, int64_t n, int64_t w);
    // dst (hp, W) words: dst[c * W + i] = src[i * ldw + c] for rows i < n (<= W), zero for i >= n.
    void (*transpose)(uint32_t *dst, const uint32_t *src, int64_t ldw, int64_t n, int64_t hp);
    // dst (n) = src (n) rounded to bf16.
    void (*round)(uint16_t *dst, const float *src, int64_t n);
} trit_flash_bf16_kernels;

// The kernels for this CPU when it has bf16 dot products usable now (AVX512-BF16; TRIT_CPU can
// withhold it), else NULL: the op then widens bf16 to f32 for the f32 kernels.
const trit_flash_bf16_kernels *trit_kernel_flash_bf16(void);

extern const trit_flash_bf16_kernels trit_kernel_flash_bf16_avx512bf16;

#endif
