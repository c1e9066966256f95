// trit models: the GPT builder (GPT-2 layout, with RMSNorm / SwiGLU / RoPE / no-bias switches),
// its training graph, and incremental decoding with a KV cache.
#ifndef TRIT_NN_H
#define TRIT_NN_H

#include "trit/graph.h"
#include "trit/ops.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TRIT_NORM_LAYER = 0, TRIT_NORM_RMS = 1 } trit_norm_kind;
typedef enum { TRIT_MLP_GELU = 0, TRIT_MLP_SWIGLU = 1 } trit_mlp_kind;
typedef enum { TRIT_POS_LEARNED = 0, TRIT_POS_ROPE = 1 } trit_pos_kind;

// Adapters beside frozen base weights (parameter-efficient fine-tuning; nn/lora.c).
typedef enum trit_adapter_kind {
    TRIT_ADAPTER_NONE = 0,
    TRIT_ADAPTER_LORA = 1,        // W x + scale B A dropout(x) on the targeted block matrices
    TRIT_ADAPTER_BOTTLENECK = 2,  // Houlsby: h + up(gelu(down h)) on each sub-layer's output
} trit_adapter_kind;
#define TRIT_ADAPTER_TARGETS_MAX 128
typedef struct trit_adapter_config {
    trit_adapter_kind kind;
    int64_t r;        // LoRA rank, or the bottleneck's width
    double alpha;     // LoRA: the product is scaled by alpha / r (alpha / sqrt(r) with rslora)
    double dropout;   // LoRA: dropout on the adapter's input, [0, 1)
    bool rslora;
    // LoRA: comma-separated module patterns, matched as PEFT matches target_modules: a module
    // ("h.3.attn.c_attn", also known as "transformer.h.3.attn.c_attn") is targeted when a
    // pattern equals its name or ends it after a dot ("c_attn", "attn.c_proj")
    char targets[TRIT_ADAPTER_TARGETS_MAX];
} trit_adapter_config;

typedef struct trit_gpt_config {
    int64_t vocab_size;    // V
    int64_t seq_len;       // T: the longest context (size of the position table)
    int64_t n_layer;       // L
    int64_t n_head;        // H
    int64_t n_embd;        // C, divisible by H
    double dropout;        // on attention output, MLP output and embeddings; 0 = off
    bool bias;             // biases in linear layers and LayerNorm
    trit_norm_kind norm;
    trit_mlp_kind mlp;
    trit_pos_kind pos;
    double rope_theta;     // 10000
    int64_t mlp_hidden;    // 0 = 4C for GELU, and 8C/3 rounded up to a multiple of 8 for SwiGLU
    double norm_eps;       // 1e-5
    bool naive_attention;  // false: flash attention (memory linear in T); true: the straightforward
                           // op, which keeps the (B, H, T, T) probabilities (same results to rounding)
    bool subln;            // SubLN (BitNet b1.58's later models): one more norm of the config's kind
                           // on the input of each output projection (attn.c_proj and mlp.c_proj), so
                           // every block matrix, not only the first of each sub-layer, sees a
                           // normalised input (what BitLinear's own RMSNorm stands for)
    trit_adapter_config adapter;  // kind NONE (zero): a plain model; else every base parameter is
                                  // frozen and the adapters are the trainable ones (nn/lora.c)
} trit_gpt_config;

// GPT-2 defaults for a small model: L=4, H=4, C=128, T=64, V=65, bias, LayerNorm, GELU, learned positions.
trit_gpt_config trit_gpt_config_default(void);
// Sizes >= 1 (and <= 2^24), C % H == 0, an even head size with RoPE, dropout in [0, 1),
// eps > 0, known enum values; the message says which field is wrong and how to fix it.
trit_status trit_gpt_config_check(const trit_gpt_config *c);
// The MLP hidden size the model uses: mlp_hidden, or its default when 0 (0 for a NULL config).
int64_t trit_gpt_mlp_hidden(const trit_gpt_config *c);

