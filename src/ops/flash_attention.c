// Causal multi-head self-attention in tiles (flash attention), forward and backward. Same
// function as ops/attention.c (which stays as the oracle), with memory linear in T.
//
// Per (batch, head) and query tile of BR queries, forward walks the key tiles of BC keys at or
// before the diagonal (tiles wholly above it are skipped; only diagonal tiles are masked) and
// keeps an online softmax per query: the running max m, the running sum l of exp(s - m) and
// the output accumulator, rescaled by exp(m_old - m_new) whenever the max grows. At the end
// out = acc / l and lse = m + log(l) is saved: (B, H, T), the only thing backward needs
// besides the inputs and the output.
//
// Backward (as in FlashAttention-2), per (batch, head): D = rowsum(dO * O), then per key tile
// and each query tile at or below the diagonal, P = exp(s - lse) is recomputed and
//   dV += P^T dO,   dP = dO V^T,   dS = P (dP - D) / sqrt(hs),   dQ += dS K,   dK += dS^T Q.
//
// Score tiles are kept transposed, keys by query lanes (see kernels/flash.h), so the softmax
// over keys is element-wise across lanes; queries (and output gradients) are packed transposed
// once per tile (forward) or per head (backward); keys and values are read in place. The
// output accumulator lives in the output itself and gradients are added straight into gin
// (through its strides: q, k and v's may be views of one parent's; a stored one is written by
// each row's first tile pair instead), so scratch holds a few tiles per thread plus, in
// backward, the head's packed queries and output gradients (linear in T). Threads take whole query tiles (forward) or whole (batch, head)
// pairs (backward), each computed the same way on any thread, so results do not depend on the
// thread count.
#include "ops/flash_attention.h"

#include "ops/flash_attention_bf16.h"
#include "ops/op_build.h"
#include "kernels/flash.h"
#include "ops/attention.h"
#include "trit/ops.h"

#include <omp.h>
#include <string.h>

#define BR TRIT_FLASH_W  // queries per tile: the lanes of the tile kernels
#define BC TRIT_FLASH_BC
// Below this many multiply-adds in total the op stays on one thread.
#define FLASH_PARALLEL_MIN ((int64_t)1 << 16)

typedef struct flash_dims {
    int64_t B, T, C, H, hs;
} flash_dims;

static flash_dims dims_of(const trit_op_call *c) {
    const trit_flash_attention_attr *a = c->attr;
    const trit_tensor *q = c->in[0];
    flash_dims d = {q->shape[0], q->shape[1], q->shape[2], a->n_head, 0};
    d.hs = d.H > 0 ? d.C / d.H : 0;
    return d;
}

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Base pointer of batch b and leading dimension (elements between time steps) of an input.
static const real *in_base(const trit_tensor *t, int64_t b) {
    return (const real *)t->data + t->offset + b * t->strides[0];
}
static int64_t in_ld(const trit_tensor *t) { return t->shape[1] > 1 ? t->strides[1] : t->shape[2]; }

// ---- memory -------------------------------------------------------------------------------

// Per-thread scratch regions. The count depends only on the shape and the process's fixed slot
// count (trit_thread_slots), so compile time and run time agree on it; run time uses at most
// this many threads.
static int64_t flash_slots(const flash_dims *d) {
    int64_t procs = trit_thread_slots();
    int64_t items = d->B * d->H * ceil_div(d->T, BR);
    return items < procs ? (items > 0 ? items : 1) : procs;
}

// Forward: packed queries (hs, BR), a score tile (BC, BR), m and alpha (BR), l (BR doubles).
static size_t fwd_thread_bytes(const flash_dims *d) {
    return sizeof(real) * (size_t)(d->hs * BR + BC * BR + 2 * BR) + sizeof(double) * BR;
}

// Backward: the head's packed queries and output gradients (nt tiles of (hs, BR) each), the
// probability and dP tiles (BC, BR), and lse and D padded to whole tiles (nt * BR each).
static size_t bwd_thread_bytes(const flash_dims *d) {
    const int64_t nt = ceil_div(d->T, BR);
    return sizeof(real) * (size_t)(2 * nt * d->hs * BR + 2 * BC * BR + 2 * nt * BR);
}

