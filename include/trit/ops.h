// trit ops: each call adds a node to a graph and returns its output tensor (NULL on error,
// message in trit_last_error()). Shapes follow PyTorch's conventions. Every op here has a
// forward, a backward and a shape rule; non-differentiable inputs (indices) get no gradient.
#ifndef TRIT_OPS_H
#define TRIT_OPS_H

#include "trit/graph.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TRIT_REDUCE_MEAN = 0, TRIT_REDUCE_SUM = 1 } trit_reduction;

// ---- element-wise (binary ops broadcast with numpy rules) -----------------------------
trit_tensor *trit_add(trit_graph *g, trit_tensor *a, trit_tensor *b);
// a + b, stored in the activation dtype (16 bits, one rounding of the f32 sum) under a policy
// with 16-bit activations when every reader takes 16 bits there: a sum that feeds attention or
// an MLP's GELU rather than the fp32 residual stream (a LoRA product added to its linear's
// output). trit_add's result stays f32.
trit_tensor *trit_add_act(trit_graph *g, trit_tensor *a, trit_tensor *b);
trit_tensor *trit_sub(trit_graph *g, trit_tensor *a, trit_tensor *b);
trit_tensor *trit_mul(trit_graph *g, trit_tensor *a, trit_tensor *b);
trit_tensor *trit_div(trit_graph *g, trit_tensor *a, trit_tensor *b);
trit_tensor *trit_scale(trit_graph *g, trit_tensor *x, double s);       // s * x
trit_tensor *trit_add_scalar(trit_graph *g, trit_tensor *x, double s);  // x + s
trit_tensor *trit_pow(trit_graph *g, trit_tensor *x, double p);         // x^p
trit_tensor *trit_exp(trit_graph *g, trit_tensor *x);
trit_tensor *trit_ln(trit_graph *g, trit_tensor *x);  // natural log (trit_log is the logger)
trit_tensor *trit_tanh(trit_graph *g, trit_tensor *x);
trit_tensor *trit_sigmoid(trit_graph *g, trit_tensor *x);
trit_tensor *trit_relu(trit_graph *g, trit_tensor *x);
trit_tensor *trit_gelu(trit_graph *g, trit_tensor *x);  // tanh form, exact backward
trit_tensor *trit_silu(trit_graph *g, trit_tensor *x);

// ---- reductions (axes negative from the end; naxes == 0 means all axes) ----------------
trit_tensor *trit_sum(trit_graph *g, trit_tensor *x, int naxes, const int *axes, bool keepdim);
trit_tensor *trit_mean(trit_graph *g, trit_tensor *x, int naxes, const int *axes, bool keepdim);
// Gradient flows to the first maximal element.
trit_tensor *trit_max(trit_graph *g, trit_tensor *x, int naxes, const int *axes, bool keepdim);

// ---- linear algebra ------------------------------------------------------------------
// a: (..., M, K) or (..., K, M) if trans_a; b: (..., K, N) or (..., N, K) if trans_b;
// batch dims broadcast. out: (..., M, N).
trit_tensor *trit_matmul(trit_graph *g, trit_tensor *a, trit_tensor *b, bool trans_a, bool trans_b);
// x: (..., K), w: (N, K), b: (N) or NULL; out: (..., N) = x w^T + b
// w may be quantized (any quantized dtype: qint8/4/2 with or without zero points and with
// double-quantized scales, nf4, f8_e4m3/e5m2, ternary 2-bit and base 3, q8_0, q4_0, tq1_0,
// tq2_0) if it gets no gradient: a frozen parameter (TRIT_FLAG_FROZEN) or a constant; a trainable
// quantized w is refused ("quantized weights get no gradient: freeze it"). The product is then
// the same as over trit_dequantize(w) in f32 (equal up to the fp32 summation order): chunks of at
// most 2 MB of w's rows are decoded into op scratch, never a whole decoded copy, in forward and
// again in backward, which gives x's gradient dy w (QLoRA trains an adapter through this).
// Under bf16/f16 activations the chunks are decoded into the activation dtype.
trit_tensor *trit_linear(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b);
// Inference only: x w^T + b with w quantized as for trit_linear, on the decoder's kernels where
// they take w: qint8, qint4 and 2-bit ternary (symmetric, groups of a multiple of 64 dividing K;
// ternary 128, or one scale per row) with x quantized per row to int8 (absmax / 127), so each
// output may differ from trit_linear's by up to sum_k |w_k| * max_k |x_k| / 254; NF4 and FP8 on
// their weight-only kernels for up to 4 rows (f32 x; the AVX2 NF4 kernel sums in 14-bit fixed
// point, within 2^-14 of each operand's largest value). Other weights, more rows for NF4/FP8,
// and the f64 graph compute as trit_linear does. No input gets a gradient: a backward through it
// is an error (use trit_linear to train). Results do not depend on the thread count.
trit_tensor *trit_qlinear(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b);

