// The GPT model's parameter layout, shared by the builder (gpt.c), the training graph
// (gpt_graph.c) and the incremental decoder (gpt_decode.c). Not a public header.
#ifndef TRIT_NN_GPT_INTERNAL_H
#define TRIT_NN_GPT_INTERNAL_H

#include "trit/nn.h"
#include "trit/ops.h"

// One transformer block. Weights are (out, in) as trit_linear reads them (y = x W^T + b).
// Biases (and LayerNorm's shift) are NULL when config.bias is false; norm shifts are always NULL
// for RMSNorm. With SwiGLU, fc_w holds [gate; up]: rows [0, hidden) make the gate and rows
// [hidden, 2 hidden) the up projection, so one GEMM computes both.
typedef struct trit_gpt_block {
    trit_tensor *ln1_w, *ln1_b;    // (C), (C)
    trit_tensor *attn_w, *attn_b;  // c_attn: (3C, C), (3C); rows q, then k, then v
    trit_tensor *sub1_w, *sub1_b;  // attn.sub_norm: (C), (C); NULL without SubLN
    trit_tensor *proj_w, *proj_b;  // attn.c_proj: (C, C), (C)
    trit_tensor *ln2_w, *ln2_b;    // (C), (C)
    trit_tensor *fc_w, *fc_b;      // mlp.c_fc: (F, C), (F); F = hidden (GELU) or 2 hidden (SwiGLU)
    trit_tensor *sub2_w, *sub2_b;  // mlp.sub_norm: (hidden), (hidden); NULL without SubLN
    trit_tensor *mlp_w, *mlp_b;    // mlp.c_proj: (C, hidden), (C)
} trit_gpt_block;

struct trit_gpt {
    trit_gpt_config cfg;
    int64_t hidden;           // MLP hidden size after defaults
    trit_tensor *wte;         // (V, C), also the output head
    trit_tensor *wpe;         // (T, C), NULL with RoPE
    trit_gpt_block *blocks;   // (L)
    trit_tensor *lnf_w, *lnf_b;
    trit_tensor **tensors;    // (cap_tensors): every parameter, in the documented order
    int n_tensors;
    int cap_tensors;          // exactly the parameters the config calls for (counted by the builder)
    trit_compute_policy policy;
    trit_tensor **quantized;  // (n_tensors) or NULL: packed copies the decoder multiplies with
    // Quantization-aware training: fake quantization of the block matrices and of their inputs.
    bool qat_weights, qat_acts;
    trit_fake_quant_spec qat_w, qat_a;
};

// Appends t to m's parameter list (which then owns it); TRIT_ERR_RANGE, t left to the caller,
// when the list already holds the cap_tensors parameters the config calls for.
trit_status trit_gpt_append_tensor(trit_gpt *m, trit_tensor *t);

#endif
