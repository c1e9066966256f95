// Flash attention's bf16 body (see ops/flash_attention_bf16.h): the tile loops of
// ops/flash_attention.c over bf16 pair operands. Per query tile, forward packs the queries as
// words transposed (the scores' yt), and per key tile the probabilities and the values as pairs
// along the keys (the accumulation's coefficients and rows); keys are read in place. Backward
// packs, once per head, the queries and the output gradients both transposed (for the scores)
// and as pairs along the queries (for dK and dV), and per key tile the keys as pairs along the
// keys (for dQ); the probability and score-gradient tiles are rounded to bf16 as rows (pairs
// along the queries) or paired along the keys, as each product needs.
#ifndef TRIT_REAL_F64  // this file is compiled with the op sources; it exists in the f32 build only
#include "ops/flash_attention_bf16.h"

#include "ops/flash_attention.h"

#include <math.h>
#include <string.h>

#define W TRIT_FLASH_W  // queries per tile
#define BC TRIT_FLASH_BC

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Per-thread work, in 4-byte units (the running sums l first: doubles, 8-byte aligned).
typedef struct fwd_work {
    double *l;       // (W) running sums
    float *m;        // (W) running max
    float *alpha;    // (W) rescale factors
    float *st;       // (BC, W) scores, then probabilities
    uint32_t *qt;    // (hp, W) the tile's query words, transposed
    uint32_t *coef;  // (BC / 2, W) probabilities paired along the keys
    uint32_t *vp;    // (BC / 2, hs) values paired along the keys
} fwd_work;

typedef struct bwd_work {
    float *lse, *dd;  // (nt W) each, padded with zeros
    float *pt, *dpt;  // (BC, W) probabilities; dP, then dS
    uint32_t *qt;     // nt tiles of (hp, W): query words transposed
    uint32_t *got;    // nt tiles of (hp, W): output-gradient words transposed
    uint32_t *qp;     // (nt W / 2, hs) queries paired along the queries
    uint32_t *gp;     // (nt W / 2, hs) output gradients paired along the queries
    uint32_t *kp;     // (BC / 2, hs) the key tile paired along the keys
    uint16_t *row16;  // (W, hs) a tile of output gradients rounded to bf16
    uint16_t *p16;    // (BC, W) probabilities rounded: rows of words paired along the queries
    uint16_t *s16;    // (BC, W) score gradients rounded likewise
    uint32_t *spair;  // (BC / 2, W) score gradients paired along the keys
} bwd_work;

// The layouts below: field `field` of w (when w is given) gets n values of `type` at byte `at`
// of base p, each region 64-byte aligned; the functions return the bytes taken.
#define TAKE(field, type, n)                                             \
    do {                                                                 \
        if (w) w->field = (type *)(void *)(p + at);                      \
        at += ((size_t)(n) * sizeof(type) + 63) / 64 * 64;               \
    } while (0)

static size_t fwd_layout(int64_t hs, void *base, fwd_work *w) {
    const int64_t hp = hs / 2;
    char *p = base;
    size_t at = 0;
    TAKE(l, double, W);
    TAKE(m, float, W);
    TAKE(alpha, float, W);
    TAKE(st, float, BC * W);
    TAKE(qt, uint32_t, hp * W);
    TAKE(coef, uint32_t, BC / 2 * W);
    TAKE(vp, uint32_t, BC / 2 * hs);
    return at;
}

static size_t bwd_layout(int64_t T, int64_t hs, void *base, bwd_work *w) {
    const int64_t hp = hs / 2, nt = ceil_div(T, W);
    char *p = base;
    size_t at = 0;
    TAKE(lse, float, nt * W);
    TAKE(dd, float, nt * W);
    TAKE(pt, float, BC * W);
    TAKE(dpt, float, BC * W);
    TAKE(qt, uint32_t, nt * hp * W);
    TAKE(got, uint32_t, nt * hp * W);
    TAKE(qp, uint32_t, nt * W / 2 * hs);
    TAKE(gp, uint32_t, nt * W / 2 * hs);
    TAKE(kp, uint32_t, BC / 2 * hs);
    TAKE(row16, uint16_t, W * hs);
    TAKE(p16, uint16_t, BC * W);
    TAKE(s16, uint16_t, BC * W);
    TAKE(spair, uint32_t, BC / 2 * W);
#undef TAKE
    return at;
}

