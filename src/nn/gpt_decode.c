// Incremental GPT decoding: the model's program (gpt_program.c) run on rows of new positions,
// with each layer's keys and values of earlier positions kept in a cache, so a token costs O(T)
// attention work instead of re-running the whole sequence. Each step runs the training graph's
// own code where the two can share it (the norm and GELU kernels, the rope op's angle table and
// rotation, the SwiGLU row) and the attention row kernel (the softmax of the row kernels between
// two products), so its logits match the graph's at each position to rounding.
// A weight with an attached quantized copy (trit_gpt_attach_quantized) that the integer kernels
// take is multiplied by its codes, with the input row quantized per token to int8 (NF4 and FP8
// weights: the f32 row). A model under quantization-aware training is decoded as it trains: its
// block matrices quantized by the freeze rule (trit_train_freeze_qat's) in the cache, and their
// inputs quantized per token as the graph's fake quantization does.
#include "kernels/dequant.h"
#include "kernels/gemm.h"
#include "kernels/qgemm.h"
#include "nn/gpt_cache.h"
#include "ops/fake_quant.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

// ---- the pieces of one position's forward ---------------------------------------------------

// Above this many rows the weight-only (NF4, FP8) kernels, which decode every weight again for
// each row, lose to the f32 GEMM over the parameters' decoded values: a prompt takes that.
enum { WEIGHT_ONLY_ROWS = 4 };

// The values of weight-only matrix i (q: its codes, (N, K)) for this block's prompt GEMMs, decoded
// at its first use in the block: the values its f32 parameter would hold (the dtype table's), so
// a decode-only model computes a prompt as a model that keeps them.
static const float *decoded(trit_gpt_cache *c, int i, const trit_tensor *q) {
    if (c->wdec_at[i] < 0) {
        const int64_t N = q->shape[0], K = q->shape[1];
        float *d = c->wdec + c->wdec_used;
        const char *codes = trit_tensor_ptr(q);
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
        for (int64_t r = 0; r < N; r++)
            trit_kernel_dequant_f32(q->dtype, d + r * K, codes + trit_dtype_nbytes(q->dtype, r * K), K, q->quant, r * K);
        c->wdec_at[i] = c->wdec_used;
        c->wdec_used += (N * K + 15) / 16 * 16;
    }
    return c->wdec + c->wdec_at[i];
}

