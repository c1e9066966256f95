// matmul and linear on R(trit_kernel_gemm). Strided inputs are passed to GEMM through leading
// dimensions and transpose flags (the constructors copy a view only when neither fits), and
// gradients are GEMMs that accumulate straight into the input gradients. linear's weight may
// also be a frozen quantized matrix, multiplied through chunks of its decoded rows
// (ops/qweight.h).
#include "ops/matmul.h"

#include "ops/op_build.h"
#include "ops/binary.h"
#include "ops/gemm_call.h"
#include "ops/qweight.h"
#include "trit/ops.h"

#include <string.h>

static const real *in_ptr(const trit_tensor *t) { return (const real *)t->data + t->offset; }

static trit_status check_dtype(const trit_tensor *t, const char *op, const char *what, bool operand) {
    char buf[128];
    if (operand ? trit_gemm_operand_dtype_ok(t->dtype) : t->dtype == TRIT_REAL_DTYPE) return TRIT_OK;
    return trit_error(TRIT_ERR_DTYPE, "%s: expected %s to be %s%s, got %s %s%s", op, what,
                      trit_dtype_name(TRIT_REAL_DTYPE), operand && TRIT_REAL_DTYPE == TRIT_F32 ? ", bf16 or f16" : "",
                      trit_dtype_name(t->dtype), trit_tensor_shape_str(t, buf, sizeof buf),
                      trit_dtype_is_quantized(t->dtype) ? " (a frozen quantized matrix is taken as linear's weight w, "
                                                          "or by trit_dequantize first)" : "");
}

// ---- matmul -----------------------------------------------------------------------------

// Everything forward and backward need: sizes, the GEMM form of each operand (flags include both
// the requested transpose and any transposed storage), and batch strides aligned to the output.
typedef struct mm_plan {
    int64_t M, N, K, batch;
    bool ta, tb;         // op(A) = ta ? A^T : A over the row-major storage at lda (same for B)
    int64_t lda, ldb;
    int nb;              // batch dims of the output
    int64_t bshape[TRIT_MAX_DIMS];
    int64_t as[TRIT_MAX_DIMS], bs[TRIT_MAX_DIMS];    // batch strides of a, b (0 when broadcast)
    int64_t gas[TRIT_MAX_DIMS], gbs[TRIT_MAX_DIMS];  // batch strides of their (contiguous) gradients
    bool fold;           // b is shared by all batches and a's batches stack as rows: one GEMM
} mm_plan;

static bool mm_plan_init(const trit_tensor *a, const trit_tensor *b, const trit_matmul_attr *at, int out_ndim,
                         const int64_t *out_shape, mm_plan *p) {
    const int na = a->ndim, nbd = b->ndim;
    const int64_t ra = a->shape[na - 2], ca = a->shape[na - 1], rb = b->shape[nbd - 2], cb = b->shape[nbd - 1];
    bool fa, fb;
    if (!trit_gemm_layout(ra, ca, a->strides[na - 2], a->strides[na - 1], &fa, &p->lda)) return false;
    if (!trit_gemm_layout(rb, cb, b->strides[nbd - 2], b->strides[nbd - 1], &fb, &p->ldb)) return false;
    p->ta = at->trans_a != fa;
    p->tb = at->trans_b != fb;
    p->M = at->trans_a ? ca : ra;
    p->K = at->trans_a ? ra : ca;
    p->N = at->trans_b ? rb : cb;
    p->nb = out_ndim - 2;
    p->batch = 1;
    for (int d = 0; d < p->nb; d++) p->batch *= p->bshape[d] = out_shape[d];
    int64_t ga[TRIT_MAX_DIMS], gb[TRIT_MAX_DIMS];
    trit_ew_contig_strides(na, a->shape, ga);
    trit_ew_contig_strides(nbd, b->shape, gb);
    trit_ew_bcast_strides(na - 2, a->shape, a->strides, p->nb, p->as);
    trit_ew_bcast_strides(nbd - 2, b->shape, b->strides, p->nb, p->bs);
    trit_ew_bcast_strides(na - 2, a->shape, ga, p->nb, p->gas);
    trit_ew_bcast_strides(nbd - 2, b->shape, gb, p->nb, p->gbs);
    // Fold when b has no batch of its own and a's (untransposed) batches are evenly spaced rows.
    p->fold = !at->trans_a && !fa && p->batch > 1;
    int64_t expect = p->M * p->lda;
    for (int d = p->nb - 1; d >= 0 && p->fold; d--) {
        if (p->bshape[d] == 1) continue;
        if (p->bs[d] != 0 || p->as[d] != expect) p->fold = false;
        expect *= p->bshape[d];
    }
    return true;
}