typedef struct trit_gpt trit_gpt;

// Allocates f32 parameters and initialises them: normal(0, 0.02), residual output projections
// (attn.c_proj, mlp.c_proj) normal(0, 0.02 / sqrt(2L)), biases 0, norm weights 1; the output
// head is tied to the token embedding. Each tensor draws from the Philox stream (seed,
// FNV-1a-64 hash of its name), so its values depend only on the seed, its name and its shape,
// and the same seed gives the same model on any machine and thread count.
//
// Tensors, in this order (weights are (out, in): a layer computes y = x W^T + b):
//   wte.weight (V, C)                       token embedding, also the output head
//   wpe.weight (T, C)                       learned positions only (absent with RoPE)
//   per block i: h.<i>.ln_1.weight (C), h.<i>.ln_1.bias (C),
//     h.<i>.attn.c_attn.weight (3C, C), .bias (3C)   rows: q, then k, then v
//     h.<i>.attn.sub_norm.weight (C), .bias (C)      SubLN only
//     h.<i>.attn.c_proj.weight (C, C), .bias (C)
//     h.<i>.ln_2.weight (C), h.<i>.ln_2.bias (C),
//     h.<i>.mlp.c_fc.weight (F, C), .bias (F)        F = hidden for GELU; for SwiGLU F = 2 hidden,
//                                                    rows [0, hidden) the gate, [hidden, 2 hidden) up
//     h.<i>.mlp.sub_norm.weight (hidden), .bias (hidden)   SubLN only
//     h.<i>.mlp.c_proj.weight (C, hidden), .bias (C)
//   ln_f.weight (C), ln_f.bias (C)
// bias = false drops every .bias tensor (linear and norm); RMSNorm has no bias in any case.
trit_gpt *trit_gpt_new(const trit_gpt_config *c, uint64_t seed);
// The same model, but the parameters for which without(name, ctx) is true get no values (their
// data is NULL): they are to come as quantized copies (trit_gpt_attach_quantized) of a model
// made decode-only (trit_gpt_make_decode_only), so their f32 values never exist.
trit_gpt *trit_gpt_new_without(const trit_gpt_config *c, uint64_t seed, bool (*without)(const char *name, void *ctx),
                               void *ctx);
// The same model with every parameter zero (no random draws): for loaders that fill every value
// from a file (a GPT-2-124M-shaped model's init costs about as much as reading its weights).
trit_gpt *trit_gpt_new_zeroed(const trit_gpt_config *c);
// Both: zero values, and none at all where without(name, ctx) (may be NULL) is true, for a
// loader that reads every value or quantizes as it reads; an adapter's values are drawn with seed
// as trit_gpt_new draws them.
trit_gpt *trit_gpt_new_zeroed_without(const trit_gpt_config *c, uint64_t seed, bool (*without)(const char *name, void *ctx),
                                      void *ctx);
