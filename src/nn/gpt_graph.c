// The GPT training graph: the model's program (gpt_program.c) turned into graph ops, then the
// mean cross-entropy of the logits over targets != -1. Attention splits the fused (B, T, 3C) q, k,
// v into views (no copy), rotates q and k with RoPE when configured, and runs flash attention
// unless naive_attention is set.
#include "nn/gpt_internal.h"
#include "ops/ternary_linear.h"
#include "trit/ops.h"

#include <string.h>

// Parameter i as an operand: its codes when a quantized base (QLoRA) keeps no f32 values.
static trit_tensor *param(const trit_gpt *m, int i) {
    if (i < 0) return NULL;
    if (!m->tensors[i]->data && m->quantized && m->quantized[i]) return m->quantized[i];
    return m->tensors[i];
}

static trit_tensor *norm(trit_graph *g, const trit_gpt *m, trit_tensor *x, const gpt_step *s) {
    if (m->cfg.norm == TRIT_NORM_RMS) return trit_rmsnorm(g, x, param(m, s->w), m->cfg.norm_eps);
    return trit_layernorm(g, x, param(m, s->w), param(m, s->b), m->cfg.norm_eps);
}

static trit_tensor *dropout(trit_graph *g, const trit_gpt *m, trit_tensor *x, uint64_t stream) {
    return m->cfg.dropout > 0.0 ? trit_dropout_stream(g, x, m->cfg.dropout, stream) : x;
}

// x W^T + b; a matrix inside a block goes through fake quantization under QAT.
// A LoRA pair adds its product (nn/lora.c) unless merged into W.
// Ternary QAT in an fp32 graph may run on the integer kernels (ops/ternary_linear.h).
static trit_tensor *linear(trit_graph *g, const trit_gpt *m, trit_tensor *x, const gpt_step *s) {
    trit_tensor *w = param(m, s->w), *in = x, *y;
    // A tensor-parallel shard (gpt_tp.c): Megatron-LM's f before a column split, g after a row
    // split's partial product, whose bias is added once, to the sum.
    if (m->tp_size > 1 && s->tp == GPT_TP_COLUMN)
        return trit_linear(g, trit_tp_copy(g, x, &m->tp_sum), w, param(m, s->b));
    if (m->tp_size > 1 && s->tp == GPT_TP_ROW) {
        y = trit_tp_reduce(g, trit_linear(g, x, w, NULL), &m->tp_sum);
        return s->b >= 0 ? trit_add(g, y, param(m, s->b)) : y;
    }
    const trit_compute_policy pol = trit_graph_policy(g);
    struct trit_ternary_weight *tw = s->block_matrix ? trit_gpt_ternary_of(m, s->w) : NULL;
    if (tw && pol.accumulate == TRIT_F32 && pol.activation == TRIT_F32 && pol.matmul == TRIT_MATMUL_HIGHEST) {
        y = trit_ternary_linear(g, x, w, param(m, s->b), tw);
    } else {
        if (s->block_matrix && m->qat_acts) x = trit_fake_quant(g, x, &m->qat_a, NULL);
        if (s->block_matrix && m->qat_weights) w = trit_fake_quant(g, w, &m->qat_w, NULL);
        y = trit_linear(g, x, w, param(m, s->b));
    }
    return s->la >= 0 && !m->adapters_merged ? trit_gpt_lora_graph(g, m, s, in, y) : y;
}

// The values of the slots while the program is built into a graph; a fused q, k, v slot also
// holds its three parts once split (by ROPE or ATTEND).
typedef struct slots {
    trit_tensor *v[GPT_NUM_SLOTS];
    trit_tensor *qkv[3];
} slots;

// The heads a graph of m computes: a tensor-parallel shard's share of them.
static int local_heads(const trit_gpt *m) { return (int)(m->cfg.n_head / (m->tp_size > 1 ? m->tp_size : 1)); }

static void split_qkv(trit_graph *g, const trit_gpt *m, slots *sl, gpt_slot src) {
    if (sl->qkv[0]) return;
    const int64_t C = m->cfg.n_embd / m->cfg.n_head * local_heads(m), sizes[3] = {C, C, C};
    if (trit_split(g, sl->v[src], 2, 3, sizes, sl->qkv) != TRIT_OK) sl->qkv[0] = sl->qkv[1] = sl->qkv[2] = NULL;
}

static trit_tensor *attend(trit_graph *g, const trit_gpt *m, slots *sl, gpt_slot src) {
    split_qkv(g, m, sl, src);
    trit_tensor **q = sl->qkv;
    const int H = local_heads(m);
    trit_tensor *y = m->cfg.naive_attention ? trit_attention(g, q[0], q[1], q[2], H)
                                            : trit_flash_attention(g, q[0], q[1], q[2], H);  // (B, T, C)
    q[0] = q[1] = q[2] = NULL;
    return y;
}

static trit_tensor *swiglu(trit_graph *g, const trit_gpt *m, trit_tensor *h) {
    trit_tensor *part[2] = {NULL, NULL};
    const int64_t sizes[2] = {m->hidden, m->hidden};
    if (trit_split(g, h, 2, 2, sizes, part) != TRIT_OK) return NULL;
    return trit_swiglu(g, part[0], part[1]);
}

