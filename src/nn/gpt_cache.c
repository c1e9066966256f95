// The decoder's cache: the KV cache and the program's row slots in one allocation, f32 copies of
// 16-bit parameters, and every quantized matrix in the form its kernel reads (scales as f32,
// ternary codes of other dtypes repacked, integer codes in panels, QAT's block matrices frozen).
#include "nn/gpt_cache.h"

#include "kernels/qgemm.h"
#include "trit/quant.h"

#include <stdlib.h>
#include <string.h>

// Whether the decoder multiplies by q's codes: integer kernels (qint8/qint4/ternary, inputs
// quantized per token; plain layout or panels) or the weight-only NF4 and FP8 kernels (f32
// inputs), each with its group rule.
static bool kernel_takes(trit_dtype dt, int64_t K, int64_t G) {
    if (dt == TRIT_NF4) return G % 64 == 0 && K % G == 0;
    if (dt == TRIT_F8_E4M3 || dt == TRIT_F8_E5M2) return trit_fp8_gemm_supported(dt, K, G);
    return trit_qgemm_supported(dt, K, G) || trit_qpanels_supported(dt, K, G);
}

// Whether the integer codes go into panels: where the CPU has a panel kernel, and always when
// only panels take the groups (ternary in groups of 64: the portable panel kernel beats f32).
static bool use_panels(trit_dtype dt, int64_t K, int64_t G) {
    return trit_qpanels_supported(dt, K, G) && (trit_qpanels_preferred(dt) || !trit_qgemm_supported(dt, K, G));
}

// A model with 16-bit parameters is decoded from f32 copies taken now: a cache sees the
// parameters as they were when it was made (training code makes a new cache per evaluation).
static trit_status copy_params(trit_gpt_cache *k, const trit_gpt *m) {
    bool all_f32 = true;
    for (int i = 0; i < m->n_tensors; i++) all_f32 &= m->tensors[i]->dtype == TRIT_F32;
    if (all_f32) return TRIT_OK;
    if (!(k->f32 = calloc((size_t)m->n_tensors, sizeof *k->f32)))
        return trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory");
    for (int i = 0; i < m->n_tensors; i++) {
        const trit_tensor *t = m->tensors[i];
        const int64_t n = trit_tensor_numel(t);
        if (!(k->f32[i] = trit_aligned_alloc(sizeof(float) * (size_t)(n ? n : 1))))
            return trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory for an f32 copy of '%s'", t->name);
        trit_dtype_traits_of(t->dtype)->to_f32(k->f32[i], trit_tensor_ptr(t), n, NULL, 0);
    }
    return TRIT_OK;
}

// Whether q's codes are ternary in another dtype: base 3 (1.6 bits), or symmetric int2 whose codes
// are all in {-1, 0, 1}. trit's symmetric int2 encoder clamps to [-1, 1]; a -2 (stored 0) can only
// come from a file written elsewhere, and keeps the matrix on the f32 path.
static bool ternary_in_disguise(const trit_tensor *q) {
    if (q->ndim != 2) return false;
    if (q->dtype == TRIT_TERNARY_B3) return true;
    if (q->dtype != TRIT_QINT2 || q->quant->zero_points) return false;
    const uint8_t *p = trit_tensor_ptr(q);
    const int64_t n = trit_tensor_numel(q);
    for (int64_t k = 0; k < n; k++)
        if (((p[k >> 2] >> ((k & 3) * 2)) & 3) == 0) return false;
    return true;
}

// Ternary codes in another dtype (ternary_in_disguise) repacked losslessly into the 2-bit layout
// the ternary kernels read, with the same scales; NULL when out of memory.
static trit_tensor *repack_ternary(const trit_tensor *q) {
    const int64_t n = trit_tensor_numel(q), gs = q->quant->group_size;
    trit_tensor *t = trit_tensor_new(TRIT_TERNARY, q->ndim, q->shape);
    trit_quant_info *qi = t ? trit_quant_info_new(n, gs, false, 0) : NULL;
    float *v = qi ? malloc(sizeof(float) * (size_t)n) : NULL;
    if (!t || !qi || !v) {
        trit_quant_info_free(qi);
        trit_tensor_free(t);
        free(v);
        return NULL;
    }
    if (trit_tensor_set_quant(t, qi) != TRIT_OK) {  // frees qi
        trit_tensor_free(t);
        free(v);
        return NULL;
    }
    for (int64_t g = 0; g < qi->num_groups; g++) qi->scales[g] = trit_quant_info_scale(q->quant, g);
    trit_dtype_traits_of(q->dtype)->to_f32(v, trit_tensor_ptr(q), n, q->quant, 0);
    trit_dtype_traits_of(TRIT_TERNARY)->from_f32(trit_tensor_ptr(t), v, n, qi, 0);  // codes {-1, 0, 1} exactly
    free(v);
    return t;
}