void trit_gpt_free(trit_gpt *m);
// Elements [first, first + n) of parameter i's initial values under seed, as trit_gpt_new(c, seed)
// gives them (each element is its own draw): a model can be made in pieces.
trit_status trit_gpt_init_values(const trit_gpt *m, int i, uint64_t seed, int64_t first, int64_t n, float *out);
const trit_gpt_config *trit_gpt_get_config(const trit_gpt *m);
// Parameter tensors in a fixed order, named as in GPT-2 checkpoints ("wte.weight",
// "wpe.weight", "h.0.ln_1.weight", "h.0.attn.c_attn.weight", ..., "ln_f.weight"); the list and
// shapes are given above trit_gpt_new.
int trit_gpt_num_tensors(const trit_gpt *m);
trit_tensor *trit_gpt_tensor(const trit_gpt *m, int i);
trit_tensor *trit_gpt_find(const trit_gpt *m, const char *name);
int64_t trit_gpt_num_params(const trit_gpt *m);
// The parameters' flat storage: one block per dtype in reverse order of first use (the last
// block's tensors first, the token embedding last), tensors views into it; their gradients, once
// attached, one f32 block in the same order, so the gradients a backward finishes together are
// neighbours. trit_gpt_build* attach them (for every parameter not frozen) before compiling.
const trit_flat *trit_gpt_flat(const trit_gpt *m);
trit_status trit_gpt_attach_grads(trit_gpt *m);
// Gives the model q, a packed quantized copy of parameter i (same shape), to decode with:
// trit_gpt_decode multiplies by its integer codes where a kernel takes its dtype (symmetric
// qint8/qint4 in groups of a multiple of 64) and by the f32 parameter otherwise. Training and
// graphs use the f32 parameter, which should hold q's decoded values (trit_gpt_quantize and
// quantized checkpoint loads see to that). The model owns q from the call on, also on failure.
trit_status trit_gpt_attach_quantized(trit_gpt *m, int i, trit_tensor *q);
const trit_tensor *trit_gpt_quantized(const trit_gpt *m, int i);  // NULL when none
// Takes parameter i's quantized copy away from m (the caller owns it; NULL when none).
trit_tensor *trit_gpt_detach_quantized(trit_gpt *m, int i);
// Decode only: the model keeps each weight only in the form its decoding kernel reads. Every
// quantized copy a kernel multiplies with loses its f32 parameter values, and the integer ones the
// CPU has panel kernels for are packed once into panels that replace their codes (the token
// embedding's rows are decoded from them). Caches made from then on share these weights. Graphs,
// quantization and checkpoint saves refuse such a model (its f32 values are gone); a model under
// QAT must be frozen first.
trit_status trit_gpt_make_decode_only(trit_gpt *m);
bool trit_gpt_decode_only(const trit_gpt *m);
// Bytes of the weights as the model holds them for decoding: panels (codes and scales), other
// quantized copies with their scales, f32 values (of a decode-only model: only what no kernel
// multiplies by codes, and codes no kernel takes, decoded once).
size_t trit_gpt_weight_bytes(const trit_gpt *m);
// Bytes one decode step at position pos (0-based; it attends over pos + 1 keys) reads: every
// weight whole as its kernel reads it (panels; codes with the f32 group scales the kernel takes,
// one per row where a group spans rows; f32 values), one row of the position table, plus the
// keys and values of pos + 1 positions in every layer, stored as kv (TRIT_F32 or TRIT_F16).
// 0 for a NULL model, a negative pos or another kv dtype.
size_t trit_gpt_decode_read_bytes(const trit_gpt *m, trit_dtype kv, int64_t pos);
// Quantization-aware training: graphs built from now on fake-quantize every matrix inside the
// blocks with `weights` and the input of each of those matmuls with `acts` (either NULL: off;
// the spec is copied). The head and embeddings stay in full precision.
trit_status trit_gpt_set_qat(trit_gpt *m, const trit_fake_quant_spec *weights, const trit_fake_quant_spec *acts);  // elements, tied weights counted once

