// Incremental GPT decoding: the forward pass for one new token written directly in C over the
// model's parameters, with each layer's keys and values of earlier positions kept in a cache,
// so a token costs O(T) attention work instead of re-running the whole sequence. It computes
// what the training graph computes with the graph's own code where the two can share it (the
// norm and GELU kernels, the rope op's angle table and rotation, the SwiGLU row) and the
// attention row kernel (the softmax of the row kernels between two products), so its logits
// match the graph's at each position to rounding.
// A weight with an attached quantized copy (trit_gpt_attach_quantized) that the integer kernels
// take is multiplied by its codes, with the input row quantized per token to int8 (NF4 and FP8
// weights: the f32 row).
#include "kernels/gemm.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_panel.h"
#include "kernels/rowops.h"
#include "nn/gpt_internal.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

// Positions a forward handles at once: a prompt's matmuls run as (ROWS x K) GEMMs.
enum { ROWS = 64 };

// Key positions a head's cache holds: the context rounded up to whole key blocks (rowops.h).
static int64_t key_positions(const trit_gpt_config *c) {
    return (c->seq_len + TRIT_ATTEND_KEY_BLOCK - 1) / TRIT_ATTEND_KEY_BLOCK * TRIT_ATTEND_KEY_BLOCK;
}

struct trit_gpt_cache {
    const trit_gpt *m;
    int64_t len;           // tokens decoded so far
    trit_dtype kv;         // TRIT_F32 or TRIT_F16: how keys and values are stored
    void *k;               // (L, H, Tk / 64, hs, 64) keys (after RoPE), Tk = key_positions: per head
                           // the attention kernel's transposed key blocks
    void *v;               // (L, H, T, hs) values, each head's positions contiguous
    // Work buffers for up to ROWS positions fed at once (a prompt is fed in chunks of ROWS).
    float *x;              // (ROWS, C) residual stream
    float *h;              // (ROWS, C) normalised input of a sub-layer
    float *qkv;            // (ROWS, 3C)
    float *y;              // (ROWS, C) attention output before c_proj, or a sub-layer's output
    float *fc;             // (ROWS, F) c_fc output, F = hidden or 2 hidden
    float *act;            // (ROWS, hidden) MLP activation
    float *p;              // (H, T) attention probabilities, one row per head
    double stats[2 * ROWS];  // (ROWS, 2) norm statistics
    double *rope;          // (2, ROWS, hs / 2) cos and sin of the rotary angles, RoPE models only
    void *block;           // one allocation holding all of the above
    // f32 copies of the parameters, made when the cache is created, for a model that stores
    // them in bf16/f16 (NULL when every parameter is f32): (n_tensors) pointers.
    float **f32;
    // For parameters with an attached quantized copy the integer kernels take: its group scales
    // decoded to f32 ((n_tensors) pointers, NULL elsewhere; the array NULL when there are none),
    // and the buffers of a quantized activation row.
    float **qscales;
    int64_t *qgroup; // (n_tensors): the group size the kernels see (a group spanning whole rows
                     // is given one scale per row)
    int8_t *xq;      // (ROWS, max K)
    float *xscale;   // (ROWS)
    int32_t *xgsum;  // (ROWS, max K / 64)
    float *xf;       // (ROWS, max K): input rows reordered for the weight-only NF4 kernel
    // (n_tensors) or NULL: 2-bit copies of ternary codes held in another dtype (base 3, symmetric
    // int2), which the ternary kernels take.
    trit_tensor **repacked;
    // (n_tensors) or NULL: integer codes in 16-row panels, for the dtypes the CPU has panel
    // kernels for (qgemm_panel.h); a parameter's entry has codes == NULL when it has none. A base-3
    // parameter's 2-bit repack is dropped once its panels are made.
    trit_qpanels *panels;
};

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

// The quantized copy of parameter i the kernels multiply with: the attached one, or its repack.
static const trit_tensor *quantized_of(const trit_gpt_cache *k, int i) {
    return k->repacked && k->repacked[i] ? k->repacked[i] : k->m->quantized[i];
}