static size_t flash_thread_bytes(const flash_dims *d) {
    size_t f = fwd_thread_bytes(d), b = bwd_thread_bytes(d);
    return ((f > b ? f : b) + 63) / 64 * 64;
}

static size_t flash_saved_bytes(const trit_op_call *c) {
    flash_dims d = dims_of(c);
    return sizeof(real) * (size_t)(d.B * d.H * d.T);
}

static size_t body_scratch_bytes(const trit_op_call *c) {
    flash_dims d = dims_of(c);
    return (size_t)flash_slots(&d) * flash_thread_bytes(&d);
}

static size_t lowp_bytes(const trit_op_call *c);

static size_t flash_scratch_bytes(const trit_op_call *c) { return body_scratch_bytes(c) + lowp_bytes(c); }

static int flash_threads(const flash_dims *d, int64_t items) {
    int64_t t = min64(min64(flash_slots(d), items), omp_get_max_threads());
    int64_t work = d->B * d->H * d->T * d->T * d->hs;
    return t > 1 && work >= FLASH_PARALLEL_MIN ? (int)t : 1;
}

// 16-bit inputs and output (a graph with 16-bit activations) in the f32 build only: the f32 body
// runs on f32 copies of each (batch, head) pair made in scratch (see flash_lowp below).

static bool any_lowp(const trit_op_call *c) {
    return trit_op_lowp_ok(c->in[0]->dtype) || trit_op_lowp_ok(c->in[1]->dtype) || trit_op_lowp_ok(c->in[2]->dtype) ||
           (c->out && trit_op_lowp_ok(c->out->dtype));
}

// Per thread, the f32 copies of one (batch, head) pair: q, k, v and the output, (T, hs) each;
// or, for the bf16 body, the f32 output and that body's work.
static size_t head_f32_bytes(const flash_dims *d) { return (sizeof(float) * (size_t)(d->T * d->hs) + 63) / 64 * 64; }

static size_t lowp_thread_bytes(const flash_dims *d) {
    const size_t widen = 4 * head_f32_bytes(d);
#ifndef TRIT_REAL_F64
    const size_t native = head_f32_bytes(d) + trit_flash_bf16_work_bytes(d->T, d->hs);
    return native > widen ? native : widen;
#else
    return widen;
#endif
}

// Threads take (batch, head) pairs here, so at most B H slots are used.
static size_t lowp_bytes(const trit_op_call *c) {
    const flash_dims d = dims_of(c);
    return any_lowp(c) ? (size_t)min64(flash_slots(&d), d.B * d.H > 0 ? d.B * d.H : 1) * lowp_thread_bytes(&d) : 0;
}

// ---- shape rule ---------------------------------------------------------------------------

static trit_status flash_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_flash_attention_attr *a = attr;
    char s0[96], s1[96], s2[96];
    if (n_in != 3) return trit_error(TRIT_ERR_INVALID, "flash_attention: expected 3 inputs (q, k, v), got %d", n_in);
    for (int i = 0; i < 3; i++) {
        if (in[i]->dtype != TRIT_REAL_DTYPE && !trit_op_lowp_ok(in[i]->dtype))
            return trit_error(TRIT_ERR_DTYPE, "flash_attention: %s must be %s%s, got %s",
                              i == 0 ? "q" : i == 1 ? "k" : "v", trit_dtype_name(TRIT_REAL_DTYPE),
                              TRIT_REAL_DTYPE == TRIT_F32 ? " or bf16/f16" : "", trit_dtype_name(in[i]->dtype));
    }
    const trit_tensor *q = in[0], *k = in[1], *v = in[2];
    if (q->ndim != 3 || !trit_tensor_same_shape(q, k) || !trit_tensor_same_shape(q, v))
        return trit_error(TRIT_ERR_SHAPE, "flash_attention: expected q, k, v of one shape (B, T, C), got q %s, k %s, v %s",
                          trit_tensor_shape_str(q, s0, sizeof s0), trit_tensor_shape_str(k, s1, sizeof s1),
                          trit_tensor_shape_str(v, s2, sizeof s2));
    if (a->n_head < 1 || q->shape[2] % a->n_head != 0)
        return trit_error(TRIT_ERR_SHAPE, "flash_attention: C = %lld channels do not split into %d heads; C must be a multiple of n_head",
                          (long long)q->shape[2], a->n_head);
    for (int i = 0; i < 3; i++)
        if (!trit_attention_layout_ok(in[i]))
            return trit_error(TRIT_ERR_INVALID, "flash_attention: input %d needs a unit-stride last dim; pass it through trit_contiguous", i);
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 3, q->shape);
}