// How f32 graphs built from now on run the block matrices under ternary QAT (TRIT_FQ_TERNARY
// weights, per-token int8 inputs): FAKE, an fp32 GEMM over the fake-quantized operands; INT8,
// the integer panel kernels for the forward (int8 codes of x against the ternary codes of W) and
// for the input gradient (dY quantized per row to int8 against W's transposed codes), the weight
// gradient on bf16 products where the CPU multiplies bf16 natively (AVX512-BF16; dY times x's row
// scales rounded to bf16, against x's int8 codes, which bf16 holds exactly; summed in fp32), in
// fp32 elsewhere; INT8_F32_DW, the same with the weight gradient in fp32; INT8_F32_DX, the
// integer forward with the input gradient an fp32 GEMM over W's ternary values and the weight
// gradient in fp32. Weight gradients reach the latent fp32 weights straight through in every
// mode. The kernel modes keep each matrix's codes (both sides multiples of 64; others stay FAKE)
// packed once per weight update: call trit_gpt_ternary_weights_changed after every change of the
// weights (an optimizer step).
typedef enum trit_ternary_matmul {
    TRIT_TERNARY_MATMUL_FAKE = 0,
    TRIT_TERNARY_MATMUL_INT8 = 1,
    TRIT_TERNARY_MATMUL_INT8_F32_DX = 2,
    TRIT_TERNARY_MATMUL_INT8_F32_DW = 3,
} trit_ternary_matmul;
trit_status trit_gpt_set_ternary_matmul(trit_gpt *m, trit_ternary_matmul mode);
// The weights changed: the next forward packs the ternary codes again (a no-op in FAKE mode).
void trit_gpt_ternary_weights_changed(trit_gpt *m);
// How many times the ternary codes of block matrix parameter i were packed (0 in FAKE mode).
int64_t trit_gpt_ternary_fills(const trit_gpt *m, int i);

// Activation recompute (checkpointing) in the graphs built from now on: NONE holds every
// activation backward reads from forward; BLOCK holds only each block's input (the residual
// stream between blocks) and recomputes the rest of a block in backward, just before its backward
// needs it, in a buffer of its own (trit_graph_recompute_since); ATTN and MLP do that for one
// half of each block only (ln_1 .. the attention residual, or ln_2 .. the MLP residual), holding
// the half's input and output. Same bits, less memory, one more forward of what is recomputed.
typedef enum trit_recompute_policy {
    TRIT_RECOMPUTE_NONE = 0,
    TRIT_RECOMPUTE_BLOCK = 1,
    TRIT_RECOMPUTE_ATTN = 2,
    TRIT_RECOMPUTE_MLP = 3,
} trit_recompute_policy;
trit_status trit_gpt_set_recompute(trit_gpt *m, trit_recompute_policy policy);
// The policy on blocks [0, n_blocks) only, the others hold everything (n_blocks >= the layer
// count: all of them, as trit_gpt_set_recompute).
trit_status trit_gpt_set_recompute_blocks(trit_gpt *m, trit_recompute_policy policy, int64_t n_blocks);

// Training precision modes, as `trit train --precision` and `trit bench --precision` name them:
// fp32; bf16 (matmul inputs and activations between matmuls bf16, fp32 accumulation, norms,
// softmax, losses and the optimizer fp32); fp16 (the same with f16, plus loss scaling in the
// trainer).
typedef enum trit_precision { TRIT_PRECISION_FP32 = 0, TRIT_PRECISION_BF16, TRIT_PRECISION_FP16 } trit_precision;
const char *trit_precision_name(trit_precision p);  // "fp32", "bf16", "fp16"
// By name; TRIT_ERR_INVALID (with the accepted names) for anything else.
trit_status trit_precision_parse(const char *name, trit_precision *out);
// The compute policy of a mode with fp32 matmuls at `matmul` precision: fp32 -> {f32, f32,
// matmul}; bf16 -> {f32, bf16, medium}; fp16 -> {f32, f16, matmul} (f16 operands are widened
// exactly, so the matmul precision applies only to fp32 operands such as gradients).
trit_compute_policy trit_precision_policy(trit_precision p, trit_matmul_precision matmul);

// The compute policy the model's graphs are built with (default: all f32, highest matmul
// precision). Call before trit_gpt_build*.
trit_status trit_gpt_set_policy(trit_gpt *m, const trit_compute_policy *policy);
trit_compute_policy trit_gpt_get_policy(const trit_gpt *m);
// Stores every parameter in dt (TRIT_F32, or TRIT_BF16 / TRIT_F16 for training without fp32
// master weights), rounding to nearest even; gradients stay f32. Call before building graphs
// or an optimizer over the parameters.
trit_status trit_gpt_set_param_dtype(trit_gpt *m, trit_dtype dt);

