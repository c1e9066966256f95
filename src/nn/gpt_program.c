// The GPT written once: the program of steps both the training graph and the decoder run.
//   EMBED                       X = wte[idx] (+ wpe), dropout
//   per block l:  NORM ln_1     H = norm(X)
//                 LINEAR c_attn QKV = H W^T + b
//                 ROPE          (rotary positions only) q, k of QKV rotated
//                 ATTEND        Y = causal attention(QKV)
//                 NORM sub_norm (SubLN only) Z = norm(Y)
//                 LINEAR c_proj H = Y (or Z) W^T + b
//                 RESIDUAL      X += dropout(H)
//                 NORM ln_2     H = norm(X)
//                 LINEAR c_fc   FC = H W^T + b
//                 GELU|SWIGLU   ACT = act(FC)
//                 NORM sub_norm (SubLN only) Z = norm(ACT)
//                 LINEAR c_proj Y = ACT (or Z) W^T + b
//                 RESIDUAL      X += dropout(Y)
//   NORM ln_f, HEAD             logits = norm(X) wte^T
// With adapters (nn/lora.c): each LINEAR of a LoRA-targeted matrix names its pair (la, lb), and
// a bottleneck adapter is an ADAPTER step (H or Y += up(gelu(down ...))) before each RESIDUAL.
// Each dropout's stream is a hash of its place ("h.3.attn.dropout"), so masks follow the model's
// structure and nothing else.
#include "nn/gpt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int trit_gpt_index_of(const trit_gpt *m, const trit_tensor *t) {
    for (int i = 0; t && i < m->n_tensors; i++)
        if (m->tensors[i] == t) return i;
    return -1;
}

typedef struct prog_builder {
    trit_gpt *m;
    int n, cap;
    int block;
    bool full;    // a step did not fit (cap is the longest program a config can give)
    bool broken;  // an adapter without some of its parameters
} prog_builder;

static gpt_step *emit(prog_builder *p, gpt_op op, gpt_slot src, gpt_slot dst, int64_t width) {
    if (p->n == p->cap) {
        p->full = true;
        return NULL;
    }
    gpt_step *s = &p->m->prog[p->n++];
    *s = (gpt_step){.op = op, .src = src, .dst = dst, .w = -1, .b = -1, .w2 = -1, .width = width, .block = p->block,
                    .la = -1, .lb = -1};
    if (op != GPT_OP_HEAD && width > p->m->slot_width[dst]) p->m->slot_width[dst] = width;  // logits are the caller's
    return s;
}

static void with(prog_builder *p, gpt_step *s, const trit_tensor *w, const trit_tensor *b) {
    if (!s) return;
    s->w = trit_gpt_index_of(p->m, w);
    s->b = trit_gpt_index_of(p->m, b);
}

static void norm(prog_builder *p, gpt_slot src, gpt_slot dst, const trit_tensor *w, const trit_tensor *b) {
    with(p, emit(p, GPT_OP_NORM, src, dst, w->shape[0]), w, b);
}

// The index of the parameter named "<stem><suffix>", -1 when the model has none.
static int find_named(const trit_gpt *m, const char *stem, size_t n, const char *suffix) {
    char name[TRIT_NAME_MAX + 32];
    snprintf(name, sizeof name, "%.*s%s", (int)n, stem, suffix);
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i]->name, name) == 0) return i;
    return -1;
}

// A block matrix W ("h.3.attn.c_attn.weight") with its LoRA pair when the model has one, and
// its split under tensor parallelism.
static void linear(prog_builder *p, gpt_slot src, gpt_slot dst, const trit_tensor *w, const trit_tensor *b,
                   gpt_tp_split tp) {
    gpt_step *s = emit(p, GPT_OP_LINEAR, src, dst, w->shape[0]);
    with(p, s, w, b);
    if (!s) return;
    s->block_matrix = true;
    s->tp = tp;
    const size_t n = strlen(w->name) - strlen(".weight");  // the module's name
    if (p->m->cfg.adapter.kind != TRIT_ADAPTER_LORA) return;
    s->la = find_named(p->m, w->name, n, ".lora_A.weight");
    s->lb = find_named(p->m, w->name, n, ".lora_B.weight");
    if ((s->la < 0) != (s->lb < 0)) p->broken = true;
    s->lora_stream = trit_gpt_name_stream(w->name) ^ trit_gpt_name_stream("lora_dropout");
}