// Offsets of batch `i` in the four strided batch layouts {a, b, grad a, grad b}.
static void mm_batch_offsets(const mm_plan *p, int64_t i, int64_t off[4]) {
    off[0] = off[1] = off[2] = off[3] = 0;
    for (int d = p->nb - 1; d >= 0; d--) {
        const int64_t k = i % p->bshape[d];
        i /= p->bshape[d];
        off[0] += k * p->as[d];
        off[1] += k * p->bs[d];
        off[2] += k * p->gas[d];
        off[3] += k * p->gbs[d];
    }
}

static trit_status matmul_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_matmul_attr *at = attr;
    const trit_tensor *a = in[0], *b = in[1];
    char x[128], y[128];
    if (n_in != 2) return trit_error(TRIT_ERR_INVALID, "matmul: expected 2 inputs, got %d", n_in);
    trit_status s = check_dtype(a, "matmul", "a", true);
    if (s == TRIT_OK) s = check_dtype(b, "matmul", "b", true);
    if (s != TRIT_OK) return s;
    trit_tensor_shape_str(a, x, sizeof x);
    trit_tensor_shape_str(b, y, sizeof y);
    if (a->ndim < 2 || b->ndim < 2)
        return trit_error(TRIT_ERR_SHAPE, "matmul: expected inputs of at least 2 dims, got %s and %s; reshape a vector "
                          "to (1, K) or (K, 1)", x, y);
    const int64_t ka = a->shape[a->ndim - (at->trans_a ? 2 : 1)], kb = b->shape[b->ndim - (at->trans_b ? 1 : 2)];
    if (ka != kb)
        return trit_error(TRIT_ERR_SHAPE, "matmul: inner dims differ: a %s%s has K = %lld, b %s%s has K = %lld", x,
                          at->trans_a ? " (transposed)" : "", (long long)ka, y, at->trans_b ? " (transposed)" : "",
                          (long long)kb);
    const int na = a->ndim - 2, nb = b->ndim - 2, n = na > nb ? na : nb;
    int64_t shape[TRIT_MAX_DIMS];
    for (int d = 0; d < n; d++) {
        const int ia = d - (n - na), ib = d - (n - nb);
        const int64_t da = ia >= 0 ? a->shape[ia] : 1, db = ib >= 0 ? b->shape[ib] : 1;
        if (da != db && da != 1 && db != 1)
            return trit_error(TRIT_ERR_SHAPE, "matmul: batch dims of %s and %s do not broadcast (%lld vs %lld)", x, y,
                              (long long)da, (long long)db);
        shape[d] = da == 1 ? db : da;
    }
    shape[n] = a->shape[a->ndim - (at->trans_a ? 1 : 2)];
    shape[n + 1] = b->shape[b->ndim - (at->trans_b ? 2 : 1)];
    mm_plan p;
    if (!mm_plan_init(a, b, at, n + 2, shape, &p))
        return trit_error(TRIT_ERR_INVALID, "matmul: an input's last two dims have strides GEMM cannot read; make it "
                          "contiguous (trit_contiguous), which trit_matmul does by itself");
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, n + 2, shape);
}