const trit_tensor *trit_gpt_cache_quantized(const trit_gpt_cache *k, int i) {
    if (i < 0) return NULL;
    if (k->repacked && k->repacked[i]) return k->repacked[i];
    if (k->frozen && k->frozen[i]) return k->frozen[i];
    return k->m->quantized ? k->m->quantized[i] : NULL;
}

const float *trit_gpt_cache_f32(const trit_gpt_cache *k, int i) {
    if (i < 0) return NULL;
    if (k->frozen_f32 && k->frozen_f32[i]) return k->frozen_f32[i];
    if (k->f32) return k->f32[i];
    const trit_tensor *t = k->m->tensors[i];
    return (const float *)t->data + t->offset;
}

// The spec trit_train_freeze_qat quantizes QAT's block matrices with: the codes the fake
// quantization of the weights rounds to.
static trit_quant_spec freeze_spec(const trit_fake_quant_spec *w) {
    if (w->mode == TRIT_FQ_TERNARY) return trit_quant_spec_default(TRIT_TERNARY);
    trit_quant_spec s = trit_quant_spec_default(w->dtype);
    s.group_size = w->group_size;
    return s;
}

// Under QAT the decoder multiplies by the block matrices as training's graph sees them: each
// quantized by the freeze rule into the cache's own copy.
static trit_status freeze_qat(trit_gpt_cache *k, const trit_gpt *m) {
    if (!m->qat_weights) return TRIT_OK;
    if (!(k->frozen = calloc((size_t)m->n_tensors, sizeof *k->frozen)) ||
        !(k->frozen_f32 = calloc((size_t)m->n_tensors, sizeof *k->frozen_f32)))
        return trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory");
    const trit_quant_spec spec = freeze_spec(&m->qat_w);
    for (int s = 0; s < m->n_prog; s++) {
        const int i = m->prog[s].w;
        if (!m->prog[s].block_matrix || k->frozen[i]) continue;
        const trit_tensor *t = m->tensors[i];
        trit_tensor *latent = trit_tensor_wrap(TRIT_F32, t->ndim, t->shape, (void *)trit_gpt_cache_f32(k, i));
        k->frozen[i] = latent ? trit_quantize(latent, &spec) : NULL;
        trit_tensor_free(latent);
        if (!k->frozen[i]) return trit_error(TRIT_ERR_NOMEM, "gpt cache: cannot freeze '%s' as trained: %s", t->name, trit_last_error());
    }
    return TRIT_OK;
}

// A frozen matrix no kernel takes is multiplied in f32 by its decoded values.
static trit_status decode_frozen(trit_gpt_cache *k, int i) {
    trit_tensor *d = trit_dequantize(k->frozen[i]);
    if (!d) return trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory");
    const int64_t n = trit_tensor_numel(d);
    k->frozen_f32[i] = trit_aligned_alloc(sizeof(float) * (size_t)n);
    if (k->frozen_f32[i]) memcpy(k->frozen_f32[i], d->data, sizeof(float) * (size_t)n);
    trit_tensor_free(d);
    return k->frozen_f32[i] ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory");
}

// Which quantized copies (attached, or frozen under QAT) the kernels multiply with; their scales as f32.
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