// ---- normalisation, activation of rows, losses ----------------------------------------
trit_tensor *trit_softmax(trit_graph *g, trit_tensor *x);      // over the last dim
trit_tensor *trit_log_softmax(trit_graph *g, trit_tensor *x);  // over the last dim
// logits: (..., V); targets: (...) i32 or i64 class indices. Scalar result.
trit_tensor *trit_cross_entropy(trit_graph *g, trit_tensor *logits, trit_tensor *targets,
                                int64_t ignore_index, trit_reduction red);
trit_tensor *trit_mse(trit_graph *g, trit_tensor *pred, trit_tensor *target, trit_reduction red);
// torch.nn.HuberLoss: per element d = pred - target, 0.5 d^2 where |d| <= delta, else
// delta (|d| - 0.5 delta); delta > 0. pred, target: any shape, the same. Scalar result.
trit_tensor *trit_huber(trit_graph *g, trit_tensor *pred, trit_tensor *target, double delta, trit_reduction red);
// weight: (V, C); idx: (...) i32 or i64. out: (..., C); backward scatter-adds into weight.
// A frozen quantized weight (as for trit_linear) is looked up by decoding the indexed rows
// (exactly trit_dequantize's values) and gets no gradient: a tied head over it (trit_linear with
// the same table, then cross-entropy) is fused into chunked logits as for an f32 table.
trit_tensor *trit_embedding(trit_graph *g, trit_tensor *weight, trit_tensor *idx);
// Over the last dim C; w, b: (C) or NULL.
trit_tensor *trit_layernorm(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b, double eps);
trit_tensor *trit_rmsnorm(trit_graph *g, trit_tensor *x, trit_tensor *w, double eps);
// x: (N, C, ...); w, b: (C) or NULL; running_mean, running_var: (C) state tensors or NULL.
// Training: batch statistics, running stats updated with momentum. Eval: running stats.
trit_tensor *trit_batchnorm(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b,
                            trit_tensor *running_mean, trit_tensor *running_var, double momentum,
                            double eps);
// ---- sentence embeddings: pooling and embedding losses --------------------------------
// Pooling of hidden states x (B, T, C) to (B, C). sel selects the positions of each row: a (B, T)
// mask of 0/1 (any integer or float dtype, e.g. an attention mask), (B) lengths (positions
// [0, len) kept: right padding), or NULL (all T). A row that keeps no position, a mask value
// other than 0 or 1, or a length outside [1, T] is an error at run time (trit_graph_forward
// returns TRIT_ERR_RANGE, the message names the row), never a zero vector.
trit_tensor *trit_mean_pool(trit_graph *g, trit_tensor *x, trit_tensor *sel);  // mean of the kept positions
trit_tensor *trit_last_token_pool(trit_graph *g, trit_tensor *x, trit_tensor *sel);  // the last kept position
// InfoNCE with in-batch negatives (sentence-transformers' MultipleNegativesRankingLoss; SimCLR's
// one-directional form). anchors: (B, C); candidates: (N, C), N >= B, row i the positive of
// anchor i, the rest its negatives (rows B..N-1: extra hard negatives). With rows normalised as
// x / max(||x||, 1e-12), S = anchors candidates^T / tau (B, N) and the loss is the cross-entropy
// of each row of S against target i (log-sum-exp in double). tau > 0 (0.05 = MNRL's scale 20).
// For the symmetric (CLIP) form add trit_info_nce(g, candidates, anchors, ...) with N == B.
trit_tensor *trit_info_nce(trit_graph *g, trit_tensor *anchors, trit_tensor *candidates, double tau,
                           trit_reduction red);