// The training (or evaluation) graph for batches of B sequences of T <= seq_len tokens.
typedef struct trit_gpt_graph {
    trit_graph *graph;
    trit_tensor *idx;      // (B, T) i32 input tokens, filled by the caller
    trit_tensor *targets;  // (B, T) i32 next tokens; -1 = ignored position
    trit_tensor *logits;   // (B, T, V), kept
    trit_tensor *loss;     // scalar mean cross-entropy
} trit_gpt_graph;

// Builds and compiles the f32 graph; with dropout > 0 the graph trains with dropout unless
// trit_graph_set_training(out->graph, false). Needs 1 <= T <= seq_len. Graphs of one model
// share its parameters and their grads (e.g. a training graph and an evaluation graph).
trit_status trit_gpt_build(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out);
// The same graph for training steps: logits are not kept (out->logits is NULL), so the compiler
// computes the head and the cross-entropy in row chunks and the B x T x V logits never exist.
trit_status trit_gpt_build_train(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out);
// The loss alone, for evaluation: compiled for inference with the loss kept, so nothing is held
// for a backward pass, no gradient buffer is made and the arena holds only the values alive at
// once; the head and the cross-entropy run in row chunks (out->logits is NULL); eval mode (no
// dropout). Read out->loss after trit_graph_forward.
trit_status trit_gpt_build_eval(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out);
// trit_gpt_build_train's graph planned only (trit_graph_set_plan_only): its memory report
// without its arena, for choosing a recompute policy by memory. It cannot run.
trit_status trit_gpt_plan_train(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out);
void trit_gpt_graph_free(trit_gpt_graph *gg);
// One pipeline stage of the training graph: blocks [first, end) of the model, for micro-batches
// of B x T tokens. The first stage (first = 0) has the embedding and reads tokens (idx); a later
// one reads `input`, the residual stream (B, T, C) entering block `first`, an input of the
// accumulate dtype whose gradient backward gives (trit_graph_grad). The last stage (end =
// n_layer) has the final norm, the head and the mean cross-entropy of `targets` (loss; compiled
// with trit_graph_compile), the others end in `output`, the residual stream leaving block end - 1
// (compiled with trit_graph_compile_output: backward takes its gradient from the next stage).
// Stages share the model's parameters, gradients and dropout streams with its other graphs.
typedef struct trit_gpt_stage {
    trit_graph *graph;
    trit_tensor *idx;      // (B, T) i32 tokens (first stage), else NULL
    trit_tensor *input;    // (B, T, C) residual stream from the previous stage, else NULL
    trit_tensor *targets;  // (B, T) i32 next tokens (last stage), else NULL
    trit_tensor *output;   // (B, T, C) residual stream to the next stage, else NULL
    trit_tensor *loss;     // scalar mean cross-entropy (last stage), else NULL
} trit_gpt_stage;
trit_status trit_gpt_build_stage(trit_gpt *m, int64_t B, int64_t T, int64_t first, int64_t end, trit_gpt_stage *out);
void trit_gpt_stage_free(trit_gpt_stage *st);
// ---- tensor parallelism (nn/gpt_tp.c) -----------------------------------------------------
// Megatron-LM's split of each block over a group of `size` ranks (Shoeybi et al. 2019): rank r
// holds heads [r H/size, (r + 1) H/size)'s q, k and v rows of c_attn (and bias), rows [r F/size,
// (r + 1) F/size) of c_fc (and bias), and the matching input columns of attn.c_proj and
// mlp.c_proj, whose biases stay whole; the embeddings, norms and head stay whole on every rank.
// A parameter's split: dim -1 whole; 0 rows, in `parts` equal parts each split among the ranks
// (c_attn: q, k, v); 1 columns. A 1-D parameter is a column of rows.
typedef struct trit_gpt_tp_split {
    int dim;
    int64_t parts;
} trit_gpt_tp_split;
trit_gpt_tp_split trit_gpt_tp_split_of(const char *name);
// What a model of config c cannot split over `size` ranks (heads or the MLP's width not
// divisible, SwiGLU, SubLN, adapters): TRIT_OK, or an error naming it and what to do.
trit_status trit_gpt_tp_check(const trit_gpt_config *c, int size);
// Rank `rank`'s piece of a whole buffer shaped like the parameter (shape[ndim], elem bytes an
// element) copied to `piece` (contiguous, in the whole's order), or back into `whole` (to_whole).
void trit_gpt_tp_copy_piece(trit_gpt_tp_split sp, int ndim, const int64_t *shape, size_t elem, void *whole, void *piece,
                            int rank, int size, bool to_whole);
