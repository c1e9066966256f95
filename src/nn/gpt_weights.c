// Every weight of a model in the form its decoding kernel reads: f32 copies of 16-bit
// parameters, group scales as f32, ternary codes of other dtypes repacked to 2 bits, integer codes
// in 16-row panels, QAT's block matrices frozen by the freeze rule. A cache makes its own; a
// decode-only model (trit_gpt_make_decode_only) makes them once, keeps no f32 copy of a weight a
// kernel multiplies with and no codes its panels replaced, and its caches share them.
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

// A model with 16-bit parameters (all, or an adapter's) is decoded from f32 copies of those taken
// now: a cache sees the parameters as they were when it was made (training code makes a new
// cache per evaluation).
static trit_status copy_params(gpt_weights *k, const trit_gpt *m) {
    bool all_f32 = true;
    for (int i = 0; i < m->n_tensors; i++) all_f32 &= m->tensors[i]->dtype == TRIT_F32;
    if (all_f32) return TRIT_OK;
    if (!(k->f32 = calloc((size_t)m->n_tensors, sizeof *k->f32)))
        return trit_error(TRIT_ERR_NOMEM, "gpt decoder: out of memory");
    for (int i = 0; i < m->n_tensors; i++) {
        const trit_tensor *t = m->tensors[i];
        const int64_t n = trit_tensor_numel(t);
        if (t->dtype == TRIT_F32 || !t->data) continue;  // read in place; a quantized base's matrix has codes only
        if (!(k->f32[i] = trit_aligned_alloc(sizeof(float) * (size_t)(n ? n : 1))))
            return trit_error(TRIT_ERR_NOMEM, "gpt decoder: out of memory for an f32 copy of '%s'", t->name);
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

const trit_tensor *trit_gpt_weights_quantized(const gpt_weights *k, const trit_gpt *m, int i) {
    if (i < 0) return NULL;
    if (k->repacked && k->repacked[i]) return k->repacked[i];
    if (k->frozen && k->frozen[i]) return k->frozen[i];
    return m->quantized ? m->quantized[i] : NULL;
}

const float *trit_gpt_weights_f32(const gpt_weights *k, const trit_gpt *m, int i) {
    if (i < 0) return NULL;
    if (k->frozen_f32 && k->frozen_f32[i]) return k->frozen_f32[i];
    if (k->f32 && k->f32[i]) return k->f32[i];
    const trit_tensor *t = m->tensors[i];
    return t->data ? (const float *)t->data + t->offset : NULL;
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
static trit_status freeze_qat(gpt_weights *k, const trit_gpt *m) {
    if (!m->qat_weights) return TRIT_OK;
    if (!(k->frozen = calloc((size_t)m->n_tensors, sizeof *k->frozen)) ||
        !(k->frozen_f32 = calloc((size_t)m->n_tensors, sizeof *k->frozen_f32)))
        return trit_error(TRIT_ERR_NOMEM, "gpt decoder: out of memory");
    const trit_quant_spec spec = freeze_spec(&m->qat_w);
    for (int s = 0; s < m->n_prog; s++) {
        const int i = m->prog[s].w;
        if (!m->prog[s].block_matrix || k->frozen[i]) continue;
        const trit_tensor *t = m->tensors[i];
        trit_tensor *latent = trit_tensor_wrap(TRIT_F32, t->ndim, t->shape, (void *)trit_gpt_weights_f32(k, m, i));
        k->frozen[i] = latent ? trit_quantize(latent, &spec) : NULL;
        trit_tensor_free(latent);
        if (!k->frozen[i]) return trit_error(TRIT_ERR_NOMEM, "gpt decoder: cannot freeze '%s' as trained: %s", t->name, trit_last_error());
    }
    return TRIT_OK;
}

// A frozen matrix no kernel takes is multiplied in f32 by its decoded values.
static trit_status decode_frozen(gpt_weights *k, int i) {
    trit_tensor *d = trit_dequantize(k->frozen[i]);
    if (!d) return trit_error(TRIT_ERR_NOMEM, "gpt decoder: out of memory");
    const int64_t n = trit_tensor_numel(d);
    k->frozen_f32[i] = trit_aligned_alloc(sizeof(float) * (size_t)n);
    if (k->frozen_f32[i]) memcpy(k->frozen_f32[i], d->data, sizeof(float) * (size_t)n);
    trit_tensor_free(d);
    return k->frozen_f32[i] ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "gpt decoder: out of memory");
}

// The group size the kernels see for q (a group spanning whole rows: one scale per row), and
// whether a kernel multiplies by q's codes (taken as dtype dt: a ternary repack's), and whether
// in panels.
static bool kernel_shape(const trit_tensor *q, trit_dtype dt, int64_t *N, int64_t *K, int64_t *G, bool *panels) {
    *K = q->ndim == 2 ? q->shape[1] : 0;
    const int64_t gs = q->quant->group_size;
    *N = q->shape[0], *G = gs > *K && *K > 0 && gs % *K == 0 ? *K : gs;
    if (q->ndim != 2 || q->quant->zero_points || !kernel_takes(dt, *K, *G)) return false;
    *panels = use_panels(dt, *K, *G);
    return true;
}

// Bytes a decode-only model's codes of q take in the block: 64-byte multiples.
static size_t block_bytes(const trit_tensor *q) { return (trit_tensor_nbytes(q) + 63) / 64 * 64; }

// A decode-only model's kernel weights all go into one block of pages (panels, and the codes the
// other kernels read in place), filled matrix by matrix as the codes they replace are freed: the
// weights a token streams then sit in huge pages where the kernel gives them (measured on AMD
// EPYC Zen 4: int4 gpt2 decoding about 30% faster than with each matrix in 4 KB pages of the
// heap). Sizes the block and maps it.
static trit_status map_weight_block(gpt_weights *k, const trit_gpt *m) {
    size_t total = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const trit_tensor *q = trit_gpt_weights_quantized(k, m, i);
        if (!q) continue;
        const trit_dtype dt = ternary_in_disguise(q) ? TRIT_TERNARY : q->dtype;  // as setup_quantized repacks it
        int64_t N, K, G;
        bool panels = false;
        if (kernel_shape(q, dt, &N, &K, &G, &panels))
            total += panels ? trit_qpanels_bytes(dt, N, K, G) : block_bytes(q);
    }
    if (!total) return TRIT_OK;
    if (!(k->weight_block = trit_pages_alloc(total)))
        return trit_error(TRIT_ERR_NOMEM, "gpt decoder: out of memory for %zu bytes of weights", total);
    k->weight_block_bytes = total;
    return TRIT_OK;
}

// Which quantized copies (attached, or frozen under QAT) the kernels multiply with; their scales as f32.
// consume (the model itself, or NULL): a decode-only model, whose codes go once packed into panels,
// so codes and panels never both exist for all matrices at once.
static trit_status setup_quantized(gpt_weights *k, const trit_gpt *m, trit_gpt *consume) {
    if (!m->quantized && !k->frozen) return TRIT_OK;
    k->qscales = calloc((size_t)m->n_tensors, sizeof *k->qscales);
    k->qgroup = calloc((size_t)m->n_tensors, sizeof *k->qgroup);
    k->repacked = calloc((size_t)m->n_tensors, sizeof *k->repacked);
    if (!k->qscales || !k->qgroup || !k->repacked) goto oom;
    if (consume && map_weight_block(k, m) != TRIT_OK) return TRIT_ERR_NOMEM;
    size_t placed = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const trit_tensor *own = trit_gpt_weights_quantized(k, m, i);
        if (own && ternary_in_disguise(own) && !(k->repacked[i] = repack_ternary(own))) goto oom;
        const trit_tensor *q = trit_gpt_weights_quantized(k, m, i);
        if (!q) continue;
        int64_t N, K, G;
        bool panels = false;
        if (!kernel_shape(q, q->dtype, &N, &K, &G, &panels)) {  // f32 path: a repack would go unused
            trit_tensor_free(k->repacked[i]);
            k->repacked[i] = NULL;
            if (k->frozen && k->frozen[i] && decode_frozen(k, i) != TRIT_OK) return TRIT_ERR_NOMEM;
            continue;
        }
        const int64_t gs = q->quant->group_size;
        if (!(k->qscales[i] = malloc(sizeof(float) * (size_t)(N * (K / G))))) goto oom;
        for (int64_t j = 0; j < N * (K / G); j++) k->qscales[i][j] = trit_quant_info_scale(q->quant, j * G / gs);
        k->qgroup[i] = G;
        if (K > k->maxk) k->maxk = K;
        if (!panels && k->weight_block && q == consume->quantized[i]) {  // read in place, from the block
            const trit_status s = trit_tensor_move_data(consume->quantized[i], (char *)k->weight_block + placed);
            if (s != TRIT_OK) return s;
            placed += block_bytes(q);
            trit_heap_trim();
        }
        if (panels) {
            if (!k->panels && !(k->panels = calloc((size_t)m->n_tensors, sizeof *k->panels))) goto oom;
            const trit_status s =
                k->weight_block ? trit_qpanels_pack_at(q->dtype, N, K, G, trit_tensor_ptr(q), k->qscales[i],
                                                      (char *)k->weight_block + placed, &k->panels[i])
                               : trit_qpanels_pack(q->dtype, N, K, G, trit_tensor_ptr(q), k->qscales[i], &k->panels[i]);
            if (s != TRIT_OK)
                return trit_error(TRIT_ERR_NOMEM, "gpt decoder: out of memory for the panels of '%s'",
                                  m->tensors[i]->name);
            if (k->weight_block) placed += trit_qpanels_bytes(q->dtype, N, K, G);
            trit_tensor_free(k->repacked[i]);
            k->repacked[i] = NULL;
            if (consume) {  // decode-only: the panels hold the codes and scales, so both go now
                trit_tensor_free(consume->quantized[i]);
                consume->quantized[i] = NULL;
                free(k->qscales[i]);
                k->qscales[i] = NULL;
                // The codes' heap pages go back as the block's fill: the peak stays one copy.
                if (k->weight_block) trit_heap_trim();
            }
        }
    }
    return TRIT_OK;
oom:
    return trit_error(TRIT_ERR_NOMEM, "gpt decoder: out of memory for quantized weights");
}