// ---- shared pieces ------------------------------------------------------------------------

typedef struct flash_head {
    const real *q, *k, *v;  // (T, hs) each, rows ldq / ldk / ldv apart
    int64_t ldq, ldk, ldv;
} flash_head;

static flash_head head_of(const trit_op_call *c, const flash_dims *d, int64_t b, int64_t h) {
    const trit_tensor *q = c->in[0], *k = c->in[1], *v = c->in[2];
    flash_head p = {in_base(q, b) + h * d->hs, in_base(k, b) + h * d->hs, in_base(v, b) + h * d->hs,
                    in_ld(q), in_ld(k), in_ld(v)};
    return p;
}

// Rows this many ahead of the one being read are asked for where a head's rows are read for the
// first time (they come from memory, a row of the whole (B, T, C) tensor apart).
enum { ROWS_AHEAD = 8 };

static void prefetch_row(const real *row, int64_t hs) {
    for (int64_t c = 0; c < hs; c += 64 / (int64_t)sizeof(real)) __builtin_prefetch(row + c);
}

// xt (hs, BR) = rows [0, n) of x (rows ldx apart) transposed; lanes [n, BR) are zero.
static void pack_transposed(real *xt, const real *x, int64_t ldx, int64_t n, int64_t hs) {
    for (int64_t c = 0; c < hs; c++)
        for (int64_t i = n; i < BR; i++) xt[c * BR + i] = 0;
    for (int64_t i = 0; i < n; i++) {
        const real *row = x + i * ldx;
        if (i + ROWS_AHEAD < n) prefetch_row(row + ROWS_AHEAD * ldx, hs);
        for (int64_t c = 0; c < hs; c++) xt[c * BR + i] = row[c];
    }
}

// ---- forward ------------------------------------------------------------------------------

// Queries [i0, i0 + br) of one head. o: (T, hs) rows ldo apart, the head's output columns, used
// as the accumulator; lse: (T) of the head.
static void forward_tile(const flash_dims *d, const flash_head *p, int64_t i0, real *o, int64_t ldo, real *lse,
                         real *work) {
    const int64_t T = d->T, hs = d->hs, br = min64(BR, T - i0);
    const real scale = (real)(1.0 / sqrt((double)hs));
    real *qt = work;             // (hs, BR) the tile's queries, transposed
    real *st = qt + hs * BR;     // (BC, BR) scores, then probabilities
    real *m = st + BC * BR;      // (BR) running max
    real *alpha = m + BR;        // (BR) rescale factors of the current key tile
    double *l = (double *)(alpha + BR);  // (BR) running sums
    pack_transposed(qt, p->q + i0 * p->ldq, p->ldq, br, hs);
    for (int64_t i = 0; i < BR; i++) {
        m[i] = RMAX_NEG;
        l[i] = 0;
    }
    real *oi = o + i0 * ldo;
    // Key tiles that hold at least one key at or before the tile's last query.
    for (int64_t j0 = 0; j0 < i0 + br; j0 += BC) {
        const int64_t bc = min64(BC, i0 + br - j0);
        R(trit_kernel_flash_scores)(bc, hs, p->k + j0 * p->ldk, p->ldk, qt, st);
        R(trit_kernel_flash_softmax)(st, bc, br, j0 - i0, scale, m, l, alpha);
        // out[i] = out[i] * alpha[i] + sum_j P[j][i] v[j]; the first tile overwrites.
        R(trit_kernel_flash_accum)(br, bc, hs, st, 1, BR, p->v + j0 * p->ldv, p->ldv, oi, ldo, alpha, j0 > 0);
    }
    for (int64_t i = 0; i < br; i++) {
        real *row = oi + i * ldo;
        const real inv = (real)(1.0 / l[i]);
        for (int64_t c = 0; c < hs; c++) row[c] *= inv;
        lse[i0 + i] = m[i] + (real)log(l[i]);
    }
}

