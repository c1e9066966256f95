// The GPT model's parameter layout, shared by the builder (gpt.c), the training graph
// (gpt_graph.c) and the incremental decoder (gpt_decode.c). Not a public header.
#ifndef TRIT_NN_GPT_INTERNAL_H
#define TRIT_NN_GPT_INTERNAL_H

#include "trit/nn.h"
#include "trit/ops.h"

#include <math.h>

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

// ---- the model written once -------------------------------------------------------------------
// The GPT is one program of steps over a few named slots of rows (gpt_program.c), made from the
// config when the model is made. The training graph (gpt_graph.c) turns each step into graph ops;
// the decoder (gpt_decode.c) runs each on its row buffers and KV cache. A new block variant is a
// new program; a new kind of computation is a new op here and a case in each of the two.
typedef enum gpt_op {
    GPT_OP_EMBED,     // X = wte[tokens] (+ wpe[positions] when w2 >= 0), then dropout
    GPT_OP_NORM,      // dst = norm(src): LayerNorm or RMSNorm (config) with gain w, shift b
    GPT_OP_LINEAR,    // dst = src w^T + b (a block matrix: QAT's fake quantization applies)
    GPT_OP_ROPE,      // rotate the query and key parts of src (a fused q, k, v row) in place
    GPT_OP_ATTEND,    // dst = causal attention of src's q, k, v parts over n_head heads
    GPT_OP_GELU,      // dst = gelu(src)
    GPT_OP_SWIGLU,    // dst = silu(src's first half) * its second half
    GPT_OP_RESIDUAL,  // X += dropout(src)
    GPT_OP_HEAD,      // logits = src wte^T: the tied output head
    GPT_OP_ADAPTER,   // src += gelu(src w^T + b) la^T + lb: a bottleneck adapter (w, b down; la, lb up)
} gpt_op;

typedef enum gpt_slot {
    GPT_X,    // (rows, C) the residual stream
    GPT_H,    // (rows, C) a sub-layer's normalised input
    GPT_QKV,  // (rows, 3C) fused queries, keys and values
    GPT_Y,    // (rows, C) a sub-layer's output
    GPT_FC,   // (rows, F) the MLP's first linear
    GPT_ACT,  // (rows, hidden) the MLP's activation
    GPT_Z,    // (rows, C or hidden) SubLN's normalised input of an output projection
    GPT_NUM_SLOTS,
} gpt_slot;

// Tensor parallelism (nn/gpt_tp.c): how a block matrix is split across the ranks of a group.
typedef enum gpt_tp_split {
    GPT_TP_NONE,    // whole on every rank
    GPT_TP_COLUMN,  // its output columns (c_attn per head, c_fc): the input through tp_copy
    GPT_TP_ROW,     // its input rows (the projections): the partial product through tp_reduce, then the bias
} gpt_tp_split;

typedef struct gpt_step {
    gpt_op op;
    gpt_slot src, dst;
    int w, b, w2;      // parameter indices (m->tensors), -1 for none; w2: EMBED's positions
    int64_t width;     // columns of dst
    int block;         // the block the step belongs to, -1 before the blocks, L after them
    bool block_matrix; // a LINEAR over a matrix inside a block (QAT applies; the head is not one)
    uint64_t stream;   // EMBED and RESIDUAL: the dropout's stream, from the step's place
    int la, lb;        // LINEAR: its LoRA A (r, in) and B (out, r), -1 for none; ADAPTER: up (C, r), (C)
    uint64_t lora_stream;  // LINEAR with LoRA: the stream of the dropout on the adapter's input
    gpt_tp_split tp;       // LINEAR of a block matrix: its split under tensor parallelism
} gpt_step;

// How each parameter gets its initial values (m->init).
typedef enum { INIT_NORMAL, INIT_RESIDUAL, INIT_ZERO, INIT_ONE, INIT_KAIMING } init_kind;

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
    uint8_t *init;            // (cap_tensors) each one's initialisation rule (gpt.c)
    double std, std_resid;    // the normal rule's deviations
    trit_compute_policy policy;
    trit_tensor **quantized;  // (n_tensors) or NULL: packed copies the decoder multiplies with
    // Quantization-aware training: fake quantization of the block matrices and of their inputs.
    bool qat_weights, qat_acts;
    trit_fake_quant_spec qat_w, qat_a;
    // Ternary QAT on the integer kernels (gpt_ternary.c): each block matrix's ternary form, by
    // parameter index (N = 0: not one), or NULL when graphs take the fake-quantized path.
    struct trit_ternary_weight *tern;
    int n_tern;
    trit_recompute_policy recompute;
    int64_t recompute_blocks; // the policy applies to blocks [0, recompute_blocks)
    trit_flat *flat;          // the parameters' storage and their gradients (reverse first use)
    struct gpt_weights *dec;  // a decode-only model's weights in kernel form (gpt_weights.c), else NULL
    bool adapters_merged;     // LoRA products added into the base weights (nn/lora.c)
    gpt_step *prog;           // the program (gpt_program.c)
    int n_prog;
    int64_t slot_width[GPT_NUM_SLOTS];  // the widest row each slot holds
    // A tensor-parallel shard (nn/gpt_tp.c): rank tp_rank of tp_size holds n_head / tp_size heads'
    // columns of c_attn, hidden / tp_size of c_fc and the matching rows of the projections' inputs;
    // tp_sum sums over the group. tp_size 1: the whole model.
    int tp_rank, tp_size;
    trit_allreduce tp_sum;
};