static trit_status weights_make(gpt_weights *w, const trit_gpt *m, trit_gpt *consume) {
    memset(w, 0, sizeof *w);
    w->n = m->n_tensors;
    trit_status s = copy_params(w, m);
    if (s == TRIT_OK) s = freeze_qat(w, m);
    if (s == TRIT_OK) s = setup_quantized(w, m, consume);
    if (s != TRIT_OK) trit_gpt_weights_free(w);
    return s;
}

trit_status trit_gpt_weights_make(gpt_weights *w, const trit_gpt *m) { return weights_make(w, m, NULL); }

void trit_gpt_weights_free(gpt_weights *w) {
    for (int i = 0; i < w->n; i++) {
        if (w->f32) trit_aligned_free(w->f32[i]);
        if (w->qscales) free(w->qscales[i]);
        if (w->repacked) trit_tensor_free(w->repacked[i]);
        if (w->frozen) trit_tensor_free(w->frozen[i]);
        if (w->frozen_f32) trit_aligned_free(w->frozen_f32[i]);
        if (w->panels) trit_qpanels_free(&w->panels[i]);
    }
    free(w->f32);
    free(w->qscales);
    free(w->qgroup);
    free(w->repacked);
    free(w->frozen);
    free(w->frozen_f32);
    free(w->panels);
    trit_pages_free(w->weight_block, w->weight_block_bytes);
    memset(w, 0, sizeof *w);
}

