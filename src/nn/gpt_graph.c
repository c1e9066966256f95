// The GPT training graph:
//   x = wte[idx] (+ wpe[0:T] with learned positions), dropout
//   per block: x = x + dropout(c_proj(attention(norm_1(x))))
//              x = x + dropout(mlp(norm_2(x)))
//   (with SubLN, c_proj's input is normalised first in both sub-layers)
//   logits = norm_f(x) wte^T (the head is tied to the token embedding), loss = mean cross-entropy
//   over targets != -1.
// Attention: c_attn gives (B, T, 3C), split into q, k, v on the last axis (views, no copy),
// RoPE on q and k when configured, causal attention (flash unless naive_attention), then c_proj.
#include "nn/gpt_internal.h"
#include "trit/ops.h"

#include <string.h>

static trit_tensor *norm(trit_graph *g, const trit_gpt *m, trit_tensor *x, trit_tensor *w, trit_tensor *b) {
    if (m->cfg.norm == TRIT_NORM_RMS) return trit_rmsnorm(g, x, w, m->cfg.norm_eps);
    return trit_layernorm(g, x, w, b, m->cfg.norm_eps);
}

static trit_tensor *dropout(trit_graph *g, const trit_gpt *m, trit_tensor *x) {
    return m->cfg.dropout > 0.0 ? trit_dropout(g, x, m->cfg.dropout) : x;
}

// x W^T + b for a matrix inside a block, through fake quantization under QAT.
static trit_tensor *linear(trit_graph *g, const trit_gpt *m, trit_tensor *x, trit_tensor *w, trit_tensor *b) {
    if (m->qat_acts) x = trit_fake_quant(g, x, &m->qat_a, NULL);
    if (m->qat_weights) w = trit_fake_quant(g, w, &m->qat_w, NULL);
    return trit_linear(g, x, w, b);
}

static trit_tensor *attention(trit_graph *g, const trit_gpt *m, const trit_gpt_block *k, trit_tensor *x) {
    const int64_t C = m->cfg.n_embd;
    const int H = (int)m->cfg.n_head;
    trit_tensor *qkv = linear(g, m, x, k->attn_w, k->attn_b);  // (B, T, 3C)
    trit_tensor *part[3] = {NULL, NULL, NULL};
    const int64_t sizes[3] = {C, C, C};
    if (trit_split(g, qkv, 2, 3, sizes, part) != TRIT_OK) return NULL;
    if (m->cfg.pos == TRIT_POS_ROPE) {
        part[0] = trit_rope(g, part[0], H, m->cfg.rope_theta);
        part[1] = trit_rope(g, part[1], H, m->cfg.rope_theta);
    }
    trit_tensor *y = m->cfg.naive_attention ? trit_attention(g, part[0], part[1], part[2], H)
                                            : trit_flash_attention(g, part[0], part[1], part[2], H);  // (B, T, C)
    if (k->sub1_w) y = norm(g, m, y, k->sub1_w, k->sub1_b);
    return linear(g, m, y, k->proj_w, k->proj_b);
}

static trit_tensor *mlp(trit_graph *g, const trit_gpt *m, const trit_gpt_block *k, trit_tensor *x) {
    trit_tensor *h = linear(g, m, x, k->fc_w, k->fc_b);  // (B, T, hidden) or (B, T, 2 hidden)
    if (m->cfg.mlp == TRIT_MLP_SWIGLU) {
        trit_tensor *part[2] = {NULL, NULL};
        const int64_t sizes[2] = {m->hidden, m->hidden};
        if (trit_split(g, h, 2, 2, sizes, part) != TRIT_OK) return NULL;
        h = trit_swiglu(g, part[0], part[1]);
    } else {
        h = trit_gelu(g, h);
    }
    if (k->sub2_w) h = norm(g, m, h, k->sub2_w, k->sub2_b);  // (B, T, hidden)
    return linear(g, m, h, k->mlp_w, k->mlp_b);
}

// Adds the model's forward and loss to g; fills out's tensors (NULL on a build error, which the
// graph remembers).
static void build_forward(trit_graph *g, const trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out) {
    const int64_t bt[2] = {B, T};
    out->idx = trit_graph_input(g, TRIT_I32, 2, bt, "idx");
    out->targets = trit_graph_input(g, TRIT_I32, 2, bt, "targets");
    trit_tensor *x = trit_embedding(g, m->wte, out->idx);  // (B, T, C)
    if (m->wpe) x = trit_add(g, x, trit_slice(g, m->wpe, 0, 0, T));
    x = dropout(g, m, x);
    for (int64_t i = 0; i < m->cfg.n_layer; i++) {
        const trit_gpt_block *k = &m->blocks[i];
        x = trit_add(g, x, dropout(g, m, attention(g, m, k, norm(g, m, x, k->ln1_w, k->ln1_b))));
        x = trit_add(g, x, dropout(g, m, mlp(g, m, k, norm(g, m, x, k->ln2_w, k->ln2_b))));
    }
    x = norm(g, m, x, m->lnf_w, m->lnf_b);
    out->logits = trit_linear(g, x, m->wte, NULL);  // (B, T, V)
    out->loss = trit_cross_entropy(g, out->logits, out->targets, -1, TRIT_REDUCE_MEAN);
}

static trit_status build(trit_gpt *m, int64_t B, int64_t T, bool keep_logits, trit_gpt_graph *out) {
    if (!out) return trit_error(TRIT_ERR_INVALID, "gpt build: NULL output struct");
    memset(out, 0, sizeof *out);
    if (!m) return trit_error(TRIT_ERR_INVALID, "gpt build: NULL model");
    if (B < 1 || T < 1 || T > m->cfg.seq_len)
        return trit_error(TRIT_ERR_INVALID, "gpt build: need B >= 1 and 1 <= T <= seq_len = %lld, got B = %lld, T = %lld",
                          (long long)m->cfg.seq_len, (long long)B, (long long)T);
    if (B > (INT64_C(1) << 40) / (T * m->cfg.vocab_size))
        return trit_error(TRIT_ERR_INVALID, "gpt build: B * T * V = %lld * %lld * %lld logits is too large; lower the batch size",
                          (long long)B, (long long)T, (long long)m->cfg.vocab_size);
    trit_graph *g = trit_graph_new_policy(&m->policy);
    if (!g) return trit_error(TRIT_ERR_INVALID, "gpt build: %s", trit_last_error());
    out->graph = g;
    build_forward(g, m, B, T, out);
    // A failed op leaves NULLs behind; compile then reports the first build error.
    trit_status s = out->logits && keep_logits ? trit_graph_keep(g, out->logits) : TRIT_OK;
    if (s == TRIT_OK) s = trit_graph_compile(g, out->loss);
    if (s != TRIT_OK) {
        trit_gpt_graph_free(out);
        return s;
    }
    // Without a keep, the compiler fuses the head and the loss: the logits never exist.
    if (!keep_logits) out->logits = NULL;
    return TRIT_OK;
}

trit_status trit_gpt_build(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out) {
    return build(m, B, T, true, out);
}

trit_status trit_gpt_build_train(trit_gpt *m, int64_t B, int64_t T, trit_gpt_graph *out) {
    return build(m, B, T, false, out);
}

void trit_gpt_graph_free(trit_gpt_graph *gg) {
    if (!gg) return;
    trit_graph_free(gg->graph);
    memset(gg, 0, sizeof *gg);
}
