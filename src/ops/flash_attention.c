// Causal multi-head self-attention in tiles (flash attention), forward and backward. Same
// function as ops/attention.c (which stays as the oracle), with memory linear in T.
//
// Per (batch, head) and query tile of BR rows, forward walks the key tiles of BC columns at or
// before the diagonal (tiles wholly above it are skipped; only diagonal tiles are masked) and
// keeps an online softmax per query row: the running max m, the running sum l of exp(s - m)
// and the output accumulator, rescaled by exp(m_old - m_new) whenever the max grows. At the
// end out = acc / l and lse = m + log(l) is saved: (B, H, T), the only thing backward needs
// besides the inputs and the output.
//
// Backward (as in FlashAttention-2), per (batch, head): D = rowsum(dO * O), then per key tile
// and each query tile at or below the diagonal, P = exp(s - lse) is recomputed and
//   dV += P^T dO,   dP = dO V^T,   dS = P (dP - D) / sqrt(hs),   dQ += dS K,   dK += dS^T Q.
//
// Tile products go through the GEMM kernel (dispatched SIMD for f32); the element-wise work
// uses a polynomial exp that the compiler vectorizes. The accumulator lives in the output
// itself and gradients are added straight into gin, so scratch holds only a few tiles per
// thread. Threads take whole query tiles (forward) or whole (batch, head) pairs (backward),
// each computed the same way on any thread, so results do not depend on the thread count.
#include "ops/flash_attention.h"

#include "kernels/gemm.h"

#include <omp.h>
#include <string.h>

#define BR TRIT_FLASH_BR
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

// Per-thread scratch regions. The count depends only on the machine and the shape, so compile
// time and run time agree on it; run time uses at most this many threads.
static int64_t flash_slots(const flash_dims *d) {
    int64_t procs = omp_get_num_procs();
    int64_t items = d->B * d->H * ceil_div(d->T, BR);
    return items < procs ? (items > 0 ? items : 1) : procs;
}

// One thread's region: forward needs a score tile, the row max, sum and rescale factor;
// backward a probability tile, a dP tile and D for every query of the pair.
static size_t flash_thread_bytes(const flash_dims *d) {
    size_t fwd = sizeof(real) * (BR * BC + 2 * BR) + sizeof(double) * BR;
    size_t bwd = sizeof(real) * (2 * BR * BC + (size_t)d->T);
    size_t b = fwd > bwd ? fwd : bwd;
    return (b + 63) / 64 * 64;
}

static size_t flash_saved_bytes(const trit_op_call *c) {
    flash_dims d = dims_of(c);
    return sizeof(real) * (size_t)(d.B * d.H * d.T);
}

static size_t flash_scratch_bytes(const trit_op_call *c) {
    flash_dims d = dims_of(c);
    return (size_t)flash_slots(&d) * flash_thread_bytes(&d);
}

static int flash_threads(const flash_dims *d, int64_t items) {
    int64_t t = min64(min64(flash_slots(d), items), omp_get_max_threads());
    int64_t work = d->B * d->H * d->T * d->T * d->hs;
    return t > 1 && work >= FLASH_PARALLEL_MIN ? (int)t : 1;
}

// ---- shape rule ---------------------------------------------------------------------------

static trit_status flash_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_flash_attention_attr *a = attr;
    char s0[96], s1[96], s2[96];
    if (n_in != 3) return trit_error(TRIT_ERR_INVALID, "flash_attention: expected 3 inputs (q, k, v), got %d", n_in);
    for (int i = 0; i < 3; i++) {
        if (in[i]->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "flash_attention: %s must be %s (the graph's compute dtype), got %s",
                              i == 0 ? "q" : i == 1 ? "k" : "v", trit_dtype_name(TRIT_REAL_DTYPE),
                              trit_dtype_name(in[i]->dtype));
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
        if (!trit_flash_attention_layout_ok(in[i]))
            return trit_error(TRIT_ERR_INVALID, "flash_attention: input %d needs a unit-stride last dim; pass it through trit_contiguous", i);
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 3, q->shape);
}

// ---- element-wise pieces ------------------------------------------------------------------

// exp(x) for x <= 0, the only arguments softmax gives it. In f32 a polynomial the compiler
// vectorizes (range reduction by n = round(x / ln 2), degree-6 polynomial on |r| <= ln2 / 2,
// scaling by 2^n through the exponent bits; within 1e-7 relative of expf, and results below
// e^-87 are flushed to about 1.6e-38 instead of 0). In f64 the C library's exp.
#ifdef TRIT_REAL_F64
static inline double exp_le0(double x) { return exp(x); }
#else
static inline float exp_le0(float x) {
    x = x < -87.0f ? -87.0f : x;
    const float shift = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
    float n = (x * 1.44269504088896341f + shift) - shift;
    float r = x - n * 0.693359375f;  // ln 2 split in two so that n * hi is exact
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return p * two_n;
}
#endif