// Rank `rank`'s shard of m (f32 parameters, no adapters or QAT): its parameters with the pieces
// of m's values, graphs that sum over the group through `sum` (trit_tp_copy, trit_tp_reduce).
// It trains and evaluates through graphs only (no decoding). NULL with a message on failure.
trit_gpt *trit_gpt_tp_shard(const trit_gpt *m, int rank, int size, const trit_allreduce *sum);
// The split (rank, size) of a shard; (0, 1) for a whole model.
void trit_gpt_tp_of(const trit_gpt *m, int *rank, int *size);

// The hidden states after the final norm for tokens idx (B, T) i32, 1 <= T <= seq_len (a graph
// input of g): (B, T, C), built into g, a graph of the model's policy (trit_gpt_get_policy) that
// the caller compiles; the gradients of the model's trainable parameters are attached. The
// model's recompute policy applies. Two calls in one graph share the weights (and the dropout
// streams). NULL with a message on failure.
trit_tensor *trit_gpt_hidden(trit_graph *g, trit_gpt *m, trit_tensor *idx);

// Incremental decoding: each call feeds one token at the next position and returns the logits
// (V) for the position after it, reusing cached keys and values, so a token costs O(T).
// The cache ((L, T, C) keys and values plus work buffers) is allocated once, by cache_new; it
// belongs to one model. Decoding is the eval-mode forward (no dropout) and gives the graph's
// logits at each position to float rounding.
typedef struct trit_gpt_cache trit_gpt_cache;
trit_gpt_cache *trit_gpt_cache_new(const trit_gpt *m);
// A cache whose keys and values are stored in kv: TRIT_F32 (as cache_new) or TRIT_F16, which
// halves the cache and the bytes attention reads per token; each key and value is then rounded
// to f16 (nearest even) when stored, so logits differ from the graph's by that rounding.
trit_gpt_cache *trit_gpt_cache_new_kv(const trit_gpt *m, trit_dtype kv);
void trit_gpt_cache_free(trit_gpt_cache *c);
void trit_gpt_cache_reset(trit_gpt_cache *c);
int64_t trit_gpt_cache_len(const trit_gpt_cache *c);
// Fails with TRIT_ERR_RANGE when the cache holds seq_len tokens already or token >= V.
trit_status trit_gpt_decode(const trit_gpt *m, trit_gpt_cache *c, int32_t token, float *logits /* (V) */);
// Feeds n tokens at once (a prompt): the same results as n decode calls, with the matrix
// products of up to 64 positions done as one GEMM; logits (V) are those after the last token.
trit_status trit_gpt_prefill(const trit_gpt *m, trit_gpt_cache *c, const int32_t *tokens /* (n) */, int64_t n,
                             float *logits /* (V) */);

