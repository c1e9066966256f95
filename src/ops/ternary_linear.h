// A linear layer whose weight is trained as BitNet's ternary weights (latent f32 values, absmean
// scale, straight-through gradient) and whose input is fake-quantized per token to int8, run on
// the integer panel kernels (kernels/qgemm_panel.h) instead of an fp32 GEMM over fake-quantized
// operands. See ternary_linear.c.
#ifndef TRIT_OPS_TERNARY_LINEAR_H
#define TRIT_OPS_TERNARY_LINEAR_H

#include "kernels/qgemm_panel.h"
#include "trit/ops.h"

// How the input gradient dX = dY W_t is computed (W_t the ternary weight).
typedef enum trit_ternary_dx {
    TRIT_TERNARY_DX_INT8 = 0,  // dY quantized per row to int8 (absmax / 127), the panels of W_t^T
    TRIT_TERNARY_DX_F32 = 1,   // dY as it is, an fp32 GEMM over W_t's values
} trit_ternary_dx;

// How the weight gradient dW = dY^T fq8(x) is computed (straight-through to the latent W).
typedef enum trit_ternary_dw {
    TRIT_TERNARY_DW_F32 = 0,   // x's codes decoded to their fp32 values, an fp32 GEMM
    TRIT_TERNARY_DW_BF16 = 1,  // each row of dY times x's row scale, rounded to bf16, against x's codes (exact
                               // in bf16): bf16 products summed in fp32, on vdpbf16ps where the CPU has it
    TRIT_TERNARY_DW_AUTO = 2,  // BF16 where the mixed GEMM multiplies bf16 natively (twice the fp32 rate),
                               // else F32 (a widening kernel would round dY for no speed)
} trit_ternary_dw;

// The ternary form of one latent weight W (N, K), owned by the model and shared by every graph
// built over it: refilled from W's values by the first forward after it is marked stale (once
// per optimizer step, not per micro-batch), read by every forward and backward until then.
typedef struct trit_ternary_weight {
    int64_t N, K;
    trit_ternary_dx dx;
    trit_ternary_dw dw;  // TRIT_TERNARY_DW_F32 after init; set it before the first backward
    trit_qpanels w;   // W_t (N, K) in panels, groups of K: the forward's y = x W_t^T
    trit_qpanels wt;  // W_t^T (K, N) in panels, groups of N: dX = dY W_t (TRIT_TERNARY_DX_INT8)
    float *wdec;      // (N, K) code x scale, the fake-quantized weight (TRIT_TERNARY_DX_F32), else NULL
    float scale;      // the absmean scale of the last fill
    bool stale;       // W changed since the last fill
    int64_t fills;    // how many fills so far
} trit_ternary_weight;

// Whether (N, K) takes this path: both multiples of 64 (whole panel steps and kernel groups), at
// most 131072 (exact int32 group sums).
bool trit_ternary_linear_supported(int64_t N, int64_t K);
// Allocates tw's panels for W (N, K), marked stale; free with trit_ternary_weight_free.
trit_status trit_ternary_weight_init(trit_ternary_weight *tw, int64_t N, int64_t K, trit_ternary_dx dx);
void trit_ternary_weight_free(trit_ternary_weight *tw);
// Refills tw from W (N, K) now (the forward does it when tw is stale).
void trit_ternary_weight_fill(trit_ternary_weight *tw, const float *w /* (N, K) */);

// y (..., N) = fq8(x) W_t^T + b with x (..., K) f32, w the latent f32 weight (N, K) (a parameter,
// contiguous), b (N) or NULL, tw its ternary form. The same function as trit_linear over
// trit_fake_quant(x, per token int8) and trit_fake_quant(w, ternary), to fp32 summation order;
// gradients: dW = dY^T fq8(x) as tw->dw says (straight-through to the latent weight), db, and dX
// as tw->dx says. Float graphs only.
trit_tensor *trit_ternary_linear(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b, trit_ternary_weight *tw);

#endif