static trit_status matmul_forward(const trit_op_call *c) {
    const trit_tensor *a = c->in[0], *b = c->in[1];
    mm_plan p;
    mm_plan_init(a, b, c->attr, c->out->ndim, c->out->shape, &p);
    real *C = c->out->data;
    if (p.M == 0 || p.N == 0 || p.batch == 0) return TRIT_OK;
    if (p.K == 0) {
        memset(C, 0, sizeof(real) * (size_t)(p.batch * p.M * p.N));
        return TRIT_OK;
    }
    const trit_mm_ref A = trit_mm_of(a), B = trit_mm_of(b);
    if (p.fold) {
        trit_op_gemm(c, false, p.tb, p.batch * p.M, p.N, p.K, A, p.lda, B, p.ldb, C, p.N, false);
        return TRIT_OK;
    }
    for (int64_t i = 0; i < p.batch; i++) {
        int64_t off[4];
        mm_batch_offsets(&p, i, off);
        trit_op_gemm(c, p.ta, p.tb, p.M, p.N, p.K, trit_mm_at(A, off[0]), p.lda, trit_mm_at(B, off[1]), p.ldb, C + i * p.M * p.N, p.N,
             false);
    }
    return TRIT_OK;
}

// dC = d loss / d C. For a stored as (M, K): dA += dC op(B)^T; stored as (K, M): dA += op(B) dC^T.
// For b stored as (K, N): dB += op(A)^T dC; stored as (N, K): dB += dC^T op(A). A gradient shared
// by several batches (broadcast) gets their sum, added batch after batch in order.
static trit_status matmul_backward(const trit_op_call *c) {
    const trit_tensor *a = c->in[0], *b = c->in[1];
    const trit_matmul_attr *at = c->attr;
    mm_plan p;
    mm_plan_init(a, b, at, c->out->ndim, c->out->shape, &p);
    if (p.M == 0 || p.N == 0 || p.K == 0 || p.batch == 0) {
        trit_op_zero_stored(c, 0);
        trit_op_zero_stored(c, 1);
        return TRIT_OK;
    }
    const trit_mm_ref A = trit_mm_of(a), B = trit_mm_of(b), dC = trit_mm_real(c->gout->data);
    real *dA = c->gin[0] ? c->gin[0]->data : NULL, *dB = c->gin[1] ? c->gin[1]->data : NULL;
    const int64_t M = p.M, N = p.N, K = p.K;
    // Stored gradients (store_inputs) take the GEMM without accumulation, but for one summed
    // over broadcast batches, zeroed first.
    bool acc_a = !(c->store_inputs & TRIT_IN(0)), acc_b = !(c->store_inputs & TRIT_IN(1));
    if (p.fold) {  // a: (batch*M, K) rows; b shared
        const int64_t BM = p.batch * M;
        if (dA) trit_op_gemm(c, false, !p.tb, BM, K, N, dC, N, B, p.ldb, dA, K, acc_a);
        if (dB && !at->trans_b) trit_op_gemm(c, true, false, K, N, BM, A, p.lda, dC, N, dB, N, acc_b);
        if (dB && at->trans_b) trit_op_gemm(c, true, false, N, K, BM, dC, N, A, p.lda, dB, K, acc_b);
        return TRIT_OK;
    }
    if (dA && !acc_a && trit_tensor_numel(a) != p.batch * M * K) acc_a = trit_op_zero_stored(c, 0);
    if (dB && !acc_b && trit_tensor_numel(b) != p.batch * K * N) acc_b = trit_op_zero_stored(c, 1);
    for (int64_t i = 0; i < p.batch; i++) {
        int64_t off[4];
        mm_batch_offsets(&p, i, off);
        const trit_mm_ref Ai = trit_mm_at(A, off[0]), Bi = trit_mm_at(B, off[1]), dCi = trit_mm_at(dC, i * M * N);
        if (dA && !at->trans_a) trit_op_gemm(c, false, !p.tb, M, K, N, dCi, N, Bi, p.ldb, dA + off[2], K, acc_a);
        if (dA && at->trans_a) trit_op_gemm(c, p.tb, true, K, M, N, Bi, p.ldb, dCi, N, dA + off[2], M, acc_a);
        if (dB && !at->trans_b) trit_op_gemm(c, !p.ta, false, K, N, M, Ai, p.lda, dCi, N, dB + off[3], N, acc_b);
        if (dB && at->trans_b) trit_op_gemm(c, true, p.ta, N, K, M, dCi, N, Ai, p.lda, dB + off[3], K, acc_b);
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_matmul) = {
    .name = "matmul", .infer = matmul_infer, .forward = matmul_forward, .backward = matmul_backward,
    .bwd_unread = TRIT_OUT, .bwd_stores = TRIT_IN(0) | TRIT_IN(1),
    .lowp_inputs = TRIT_IN(0) | TRIT_IN(1), .attr_size = sizeof(trit_matmul_attr),
};

// ---- linear -----------------------------------------------------------------------------

typedef struct lin_plan {
    int64_t rows, K, N;
    bool xt, wflip;  // x read as (rows, K) (transposed storage if xt); w as (N, K) (as (K, N) if wflip)
    int64_t ldx, ldw;
} lin_plan;

static bool lin_plan_init(const trit_tensor *x, const trit_tensor *w, lin_plan *p) {
    p->N = w->shape[0];
    p->K = w->shape[1];
    return trit_gemm_rows(x, &p->rows, &p->xt, &p->ldx) &&
           trit_gemm_layout(p->N, p->K, w->strides[0], w->strides[1], &p->wflip, &p->ldw);
}

static trit_status linear_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    const trit_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    char xs[128], ws[128], bs[128];
    if (n_in != 2 && n_in != 3) return trit_error(TRIT_ERR_INVALID, "linear: expected 2 or 3 inputs, got %d", n_in);
    trit_status s = check_dtype(x, "linear", "x", true);
    if (s == TRIT_OK) s = trit_qw_is(w) ? R(trit_qw_check)(w, "linear", "w") : check_dtype(w, "linear", "w", true);
    if (s == TRIT_OK && b) s = check_dtype(b, "linear", "b", false);
    if (s != TRIT_OK) return s;
    trit_tensor_shape_str(x, xs, sizeof xs);
    trit_tensor_shape_str(w, ws, sizeof ws);
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1])
        return trit_error(TRIT_ERR_SHAPE, "linear: expected x (..., K) and w (N, K), got x %s and w %s", xs, ws);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return trit_error(TRIT_ERR_SHAPE, "linear: expected b (%lld,) to match w %s, got b %s", (long long)w->shape[0],
                          ws, trit_tensor_shape_str(b, bs, sizeof bs));
    lin_plan p;
    if (!lin_plan_init(x, w, &p))
        return trit_error(TRIT_ERR_INVALID, "linear: x %s or w %s has strides GEMM cannot read; make it contiguous "
                          "(trit_contiguous), which trit_linear does by itself", xs, ws);
    int64_t shape[TRIT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w->shape[0];
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, x->ndim, shape);
}

