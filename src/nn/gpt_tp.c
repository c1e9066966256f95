// Tensor-parallel shards of a GPT (Megatron-LM, Shoeybi et al. 2019): each block's c_attn split
// by heads and c_fc by hidden units (columns of their output), attn.c_proj and mlp.c_proj by the
// matching rows of their input, so attention and the MLP of a rank need no other rank's values
// until the projections' partial products are summed. The graph (gpt_graph.c) puts tp_copy
// before each column split and tp_reduce after each row split; everything else is whole on
// every rank and sees the same values, so its gradients are the same on every rank too.
#include "nn/gpt_internal.h"

#include <stdio.h>
#include <string.h>

// The part of a name after its block ("h.3.attn.c_attn.weight" -> "attn.c_attn.weight"), or NULL.
static const char *in_block(const char *name) {
    if (strncmp(name, "h.", 2) != 0) return NULL;
    const char *p = name + 2;
    while (*p >= '0' && *p <= '9') p++;
    return *p == '.' ? p + 1 : NULL;
}

trit_gpt_tp_split trit_gpt_tp_split_of(const char *name) {
    const char *r = name ? in_block(name) : NULL;
    if (!r) return (trit_gpt_tp_split){-1, 1};
    if (strcmp(r, "attn.c_attn.weight") == 0 || strcmp(r, "attn.c_attn.bias") == 0) return (trit_gpt_tp_split){0, 3};
    if (strcmp(r, "mlp.c_fc.weight") == 0 || strcmp(r, "mlp.c_fc.bias") == 0) return (trit_gpt_tp_split){0, 1};
    if (strcmp(r, "attn.c_proj.weight") == 0 || strcmp(r, "mlp.c_proj.weight") == 0) return (trit_gpt_tp_split){1, 1};
    return (trit_gpt_tp_split){-1, 1};
}

trit_status trit_gpt_tp_check(const trit_gpt_config *c, int size) {
    if (!c || size < 1) return trit_error(TRIT_ERR_INVALID, "tensor parallel: need a config and a group of >= 1 ranks");
    const int64_t hidden = trit_gpt_mlp_hidden(c);
    if (c->n_head % size != 0)
        return trit_error(TRIT_ERR_INVALID, "tensor parallel over %d ranks: --heads %lld is not divisible by %d (each "
                          "rank computes whole heads): pass --tp a divisor of the heads, or --heads a multiple of %d",
                          size, (long long)c->n_head, size, size);
    if (hidden % size != 0)
        return trit_error(TRIT_ERR_INVALID, "tensor parallel over %d ranks: the MLP's width %lld (4C) is not divisible "
                          "by %d: pass --tp a divisor of it", size, (long long)hidden, size);
    if (c->mlp == TRIT_MLP_SWIGLU || c->subln || c->adapter.kind != TRIT_ADAPTER_NONE)
        return trit_error(TRIT_ERR_UNSUPPORTED, "tensor parallel splits GPT-2's GELU MLP without SubLN or adapters: "
                          "drop --mlp swiglu, --subln, --lora and --adapter-type, or use --dist ddp");
    return TRIT_OK;
}

void trit_gpt_tp_copy_piece(trit_gpt_tp_split sp, int ndim, const int64_t *shape, size_t elem, void *whole, void *piece,
                            int rank, int size, bool to_whole) {
    const int64_t rows = shape[0], cols = ndim > 1 ? shape[1] : 1;
    uint8_t *w = whole, *p = piece;
    if (sp.dim == 0) {  // in each part, this rank's run of rows
        const int64_t part = rows / sp.parts, run = part / size;
        for (int64_t j = 0; j < sp.parts; j++) {
            uint8_t *at = w + (size_t)((j * part + rank * run) * cols) * elem;
            const size_t n = (size_t)(run * cols) * elem;
            if (to_whole) memcpy(at, p, n);
            else memcpy(p, at, n);
            p += n;
        }
    } else if (sp.dim == 1) {  // in each row, this rank's run of columns
        const int64_t run = cols / size;
        for (int64_t i = 0; i < rows; i++) {
            uint8_t *at = w + (size_t)(i * cols + rank * run) * elem;
            const size_t n = (size_t)run * elem;
            if (to_whole) memcpy(at, p, n);
            else memcpy(p, at, n);
            p += n;
        }
    } else if (to_whole) {
        memcpy(w, p, (size_t)(rows * cols) * elem);
    } else {
        memcpy(p, w, (size_t)(rows * cols) * elem);
    }
}

void trit_gpt_tp_of(const trit_gpt *m, int *rank, int *size) {
    *rank = m && m->tp_size > 1 ? m->tp_rank : 0;
    *size = m && m->tp_size > 1 ? m->tp_size : 1;
}

// Each parameter of the shard takes its piece of the whole model's, of the same name.
static trit_status take_pieces(trit_gpt *s, const trit_gpt *m) {
    for (int i = 0; i < s->n_tensors; i++) {
        trit_tensor *t = s->tensors[i];
        const trit_tensor *w = m->tensors[i];
        if (strcmp(t->name, w->name) != 0 || !w->data || w->dtype != TRIT_F32 || !trit_tensor_is_contiguous(w))
            return trit_error(TRIT_ERR_STATE, "tensor parallel: parameter %d of the whole model ('%s') is not the "
                              "shard's '%s' as a contiguous f32 tensor with values", i, w->name, t->name);
        trit_gpt_tp_copy_piece(trit_gpt_tp_split_of(t->name), w->ndim, w->shape, sizeof(float), trit_tensor_ptr(w),
                               trit_tensor_ptr(t), s->tp_rank, s->tp_size, false);
        t->flags = (t->flags & ~TRIT_FLAG_FROZEN) | (w->flags & TRIT_FLAG_FROZEN);
    }
    return TRIT_OK;
}

trit_gpt *trit_gpt_tp_shard(const trit_gpt *m, int rank, int size, const trit_allreduce *sum) {
    if (!m || !sum || !sum->fn || size < 1 || rank < 0 || rank >= size) {
        trit_error(TRIT_ERR_INVALID, "trit_gpt_tp_shard: need a model, an all-reduce and 0 <= rank < size");
        return NULL;
    }
    if (m->dec || m->quantized || m->qat_weights || m->qat_acts || m->tern || m->tp_size > 1) {
        trit_error(TRIT_ERR_UNSUPPORTED, "tensor parallel: the model is decode-only, quantized, under QAT or a shard "
                   "already; shard a plain f32 model");
        return NULL;
    }
    trit_gpt_config c = m->cfg;
    c.adapter = (trit_adapter_config){.kind = TRIT_ADAPTER_NONE};
    if (trit_gpt_tp_check(&m->cfg, size) != TRIT_OK) return NULL;
    trit_gpt *s = trit_gpt_new_tp_layout(&c, rank, size);
    if (!s) return NULL;
    s->tp_sum = *sum;
    s->policy = m->policy;
    s->recompute = m->recompute;
    s->recompute_blocks = m->recompute_blocks;
    trit_status st = s->n_tensors == m->n_tensors ? take_pieces(s, m)
                                                  : trit_error(TRIT_ERR_STATE, "tensor parallel: the shard has %d "
                                                               "parameters, the model %d", s->n_tensors, m->n_tensors);
    if (st != TRIT_OK) {
        trit_gpt_free(s);
        return NULL;
    }
    return s;
}