// out (R, N) = x (R, K) W^T for the weight of step st, W: (N, K), with W's codes when it has a
// quantized copy the kernels take (integer codes with x quantized per token; NF4 and FP8 codes
// for up to WEIGHT_ONLY_ROWS rows), else in f32. Under QAT's input quantization a block matrix
// that no integer kernel takes is given x fake-quantized per token, as the graph gives it. e (or
// NULL): an epilogue the panel kernels apply when w has panels; returns whether it was applied.
static bool product(trit_gpt_cache *c, float *out, const float *x, const gpt_step *st, int64_t R,
                    const trit_qpanel_epilogue *e) {
    const trit_gpt *m = c->m;
    const int i = st->w;
    const int64_t N = m->tensors[i]->shape[0], K = m->tensors[i]->shape[1];
    const gpt_weights *wt = c->w;
    if (wt->panels && wt->panels[i].codes) {
        const trit_qact a = {c->xq, c->xscale, c->xgsum};
        trit_qpanels_quantize(&wt->panels[i], x, R, &a);
        trit_kernel_qgemm_panels(&wt->panels[i], R, &a, out, N, e);
        return e != NULL;
    }
    const trit_tensor *q = wt->qscales && wt->qscales[i] ? trit_gpt_cache_quantized(c, i) : NULL;
    const bool weight_only = q && (q->dtype == TRIT_NF4 || q->dtype == TRIT_F8_E4M3 || q->dtype == TRIT_F8_E5M2);
    if (q && !weight_only) {
        const int64_t G = wt->qgroup[i];
        const trit_qact a = {c->xq, c->xscale, c->xgsum};
        trit_qact_quantize(x, R, K, G, q->dtype, &a);
        trit_kernel_qgemm(q->dtype, R, N, K, G, &a, trit_tensor_ptr(q), wt->qscales[i], out, N);
        return false;
    }
    if (st->block_matrix && m->qat_acts) {
        trit_fake_quant_rows_f32(x, c->xf, R, K, &m->qat_a);
        x = c->xf;
    }
    const float *w = trit_gpt_cache_f32(c, i);
    if (q && R > WEIGHT_ONLY_ROWS && !w) w = decoded(c, i, q);  // a decode-only model's prompt
    if (q && R <= WEIGHT_ONLY_ROWS) {
        const int64_t G = wt->qgroup[i];
        if (q->dtype == TRIT_NF4) {
            float *xo = c->xf;  // the kernel's order, in place when x is already the scratch
            if (x == xo) {
                for (int64_t r = 0; r < R; r++) trit_nf4_act_order(x + r * K, 1, K, xo + r * K);
            } else {
                trit_nf4_act_order(x, R, K, xo);
            }
            trit_kernel_nf4_gemm(R, N, K, G, xo, trit_tensor_ptr(q), wt->qscales[i], out, N);
            return false;
        }
        trit_kernel_fp8_gemm(q->dtype, R, N, K, G, x, trit_tensor_ptr(q), wt->qscales[i], out, N);
        return false;
    }
    if (R <= 4) trit_kernel_gemv_f32(false, true, R, N, K, x, K, w, K, out, N, false);
    else trit_kernel_gemm_f32(false, true, R, N, K, x, K, w, K, out, N, false);
    return false;
}

// x (R, C) += up(gelu(x down^T + bd)) + bu: a bottleneck adapter on a sub-layer's output rows
// (down (r, C), up (C, r)), in the graph's order: the up product, then its bias, then the add.
static void bottleneck_rows(const trit_gpt_cache *c, float *x, const gpt_step *st, int64_t R) {
    const trit_gpt *m = c->m;
    const int64_t r = m->tensors[st->w]->shape[0], C = st->width;
    const float *down = trit_gpt_cache_f32(c, st->w), *bd = trit_gpt_cache_f32(c, st->b);
    const float *up = trit_gpt_cache_f32(c, st->la), *bu = trit_gpt_cache_f32(c, st->lb);
    float *h = c->lora, *a = c->lora + ROWS * r, *u = c->xf_adapter;  // (R, r), (R, r), (R, C)
    trit_kernel_gemm_f32(false, true, R, r, C, x, C, down, C, h, r, false);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < r; j++) h[i * r + j] += bd[j];
    trit_kernel_gelu_fwd_f32(a, h, NULL, R, r);
    trit_kernel_gemm_f32(false, true, R, C, r, a, r, up, r, u, C, false);
    for (int64_t i = 0; i < R; i++)
        for (int64_t j = 0; j < C; j++) x[i * C + j] += u[i * C + j] + bu[j];
}

// Below this many values a bias is added on one thread.
#define ADD_PARALLEL_MIN ((int64_t)1 << 15)

// out (R, N) += s (x A^T) B^T: step st's LoRA pair (A (r, K), B (N, r)) beside the base's product,
// in the graph's order (the (R, r) product scaled, then multiplied by B).
static void lora_rows(const trit_gpt_cache *c, float *out, const float *x, const gpt_step *st, int64_t R) {
    const trit_gpt *m = c->m;
    const int64_t r = m->tensors[st->la]->shape[0], K = m->tensors[st->la]->shape[1], N = st->width;
    const float *A = trit_gpt_cache_f32(c, st->la), *B = trit_gpt_cache_f32(c, st->lb);
    const float s = (float)trit_adapter_scale(&m->cfg.adapter);
    float *t = c->lora;  // (R, r)
    trit_kernel_gemm_f32(false, true, R, r, K, x, K, A, K, t, r, false);
    for (int64_t i = 0; i < R * r; i++) t[i] *= s;
    trit_kernel_gemm_f32(false, true, R, N, r, t, r, B, r, out, N, true);
}