// ---- decode-only models ----------------------------------------------------------------------

// Whether a kernel multiplies by parameter i's codes (its f32 values are then not read, but for
// the embedding's rows, which come from the panels or the codes).
static bool kernel_multiplies(const gpt_weights *w, int i) {
    return (w->panels && w->panels[i].codes) || (w->qscales && w->qscales[i]);
}

// A weight made without values (trit_gpt_new_without) that no kernel takes: its codes decoded once.
static trit_status decode_codes(gpt_weights *w, const trit_gpt *m, int i) {
    const trit_tensor *q = m->quantized ? m->quantized[i] : NULL;
    if (!q) return trit_error(TRIT_ERR_STATE, "gpt: parameter '%s' has neither values nor a quantized copy", m->tensors[i]->name);
    if (!w->f32 && !(w->f32 = calloc((size_t)m->n_tensors, sizeof *w->f32))) return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory");
    const int64_t n = trit_tensor_numel(q);
    if (!(w->f32[i] = trit_aligned_alloc(sizeof(float) * (size_t)n))) return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory");
    return trit_quant_decode(q->dtype, trit_tensor_ptr(q), n, q->quant, w->f32[i]);
}

trit_status trit_gpt_make_decode_only(trit_gpt *m) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "trit_gpt_make_decode_only: NULL model");
    if (m->dec) return TRIT_OK;
    if (m->qat_weights)
        return trit_error(TRIT_ERR_STATE, "gpt: a model under quantization-aware training cannot decode only; freeze "
                          "it first (trit_train_freeze_qat)");
    gpt_weights *w = calloc(1, sizeof *w);
    if (!w) return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory");
    trit_status s = weights_make(w, m, m);
    if (s != TRIT_OK) {
        free(w);
        return s;
    }
    bool *drop = calloc((size_t)m->n_tensors + 1, sizeof *drop);
    if (!drop) {
        trit_gpt_weights_free(w);
        free(w);
        return trit_error(TRIT_ERR_NOMEM, "gpt: out of memory");
    }
    for (int i = 0; i < m->n_tensors; i++) drop[i] = kernel_multiplies(w, i);
    for (int i = 0; i < m->n_tensors && s == TRIT_OK; i++)
        if (!m->tensors[i]->data && !drop[i]) s = decode_codes(w, m, i);
    m->dec = w;
    bool any = false;
    for (int i = 0; i < m->n_tensors; i++) any |= drop[i] && m->tensors[i]->data;
    // The f32 values of what the kernels multiply with go too (a new layout only if any do).
    if (s == TRIT_OK && any) s = trit_gpt_lay_out(m, drop, NULL);
    free(drop);
    return s;
}