// torch.nn.TripletMarginLoss (p = 2, no swap): per row of (..., C) inputs of one shape,
// max(||a - p + eps|| - ||a - n + eps|| + margin, 0) with eps = 1e-6 (PyTorch's); margin finite.
trit_tensor *trit_triplet_margin_loss(trit_graph *g, trit_tensor *anchor, trit_tensor *positive,
                                      trit_tensor *negative, double margin, trit_reduction red);
// torch.nn.CosineEmbeddingLoss: x1, x2 (..., C), target (...) of +1 or -1 (integer or float;
// anything else is an error at run time); per row 1 - cos for +1, max(cos - margin, 0) for -1,
// cos = x1.x2 / sqrt((|x1|^2 + 1e-12)(|x2|^2 + 1e-12)); margin in [-1, 1].
trit_tensor *trit_cosine_embedding_loss(trit_graph *g, trit_tensor *x1, trit_tensor *x2, trit_tensor *target,
                                        double margin, trit_reduction red);

// ---- quantization-aware training -------------------------------------------------------
// Fake quantization: out = dequantize(quantize(x)) in x's dtype, with the straight-through
// estimator backward (d out / d x = 1), or the clipped one (0 where x lay outside the range the
// scale can represent; only a calibrated scale can leave values outside it).
typedef enum trit_fake_quant_mode {
    TRIT_FQ_GROUPS,      // weights: a scale per group from its absmax (as trit_quantize does)
    TRIT_FQ_TOKEN,       // activations: a scale per row (last dim) from its absmax, each step
    TRIT_FQ_CALIBRATED,  // activations: one scale from a running absmax (state tensor (1)),
                         // updated in training forwards: r = m r + (1 - m) max|x| (r = 0: max|x|)
    TRIT_FQ_TERNARY,     // BitNet b1.58 weights: scale = mean|x| (at least 1e-5), codes in {-1, 0, 1}
} trit_fake_quant_mode;

typedef struct trit_fake_quant_spec {
    trit_dtype dtype;      // TRIT_QINT8, TRIT_QINT4, TRIT_QINT2, TRIT_F8_E4M3 or TRIT_F8_E5M2 (codes
                           // symmetric: [-127, 127], [-7, 7], [-1, 1]; fp8 scaled to its largest value)
    int64_t group_size;    // TRIT_FQ_GROUPS: 0 per tensor, -1 per row, or > 0 dividing the rows
    trit_fake_quant_mode mode;
    bool clip_ste;         // zero gradient outside the representable range
    double momentum;       // TRIT_FQ_CALIBRATED (0.9 as optimum-quanto)
} trit_fake_quant_spec;

// running_absmax: (1) f32 state tensor for TRIT_FQ_CALIBRATED, else NULL.
trit_tensor *trit_fake_quant(trit_graph *g, trit_tensor *x, const trit_fake_quant_spec *s, trit_tensor *running_absmax);

// Inverted dropout with a Philox mask; identity in eval mode. The mask depends on (seed, stream,
// step) only: trit_dropout_stream takes a stream from the model's structure (a block index and a
// role, say), trit_dropout the next of the graph's own counter of random ops in build order.
trit_tensor *trit_dropout(trit_graph *g, trit_tensor *x, double p);
trit_tensor *trit_dropout_stream(trit_graph *g, trit_tensor *x, double p, uint64_t stream);