static trit_status flash_forward(const trit_op_call *c) {
    const flash_dims d = dims_of(c);
    const int64_t BH = d.B * d.H, nq = ceil_div(d.T, BR), items = BH * nq;
    real *out = c->out->data;  // (B, T, C)
    real *lse = c->saved;      // (B, H, T)
    if (items == 0 || d.hs == 0) return TRIT_OK;
    const size_t stride = flash_thread_bytes(&d);
    const int threads = flash_threads(&d, items);
    // Query tiles cost more further down the sequence; dynamic scheduling balances them and
    // cannot change results, since every tile is computed whole by one thread.
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        real *work = (real *)((char *)c->scratch + (size_t)omp_get_thread_num() * stride);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int64_t bh = it / nq, i0 = (it % nq) * BR, b = bh / d.H, h = bh % d.H;
            const flash_head p = head_of(c, &d, b, h);
            forward_tile(&d, &p, i0, out + b * d.T * d.C + h * d.hs, d.C, lse + bh * d.T, work);
        }
    }
    return TRIT_OK;
}

// ---- backward -----------------------------------------------------------------------------

typedef struct flash_grads {
    const real *o;             // (T, hs) rows ldo apart: the head's output
    int64_t ldo;
    const real *go;            // (T, hs) rows C apart: the output's gradient
    real *gq, *gk, *gv;        // (T, hs) rows ldgq, ldgk, ldgv apart, or NULL
    int64_t ldgq, ldgk, ldgv;
    const real *lse;           // (T)
    uint32_t store;            // the call's store_inputs: gq, gk, gv (bits 0, 1, 2) start unwritten
} flash_grads;

// Input i's gradient for head h of batch element b: its first element, and its row stride in
// *ld. A gradient may be a view of a larger one (bwd_strided_gin: q, k and v's gradients are then
// the columns of their parent's), so it is read through its own strides.
static real *grad_head(const trit_op_call *c, int i, const flash_dims *d, int64_t b, int64_t h, int64_t *ld) {
    const trit_tensor *t = c->gin[i];
    *ld = t ? in_ld(t) : 0;
    return t ? (real *)t->data + t->offset + b * t->strides[0] + h * d->hs : NULL;
}

// The gradients of head h of batch element b: output o (rows ldo apart), the output's gradient
// go (contiguous (B, T, C)), q, k and v's, lse.
static flash_grads grads_of(const trit_op_call *c, const flash_dims *d, int64_t b, int64_t h, const real *o,
                            int64_t ldo, const real *lse) {
    flash_grads g = {.o = o, .ldo = ldo, .go = (const real *)c->gout->data + b * d->T * d->C + h * d->hs, .lse = lse,
                     .store = c->store_inputs};
    g.gq = grad_head(c, 0, d, b, h, &g.ldgq);
    g.gk = grad_head(c, 1, d, b, h, &g.ldgk);
    g.gv = grad_head(c, 2, d, b, h, &g.ldgv);
    return g;
}