// Scratch: a quantized weight's decoded chunk first, then linear's own (the bias's ones or
// dense copy).
static size_t linear_qw_bytes(const trit_op_call *c) {
    return trit_qw_is(c->in[1]) ? R(trit_qw_scratch_bytes)(c->in[1], trit_qw_decode_dtype(c->in[0]->dtype)) : 0;
}
static real *linear_own_scratch(const trit_op_call *c) { return (real *)((char *)c->scratch + linear_qw_bytes(c)); }

// A 16-bit output (the f32 build only) comes from the mixed GEMM, which sums each row in fp32
// from the bias and rounds every element once.
static trit_status linear_forward_lowp(const trit_op_call *c, const lin_plan *p) {
#ifndef TRIT_REAL_F64
    const trit_tensor *x = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
    const real *bias = b ? in_ptr(b) : NULL;
    if (b && b->strides[0] != 1) {
        real *dense = linear_own_scratch(c);  // (N)
        for (int64_t j = 0; j < p->N; j++) dense[j] = bias[j * b->strides[0]];
        bias = dense;
    }
    if (trit_qw_is(w)) {
        R(trit_qw_gemm_xwt)(c, p->rows, trit_mm_of(x), p->xt, p->ldx, w, c->out->data, c->out->dtype, p->N, false, bias,
                            c->scratch);
        return TRIT_OK;
    }
    const trit_gemm_operand xa = {trit_tensor_ptr(x), x->dtype, p->ldx, p->xt},
                            wb = {trit_tensor_ptr(w), w->dtype, p->ldw, !p->wflip};
    trit_kernel_gemm_mixed(p->rows, p->N, p->K, &xa, &wb, c->out->data, c->out->dtype, p->N, false, c->ctx->matmul,
                           bias);
#else
    (void)c, (void)p;
#endif
    return TRIT_OK;
}