// Keys of a tile that query row i (absolute position qi) may see: those at or before qi.
static int64_t visible(int64_t qi, int64_t j0, int64_t bc) {
    int64_t n = qi - j0 + 1;
    return n < 0 ? 0 : n > bc ? bc : n;
}

// One row of a score tile s (bc raw scores q.k, nv of them visible) joins the online softmax:
// s becomes exp(scale * s - m_new) (0 where masked), *m the new max, *l the new sum; returns
// the factor exp(m_old - m_new) by which the row's accumulator must be rescaled.
static real online_softmax_row(real *s, int64_t bc, int64_t nv, real scale, real *m, double *l) {
    real mx = *m;
#pragma omp simd reduction(max : mx)
    for (int64_t j = 0; j < nv; j++) {
        s[j] *= scale;
        mx = s[j] > mx ? s[j] : mx;
    }
    real sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int64_t j = 0; j < nv; j++) {
        s[j] = exp_le0(s[j] - mx);
        sum += s[j];
    }
    for (int64_t j = nv; j < bc; j++) s[j] = 0;
    if (nv == 0) return 1;
    // The first visible tile of a row starts from m = -inf: nothing to rescale.
    real alpha = *m == RMAX_NEG ? 0 : exp_le0(*m - mx);
    *l = *l * (double)alpha + (double)sum;
    *m = mx;
    return alpha;
}

// ---- forward ------------------------------------------------------------------------------

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

// Query rows [i0, i0 + br) of one head. o: (T, hs) rows C apart, the head's output columns,
// used as the accumulator; lse: (T) of the head.
static void forward_tile(const flash_dims *d, const flash_head *p, int64_t i0, real *o, real *lse, real *work) {
    const int64_t T = d->T, hs = d->hs, C = d->C, br = min64(BR, T - i0);
    const real scale = (real)(1.0 / sqrt((double)hs));
    real *s = work;              // (br, BC) scores, then probabilities
    real *m = s + BR * BC;       // (br) running max
    real *alpha = m + BR;        // (br) rescale factors of the current key tile
    double *l = (double *)(alpha + BR);  // (br) running sums
    for (int64_t i = 0; i < br; i++) {
        m[i] = RMAX_NEG;
        l[i] = 0;
    }
    real *oi = o + i0 * C;
    // Key tiles that hold at least one key at or before the tile's last query.
    for (int64_t j0 = 0; j0 < i0 + br; j0 += BC) {
        const int64_t bc = min64(BC, i0 + br - j0);
        R(trit_kernel_gemm)(false, true, br, bc, hs, p->q + i0 * p->ldq, p->ldq, p->k + j0 * p->ldk, p->ldk, s, BC, false);
        const bool diag = j0 + bc - 1 > i0;
        for (int64_t i = 0; i < br; i++)
            alpha[i] = online_softmax_row(s + i * BC, bc, diag ? visible(i0 + i, j0, bc) : bc, scale, &m[i], &l[i]);
        if (j0 > 0)
            for (int64_t i = 0; i < br; i++) {
                real *row = oi + i * C, a = alpha[i];
                if (a == 1) continue;
#pragma omp simd
                for (int64_t c = 0; c < hs; c++) row[c] *= a;
            }
        R(trit_kernel_gemm)(false, false, br, hs, bc, s, BC, p->v + j0 * p->ldv, p->ldv, oi, C, j0 > 0);
    }
    for (int64_t i = 0; i < br; i++) {
        real *row = oi + i * C, inv = (real)(1.0 / l[i]);
#pragma omp simd
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
            forward_tile(&d, &p, i0, out + b * d.T * d.C + h * d.hs, lse + bh * d.T, work);
        }
    }
    return TRIT_OK;
}

// ---- backward -----------------------------------------------------------------------------

typedef struct flash_grads {
    const real *o, *go;  // (T, hs) rows C apart: the head's output and its gradient
    real *gq, *gk, *gv;  // (T, hs) rows C apart, or NULL
    const real *lse;     // (T)
} flash_grads;