// Tile pair (queries from i0, keys from j0) of one head, with the head's packed tiles.
static void backward_pair(const flash_dims *d, const flash_head *p, const flash_grads *g, int64_t i0, int64_t j0,
                          const real *qt, const real *got, const real *lse, const real *dd, real *pt, real *dpt) {
    const int64_t T = d->T, hs = d->hs, C = d->C, br = min64(BR, T - i0), bc = min64(BC, T - j0);
    const real scale = (real)(1.0 / sqrt((double)hs));
    const real *kj = p->k + j0 * p->ldk, *vj = p->v + j0 * p->ldv;
    R(trit_kernel_flash_scores)(bc, hs, kj, p->ldk, qt, pt);
    R(trit_kernel_flash_probs)(pt, bc, br, j0 - i0, scale, lse);
    // dV[j] += sum_i P[j][i] dO[i]
    // A stored gradient's rows are written, not added to, by their first tile pair: a query
    // tile's at the first key tile (every query sees key 0), a key tile's at the query tile
    // holding its first key (the tile pair is dense, masked scores giving zeros).
    const bool first_kv = i0 == j0 / BR * BR;
    const bool add_q = !(g->store & TRIT_IN(0)) || j0 > 0, add_k = !(g->store & TRIT_IN(1)) || !first_kv,
               add_v = !(g->store & TRIT_IN(2)) || !first_kv;
    if (g->gv)
        R(trit_kernel_flash_accum)(bc, br, hs, pt, BR, 1, g->go + i0 * C, C, g->gv + j0 * g->ldgv, g->ldgv, NULL,
                                   add_v);
    if (!g->gq && !g->gk) return;
    R(trit_kernel_flash_scores)(bc, hs, vj, p->ldv, got, dpt);  // dP^T = V dO^T
    R(trit_kernel_flash_dscores)(dpt, pt, bc, dd, scale);
    // dQ[i] += sum_j dS[j][i] k[j],   dK[j] += sum_i dS[j][i] q[i]
    if (g->gq)
        R(trit_kernel_flash_accum)(br, bc, hs, dpt, 1, BR, kj, p->ldk, g->gq + i0 * g->ldgq, g->ldgq, NULL, add_q);
    if (g->gk)
        R(trit_kernel_flash_accum)(bc, br, hs, dpt, BR, 1, p->q + i0 * p->ldq, p->ldq, g->gk + j0 * g->ldgk, g->ldgk,
                                   NULL, add_k);
}

static void backward_head(const flash_dims *d, const flash_head *p, const flash_grads *g, real *work) {
    const int64_t T = d->T, hs = d->hs, C = d->C, nt = ceil_div(T, BR);
    real *qt = work;                  // nt tiles of (hs, BR): queries, transposed
    real *got = qt + nt * hs * BR;    // nt tiles of (hs, BR): output gradients, transposed
    real *pt = got + nt * hs * BR;    // (BC, BR) probabilities
    real *dpt = pt + BC * BR;         // (BC, BR) dP, then dS
    real *lse = dpt + BC * BR;        // (nt * BR) log-sum-exp, padded with 0
    real *dd = lse + nt * BR;         // (nt * BR) D = rowsum(dO * O), padded with 0
    for (int64_t t = 0; t < nt; t++) {
        const int64_t n = min64(BR, T - t * BR);
        pack_transposed(qt + t * hs * BR, p->q + t * BR * p->ldq, p->ldq, n, hs);
        pack_transposed(got + t * hs * BR, g->go + t * BR * C, C, n, hs);
    }
    for (int64_t i = 0; i < nt * BR; i++) {
        double acc = 0;
        if (i + ROWS_AHEAD < T) prefetch_row(g->o + (i + ROWS_AHEAD) * g->ldo, hs);
        if (i < T) {
            const real *a = g->go + i * C, *b = g->o + i * g->ldo;
#pragma omp simd reduction(+ : acc)
            for (int64_t c = 0; c < hs; c++) acc += (double)a[c] * (double)b[c];
        }
        dd[i] = (real)acc;
        lse[i] = i < T ? g->lse[i] : 0;
    }
    for (int64_t j0 = 0; j0 < T; j0 += BC)
        // Query tiles from the one holding query j0 (the first that sees any key of the tile).
        for (int64_t i0 = j0 / BR * BR; i0 < T; i0 += BR) {
            const int64_t t = i0 / BR;
            backward_pair(d, p, g, i0, j0, qt + t * hs * BR, got + t * hs * BR, lse + i0, dd + i0, pt, dpt);
        }
}

static trit_status flash_backward(const trit_op_call *c) {
    const flash_dims d = dims_of(c);
    const int64_t BH = d.B * d.H;
    const real *o = c->out->data;  // (B, T, C)
    const real *lse = c->saved;    // (B, H, T)
    if (BH == 0 || d.T == 0 || d.hs == 0 || (!c->gin[0] && !c->gin[1] && !c->gin[2])) return TRIT_OK;
    const size_t stride = flash_thread_bytes(&d);
    const int threads = flash_threads(&d, BH);
    // A pair's dK and dV sum over its query tiles in a fixed order, so each thread owns whole
    // pairs; pairs cost the same, so static scheduling balances them.
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        real *work = (real *)((char *)c->scratch + (size_t)omp_get_thread_num() * stride);
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < BH; bh++) {
            const int64_t b = bh / d.H, h = bh % d.H, col = b * d.T * d.C + h * d.hs;
            const flash_head p = head_of(c, &d, b, h);
            const flash_grads g = grads_of(c, &d, b, h, o + col, d.C, lse + bh * d.T);
            backward_head(&d, &p, &g, work);
        }
    }
    return TRIT_OK;
}