static trit_status setup_quantized(trit_gpt_cache *k, const trit_gpt *m) {
    int64_t maxk = 0;
    if (!m->quantized && !k->frozen) return alloc_act_buffers(k, m, maxk);
    k->qscales = calloc((size_t)m->n_tensors, sizeof *k->qscales);
    k->qgroup = calloc((size_t)m->n_tensors, sizeof *k->qgroup);
    k->repacked = calloc((size_t)m->n_tensors, sizeof *k->repacked);
    if (!k->qscales || !k->qgroup || !k->repacked) goto oom;
    for (int i = 0; i < m->n_tensors; i++) {
        const trit_tensor *own = trit_gpt_cache_quantized(k, i);
        if (own && ternary_in_disguise(own) && !(k->repacked[i] = repack_ternary(own))) goto oom;
        const trit_tensor *q = trit_gpt_cache_quantized(k, i);
        if (!q) continue;
        const int64_t K = q->ndim == 2 ? q->shape[1] : 0, gs = q->quant->group_size;
        const int64_t N = q->shape[0], G = gs > K && K > 0 && gs % K == 0 ? K : gs;
        if (q->ndim != 2 || q->quant->zero_points || !kernel_takes(q->dtype, K, G)) {  // f32 path: a repack would go unused
            trit_tensor_free(k->repacked[i]);
            k->repacked[i] = NULL;
            if (k->frozen && k->frozen[i] && decode_frozen(k, i) != TRIT_OK) return TRIT_ERR_NOMEM;
            continue;
        }
        if (!(k->qscales[i] = malloc(sizeof(float) * (size_t)(N * (K / G))))) goto oom;
        for (int64_t j = 0; j < N * (K / G); j++) k->qscales[i][j] = trit_quant_info_scale(q->quant, j * G / gs);
        k->qgroup[i] = G;
        if (K > maxk) maxk = K;
        if (use_panels(q->dtype, K, G)) {
            if (!k->panels && !(k->panels = calloc((size_t)m->n_tensors, sizeof *k->panels))) goto oom;
            if (trit_qpanels_pack(q->dtype, N, K, G, trit_tensor_ptr(q), k->qscales[i], &k->panels[i]) != TRIT_OK)
                return trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory for the panels of '%s'",
                                  m->tensors[i]->name);
            trit_tensor_free(k->repacked[i]);
            k->repacked[i] = NULL;
        }
    }
    return alloc_act_buffers(k, m, maxk);
oom:
    return trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory for quantized weights");
}

trit_gpt_cache *trit_gpt_cache_new(const trit_gpt *m) { return trit_gpt_cache_new_kv(m, TRIT_F32); }

trit_gpt_cache *trit_gpt_cache_new_kv(const trit_gpt *m, trit_dtype kv) {
    if (!m || (kv != TRIT_F32 && kv != TRIT_F16)) {
        trit_error(TRIT_ERR_INVALID, m ? "gpt cache: keys and values are stored in f32 or f16, not %s"
                                       : "gpt cache: NULL model", trit_dtype_name(kv));
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
    void *block = k ? trit_aligned_alloc(sizeof(float) * (size_t)total) : NULL;
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
        trit_aligned_free(block);
        free(k);
        trit_error(TRIT_ERR_NOMEM, "gpt cache: out of memory");
        return NULL;
    }
    k->block = block;
    if (copy_params(k, m) != TRIT_OK || freeze_qat(k, m) != TRIT_OK || setup_quantized(k, m) != TRIT_OK) {
        trit_gpt_cache_free(k);
        return NULL;
    }
    return k;
}

void trit_gpt_cache_free(trit_gpt_cache *c) {
    if (!c) return;
    trit_aligned_free(c->block);
    free(c->rope);
    for (int i = 0; c->f32 && i < c->m->n_tensors; i++) trit_aligned_free(c->f32[i]);
    free(c->f32);
    for (int i = 0; c->qscales && i < c->m->n_tensors; i++) free(c->qscales[i]);
    free(c->qscales);
    free(c->qgroup);
    for (int i = 0; c->repacked && i < c->m->n_tensors; i++) trit_tensor_free(c->repacked[i]);
    free(c->repacked);
    for (int i = 0; c->frozen && i < c->m->n_tensors; i++) {
        trit_tensor_free(c->frozen[i]);
        trit_aligned_free(c->frozen_f32[i]);
    }
    free(c->frozen);
    free(c->frozen_f32);
    for (int i = 0; c->panels && i < c->m->n_tensors; i++) trit_qpanels_free(&c->panels[i]);
    free(c->panels);
    trit_aligned_free(c->xq);
    free(c->xscale);
    free(c->xgsum);
    trit_aligned_free(c->xf);
    free(c);
}

void trit_gpt_cache_reset(trit_gpt_cache *c) {
    if (c) c->len = 0;
}

int64_t trit_gpt_cache_len(const trit_gpt_cache *c) { return c ? c->len : 0; }