// s: (br, BC) raw scores of query rows [i0, i0 + br) and keys [j0, j0 + bc): becomes P.
static void recompute_probs(real *s, int64_t br, int64_t bc, int64_t i0, int64_t j0, real scale, const real *lse) {
    const bool diag = j0 + bc - 1 > i0;
    for (int64_t i = 0; i < br; i++) {
        real *row = s + i * BC, off = lse[i0 + i];
        const int64_t nv = diag ? visible(i0 + i, j0, bc) : bc;
#pragma omp simd
        for (int64_t j = 0; j < nv; j++) row[j] = exp_le0(row[j] * scale - off);
        for (int64_t j = nv; j < bc; j++) row[j] = 0;
    }
}

// dp: (br, BC) holds dP on entry and dS * scale on return; p: the probabilities.
static void softmax_grad(real *dp, const real *p, int64_t br, int64_t bc, const real *dd, real scale) {
    for (int64_t i = 0; i < br; i++) {
        real *dr = dp + i * BC, di = dd[i];
        const real *pr = p + i * BC;
#pragma omp simd
        for (int64_t j = 0; j < bc; j++) dr[j] = pr[j] * (dr[j] - di) * scale;
    }
}

static void backward_head(const flash_dims *d, const flash_head *p, const flash_grads *g, real *work) {
    const int64_t T = d->T, hs = d->hs, C = d->C;
    const real scale = (real)(1.0 / sqrt((double)hs));
    real *s = work;           // (BR, BC) probabilities
    real *dp = s + BR * BC;   // (BR, BC) dP, then dS
    real *dd = dp + BR * BC;  // (T) D = rowsum(dO * O)
    const bool need_ds = g->gq || g->gk;
    if (need_ds)
        for (int64_t i = 0; i < T; i++) {
            const real *a = g->go + i * C, *b = g->o + i * C;
            double acc = 0;
            for (int64_t c = 0; c < hs; c++) acc += (double)a[c] * (double)b[c];
            dd[i] = (real)acc;
        }
    for (int64_t j0 = 0; j0 < T; j0 += BC) {
        const int64_t bc = min64(BC, T - j0);
        const real *kj = p->k + j0 * p->ldk, *vj = p->v + j0 * p->ldv;
        // Query tiles from the one holding query j0 (the first that sees any key of the tile).
        for (int64_t i0 = j0 / BR * BR; i0 < T; i0 += BR) {
            const int64_t br = min64(BR, T - i0);
            const real *qi = p->q + i0 * p->ldq, *goi = g->go + i0 * C;
            R(trit_kernel_gemm)(false, true, br, bc, hs, qi, p->ldq, kj, p->ldk, s, BC, false);
            recompute_probs(s, br, bc, i0, j0, scale, g->lse);
            if (g->gv) R(trit_kernel_gemm)(true, false, bc, hs, br, s, BC, goi, C, g->gv + j0 * C, C, true);
            if (!need_ds) continue;
            R(trit_kernel_gemm)(false, true, br, bc, hs, goi, C, vj, p->ldv, dp, BC, false);
            softmax_grad(dp, s, br, bc, dd + i0, scale);
            if (g->gq) R(trit_kernel_gemm)(false, false, br, hs, bc, dp, BC, kj, p->ldk, g->gq + i0 * C, C, true);
            if (g->gk) R(trit_kernel_gemm)(true, false, bc, hs, br, dp, BC, qi, p->ldq, g->gk + j0 * C, C, true);
        }
    }
}

static trit_status flash_backward(const trit_op_call *c) {
    const flash_dims d = dims_of(c);
    const int64_t BH = d.B * d.H;
    real *gq = c->gin[0] ? c->gin[0]->data : NULL;  // (B, T, C)
    real *gk = c->gin[1] ? c->gin[1]->data : NULL;  // (B, T, C)
    real *gv = c->gin[2] ? c->gin[2]->data : NULL;  // (B, T, C)
    const real *go = c->gout->data;                  // (B, T, C)
    const real *o = c->out->data;                    // (B, T, C)
    const real *lse = c->saved;                      // (B, H, T)
    if (BH == 0 || d.T == 0 || d.hs == 0 || (!gq && !gk && !gv)) return TRIT_OK;
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
            const flash_grads g = {o + col, go + col, gq ? gq + col : NULL, gk ? gk + col : NULL,
                                   gv ? gv + col : NULL, lse + bh * d.T};
            backward_head(&d, &p, &g, work);
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_flash_attention) = {
    .name = "flash_attention",
    .infer = flash_infer,
    .forward = flash_forward,
    .backward = flash_backward,
    .saved_bytes = flash_saved_bytes,
    .scratch_bytes = flash_scratch_bytes,
    .attr_size = sizeof(trit_flash_attention_attr),
};