// ---- 16-bit activations ----------------------------------------------------------------------

#ifndef TRIT_REAL_F64
// Head h of batch element b of t as f32 (T, hs) rows at dst. 16-bit values are not blocked, so
// a row's byte offset is its element offset times the element size.
static void widen_head(float *dst, const trit_tensor *t, const flash_dims *d, int64_t b, int64_t h) {
    const trit_dtype_traits *tr = trit_dtype_traits_of(t->dtype);
    const size_t esz = trit_dtype_nbytes(t->dtype, 1);
    const int64_t ld = in_ld(t), at0 = t->offset + b * t->strides[0] + h * d->hs;
    for (int64_t r = 0; r < d->T; r++) {
        const int64_t at = at0 + r * ld;
        tr->to_f32(dst + r * d->hs, (const char *)t->data + esz * (size_t)at, d->hs, NULL, at);
    }
}

// The f32 output y (T, hs) of head h of batch element b rounded into its columns of the output.
static void narrow_head(trit_tensor *out, const float *y, const flash_dims *d, int64_t b, int64_t h) {
    const trit_dtype_traits *tr = trit_dtype_traits_of(out->dtype);
    const size_t esz = trit_dtype_nbytes(out->dtype, 1);
    for (int64_t r = 0; r < d->T; r++) {
        const int64_t at = (b * d->T + r) * d->C + h * d->hs;
        tr->from_f32((char *)out->data + esz * (size_t)at, y + r * d->hs, d->hs, NULL, at);
    }
}

// bf16 storage whose rows the pair kernels can read as 32-bit words.
static bool words_ok(const trit_tensor *t) {
    return t->dtype == TRIT_BF16 && t->offset % 2 == 0 && t->strides[0] % 2 == 0 && in_ld(t) % 2 == 0;
}

// The bf16 pair kernels when they apply: bf16 q, k, v and output, an even head size, and a CPU
// that has them.
static const trit_flash_bf16_kernels *native_bf16(const trit_op_call *c, const flash_dims *d) {
    if (d->hs % 2 || !words_ok(c->in[0]) || !words_ok(c->in[1]) || !words_ok(c->in[2]) || !words_ok(c->out))
        return NULL;
    return trit_kernel_flash_bf16();
}

static const uint16_t *head16(const trit_tensor *t, const flash_dims *d, int64_t b, int64_t h) {
    return (const uint16_t *)t->data + t->offset + b * t->strides[0] + h * d->hs;
}

// One (batch, head) pair on the bf16 pair kernels: ho (T, hs) f32 holds the output before it is
// rounded, work the body's work (ops/flash_attention_bf16.h).
static void native_head(const trit_op_call *c, const flash_dims *d, const trit_flash_bf16_kernels *kn, bool backward,
                        int64_t b, int64_t h, float *ho, void *work) {
    const trit_flash_bf16_head hd = {d->T,
                                     d->hs,
                                     head16(c->in[0], d, b, h),
                                     head16(c->in[1], d, b, h),
                                     head16(c->in[2], d, b, h),
                                     in_ld(c->in[0]),
                                     in_ld(c->in[1]),
                                     in_ld(c->in[2])};
    const int64_t bh = b * d->H + h, col = b * d->T * d->C + h * d->hs;
    real *lse = (real *)c->saved + bh * d->T;
    if (!backward) {
        trit_flash_bf16_forward(kn, &hd, ho, lse, work);
        narrow_head(c->out, ho, d, b, h);
        return;
    }
    int64_t ldg[3];
    float *const gin[3] = {grad_head(c, 0, d, b, h, &ldg[0]), grad_head(c, 1, d, b, h, &ldg[1]),
                           grad_head(c, 2, d, b, h, &ldg[2])};
    trit_flash_bf16_backward(kn, &hd, (const uint16_t *)c->out->data + col, d->C, (const float *)c->gout->data + col,
                             d->C, gin, ldg, lse, c->store_inputs, work);
}