// One step of the program as graph ops.
static void build_step(trit_graph *g, const trit_gpt *m, const gpt_step *s, slots *sl, trit_gpt_graph *out, int64_t T) {
    trit_tensor *x = sl->v[s->src], **dst = &sl->v[s->dst];
    switch (s->op) {
    case GPT_OP_EMBED:
        *dst = trit_embedding(g, param(m, s->w), out->idx);  // (B, T, C)
        if (s->w2 >= 0) *dst = trit_add(g, *dst, trit_slice(g, param(m, s->w2), 0, 0, T));
        *dst = dropout(g, m, *dst, s->stream);
        break;
    case GPT_OP_NORM: *dst = norm(g, m, x, s); break;
    case GPT_OP_LINEAR: *dst = linear(g, m, x, s); break;
    case GPT_OP_ROPE:
        split_qkv(g, m, sl, s->src);
        for (int i = 0; i < 2; i++) sl->qkv[i] = trit_rope(g, sl->qkv[i], local_heads(m), m->cfg.rope_theta);
        break;
    case GPT_OP_ATTEND: *dst = attend(g, m, sl, s->src); break;
    case GPT_OP_GELU: *dst = trit_gelu(g, x); break;
    case GPT_OP_SWIGLU: *dst = swiglu(g, m, x); break;
    case GPT_OP_RESIDUAL: sl->v[GPT_X] = trit_add(g, sl->v[GPT_X], dropout(g, m, x, s->stream)); break;
    case GPT_OP_HEAD: out->logits = trit_linear(g, x, param(m, s->w), NULL); break;  // (B, T, V)
    case GPT_OP_ADAPTER: *dst = trit_gpt_bottleneck_graph(g, m, s, x); break;
    }
}

// Whether the half (0: ln_1 .. the attention residual, 1: ln_2 .. the MLP residual) of block b is
// recomputed in backward under the model's policy.
static bool recomputed(const trit_gpt *m, int b, int half) {
    if (b < 0 || b >= m->cfg.n_layer || b >= m->recompute_blocks) return false;
    switch (m->recompute) {
    case TRIT_RECOMPUTE_BLOCK: return true;
    case TRIT_RECOMPUTE_ATTN: return half == 0;
    case TRIT_RECOMPUTE_MLP: return half == 1;
    default: return false;
    }
}

// Whether step s lies in the part of the model blocks [r->first, r->end) make: the embedding
// goes with block 0, the final norm and the head with the last block.
static bool in_range(const trit_gpt *m, const gpt_range *r, const gpt_step *s) {
    if (s->block < 0) return r->first == 0;
    if (s->block >= m->cfg.n_layer) return r->end == m->cfg.n_layer;
    return s->block >= r->first && s->block < r->end;
}

// The program's steps of blocks [r->first, r->end) into g up to the head (which is built only
// when with_head), for tokens out->idx, or from r->x, the residual stream entering block r->first.
// A recomputed segment (a block, or one of its halves) gets everything it makes but its output
// (the residual stream) recomputed in backward. Returns the final norm's output (B, T, C) when
// the range has it; r->x gets the residual stream leaving the range.
trit_tensor *trit_gpt_graph_range(trit_graph *g, const trit_gpt *m, int64_t T, trit_gpt_graph *out, bool with_head,
                                  gpt_range *r) {
    slots sl = {.v[GPT_X] = r->first > 0 ? r->x : NULL};
    int mark = 0, half = 0;
    bool half_starts = true;
    const bool whole = m->recompute == TRIT_RECOMPUTE_BLOCK;
    for (int i = 0; i < m->n_prog; i++) {
        const gpt_step *s = &m->prog[i];
        if (!in_range(m, r, s)) continue;
        const bool starts = i == 0 || m->prog[i - 1].block != s->block;
        const bool ends = i + 1 == m->n_prog || m->prog[i + 1].block != s->block;
        if (starts) half = 0;
        if (s->op == GPT_OP_HEAD && !with_head) break;
        if (whole ? starts : starts || half_starts) mark = trit_graph_mark(g);
        half_starts = false;
        build_step(g, m, s, &sl, out, T);
        const bool half_ends = ends || (s->op == GPT_OP_RESIDUAL && half == 0);
        if ((whole ? ends : half_ends) && recomputed(m, s->block, half) && sl.v[GPT_X])
            trit_graph_recompute_since(g, mark, sl.v[GPT_X]);
        if (half_ends) half_starts = true;
        if (s->op == GPT_OP_RESIDUAL) half = 1;
    }
    r->x = sl.v[GPT_X];
    return r->end == m->cfg.n_layer ? sl.v[GPT_H] : NULL;
}

static trit_tensor *build_body(trit_graph *g, const trit_gpt *m, int64_t T, trit_gpt_graph *out, bool with_head) {
    gpt_range all = {.first = 0, .end = m->cfg.n_layer};
    return trit_gpt_graph_range(g, m, T, out, with_head, &all);
}