// ---- attention ----------------------------------------------------------------------
// Causal multi-head self-attention core. q, k, v: (B, T, C) with C = n_head * head_dim.
// out: (B, T, C) = concat_h softmax(q_h k_h^T / sqrt(head_dim) + causal mask) v_h
trit_tensor *trit_attention(trit_graph *g, trit_tensor *q, trit_tensor *k, trit_tensor *v, int n_head);
// The same function computed in tiles (flash attention): memory linear in T, no T x T matrix.
trit_tensor *trit_flash_attention(trit_graph *g, trit_tensor *q, trit_tensor *k, trit_tensor *v, int n_head);

// Rotary position embedding on x: (B, T, C), C = n_head * hs, hs even. Within each head the
// pair (i, i + hs/2) at position t is rotated by angle t * theta^(-2i/hs) (the rotate-half form).
trit_tensor *trit_rope(trit_graph *g, trit_tensor *x, int n_head, double theta);
// SwiGLU gate: silu(gate) * up, same shapes.
trit_tensor *trit_swiglu(trit_graph *g, trit_tensor *gate, trit_tensor *up);

// ---- tensor parallelism (Megatron-LM's f and g; Shoeybi et al. 2019) --------------------
// A sum over the ranks of a tensor-parallel group, in place, the result on every rank: the
// caller's (src/dist gives an MPI all-reduce); the graph never talks to other processes. data
// holds n values of dtype (the graph's accumulate dtype: f32, or f64 on the reference path).
typedef trit_status (*trit_allreduce_fn)(void *ctx, void *data, trit_dtype dtype, int64_t n);
typedef struct trit_allreduce {
    trit_allreduce_fn fn;
    void *ctx;
} trit_allreduce;
// f, before a column-split linear: the identity forward; backward sums x's gradient over the
// group (each rank's columns contribute a part of it).
trit_tensor *trit_tp_copy(trit_graph *g, trit_tensor *x, const trit_allreduce *r);
// g, after a row-split linear: forward sums x (each rank's partial product) over the group;
// backward passes the gradient through (every rank holds the same one).
trit_tensor *trit_tp_reduce(trit_graph *g, trit_tensor *x, const trit_allreduce *r);

// ---- shape ops (views where the layout allows, copies otherwise) ------------------------
trit_tensor *trit_reshape(trit_graph *g, trit_tensor *x, int ndim, const int64_t *shape);
trit_tensor *trit_transpose(trit_graph *g, trit_tensor *x, int d0, int d1);
trit_tensor *trit_permute(trit_graph *g, trit_tensor *x, const int *perm);
trit_tensor *trit_slice(trit_graph *g, trit_tensor *x, int dim, int64_t start, int64_t stop);
trit_tensor *trit_expand(trit_graph *g, trit_tensor *x, int ndim, const int64_t *shape);
trit_tensor *trit_contiguous(trit_graph *g, trit_tensor *x);
// x converted to float dtype `dt` (f32, f64, bf16, f16; round to nearest even). The gradient
// passes through unchanged, in the graph's accumulate dtype. Casting to x's own dtype is x.
trit_tensor *trit_cast(trit_graph *g, trit_tensor *x, trit_dtype dt);
trit_tensor *trit_concat(trit_graph *g, int n, trit_tensor *const *xs, int axis);
// Split x along axis into n parts of the given sizes; out[i] receives the parts.
trit_status trit_split(trit_graph *g, trit_tensor *x, int axis, int n, const int64_t *sizes, trit_tensor **out);

// ---- convolution and pooling (NCHW) ------------------------------------------------
// x: (N, Cin, H, W), w: (Cout, Cin, KH, KW), b: (Cout) or NULL.
trit_tensor *trit_conv2d(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b, int stride, int padding);
trit_tensor *trit_maxpool2d(trit_graph *g, trit_tensor *x, int kernel, int stride, int padding);
trit_tensor *trit_avgpool2d(trit_graph *g, trit_tensor *x, int kernel, int stride, int padding);

#ifdef __cplusplus
}
#endif
#endif