// A sub-layer's output into the residual stream, through its bottleneck adapter when the
// model has one ("h.3.attn.adapter.down.weight", ...).
static void residual(prog_builder *p, gpt_slot src, const char *role) {
    char name[64];
    snprintf(name, sizeof name, "h.%d.%s.adapter.", p->block, role);
    const int down = p->m->cfg.adapter.kind == TRIT_ADAPTER_BOTTLENECK ? find_named(p->m, name, strlen(name), "down.weight") : -1;
    if (down >= 0) {
        gpt_step *a = emit(p, GPT_OP_ADAPTER, src, src, p->m->cfg.n_embd);
        if (a) {
            a->w = down;
            a->b = find_named(p->m, name, strlen(name), "down.bias");
            a->la = find_named(p->m, name, strlen(name), "up.weight");
            a->lb = find_named(p->m, name, strlen(name), "up.bias");
            if (a->b < 0 || a->la < 0 || a->lb < 0) p->broken = true;
        }
    }
    gpt_step *s = emit(p, GPT_OP_RESIDUAL, src, GPT_X, p->m->cfg.n_embd);
    snprintf(name, sizeof name, "h.%d.%s.dropout", p->block, role);
    if (s) s->stream = trit_gpt_name_stream(name);
}

static void block(prog_builder *p, const trit_gpt_block *k) {
    const trit_gpt_config *c = &p->m->cfg;
    const int64_t C = c->n_embd, hid = p->m->hidden;
    norm(p, GPT_X, GPT_H, k->ln1_w, k->ln1_b);
    linear(p, GPT_H, GPT_QKV, k->attn_w, k->attn_b, GPT_TP_COLUMN);
    if (c->pos == TRIT_POS_ROPE) emit(p, GPT_OP_ROPE, GPT_QKV, GPT_QKV, 3 * C);
    emit(p, GPT_OP_ATTEND, GPT_QKV, GPT_Y, C);
    gpt_slot in = GPT_Y;
    if (k->sub1_w) norm(p, GPT_Y, in = GPT_Z, k->sub1_w, k->sub1_b);
    linear(p, in, GPT_H, k->proj_w, k->proj_b, GPT_TP_ROW);
    residual(p, GPT_H, "attn");
    norm(p, GPT_X, GPT_H, k->ln2_w, k->ln2_b);
    linear(p, GPT_H, GPT_FC, k->fc_w, k->fc_b, GPT_TP_COLUMN);
    emit(p, c->mlp == TRIT_MLP_SWIGLU ? GPT_OP_SWIGLU : GPT_OP_GELU, GPT_FC, GPT_ACT, hid);
    in = GPT_ACT;
    if (k->sub2_w) norm(p, GPT_ACT, in = GPT_Z, k->sub2_w, k->sub2_b);
    linear(p, in, GPT_Y, k->mlp_w, k->mlp_b, GPT_TP_ROW);
    residual(p, GPT_Y, "mlp");
}

trit_status trit_gpt_program_build(trit_gpt *m) {
    const int64_t L = m->cfg.n_layer;
    prog_builder p = {.m = m, .cap = (int)(16 * L + 4), .block = -1};
    free(m->prog);
    if (!(m->prog = calloc((size_t)p.cap, sizeof *m->prog))) return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory");
    for (int s = 0; s < GPT_NUM_SLOTS; s++) m->slot_width[s] = 0;
    gpt_step *e = emit(&p, GPT_OP_EMBED, GPT_X, GPT_X, m->cfg.n_embd);
    with(&p, e, m->wte, NULL);
    e->w2 = trit_gpt_index_of(m, m->wpe);
    e->stream = trit_gpt_name_stream("embedding.dropout");
    for (p.block = 0; p.block < L; p.block++) block(&p, &m->blocks[p.block]);
    norm(&p, GPT_X, GPT_H, m->lnf_w, m->lnf_b);
    with(&p, emit(&p, GPT_OP_HEAD, GPT_H, GPT_H, m->cfg.vocab_size), m->wte, NULL);
    m->n_prog = p.n;
    if (p.broken) return trit_error(TRIT_ERR_STATE, "gpt: an adapter is missing some of its parameters");
    if (p.full) return trit_error(TRIT_ERR_STATE, "gpt: the program outgrew its %d steps", p.cap);
    return TRIT_OK;
}