bool trit_gpt_decode_only(const trit_gpt *m) { return m && m->dec; }

// Bytes of parameter i as the model holds it for decoding (see trit_gpt_weight_bytes), or with
// `read`, as a decode step reads it: an integer kernel on codes outside panels takes the f32
// copy of the group scales (one per row where a group spans rows), not the stored scales.
static size_t held_bytes(const trit_gpt *m, int i, bool read) {
    const gpt_weights *w = m->dec;
    const trit_tensor *t = m->tensors[i], *q = m->quantized ? m->quantized[i] : NULL;
    const trit_qpanels *p = w && w->panels && w->panels[i].codes ? &w->panels[i] : NULL;
    const float *qs = w && w->qscales ? w->qscales[i] : NULL;
    size_t b = 0;
    if (p) b += (size_t)p->panels * p->panel_bytes + sizeof(float) * (size_t)(p->panels * (p->K / p->G) * TRIT_QPANEL_ROWS);
    else if (q && read && qs) b += trit_tensor_nbytes(q) + sizeof(float) * (size_t)(trit_tensor_numel(q) / w->qgroup[i]);
    else if (q) b += trit_tensor_nbytes(q) + trit_quant_info_bytes(q->quant);
    if (t->data && !q) b += trit_tensor_nbytes(t);
    if (w && w->f32 && w->f32[i]) b += sizeof(float) * (size_t)trit_tensor_numel(t);
    return b;
}

size_t trit_gpt_weight_bytes(const trit_gpt *m) {
    size_t b = 0;
    for (int i = 0; m && i < m->n_tensors; i++) b += held_bytes(m, i, false);
    return b;
}

size_t trit_gpt_decode_read_bytes(const trit_gpt *m, trit_dtype kv, int64_t pos) {
    if (!m || pos < 0 || (kv != TRIT_F32 && kv != TRIT_F16)) return 0;
    const trit_gpt_config *c = &m->cfg;
    size_t b = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const size_t held = held_bytes(m, i, true);
        // The position table gives one row a step; every other tensor is read whole (the token
        // embedding as the head, its one row for the input being part of that).
        b += m->tensors[i] == m->wpe ? held / (size_t)c->seq_len : held;
    }
    return b + 2 * (size_t)c->n_layer * (size_t)(pos + 1) * (size_t)c->n_embd * (kv == TRIT_F16 ? 2 : 4);
}