size_t trit_flash_bf16_work_bytes(int64_t T, int64_t hs) {
    const size_t f = fwd_layout(hs, NULL, NULL), b = bwd_layout(T, hs, NULL, NULL);
    return f > b ? f : b;
}

static const uint32_t *as_words(const uint16_t *p) { return (const uint32_t *)(const void *)p; }

// A bf16 value as f32 (a NaN stays a NaN, perhaps signalling: it only enters a product).
static inline float widen(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

// ---- forward -------------------------------------------------------------------------------

// Queries [i0, i0 + br) of the head into acc's rows (the first key tile overwrites them).
static void forward_tile(const trit_flash_bf16_kernels *kn, const trit_flash_bf16_head *h, int64_t i0, float *acc,
                         float *lse, const fwd_work *w) {
    const int64_t T = h->T, hs = h->hs, hp = hs / 2, br = min64(W, T - i0);
    const float scale = (float)(1.0 / sqrt((double)hs));
    kn->transpose(w->qt, as_words(h->q + i0 * h->ldq), h->ldq / 2, br, hp);
    for (int64_t i = 0; i < W; i++) {
        w->m[i] = -INFINITY;
        w->l[i] = 0;
    }
    float *ai = acc + i0 * hs;
    for (int64_t j0 = 0; j0 < i0 + br; j0 += BC) {
        const int64_t bc = min64(BC, i0 + br - j0), np = ceil_div(bc, 2);
        kn->scores(bc, hp, as_words(h->k + j0 * h->ldk), h->ldk / 2, w->qt, w->st);
        trit_kernel_flash_softmax_f32(w->st, bc, br, j0 - i0, scale, w->m, w->l, w->alpha);
        kn->pair_rows(w->coef, w->st, TRIT_F32, W, bc, W);
        kn->pair_rows(w->vp, h->v + j0 * h->ldv, TRIT_BF16, h->ldv, bc, hs);
        // acc[i] = acc[i] * alpha[i] + sum_j P[j][i] v[j]
        kn->accum(br, np, hs, w->coef, 1, W, w->vp, hs, ai, hs, w->alpha, j0 > 0);
    }
    for (int64_t i = 0; i < br; i++) {
        float *row = ai + i * hs;
        const float inv = (float)(1.0 / w->l[i]);
        for (int64_t c = 0; c < hs; c++) row[c] *= inv;
        lse[i0 + i] = w->m[i] + (float)log(w->l[i]);
    }
}

void trit_flash_bf16_forward(const trit_flash_bf16_kernels *kn, const trit_flash_bf16_head *h, float *acc,
                             float *lse, void *work) {
    fwd_work w;
    fwd_layout(h->hs, work, &w);
    for (int64_t i0 = 0; i0 < h->T; i0 += W) forward_tile(kn, h, i0, acc, lse, &w);
}

// ---- backward ------------------------------------------------------------------------------

// Rows of the output this many ahead are asked for while D is summed: they come from memory, a
// row of the whole (B, T, C) tensor apart, read for the first time since forward.
enum { ROWS_AHEAD = 8 };

// The head's packed queries and output gradients, and D and lse padded to whole tiles.
static void backward_pack(const trit_flash_bf16_kernels *kn, const trit_flash_bf16_head *h, const uint16_t *o,
                          int64_t ldo, const float *go, int64_t ldg, const float *lse, const bwd_work *w) {
    const int64_t T = h->T, hs = h->hs, hp = hs / 2, nt = ceil_div(T, W);
    for (int64_t t = 0; t < nt; t++) {
        const int64_t i0 = t * W, n = min64(W, T - i0);
        kn->transpose(w->qt + t * hp * W, as_words(h->q + i0 * h->ldq), h->ldq / 2, n, hp);
        for (int64_t r = 0; r < n; r++) kn->round(w->row16 + r * hs, go + (i0 + r) * ldg, hs);
        kn->transpose(w->got + t * hp * W, as_words(w->row16), hp, n, hp);
        kn->pair_rows(w->qp + i0 / 2 * hs, h->q + i0 * h->ldq, TRIT_BF16, h->ldq, n, hs);
        kn->pair_rows(w->gp + i0 / 2 * hs, go + i0 * ldg, TRIT_F32, ldg, n, hs);
    }
    for (int64_t i = 0; i < nt * W; i++) {
        double acc = 0;
        if (i + ROWS_AHEAD < T)
            for (int64_t c = 0; c < hs; c += 64 / (int64_t)sizeof *o)
                __builtin_prefetch(o + (i + ROWS_AHEAD) * ldo + c);
        if (i < T) {
            const float *g = go + i * ldg;
            const uint16_t *oi = o + i * ldo;
#pragma omp simd reduction(+ : acc)
            for (int64_t c = 0; c < hs; c++) acc += (double)g[c] * (double)widen(oi[c]);
        }
        w->dd[i] = (float)acc;
        w->lse[i] = i < T ? lse[i] : 0;
    }
}

void trit_flash_bf16_backward(const trit_flash_bf16_kernels *kn, const trit_flash_bf16_head *h, const uint16_t *o,
                              int64_t ldo, const float *go, int64_t ldg, float *const g[3], const int64_t ldgi[3],
                              const float *lse, uint32_t store, void *work) {
    const int64_t T = h->T, hs = h->hs, hp = hs / 2;
    const float scale = (float)(1.0 / sqrt((double)hs));
    float *const gq = g[0], *const gk = g[1], *const gv = g[2];
    const int64_t ldq = ldgi[0], ldk = ldgi[1], ldv = ldgi[2];
    bwd_work w;
    bwd_layout(T, hs, work, &w);
    backward_pack(kn, h, o, ldo, go, ldg, lse, &w);
    for (int64_t j0 = 0; j0 < T; j0 += BC) {
        const int64_t bc = min64(BC, T - j0), kpairs = ceil_div(bc, 2);
        if (gq) kn->pair_rows(w.kp, h->k + j0 * h->ldk, TRIT_BF16, h->ldk, bc, hs);
        for (int64_t i0 = j0 / W * W; i0 < T; i0 += W) {
            const int64_t t = i0 / W, br = min64(W, T - i0), qpairs = ceil_div(br, 2);
            // A stored gradient's rows are written by their first tile pair (ops/flash_attention.c).
            const bool first_kv = i0 == j0 / W * W, add_q = !(store & 1u) || j0 > 0,
                       add_k = !(store & 2u) || !first_kv, add_v = !(store & 4u) || !first_kv;
            kn->scores(bc, hp, as_words(h->k + j0 * h->ldk), h->ldk / 2, w.qt + t * hp * W, w.pt);
            trit_kernel_flash_probs_f32(w.pt, bc, br, j0 - i0, scale, w.lse + i0);
            if (gv) {  // dV[j] += sum_i P[j][i] dO[i]
                kn->round(w.p16, w.pt, bc * W);
                kn->accum(bc, qpairs, hs, as_words(w.p16), W / 2, 1, w.gp + i0 / 2 * hs, hs, gv + j0 * ldv, ldv,
                          NULL, add_v);
            }
            if (!gq && !gk) continue;
            kn->scores(bc, hp, as_words(h->v + j0 * h->ldv), h->ldv / 2, w.got + t * hp * W, w.dpt);  // dP^T
            trit_kernel_flash_dscores_f32(w.dpt, w.pt, bc, w.dd + i0, scale);
            if (gq) {  // dQ[i] += sum_j dS[j][i] k[j]
                kn->pair_rows(w.spair, w.dpt, TRIT_F32, W, bc, W);
                kn->accum(br, kpairs, hs, w.spair, 1, W, w.kp, hs, gq + i0 * ldq, ldq, NULL, add_q);
            }
            if (gk) {  // dK[j] += sum_i dS[j][i] q[i]
                kn->round(w.s16, w.dpt, bc * W);
                kn->accum(bc, qpairs, hs, as_words(w.s16), W / 2, 1, w.qp + i0 / 2 * hs, hs, gk + j0 * ldk, ldk,
                          NULL, add_k);
            }
        }
    }
}
#endif