// Which attached quantized copies the integer kernels multiply with; their scales as f32.
static trit_status setup_quantized(trit_gpt_cache *k, const trit_gpt *m) {
    if (!m->quantized) return TRIT_OK;
    int64_t maxk = 0;
    k->qscales = calloc((size_t)m->n_tensors, sizeof *k->qscales);
    k->qgroup = calloc((size_t)m->n_tensors, sizeof *k->qgroup);
    k->repacked = calloc((size_t)m->n_tensors, sizeof *k->repacked);
    if (!k->qscales || !k->qgroup || !k->repacked) goto oom;
    for (int i = 0; i < m->n_tensors; i++) {
        if (m->quantized[i] && ternary_in_disguise(m->quantized[i]) && !(k->repacked[i] = repack_ternary(m->quantized[i])))
            goto oom;
        const trit_tensor *q = quantized_of(k, i);
        if (!q || q->ndim != 2 || q->quant->zero_points) continue;
        const int64_t N = q->shape[0], K = q->shape[1], gs = q->quant->group_size;
        const int64_t G = gs > K && gs % K == 0 ? K : gs;
        if (!kernel_takes(q->dtype, K, G)) {  // f32 path: a repack would go unused
            trit_tensor_free(k->repacked[i]);
            k->repacked[i] = NULL;
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
    if (maxk && (!(k->xq = trit_aligned_alloc((size_t)(ROWS * maxk))) || !(k->xscale = malloc(sizeof(float) * ROWS)) ||
                 !(k->xgsum = malloc(sizeof(int32_t) * (size_t)(ROWS * maxk / 64))) ||
                 !(k->xf = trit_aligned_alloc(sizeof(float) * (size_t)(ROWS * maxk)))))
        goto oom;
    return TRIT_OK;
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
    const int64_t L = c->n_layer, T = c->seq_len, C = c->n_embd, hid = m->hidden;
    const int64_t F = c->mlp == TRIT_MLP_SWIGLU ? 2 * hid : hid;
    const int64_t keys = L * C * key_positions(c), values = L * T * C;  // elements, stored in kv
    // Sizes in floats; each buffer is rounded up to 16 floats so every one starts 64-byte aligned.
    const int64_t sizes[9] = {kv == TRIT_F16 ? (keys + 1) / 2 : keys, kv == TRIT_F16 ? (values + 1) / 2 : values,
                              ROWS * C, ROWS * C, ROWS * 3 * C, ROWS * C, ROWS * F, ROWS * hid, c->n_head * T};
    int64_t total = 0;
    for (int i = 0; i < 9; i++) total += (sizes[i] + 15) / 16 * 16;
    trit_gpt_cache *k = calloc(1, sizeof *k);
    void *block = k ? trit_aligned_alloc(sizeof(float) * (size_t)total) : NULL;
    if (!block) {
        free(k);
        trit_error(TRIT_ERR_NOMEM, "gpt cache: cannot allocate %lld floats for %lld layers x %lld positions",
                   (long long)total, (long long)L, (long long)T);
        return NULL;
    }
    void *kv_at[2];
    float **dst[9] = {(float **)&kv_at[0], (float **)&kv_at[1], &k->x, &k->h, &k->qkv, &k->y, &k->fc, &k->act, &k->p};
    float *at = block;
    for (int i = 0; i < 9; i++) {
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
    if (copy_params(k, m) != TRIT_OK || setup_quantized(k, m) != TRIT_OK) {
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

// ---- the pieces of one position's forward ---------------------------------------------------

// A parameter's values as f32: its own storage, or the cache's copy.
static const float *data_of(const trit_gpt_cache *c, const trit_tensor *t) {
    if (!t) return NULL;
    for (int i = 0; c->f32 && i < c->m->n_tensors; i++)
        if (c->m->tensors[i] == t) return c->f32[i];
    return (const float *)t->data + t->offset;
}

static int index_of(const trit_gpt *m, const trit_tensor *t) {
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i] == t) return i;
    return -1;
}

// Above this many rows the weight-only (NF4, FP8) kernels, which decode every weight again for
// each row, lose to the f32 GEMM over the parameters' decoded values: a prompt takes that.
enum { WEIGHT_ONLY_ROWS = 4 };

// out (R, N) = x (R, K) W^T, W: (N, K), with W's codes when it has a quantized copy the kernels
// take (integer codes with x quantized per token; NF4 and FP8 codes for up to WEIGHT_ONLY_ROWS
// rows), else in f32. e (or NULL): an epilogue the panel kernels apply when w has panels; returns
// whether it was applied.
static bool product(const trit_gpt_cache *c, float *out, const float *x, const trit_tensor *w, int64_t R,
                    const trit_qpanel_epilogue *e) {
    const int64_t N = w->shape[0], K = w->shape[1];
    const int i = c->qscales ? index_of(c->m, w) : -1;
    if (i >= 0 && c->panels && c->panels[i].codes) {
        const trit_qact a = {c->xq, c->xscale, c->xgsum};
        trit_qpanels_quantize(&c->panels[i], x, R, &a);
        trit_kernel_qgemm_panels(&c->panels[i], R, &a, out, N, e);
        return e != NULL;
    }
    const trit_tensor *q = i >= 0 && c->qscales[i] ? quantized_of(c, i) : NULL;
    const bool weight_only = q && (q->dtype == TRIT_NF4 || q->dtype == TRIT_F8_E4M3 || q->dtype == TRIT_F8_E5M2);
    if (q && (!weight_only || R <= WEIGHT_ONLY_ROWS)) {
        const int64_t G = c->qgroup[i];
        if (q->dtype == TRIT_NF4) {
            trit_nf4_act_order(x, R, K, c->xf);
            trit_kernel_nf4_gemm(R, N, K, G, c->xf, trit_tensor_ptr(q), c->qscales[i], out, N);
            return false;
        }
        if (q->dtype == TRIT_F8_E4M3 || q->dtype == TRIT_F8_E5M2) {
            trit_kernel_fp8_gemm(q->dtype, R, N, K, G, x, trit_tensor_ptr(q), c->qscales[i], out, N);
            return false;
        }
        const trit_qact a = {c->xq, c->xscale, c->xgsum};
        trit_qact_quantize(x, R, K, G, q->dtype, &a);
        trit_kernel_qgemm(q->dtype, R, N, K, G, &a, trit_tensor_ptr(q), c->qscales[i], out, N);
        return false;
    }
    if (R <= 4) trit_kernel_gemv_f32(false, true, R, N, K, x, K, data_of(c, w), K, out, N, false);
    else trit_kernel_gemm_f32(false, true, R, N, K, x, K, data_of(c, w), K, out, N, false);
    return false;
}

// Below this many values a bias is added on one thread.
#define ADD_PARALLEL_MIN ((int64_t)1 << 15)

// out (R, N) = x (R, K) W^T + b, W: (N, K), b: (N) or NULL; then res (R, N) += out when res is
// given (the residual stream).
static void matmul(const trit_gpt_cache *c, float *out, const float *x, const trit_tensor *w, const trit_tensor *b,
                   int64_t R, float *res) {
    const int64_t N = w->shape[0];
    const float *bd = data_of(c, b);
    const trit_qpanel_epilogue e = {bd, res, N};
    if (product(c, out, x, w, R, &e)) return;  // the panel kernels' threads added both to their columns
#pragma omp parallel for schedule(static) if ((bd || res) && R * N >= ADD_PARALLEL_MIN && !omp_in_parallel())
    for (int64_t r = 0; r < R; r++) {
        float *o = out + r * N;
        if (bd)
            for (int64_t j = 0; j < N; j++) o[j] += bd[j];
        if (res)
            for (int64_t j = 0; j < N; j++) res[r * N + j] += o[j];
    }
}

// LayerNorm or RMSNorm of R rows of x (R, w's length) into out: the training graph's norm kernel.
static void norm(trit_gpt_cache *c, float *out, const float *x, const trit_tensor *w, const trit_tensor *b, int64_t R) {
    const trit_gpt *m = c->m;
    trit_kernel_norm_fwd_f32(out, c->stats, NULL, x, NULL, data_of(c, w), data_of(c, b), R, w->shape[0],
                             m->cfg.norm_eps, m->cfg.norm == TRIT_NORM_LAYER);
}

// Rotates the queries and keys of the R positions from pos0 (rows of the fused qkv (R, 3C)) in
// place: the rope op's angle table and row rotation (ops/rope.h).
static void rope_rows(const trit_gpt *m, trit_gpt_cache *c, float *qkv, int64_t pos0, int64_t R) {
    const int64_t C = m->cfg.n_embd, H = m->cfg.n_head, hs = C / H;
    double *cs = c->rope, *sn = cs + ROWS * (hs / 2);  // (R, hs / 2) each
    trit_rope_table(cs, sn, pos0, R, hs, m->cfg.rope_theta);
    for (int64_t r = 0; r < R; r++) {
        float *q = qkv + r * 3 * C;
        trit_rope_row_f32(q, q, 1, cs + r * (hs / 2), sn + r * (hs / 2), H, hs);
        trit_rope_row_f32(q + C, q + C, 1, cs + r * (hs / 2), sn + r * (hs / 2), H, hs);
    }
}

// Stores head h's keys and values of the R positions from pos0 (rows of the fused qkv (R, 3C)) in
// layer l's cache: keys into their columns of the head's transposed block, values into their rows.
// A key column touches hs cache lines that the weights streamed since the last token have
// evicted: the thread that attends with head h takes those misses, in parallel with the others.
static void store_head(const trit_gpt *m, trit_gpt_cache *c, int64_t l, int64_t h, int64_t pos0, int64_t R,
                       const float *qkv) {
    const int64_t C = m->cfg.n_embd, T = m->cfg.seq_len, H = m->cfg.n_head, hs = C / H, Tk = key_positions(&m->cfg);
    const int64_t kh = l * C * Tk + h * hs * Tk, vh = l * T * C + h * T * hs;  // (Tk / 64, hs, 64) and (T, hs)
    const bool f16 = c->kv == TRIT_F16;
    for (int64_t r = 0; r < R; r++) {
        const float *key = qkv + r * 3 * C + C + h * hs, *val = key + C;
        const int64_t at = pos0 + r;
        for (int64_t i0 = 0; i0 < hs; i0 += 64) {
            const int64_t n = hs - i0 < 64 ? hs - i0 : 64;
            uint16_t half[64];
            if (f16) trit_f32_to_f16_n(half, key + i0, n);
            for (int64_t i = 0; i < n; i++) {
                if (f16)
                    ((uint16_t *)c->k)[kh + trit_attend_key_at(i0 + i, at, hs)] = half[i];
                else
                    ((float *)c->k)[kh + trit_attend_key_at(i0 + i, at, hs)] = key[i0 + i];
            }
        }
        if (f16)
            trit_f32_to_f16_n((uint16_t *)c->v + vh + at * hs, val, hs);
        else
            memcpy((float *)c->v + vh + at * hs, val, sizeof(float) * (size_t)hs);
    }
}

// Below this many multiply-adds (heads x rows x keys x head size) attention runs on one thread.
#define ATTEND_PARALLEL_MIN ((int64_t)1 << 15)

// y (R, C) = causal attention of the R queries at positions pos0.. (rows of the fused qkv (R, 3C),
// whose keys and values are stored in layer l's cache first) against the cached keys and values
// of positions 0..pos0 + r: the attention row kernel per (query, head), heads split among
// threads (each head's rows on one thread, in order, so results do not depend on the thread
// count).
static void attend(const trit_gpt *m, trit_gpt_cache *c, int64_t l, int64_t pos0, int64_t R, const float *qkv,
                   float *y) {
    const int64_t C = m->cfg.n_embd, T = m->cfg.seq_len, H = m->cfg.n_head, hs = C / H, Tk = key_positions(&m->cfg);
    const int64_t ko = l * C * Tk, vo = l * T * C;  // layer l's keys (H, Tk / 64, hs, 64) and values (H, T, hs)
    const float scale = (float)(1.0 / sqrt((double)hs));
    const bool par = H * R * (pos0 + R) * hs >= ATTEND_PARALLEL_MIN && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (par)
    for (int64_t h = 0; h < H; h++) {
        store_head(m, c, l, h, pos0, R, qkv);
        for (int64_t r = 0; r < R; r++) {
            float *yr = y + r * C + h * hs, *p = c->p + h * T;
            const float *qr = qkv + r * 3 * C + h * hs;
            const int64_t kh = ko + h * hs * Tk, vh = vo + h * T * hs, n = pos0 + r + 1;
            if (c->kv == TRIT_F16)
                trit_kernel_attend_f16(yr, p, qr, (const uint16_t *)c->k + kh, (const uint16_t *)c->v + vh, hs, n, hs,
                                       scale);
            else
                trit_kernel_attend_f32(yr, p, qr, (const float *)c->k + kh, (const float *)c->v + vh, hs, n, hs, scale);
        }
    }
}

// Layer l for the R positions pos0.. held in c->x.
static void block_forward(const trit_gpt *m, trit_gpt_cache *c, int64_t l, int64_t pos0, int64_t R) {
    const trit_gpt_block *k = &m->blocks[l];
    const int64_t hid = m->hidden, F = m->cfg.mlp == TRIT_MLP_SWIGLU ? 2 * hid : hid;
    norm(c, c->h, c->x, k->ln1_w, k->ln1_b, R);
    matmul(c, c->qkv, c->h, k->attn_w, k->attn_b, R, NULL);
    if (m->cfg.pos == TRIT_POS_ROPE) rope_rows(m, c, c->qkv, pos0, R);
    attend(m, c, l, pos0, R, c->qkv, c->y);
    const float *in = c->y;
    if (k->sub1_w) {
        norm(c, c->qkv, c->y, k->sub1_w, k->sub1_b, R);  // the queries are spent: qkv is scratch now
        in = c->qkv;
    }
    matmul(c, c->h, in, k->proj_w, k->proj_b, R, c->x);

    norm(c, c->h, c->x, k->ln2_w, k->ln2_b, R);
    matmul(c, c->fc, c->h, k->fc_w, k->fc_b, R, NULL);
    if (m->cfg.mlp == TRIT_MLP_SWIGLU) {
        for (int64_t r = 0; r < R; r++)  // the training graph's SwiGLU row
            trit_swiglu_row_f32(c->act + r * hid, c->fc + r * F, 1, c->fc + r * F + hid, 1, hid);
    } else {
        trit_kernel_gelu_fwd_f32(c->act, c->fc, NULL, R, hid);  // the training graph's GELU kernel
    }
    in = c->act;
    if (k->sub2_w) {
        norm(c, c->fc, c->act, k->sub2_w, k->sub2_b, R);  // (R, hidden) fits in fc's (R, F)
        in = c->fc;
    }
    matmul(c, c->y, in, k->mlp_w, k->mlp_b, R, c->x);
}

// Feeds R <= ROWS tokens at the next positions; logits (V) of the last one when asked.
static void forward_rows(const trit_gpt *m, trit_gpt_cache *c, const int32_t *tokens, int64_t R, float *logits) {
    const int64_t C = m->cfg.n_embd, pos0 = c->len;
    const float *wte = data_of(c, m->wte), *wpe = m->wpe ? data_of(c, m->wpe) : NULL;
    for (int64_t r = 0; r < R; r++)
        for (int64_t j = 0; j < C; j++)
            c->x[r * C + j] = wte[(int64_t)tokens[r] * C + j] + (wpe ? wpe[(pos0 + r) * C + j] : 0.0f);
    for (int64_t l = 0; l < m->cfg.n_layer; l++) block_forward(m, c, l, pos0, R);
    if (logits) {
        norm(c, c->h, c->x + (R - 1) * C, m->lnf_w, m->lnf_b, 1);
        (void)product(c, logits, c->h, m->wte, 1, NULL);
    }
    c->len += R;
}

trit_status trit_gpt_prefill(const trit_gpt *m, trit_gpt_cache *c, const int32_t *tokens, int64_t n, float *logits) {
    if (!m || !c || !tokens || !logits) return trit_error(TRIT_ERR_INVALID, "gpt decode: NULL model, cache, tokens or logits");
    if (c->m != m)
        return trit_error(TRIT_ERR_INVALID, "gpt decode: the cache was made for another model; make one with trit_gpt_cache_new(model)");
    const trit_gpt_config *cfg = &m->cfg;
    if (n < 1 || n > cfg->seq_len - c->len)
        return trit_error(TRIT_ERR_RANGE, "gpt decode: the cache holds %lld tokens and the model's context (seq_len) is "
                          "%lld, so %lld more do not fit; trit_gpt_cache_reset it or keep the last tokens and re-feed them",
                          (long long)c->len, (long long)cfg->seq_len, (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= cfg->vocab_size)
            return trit_error(TRIT_ERR_RANGE, "gpt decode: token %d outside the vocabulary [0, %lld)", (int)tokens[i],
                              (long long)cfg->vocab_size);
    for (int64_t i = 0; i < n; i += ROWS) {
        const int64_t R = n - i < ROWS ? n - i : ROWS;
        forward_rows(m, c, tokens + i, R, i + R == n ? logits : NULL);
    }
    return TRIT_OK;
}

trit_status trit_gpt_decode(const trit_gpt *m, trit_gpt_cache *c, int32_t token, float *logits /* (V) */) {
    return trit_gpt_prefill(m, c, &token, 1, logits);
}