// out (R, N) = x (R, K) W^T + b for step st; then res (R, N) += out when res is given (the
// residual stream).
static void matmul(trit_gpt_cache *c, float *out, const float *x, const gpt_step *st, int64_t R, float *res) {
    const int64_t N = st->width;
    const float *bd = trit_gpt_cache_f32(c, st->b);
    const trit_qpanel_epilogue e = {.bias = bd, .res = res, .ldr = N};
    const bool lora = st->la >= 0 && !c->m->adapters_merged;
    if (product(c, out, x, st, R, lora ? NULL : &e)) return;  // the panel kernels' threads added both to their columns
    if (lora) lora_rows(c, out, x, st, R);
#pragma omp parallel for schedule(static) if ((bd || res) && R * N >= ADD_PARALLEL_MIN && !omp_in_parallel())
    for (int64_t r = 0; r < R; r++) {
        float *o = out + r * N;
        if (bd)
            for (int64_t j = 0; j < N; j++) o[j] += bd[j];
        if (res)
            for (int64_t j = 0; j < N; j++) res[r * N + j] += o[j];
    }
}

// LayerNorm or RMSNorm of R rows of x (R, width) into out: the training graph's norm kernel.
static void norm(trit_gpt_cache *c, float *out, const float *x, const gpt_step *st, int64_t R) {
    const trit_gpt *m = c->m;
    trit_kernel_norm_fwd_f32(out, c->stats, NULL, x, NULL, trit_gpt_cache_f32(c, st->w), trit_gpt_cache_f32(c, st->b), R,
                             st->width, m->cfg.norm_eps, m->cfg.norm == TRIT_NORM_LAYER);
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
    const int64_t C = m->cfg.n_embd, T = m->cfg.seq_len, H = m->cfg.n_head, hs = C / H, Tk = trit_gpt_key_positions(&m->cfg);
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
    const int64_t C = m->cfg.n_embd, T = m->cfg.seq_len, H = m->cfg.n_head, hs = C / H, Tk = trit_gpt_key_positions(&m->cfg);
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

// Row r of the embedding table into out (C): its f32 values, or on a decode-only model decoded
// from its panels or its codes.
static void table_row(const trit_gpt_cache *c, int i, int64_t r, float *out) {
    const int64_t C = c->m->cfg.n_embd;
    const float *t = trit_gpt_cache_f32(c, i);
    if (t) {
        memcpy(out, t + r * C, sizeof(float) * (size_t)C);
        return;
    }
    if (c->w->panels && c->w->panels[i].codes) {
        trit_qpanels_row_f32(&c->w->panels[i], r, out);
        return;
    }
    const trit_tensor *q = trit_gpt_cache_quantized(c, i);
    trit_dtype_traits_of(q->dtype)->to_f32(out, (const char *)trit_tensor_ptr(q) + trit_dtype_nbytes(q->dtype, r * C), C,
                                           q->quant, r * C);
}

// x (R, C) = wte[tokens] + wpe[positions pos0..]: the embedding step.
static void embed(const trit_gpt_cache *c, const gpt_step *st, const int32_t *tokens, int64_t pos0, int64_t R, float *x) {
    const int64_t C = c->m->cfg.n_embd;
    const float *wpe = trit_gpt_cache_f32(c, st->w2);
    for (int64_t r = 0; r < R; r++) {
        table_row(c, st->w, tokens[r], x + r * C);
        for (int64_t j = 0; wpe && j < C; j++) x[r * C + j] += wpe[(pos0 + r) * C + j];
    }
}

// Runs program step i for the R rows of positions pos0.. (the head's steps, after the blocks, on
// the last row only, when logits are asked for). Returns the number of steps taken: a linear
// whose output the next step adds to the residual stream takes both, the add done by the
// matmul's epilogue.
static int run_step(trit_gpt_cache *c, int i, const int32_t *tokens, int64_t pos0, int64_t R, float *logits) {
    const trit_gpt *m = c->m;
    const gpt_step *st = &m->prog[i];
    const bool head = st->block >= m->cfg.n_layer;
    if (head && !logits) return 1;
    const int64_t rows = head ? 1 : R;
    const float *src = c->slot[st->src] + (head && st->src == GPT_X ? (R - 1) * m->slot_width[GPT_X] : 0);
    float *dst = c->slot[st->dst];
    switch (st->op) {
    case GPT_OP_EMBED: embed(c, st, tokens, pos0, R, dst); break;
    case GPT_OP_NORM: norm(c, dst, src, st, rows); break;
    case GPT_OP_LINEAR: {
        const gpt_step *next = i + 1 < m->n_prog ? st + 1 : NULL;
        const bool fuse = next && next->op == GPT_OP_RESIDUAL && next->src == st->dst;
        matmul(c, dst, src, st, rows, fuse ? c->slot[GPT_X] : NULL);
        return fuse ? 2 : 1;
    }
    case GPT_OP_ROPE: rope_rows(m, c, dst, pos0, rows); break;
    case GPT_OP_ATTEND: attend(m, c, st->block, pos0, rows, src, dst); break;
    case GPT_OP_GELU: trit_kernel_gelu_fwd_f32(dst, src, NULL, rows, st->width); break;  // the graph's GELU kernel
    case GPT_OP_SWIGLU:
        for (int64_t r = 0; r < rows; r++)  // the graph's SwiGLU row
            trit_swiglu_row_f32(dst + r * st->width, src + r * 2 * st->width, 1, src + r * 2 * st->width + st->width, 1,
                                st->width);
        break;
    case GPT_OP_RESIDUAL:
        for (int64_t r = 0; r < rows * st->width; r++) c->slot[GPT_X][r] += src[r];
        break;
    case GPT_OP_HEAD: (void)product(c, logits, src, st, 1, NULL); break;
    case GPT_OP_ADAPTER: bottleneck_rows(c, dst, st, rows); break;
    }
    return 1;
}

// Feeds n tokens at the next positions, a block of the program at a time over all chunks of ROWS
// positions (the residual stream of all n kept in c->xs), so each block's weights are read once
// per chunk while they are in cache, and weight-only matrices are decoded once per block. A
// chunk's keys and values are stored before it attends, and the chunks before it have stored
// theirs in this block already: each chunk computes what it computes run alone. Logits (V) of
// the last position when asked (the head runs on the last chunk only).
static void forward_tokens(const trit_gpt *m, trit_gpt_cache *c, const int32_t *tokens, int64_t n, float *logits) {
    float *x = c->slot[GPT_X];
    const int64_t C = m->slot_width[GPT_X];
    for (int i = 0; i < m->n_prog;) {
        int e = i + 1;
        while (e < m->n_prog && m->prog[e].block == m->prog[i].block) e++;
        if (c->wdec) {
            for (int t = 0; t < m->n_tensors; t++) c->wdec_at[t] = -1;
            c->wdec_used = 0;
        }
        const bool head = m->prog[i].block >= m->cfg.n_layer;
        for (int64_t j = head ? (n - 1) / ROWS * ROWS : 0; j < n; j += ROWS) {
            const int64_t R = n - j < ROWS ? n - j : ROWS;
            c->slot[GPT_X] = c->xs + j * C;
            for (int s = i; s < e;) s += run_step(c, s, tokens + j, c->len + j, R, j + R == n ? logits : NULL);
        }
        i = e;
    }
    c->slot[GPT_X] = x;
    c->len += n;
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
    forward_tokens(m, c, tokens, n, logits);
    return TRIT_OK;
}

trit_status trit_gpt_decode(const trit_gpt *m, trit_gpt_cache *c, int32_t token, float *logits /* (V) */) {
    return trit_gpt_prefill(m, c, &token, 1, logits);
}
