// The decoder's cache: the KV cache and the program's row slots in one allocation, the buffers
// of a chunk's quantized inputs, and the weights in kernel form (gpt_weights.c): its own, or a
// decode-only model's.
#include "nn/gpt_cache.h"

#include <stdlib.h>
#include <string.h>

// Buffers of a chunk's input rows: quantized to int8 for the integer kernels (K up to maxk), and
// as f32 for the NF4 kernel's order or, under QAT's input quantization, fake-quantized.
static trit_status alloc_act_buffers(trit_gpt_cache *k, const trit_gpt *m, int64_t maxk) {
    int64_t maxf = maxk;
    for (int s = 0; m->qat_acts && s < m->n_prog; s++)
        if (m->prog[s].block_matrix && m->tensors[m->prog[s].w]->shape[1] > maxf) maxf = m->tensors[m->prog[s].w]->shape[1];
    if ((maxk && (!(k->xq = trit_aligned_alloc((size_t)(ROWS * maxk))) || !(k->xscale = malloc(sizeof(float) * ROWS)) ||
                  !(k->xgsum = malloc(sizeof(int32_t) * (size_t)(ROWS * maxk / 64))))) ||
        (maxf && !(k->xf = trit_aligned_alloc(sizeof(float) * (size_t)(ROWS * maxf)))))
        return trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory for quantized inputs");
    return TRIT_OK;
}

// Whether the decoder multiplies a prompt by matrix i's decoded values: a weight-only (NF4, FP8)
// matrix that keeps no f32 values (a decode-only model's).
bool trit_gpt_cache_decodes(const trit_gpt_cache *k, int i) {
    const trit_tensor *q = k->w->qscales && k->w->qscales[i] ? trit_gpt_cache_quantized(k, i) : NULL;
    return q && (q->dtype == TRIT_NF4 || q->dtype == TRIT_F8_E4M3 || q->dtype == TRIT_F8_E5M2) && !trit_gpt_cache_f32(k, i);
}

// The residual stream of a whole context, and room for the most weight-only values one block's
// steps decode.
static trit_status alloc_prompt_buffers(trit_gpt_cache *k, const trit_gpt *m) {
    int64_t most = 0, in_block = 0;
    for (int s = 0; s < m->n_prog; s++) {
        if (s > 0 && m->prog[s].block != m->prog[s - 1].block) in_block = 0;
        const gpt_step *st = &m->prog[s];
        if (st->op == GPT_OP_LINEAR && trit_gpt_cache_decodes(k, st->w))  // the head takes one row
            in_block += (trit_tensor_numel(m->tensors[st->w]) + 15) / 16 * 16;
        if (in_block > most) most = in_block;
    }
    if (!(k->xs = trit_aligned_alloc(sizeof(float) * (size_t)(m->cfg.seq_len * m->slot_width[GPT_X]))) ||
        (most && (!(k->wdec = trit_aligned_alloc(sizeof(float) * (size_t)most)) ||
                  !(k->wdec_at = malloc(sizeof(int64_t) * (size_t)m->n_tensors)))))
        return trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory for a prompt's buffers");
    return TRIT_OK;
}

trit_gpt_cache *trit_gpt_cache_new(const trit_gpt *m) { return trit_gpt_cache_new_kv(m, TRIT_F32); }