// Adds the model's forward and loss to g; fills out's tensors (NULL on a build error, which the
// graph remembers).
static void build_forward(trit_graph *g, const trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out) {
    const int64_t bt[2] = {B, T};
    out->idx = trit_graph_input(g, TRIT_I32, 2, bt, "idx");
    out->targets = trit_graph_input(g, TRIT_I32, 2, bt, "targets");
    build_body(g, m, T, out, true);
    out->loss = trit_cross_entropy(g, out->logits, out->targets, -1, TRIT_REDUCE_MEAN);
}

trit_tensor *trit_gpt_hidden(trit_graph *g, trit_gpt *m, trit_tensor *idx) {
    if (!g || !m || !idx) {
        trit_error(TRIT_ERR_INVALID, "trit_gpt_hidden: NULL argument");
        return NULL;
    }
    if (idx->ndim != 2 || idx->dtype != TRIT_I32 || idx->shape[1] < 1 || idx->shape[1] > m->cfg.seq_len) {
        trit_error(TRIT_ERR_INVALID, "trit_gpt_hidden: idx must be (B, T) i32 with 1 <= T <= seq_len = %lld",
                   (long long)m->cfg.seq_len);
        return NULL;
    }
    if (m->dec) {
        trit_error(TRIT_ERR_STATE, "trit_gpt_hidden: the model decodes only; load it again to build a graph");
        return NULL;
    }
    if (trit_gpt_attach_grads(m) != TRIT_OK) return NULL;
    trit_gpt_graph out = {.graph = g, .idx = idx};
    return build_body(g, m, idx->shape[1], &out, false);
}

// What a build is for: training (logits kept or not, or only planned), or evaluation.
typedef enum { BUILD_LOGITS, BUILD_TRAIN, BUILD_PLAN, BUILD_EVAL } build_kind;

static trit_status build(trit_gpt *m, int64_t B, int64_t T, build_kind kind, trit_gpt_graph *out) {
    if (!out) return trit_error(TRIT_ERR_INVALID, "gpt build: NULL output struct");
    memset(out, 0, sizeof *out);
    if (!m) return trit_error(TRIT_ERR_INVALID, "gpt build: NULL model");
    if (B < 1 || T < 1 || T > m->cfg.seq_len)
        return trit_error(TRIT_ERR_INVALID, "gpt build: need B >= 1 and 1 <= T <= seq_len = %lld, got B = %lld, T = %lld",
                          (long long)m->cfg.seq_len, (long long)B, (long long)T);
    if (B > (INT64_C(1) << 40) / (T * m->cfg.vocab_size))
        return trit_error(TRIT_ERR_INVALID, "gpt build: B * T * V = %lld * %lld * %lld logits is too large; lower the batch size",
                          (long long)B, (long long)T, (long long)m->cfg.vocab_size);
    if (m->dec)
        return trit_error(TRIT_ERR_STATE, "gpt build: the model decodes only (trit_gpt_make_decode_only dropped the f32 "
                          "values graphs compute with); load it again to train or evaluate through a graph");
    trit_status st = kind == BUILD_EVAL ? TRIT_OK : trit_gpt_attach_grads(m);
    if (st != TRIT_OK) return st;
    trit_graph *g = trit_graph_new_policy(&m->policy);
    if (!g) return trit_error(TRIT_ERR_INVALID, "gpt build: %s", trit_last_error());
    out->graph = g;
    trit_graph_set_plan_only(g, kind == BUILD_PLAN);
    build_forward(g, m, B, T, out);
    // A failed op leaves NULLs behind; compile then reports the first build error. Evaluation
    // compiles for inference with the loss kept: no backward, nothing held for one.
    trit_status s = TRIT_OK;
    if (kind == BUILD_LOGITS && out->logits) s = trit_graph_keep(g, out->logits);
    if (kind == BUILD_EVAL && out->loss) s = trit_graph_keep(g, out->loss);
    if (s == TRIT_OK) s = trit_graph_compile(g, kind == BUILD_EVAL ? NULL : out->loss);
    if (s != TRIT_OK) {
        trit_gpt_graph_free(out);
        return s;
    }
    // Without a keep, the compiler fuses the head and the loss: the logits never exist.
    if (kind != BUILD_LOGITS) out->logits = NULL;
    if (kind == BUILD_EVAL) trit_graph_set_training(g, false);
    return TRIT_OK;
}

trit_status trit_gpt_build(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out) {
    return build(m, B, T, BUILD_LOGITS, out);
}

trit_status trit_gpt_build_train(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out) {
    return build(m, B, T, BUILD_TRAIN, out);
}

trit_status trit_gpt_plan_train(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out) {
    return build(m, B, T, BUILD_PLAN, out);
}

trit_status trit_gpt_build_eval(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out) {
    return build(m, B, T, BUILD_EVAL, out);
}

void trit_gpt_graph_free(trit_gpt_graph *gg) {
    if (!gg) return;
    trit_graph_free(gg->graph);
    memset(gg, 0, sizeof *gg);
}