// ---- adapters (nn/lora.c) -------------------------------------------------------------------
// A model whose config has an adapter holds, after its base parameters (same names and order as
// without one), the adapter's, named as PEFT names them under the module they adapt:
//   LoRA, per targeted matrix W (out, in):  h.<i>.<module>.lora_A.weight (r, in)   Kaiming-uniform
//                                           h.<i>.<module>.lora_B.weight (out, r)  zeros
//     module: attn.c_attn, attn.c_proj, mlp.c_fc or mlp.c_proj; y = x W^T + b + s (drop(x) A^T) B^T
//   bottleneck (Houlsby), per block and sub-layer (attn, mlp):
//                                           h.<i>.<sub>.adapter.down.weight (r, C)  Kaiming-uniform
//                                           h.<i>.<sub>.adapter.down.bias (r)       zeros
//                                           h.<i>.<sub>.adapter.up.weight (C, r)    zeros
//                                           h.<i>.<sub>.adapter.up.bias (C)         zeros
//     the sub-layer's output h becomes h + up(gelu(down h)) before the residual add, so a fresh
//     adapter is the identity; it is nonlinear, so it cannot be merged.
// Base parameters are frozen (no gradient, no optimizer state). Training graphs, evaluation and
// the decoder all run the adapters (the decoder on top of the base's quantized kernels).

// Parses "r=8,alpha=16,dropout=0.05,targets=c_attn,attn.c_proj[,rslora]" (a bare word after
// targets= is one more target) into a LoRA config; keys left out take peft's LoraConfig
// defaults (r 8, alpha 8, dropout 0) and its target for GPT-2 (c_attn).
trit_status trit_adapter_parse_lora(const char *spec, trit_adapter_config *out);
// The inverse: the spec string of a LoRA config (what the parser reads back the same).
trit_status trit_adapter_format_lora(const trit_adapter_config *a, char *buf, size_t n);
// The adapter against the model it adapts: sizes and ranges, every target pattern matching at
// least one block matrix, a rank no larger than the smaller side of each matrix it adapts.
trit_status trit_adapter_check(const trit_adapter_config *a, const trit_gpt_config *c);
// A bottleneck adapter of width size (Houlsby; no targets: after attention and after the MLP).
trit_adapter_config trit_adapter_bottleneck(int64_t size);
// LoRA's scale: alpha / r, or alpha / sqrt(r) with rslora.
double trit_adapter_scale(const trit_adapter_config *a);
// Whether module ("h.3.attn.c_attn") is targeted by a's patterns.
bool trit_adapter_targets(const trit_adapter_config *a, const char *module);
// Gives m (a plain model) the adapter a: new zero/Kaiming parameters drawn from seed, the base
// frozen. Not for a decode-only model (make it decode-only after).
trit_status trit_gpt_add_adapter(trit_gpt *m, const trit_adapter_config *a, uint64_t seed);
// Stores the adapter's parameters (LoRA's A and B, a bottleneck's weights and biases) in dt:
// TRIT_BF16 (rounded to nearest even; trained without an fp32 master copy, as
// trit_gpt_set_param_dtype's 16-bit parameters are) or TRIT_F32 (widened exactly); the base keeps
// its storage. Call before building graphs or an optimizer over the parameters.
trit_status trit_gpt_set_adapter_dtype(trit_gpt *m, trit_dtype dt);
// LoRA merge: W += s B A for every adapted matrix (f32 W, an f32 or bf16 adapter; quantized copies of those
// matrices are dropped, as they no longer hold W), after which graphs and the decoder skip the
// adapters; unmerge subtracts the same product again.
trit_status trit_gpt_merge_adapters(trit_gpt *m);
trit_status trit_gpt_unmerge_adapters(trit_gpt *m);
bool trit_gpt_adapters_merged(const trit_gpt *m);
// QLoRA: every frozen parameter with a quantized copy (trit_gpt_quantize) gives up its f32
// values, so the base lives only as codes: graphs multiply by the codes through the quantized-
// operand linear (decoded a chunk at a time, input gradients only), the decoder through its
// kernels (every such matrix must have one). The model must have an adapter (its base frozen).
trit_status trit_gpt_use_quantized_base(trit_gpt *m);
// Elements of the parameters that are not frozen.
int64_t trit_gpt_num_trainable(const trit_gpt *m);

#ifdef __cplusplus
}
#endif
#endif