static trit_status linear_forward(const trit_op_call *c) {
    const trit_tensor *x = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
    lin_plan p;
    lin_plan_init(x, w, &p);
    if (p.rows == 0 || p.N == 0) return TRIT_OK;
    if (c->out->dtype != TRIT_REAL_DTYPE) return linear_forward_lowp(c, &p);
    real *y = c->out->data;  // (rows, N)
    if (b) {  // every row starts as the bias, then the GEMM accumulates onto it
        const real *pb = in_ptr(b);
        const int64_t sb = b->strides[0];
        for (int64_t r = 0; r < p.rows; r++)
            for (int64_t j = 0; j < p.N; j++) y[r * p.N + j] = pb[j * sb];
    } else if (p.K == 0) {
        memset(y, 0, sizeof(real) * (size_t)(p.rows * p.N));
    }
    if (p.K > 0 && trit_qw_is(w))
        R(trit_qw_gemm_xwt)(c, p.rows, trit_mm_of(x), p.xt, p.ldx, w, y, TRIT_REAL_DTYPE, p.N, b != NULL, NULL, c->scratch);
    else if (p.K > 0)
        trit_op_gemm(c, p.xt, !p.wflip, p.rows, p.N, p.K, trit_mm_of(x), p.ldx, trit_mm_of(w), p.ldw, y, p.N, b != NULL);
    return TRIT_OK;
}

// dx += dy w, dw += dy^T x, db += ones(1, rows) dy: three GEMMs that accumulate, or store where
// the call asks. A quantized w gets no gradient (infer refuses a trainable one) and is decoded
// chunk by chunk for dx.
static trit_status linear_backward(const trit_op_call *c) {
    const trit_tensor *x = c->in[0], *w = c->in[1];
    lin_plan p;
    lin_plan_init(x, w, &p);
    if (p.rows == 0 || p.N == 0) {
        for (int i = 0; i < c->n_in; i++) trit_op_zero_stored(c, i);
        return TRIT_OK;
    }
    const real *dy = c->gout->data;
    const bool qw = trit_qw_is(w);
    const uint32_t st = c->store_inputs;
    // The quantized weight's product adds chunk after chunk of W's rows: a stored dx is zeroed first.
    if (c->gin[0] && p.K > 0 && qw) {
        trit_op_zero_stored(c, 0);
        R(trit_qw_gemm_dyw)(c, p.rows, trit_mm_real(dy), p.N, w, c->gin[0]->data, p.K, trit_qw_decode_dtype(x->dtype),
                            c->scratch);
    } else if (c->gin[0] && p.K > 0) {
        trit_op_gemm(c, false, p.wflip, p.rows, p.K, p.N, trit_mm_real(dy), p.N, trit_mm_of(w), p.ldw, c->gin[0]->data, p.K,
                     !(st & TRIT_IN(0)));
    }
    if (c->gin[1] && qw)
        return trit_error(TRIT_ERR_STATE, "linear: the %s weight '%s' was asked for a gradient; quantized weights "
                          "get none: freeze it", trit_dtype_name(w->dtype), w->name);
    if (c->gin[1] && p.K > 0)
        trit_op_gemm(c, true, p.xt, p.N, p.K, p.rows, trit_mm_real(dy), p.N, trit_mm_of(x), p.ldx, c->gin[1]->data, p.K,
                     !(st & TRIT_IN(1)));
    if (c->n_in > 2 && c->gin[2]) {
        real *ones = linear_own_scratch(c);
        for (int64_t r = 0; r < p.rows; r++) ones[r] = 1;
        R(trit_kernel_gemm)(false, false, 1, p.N, p.rows, ones, p.rows, dy, p.N, c->gin[2]->data, p.N, !(st & TRIT_IN(2)));
    }
    return TRIT_OK;
}