// The op on 16-bit q, k, v (and output): threads take whole (batch, head) pairs, widen the pair's
// q, k, v (and, in backward, output) columns into f32 (T, hs) copies in their own scratch slot,
// run the f32 body on them and, in forward, round the head's output once into 16 bits; or, where
// the bf16 pair kernels apply, run the pair on them instead (native_head). Every conversion runs
// inside the one parallel loop; each pair is computed the same way on any thread.
static trit_status flash_lowp(const trit_op_call *c, bool backward) {
    const flash_dims d = dims_of(c);
    const int64_t BH = d.B * d.H, T = d.T, hs = d.hs;
    real *lse = c->saved;  // (B, H, T)
    if (BH == 0 || T == 0 || hs == 0 || (backward && !c->gin[0] && !c->gin[1] && !c->gin[2])) return TRIT_OK;
    const size_t stride = flash_thread_bytes(&d), lowp_stride = lowp_thread_bytes(&d);
    char *lowp_base = (char *)c->scratch + body_scratch_bytes(c);
    const int threads = flash_threads(&d, BH);
    const trit_flash_bf16_kernels *kn = native_bf16(c, &d);
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        const int id = omp_get_thread_num();
        real *work = (real *)((char *)c->scratch + (size_t)id * stride);
        float *hq = (float *)(lowp_base + (size_t)id * lowp_stride);  // (T, hs)
        float *hk = hq + T * hs, *hv = hk + T * hs, *ho = hv + T * hs;   // (T, hs) each
#pragma omp for schedule(static)
        for (int64_t bh = 0; bh < BH; bh++) {
            const int64_t b = bh / d.H, h = bh % d.H;
            if (kn) {
                native_head(c, &d, kn, backward, b, h, hq, (char *)hq + head_f32_bytes(&d));
                continue;
            }
            widen_head(hq, c->in[0], &d, b, h);
            widen_head(hk, c->in[1], &d, b, h);
            widen_head(hv, c->in[2], &d, b, h);
            const flash_head p = {hq, hk, hv, hs, hs, hs};
            if (!backward) {
                for (int64_t i0 = 0; i0 < T; i0 += BR) forward_tile(&d, &p, i0, ho, hs, lse + bh * T, work);
                narrow_head(c->out, ho, &d, b, h);
                continue;
            }
            widen_head(ho, c->out, &d, b, h);
            const flash_grads g = grads_of(c, &d, b, h, ho, hs, lse + bh * T);
            backward_head(&d, &p, &g, work);
        }
    }
    return TRIT_OK;
}
#endif

static trit_status flash_forward_any(const trit_op_call *c) {
#ifndef TRIT_REAL_F64
    if (any_lowp(c)) return flash_lowp(c, false);
#endif
    return flash_forward(c);
}

static trit_status flash_backward_any(const trit_op_call *c) {
#ifndef TRIT_REAL_F64
    if (any_lowp(c)) return flash_lowp(c, true);
#endif
    return flash_backward(c);
}

const trit_op_def R(trit_op_flash_attention) = {
    .name = "flash_attention",
    .infer = flash_infer,
    .forward = flash_forward_any,
    .backward = flash_backward_any,
    .bwd_stores = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2),
    .bwd_strided_gin = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2),
    .lowp_inputs = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2),
    .lowp_output = true,
    .saved_bytes = flash_saved_bytes,
    .scratch_bytes = flash_scratch_bytes,
    .attr_size = sizeof(trit_flash_attention_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_flash_attention(trit_graph *g, trit_tensor *q, trit_tensor *k, trit_tensor *v, int n_head) {
    trit_tensor *in[3] = {q, k, v};
    if (!trit_attention_inputs(g, "flash_attention", n_head, in)) return NULL;
    trit_flash_attention_attr a = {.n_head = n_head};
    return TRIT_APPLY(g, trit_op_flash_attention, 3, in, &a);
}

#endif