trit_gpt_cache *trit_gpt_cache_new_kv(const trit_gpt *m, trit_dtype kv) {
    if (!m || (kv != TRIT_F32 && kv != TRIT_F16)) {
        trit_error(TRIT_ERR_INVALID, m ? "gpt cache: keys and values are stored in f32 or f16, not %s"
                                       : "gpt cache: NULL model", trit_dtype_name(kv));
        return NULL;
    }
    if (m->tp_size > 1) {
        trit_error(TRIT_ERR_UNSUPPORTED, "gpt cache: the model is a tensor-parallel shard (rank %d of %d), which runs "
                   "through graphs only: decode the whole model", m->tp_rank, m->tp_size);
        return NULL;
    }
    const trit_gpt_config *c = &m->cfg;
    const int64_t L = c->n_layer, T = c->seq_len, C = c->n_embd;
    const int64_t keys = L * C * trit_gpt_key_positions(c), values = L * T * C;  // elements, stored in kv
    enum { NBUF = 3 + GPT_NUM_SLOTS };
    // Sizes in floats (keys, values, probabilities, the slots); each rounded up to 16 floats so
    // every buffer starts 64-byte aligned.
    int64_t sizes[NBUF] = {kv == TRIT_F16 ? (keys + 1) / 2 : keys, kv == TRIT_F16 ? (values + 1) / 2 : values, c->n_head * T};
    for (int s = 0; s < GPT_NUM_SLOTS; s++) sizes[3 + s] = ROWS * m->slot_width[s];
    int64_t total = 0;
    for (int i = 0; i < NBUF; i++) total += (sizes[i] + 15) / 16 * 16;
    trit_gpt_cache *k = calloc(1, sizeof *k);
    void *block = k ? trit_pages_alloc(sizeof(float) * (size_t)total) : NULL;  // huge pages for the streamed KV
    if (!block) {
        free(k);
        trit_error(TRIT_ERR_NOMEM, "gpt cache: cannot allocate %lld floats for %lld layers x %lld positions",
                   (long long)total, (long long)L, (long long)T);
        return NULL;
    }
    void *kv_at[2];
    float **dst[NBUF] = {(float **)&kv_at[0], (float **)&kv_at[1], &k->p};
    for (int s = 0; s < GPT_NUM_SLOTS; s++) dst[3 + s] = &k->slot[s];
    float *at = block;
    for (int i = 0; i < NBUF; i++) {
        *dst[i] = at;
        at += (sizes[i] + 15) / 16 * 16;
    }
    k->k = kv_at[0], k->v = kv_at[1], k->kv = kv;
    k->m = m;
    if (c->pos == TRIT_POS_ROPE && !(k->rope = malloc(sizeof(double) * (size_t)(ROWS * (C / c->n_head))))) {
        trit_pages_free(block, sizeof(float) * (size_t)total);
        free(k);
        trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory");
        return NULL;
    }
    k->block = block;
    k->block_bytes = sizeof(float) * (size_t)total;
    if (m->dec) {
        k->w = m->dec;
    } else {
        k->w = &k->own;
        if (trit_gpt_weights_make(&k->own, m) != TRIT_OK) {
            trit_gpt_cache_free(k);
            return NULL;
        }
    }
    const int64_t r = m->cfg.adapter.kind != TRIT_ADAPTER_NONE ? m->cfg.adapter.r : 0;
    const bool bottleneck = m->cfg.adapter.kind == TRIT_ADAPTER_BOTTLENECK;
    if ((r && !(k->lora = malloc(sizeof(float) * (size_t)(2 * ROWS * r)))) ||
        (bottleneck && !(k->xf_adapter = malloc(sizeof(float) * (size_t)(ROWS * C))))) {
        trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory for the adapters' products");
        trit_gpt_cache_free(k);
        return NULL;
    }
    if (alloc_act_buffers(k, m, k->w->maxk) != TRIT_OK || alloc_prompt_buffers(k, m) != TRIT_OK) {
        trit_gpt_cache_free(k);
        return NULL;
    }
    return k;
}

void trit_gpt_cache_free(trit_gpt_cache *c) {
    if (!c) return;
    trit_pages_free(c->block, c->block_bytes);
    free(c->rope);
    trit_gpt_weights_free(&c->own);
    trit_aligned_free(c->xq);
    free(c->xscale);
    free(c->xgsum);
    trit_aligned_free(c->xf);
    trit_aligned_free(c->xs);
    trit_aligned_free(c->wdec);
    free(c->wdec_at);
    free(c->lora);
    free(c->xf_adapter);
    free(c);
}

void trit_gpt_cache_reset(trit_gpt_cache *c) {
    if (c) c->len = 0;
}

int64_t trit_gpt_cache_len(const trit_gpt_cache *c) { return c ? c->len : 0; }