// A quantized weight's decoded chunk; then backward's ones (rows) for the bias gradient, or a
// dense copy of a strided bias (N) for a 16-bit output.
static size_t linear_scratch(const trit_op_call *c) {
    lin_plan p;
    if (!lin_plan_init(c->in[0], c->in[1], &p)) return 0;
    const size_t qw = linear_qw_bytes(c);
    if (c->n_in < 3) return qw;
    const size_t ones = (size_t)p.rows * sizeof(real), bias = (size_t)p.N * sizeof(real);
    return qw + (ones > bias ? ones : bias);
}

const trit_op_def R(trit_op_linear) = {
    .name = "linear", .infer = linear_infer, .forward = linear_forward, .backward = linear_backward,
    .bwd_unread = TRIT_IN(2) | TRIT_OUT, .bwd_stores = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2),
    .lowp_inputs = TRIT_IN(0) | TRIT_IN(1), .lowp_output = true,
    .scratch_bytes = linear_scratch,
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

// A matrix operand whose last two dims GEMM cannot read through a leading dimension (neither
// dim has unit stride) is copied first; everything else is read in place.
static trit_tensor *gemm_readable(trit_graph *g, trit_tensor *t) {
    if (!t || t->ndim < 2) return t;
    bool flip;
    int64_t ld;
    const int n = t->ndim;
    if (trit_gemm_layout(t->shape[n - 2], t->shape[n - 1], t->strides[n - 2], t->strides[n - 1], &flip, &ld))
        return t;
    return trit_contiguous(g, t);
}

// Under a policy with bf16 or f16 activations, a matmul operand enters in that dtype through a
// cast node: the cast value is what backward keeps. Operands already in a 16-bit dtype stay as
// they are. An f32 parameter under bf16 at MEDIUM precision is read as it is: the GEMM rounds
// it to bf16 (nearest even, as the cast would) while packing, so no compute copy is stored
// between forward and backward; f16 needs the copy (the packing has no f16 rounding). A
// quantized weight is never cast: linear decodes it chunk by chunk into the activation dtype.
static trit_tensor *matmul_operand(trit_graph *g, trit_tensor *t) {
    if (!t || !g) return t;
    const trit_compute_policy pol = trit_graph_policy(g);
    if ((pol.activation != TRIT_BF16 && pol.activation != TRIT_F16) || t->dtype != trit_graph_dtype(g)) return t;
    if (pol.activation == TRIT_BF16 && pol.matmul == TRIT_MATMUL_MEDIUM && (t->flags & TRIT_FLAG_PARAM)) return t;
    return trit_cast(g, t, pol.activation);
}

trit_tensor *trit_matmul(trit_graph *g, trit_tensor *a, trit_tensor *b, bool trans_a, bool trans_b) {
    const trit_matmul_attr at = {.trans_a = trans_a, .trans_b = trans_b};
    a = matmul_operand(g, a);
    b = matmul_operand(g, b);
    trit_tensor *in[2] = {gemm_readable(g, a), gemm_readable(g, b)};
    if ((a && !in[0]) || (b && !in[1])) return NULL;
    return TRIT_APPLY(g, trit_op_matmul, 2, in, &at);
}

trit_tensor *trit_linear(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b) {
    x = matmul_operand(g, x);
    w = matmul_operand(g, w);
    trit_tensor *in[3] = {x, gemm_readable(g, w), b};
    if (w && !in[1]) return NULL;
    int64_t rows, ld;
    bool flip;
    if (x && x->ndim >= 1 && !trit_gemm_rows(x, &rows, &flip, &ld)) {
        // The leading dims do not stack into evenly spaced rows: one copy makes them.
        if (!(in[0] = trit_contiguous(g, x))) return NULL;
    }
    return TRIT_APPLY(g, trit_op_linear, b ? 3 : 2, in, NULL);
}

#endif