// A Philox stream from a name (FNV-1a-64): a parameter's initial values, a dropout's mask.
static inline uint64_t trit_gpt_name_stream(const char *name) {
    uint64_t h = UINT64_C(1469598103934665603);
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = (h ^ *p) * UINT64_C(1099511628211);
    return h;
}

// The ternary state a graph's linear over parameter i runs on, NULL when i takes the
// fake-quantized path (gpt_ternary.c).
struct trit_ternary_weight *trit_gpt_ternary_of(const trit_gpt *m, int i);
void trit_gpt_ternary_free(trit_gpt *m);

// The zeroed parameters of rank `rank`'s shard of a model of config c under tensor parallelism over
// `size` ranks (block matrices split as gpt_tp_split says, the rest whole), its program and storage.
trit_gpt *trit_gpt_new_tp_layout(const trit_gpt_config *c, int rank, int size);

// Builds m's program from its config and parameters (trit_gpt_new calls it).
trit_status trit_gpt_program_build(trit_gpt *m);
// Lays the parameters out in flat storage (gpt.c), dropping the values of those in drop (NULL:
// none), giving zeroed storage to those in give (NULL: none), leaving out any other without values.
trit_status trit_gpt_lay_out(trit_gpt *m, const bool *drop, const bool *give);
// trit_gpt_add_adapter, where base_give (or NULL) also gives storage to base parameters that have
// none yet, in the same layout: a model made with an adapter is laid out once, not twice.
trit_status trit_gpt_add_adapter_giving(trit_gpt *m, const trit_adapter_config *a, uint64_t seed, const bool *base_give);
// Stores the parameters which(t) picks (NULL: all) in dt, rounding to nearest even, and lays the
// storage out again (trit_gpt_set_param_dtype, trit_gpt_set_adapter_dtype).
trit_status trit_gpt_convert_params(trit_gpt *m, trit_dtype dt, bool (*which)(const trit_tensor *t));
// The index of parameter t in m->tensors, -1 for NULL (or a tensor not of the model).
int trit_gpt_index_of(const trit_gpt *m, const trit_tensor *t);
// Appends t to m's parameter list (which then owns it); TRIT_ERR_RANGE, t left to the caller,
// when the list already holds the cap_tensors parameters the config calls for.
trit_status trit_gpt_append_tensor(trit_gpt *m, trit_tensor *t);

// torch.nn.init.kaiming_uniform_(w, a = sqrt(5)), nn.Linear's default and LoRA's A: uniform in
// +-gain sqrt(3 / fan_in) with gain sqrt(2 / (1 + a^2)), which is +-1 / sqrt(fan_in); fan_in = in.
static inline double trit_gpt_kaiming_bound(const trit_tensor *w) {
    return 1.0 / sqrt((double)(w->ndim == 2 && w->shape[1] > 0 ? w->shape[1] : 1));
}
// Parameter i's initial values under seed, in its place in flat storage (gpt.c).
trit_status trit_gpt_init_param(trit_gpt *m, int i, uint64_t seed);

// A module's matrix (role: 0 attn.c_attn, 1 attn.c_proj, 2 mlp.c_fc, 3 mlp.c_proj) in block k.
enum { GPT_NUM_MATRICES = 4 };
extern const char *const trit_gpt_matrix_roles[GPT_NUM_MATRICES];
void trit_gpt_matrix_shape(const trit_gpt_config *c, int role, int64_t *out, int64_t *in);
// A part of the training graph (a pipeline stage, nn/gpt_stage.c): blocks [first, end), with the
// embedding when first is 0 and the final norm and head when end is n_layer; x is the residual
// stream entering block `first` (when first > 0) and, once built, the one leaving block end - 1.
typedef struct gpt_range {
    int64_t first, end;
    trit_tensor *x;
} gpt_range;
trit_tensor *trit_gpt_graph_range(trit_graph *g, const trit_gpt *m, int64_t T, trit_gpt_graph *out, bool with_head,
                                  gpt_range *r);
// A bottleneck adapter's step in a graph: x + up(gelu(down x)) (nn/lora.c).
trit_tensor *trit_gpt_bottleneck_graph(trit_graph *g, const trit_gpt *m, const gpt_step *s, trit_tensor *x);
// LoRA's contribution to a LINEAR step in a graph: y + s (drop(x) A^T) B^T (gpt_graph.c's).
trit_tensor *trit_gpt_lora_graph(trit_graph *g, const trit_gpt *m, const gpt_step *s, trit_tensor *x, trit_tensor *y);

#endif
