// ternary_linear: BitNet b1.58's training-time linear on integer kernels. Quantization-aware
// training computes y = fq8(x) fq3(W)^T + b, fq8 the per-token int8 fake quantization of the
// input and fq3 the ternary absmean one of the latent weight; both operands are integers times
// one scale, so the product is an integer matmul: the codes of x (int8) against W's ternary codes
// packed in panels, scaled by s_x[row] * s_W. This op runs it on the panel kernels (vpdpbusd on
// AVX512-VNNI, vpmaddubsw on AVX2) instead of an fp32 GEMM over the fake-quantized values.
//
//   forward   x's codes and row scales (kept for backward: 1 byte an element, not 4), y from the
//             panels of W_t, the bias added by the kernel's epilogue
//   dX        dY W_t: dY quantized per row to int8 (absmax / 127) against the panels of W_t^T,
//             the kernel adding into the gradient in place; or (TRIT_TERNARY_DX_F32) an fp32
//             GEMM of dY and W_t's values
//   dW        dY^T fq8(x), a chunk of rows at a time (straight-through: the latent weight gets
//             the fake-quantized weight's gradient, as fake_quant's backward passes it): in fp32
//             over x's decoded values, or (TRIT_TERNARY_DW_BF16) as dY s_x against x's codes, the
//             row scale moved to dY's side because it varies along the sum: the codes are exact
//             in bf16, so the one added rounding is dY s_x's to bf16 (at most 2^-8 relative), and the
//             product runs at the bf16 dot-product rate, twice the fp32 FMA's
//   db        the column sums of dY, as linear sums them
//
// The panels belong to the model (trit_ternary_weight): the first forward after the weight
// changed refills them, so micro-batches of one step and the validation after it share one fill.
// Forward values equal linear's over fake_quant's outputs up to the fp32 order of the sums: the
// codes and scales are fake_quant's own (trit_fake_quant_row_codes_f32, the panel fill's rule).
#include "ops/ternary_linear.h"
#include "ops/fake_quant.h"
#include "ops/gemm_call.h"
#include "ops/op_build.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef struct tl_attr {
    trit_ternary_weight *tw;
} tl_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_ternary_linear);

enum { TL_CHUNK = 1024 };  // rows of a backward chunk (decoded x, dX's kernel output, dY's codes)
enum { TL_ROW_PART = 256 };  // values of a row a bf16 weight gradient rounds at once (on the stack)
#define TL_PAR_MIN ((int64_t)1 << 15)

static size_t al64(size_t b) { return (b + 63) / 64 * 64; }

static int64_t tl_rows(const trit_op_call *c) { return trit_tensor_numel(c->in[0]) / c->in[1]->shape[1]; }

static trit_status tl_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    const trit_ternary_weight *tw = ((const tl_attr *)attr)->tw;
    char xs[128], ws[128];
    if (TRIT_REAL_DTYPE != TRIT_F32) return trit_error(TRIT_ERR_DTYPE, "ternary_linear: float graphs only");
    if (!tw) return trit_error(TRIT_ERR_INVALID, "ternary_linear: no ternary weight state");
    if (x->dtype != TRIT_F32 || w->dtype != TRIT_F32 || (b && b->dtype != TRIT_F32))
        return trit_error(TRIT_ERR_DTYPE, "ternary_linear: expected f32 x, w and b, got %s, %s and %s",
                          trit_dtype_name(x->dtype), trit_dtype_name(w->dtype), b ? trit_dtype_name(b->dtype) : "no bias");
    trit_tensor_shape_str(x, xs, sizeof xs);
    trit_tensor_shape_str(w, ws, sizeof ws);
    if (w->ndim != 2 || !trit_tensor_is_contiguous(w) || w->shape[0] != tw->N || w->shape[1] != tw->K)
        return trit_error(TRIT_ERR_SHAPE, "ternary_linear: expected a contiguous w (%lld, %lld) as its ternary state "
                          "was made for, got %s", (long long)tw->N, (long long)tw->K, ws);
    if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
        return trit_error(TRIT_ERR_SHAPE, "ternary_linear: expected x (..., K) and w (N, K), got x %s and w %s", xs, ws);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return trit_error(TRIT_ERR_SHAPE, "ternary_linear: expected b (%lld,) to match w %s", (long long)w->shape[0], ws);
    int64_t shape[TRIT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w->shape[0];
    return trit_tensor_init_layout(out, TRIT_F32, x->ndim, shape);
}

// Saved: x's codes (rows, K), then its row scales (rows).
static size_t tl_saved(const trit_op_call *c) {
    const size_t rows = (size_t)tl_rows(c), K = (size_t)c->in[1]->shape[1];
    return al64(rows * K) + al64(4 * rows);
}

// The weight gradient's operands for a chunk of ch rows: x decoded (ch, K) in f32, or x's codes
// (ch, K) and dY s_x (ch, N) in bf16.
static size_t tl_dw_bytes(size_t ch, size_t N, size_t K) {
    const size_t f32 = al64(4 * ch * K), bf16 = al64(2 * ch * K) + al64(2 * ch * N);
    return f32 > bf16 ? f32 : bf16;
}

// Forward: the group sums (rows). Backward: dY's codes (chunk, N), scales and sums (chunk), the
// weight gradient's operands (tl_dw_bytes), then ones (rows) for the bias gradient.
static size_t tl_scratch(const trit_op_call *c) {
    const size_t rows = (size_t)tl_rows(c), N = (size_t)c->in[1]->shape[0], K = (size_t)c->in[1]->shape[1];
    const size_t ch = rows < TL_CHUNK ? rows : TL_CHUNK;
    const size_t fwd = al64(4 * rows), bwd = al64(ch * N) + 2 * al64(4 * ch) + tl_dw_bytes(ch, N, K) + al64(4 * rows);
    return fwd > bwd ? fwd : bwd;
}

#ifndef TRIT_REAL_F64
// Row codes, scales and group sums (one group a row) of x (rows, K): fake_quant's per-token rule
// (trit_fake_quant_row_codes_f32) on the kernel table's quantizer.
static void quantize_rows(const float *x, int64_t rows, int64_t K, int8_t *q, float *scale, int32_t *gsum) {
    const trit_qact a = {q, scale, gsum};
    trit_qact_quantize_div(x, rows, K, &a);
}

static trit_status tl_forward_f32(const trit_op_call *c) {
    trit_ternary_weight *tw = ((const tl_attr *)c->attr)->tw;
    const trit_tensor *x = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
    const int64_t N = w->shape[0], K = w->shape[1], rows = tl_rows(c);
    if (tw->stale && !c->ctx->recompute) trit_ternary_weight_fill(tw, trit_tensor_ptr(w));
    int8_t *q = c->saved;                                  // (rows, K)
    float *xs = (float *)((char *)c->saved + al64((size_t)(rows * K)));  // (rows)
    int32_t *gsum = c->scratch;                            // (rows)
    quantize_rows(trit_tensor_ptr(x), rows, K, q, xs, gsum);
    const trit_qact a = {q, xs, gsum};
    const trit_qpanel_epilogue e = {.bias = b ? trit_tensor_ptr(b) : NULL};
    return trit_kernel_qgemm_panels(&tw->w, rows, &a, c->out->data, N, &e);
}

// dX[r0, r0 + n) += dY W_t for one chunk of rows (stored where the call asks).
static trit_status tl_dx_chunk(const trit_op_call *c, const trit_ternary_weight *tw, int64_t r0, int64_t n, char *at) {
    const int64_t N = tw->N, K = tw->K;
    const float *dy = (const float *)c->gout->data + r0 * N;  // (n, N)
    float *dx = (float *)c->gin[0]->data + r0 * K;           // (n, K)
    const bool store = c->store_inputs & TRIT_IN(0);
    if (tw->dx == TRIT_TERNARY_DX_F32) {
        trit_op_gemm(c, false, false, n, K, N, trit_mm_real(dy), N, trit_mm_real(tw->wdec), K, dx, K, !store);
        return TRIT_OK;
    }
    int8_t *q = (int8_t *)at;  // (n, N)
    float *s = (float *)(at + al64((size_t)(n * N)));
    int32_t *gsum = (int32_t *)((char *)s + al64(4 * (size_t)n));
    quantize_rows(dy, n, N, q, s, gsum);
    const trit_qact a = {q, s, gsum};
    const trit_qpanel_epilogue e = {.accumulate = !store};  // each product rounded, then added: as linear's += would
    return trit_kernel_qgemm_panels(&tw->wt, n, &a, dx, K, &e);
}

// dW += dY[r0, r0 + n)^T fq8(x)[r0, r0 + n). fp32: x's values decoded from its codes (code x
// scale: the fake quantization's output bit for bit). bf16: x's codes in bf16 (exact below 256)
// against dY's rows times x's row scales rounded to bf16 (nearest even), both stored as bf16 so
// that the GEMM reads half the bytes and rounds nothing.
static void tl_dw_chunk(const trit_op_call *c, trit_ternary_dw dw, int64_t r0, int64_t n, float *xf /* (n, K) */) {
    const int64_t N = c->in[1]->shape[0], K = c->in[1]->shape[1], rows = tl_rows(c);
    const int8_t *q = (const int8_t *)c->saved + r0 * K;
    const float *xs = (const float *)((const char *)c->saved + al64((size_t)(rows * K))) + r0;
    const float *dy = (const float *)c->gout->data + r0 * N;
    if (dw == TRIT_TERNARY_DW_F32) {
#pragma omp parallel for schedule(static) if (n * K >= TL_PAR_MIN && !omp_in_parallel())
        for (int64_t r = 0; r < n; r++)
            for (int64_t k = 0; k < K; k++) xf[r * K + k] = (float)q[r * K + k] * xs[r];
        trit_op_gemm(c, true, false, N, K, n, trit_mm_real(dy), N, trit_mm_real(xf), K, c->gin[1]->data, K, true);
        return;
    }
    uint16_t *qb = (uint16_t *)xf;                                       // (n, K)
    uint16_t *dyb = (uint16_t *)((char *)xf + al64(2 * (size_t)(n * K)));  // (n, N)
#pragma omp parallel for schedule(static) if (n * (K + N) >= TL_PAR_MIN && !omp_in_parallel())
    for (int64_t r = 0; r < n; r++) {
        float t[TL_ROW_PART];  // a part of a row in f32, rounded to bf16 by the vector converter
        for (int64_t k0 = 0; k0 < K; k0 += TL_ROW_PART) {
            const int64_t m = K - k0 < TL_ROW_PART ? K - k0 : TL_ROW_PART;
            for (int64_t k = 0; k < m; k++) t[k] = (float)q[r * K + k0 + k];
            trit_f32_to_bf16_n(qb + r * K + k0, t, m);
        }
        for (int64_t j0 = 0; j0 < N; j0 += TL_ROW_PART) {
            const int64_t m = N - j0 < TL_ROW_PART ? N - j0 : TL_ROW_PART;
            for (int64_t j = 0; j < m; j++) t[j] = dy[r * N + j0 + j] * xs[r];
            trit_f32_to_bf16_n(dyb + r * N + j0, t, m);
        }
    }
    const trit_gemm_operand a = {dyb, TRIT_BF16, N, true}, b = {qb, TRIT_BF16, K, false};
    trit_kernel_gemm_mixed(N, K, n, &a, &b, c->gin[1]->data, TRIT_F32, K, true, TRIT_MATMUL_MEDIUM, NULL);
}

static trit_status tl_backward_f32(const trit_op_call *c) {
    const trit_ternary_weight *tw = ((const tl_attr *)c->attr)->tw;
    const int64_t N = tw->N, K = tw->K, rows = tl_rows(c);
    if (rows == 0) return TRIT_OK;
    const int64_t ch = rows < TL_CHUNK ? rows : TL_CHUNK;
    char *at = c->scratch;
    float *xf = (float *)(at + al64((size_t)(ch * N)) + 2 * al64(4 * (size_t)ch));
    trit_ternary_dw dw = tw->dw;
    if (dw == TRIT_TERNARY_DW_AUTO) dw = trit_kernel_gemm_mixed_bf16_native() ? TRIT_TERNARY_DW_BF16 : TRIT_TERNARY_DW_F32;
    if (c->gin[0] && tw->dx == TRIT_TERNARY_DX_F32)  // one GEMM over all rows, as linear's
        trit_op_gemm(c, false, false, rows, K, N, trit_mm_real(c->gout->data), N, trit_mm_real(tw->wdec), K,
                     c->gin[0]->data, K, !(c->store_inputs & TRIT_IN(0)));
    for (int64_t r0 = 0; r0 < rows; r0 += ch) {
        const int64_t n = rows - r0 < ch ? rows - r0 : ch;
        if (c->gin[0] && tw->dx == TRIT_TERNARY_DX_INT8) {
            trit_status s = tl_dx_chunk(c, tw, r0, n, at);
            if (s != TRIT_OK) return s;
        }
        if (c->gin[1]) tl_dw_chunk(c, dw, r0, n, xf);
    }
    if (c->n_in > 2 && c->gin[2]) {  // as linear: ones (rows) times dY
        float *ones = (float *)((char *)xf + tl_dw_bytes((size_t)ch, (size_t)N, (size_t)K));
        for (int64_t r = 0; r < rows; r++) ones[r] = 1;
        trit_kernel_gemm_f32(false, false, 1, N, rows, ones, rows, c->gout->data, N, c->gin[2]->data, N, true);
    }
    return TRIT_OK;
}
#endif

static trit_status tl_forward(const trit_op_call *c) {
#ifdef TRIT_REAL_F64
    (void)c;
    return trit_error(TRIT_ERR_DTYPE, "ternary_linear: float graphs only");
#else
    return tl_forward_f32(c);
#endif
}

static trit_status tl_backward(const trit_op_call *c) {
#ifdef TRIT_REAL_F64
    (void)c;
    return trit_error(TRIT_ERR_DTYPE, "ternary_linear: float graphs only");
#else
    return tl_backward_f32(c);
#endif
}

const trit_op_def R(trit_op_ternary_linear) = {
    .name = "ternary_linear", .infer = tl_infer, .forward = tl_forward, .backward = tl_backward,
    .saved_bytes = tl_saved, .scratch_bytes = tl_scratch, .contiguous_inputs = TRIT_IN(0) | TRIT_IN(2),
    .bwd_unread = TRIT_IN(0) | TRIT_IN(2) | TRIT_OUT, .bwd_stores = TRIT_IN(0), .attr_size = sizeof(tl_attr),
};

// ---- the ternary state and the graph constructor --------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

bool trit_ternary_linear_supported(int64_t N, int64_t K) {
    return N > 0 && K > 0 && N % 64 == 0 && K % 64 == 0 && N <= 131072 && K <= 131072;
}

trit_status trit_ternary_weight_init(trit_ternary_weight *tw, int64_t N, int64_t K, trit_ternary_dx dx) {
    memset(tw, 0, sizeof *tw);
    if (!trit_ternary_linear_supported(N, K))
        return trit_error(TRIT_ERR_SHAPE, "ternary_linear: a (%lld, %lld) weight does not fit the panels; both sides "
                          "must be multiples of 64, at most 131072", (long long)N, (long long)K);
    tw->N = N, tw->K = K, tw->dx = dx, tw->stale = true;
    trit_status s = trit_qpanels_alloc(TRIT_TERNARY, N, K, K, &tw->w);
    if (s == TRIT_OK && dx == TRIT_TERNARY_DX_INT8) s = trit_qpanels_alloc(TRIT_TERNARY, K, N, N, &tw->wt);
    if (s == TRIT_OK && dx == TRIT_TERNARY_DX_F32) {
        tw->wdec = trit_aligned_alloc(sizeof(float) * (size_t)(N * K));
        if (!tw->wdec) s = trit_error(TRIT_ERR_NOMEM, "ternary_linear: out of memory for a (%lld, %lld) weight",
                                      (long long)N, (long long)K);
    }
    if (s != TRIT_OK) trit_ternary_weight_free(tw);
    return s;
}

void trit_ternary_weight_free(trit_ternary_weight *tw) {
    if (!tw) return;
    trit_qpanels_free(&tw->w);
    trit_qpanels_free(&tw->wt);
    trit_aligned_free(tw->wdec);
    memset(tw, 0, sizeof *tw);
}

void trit_ternary_weight_fill(trit_ternary_weight *tw, const float *w) {
    const int64_t n = tw->N * tw->K;
    const float s = trit_fake_quant_ternary_scale_f32(w, n);
    trit_qpanels_fill_ternary_f32(&tw->w, w, s, false);
    if (tw->wt.codes) trit_qpanels_fill_ternary_f32(&tw->wt, w, s, true);
    if (tw->wdec) {
#pragma omp parallel for schedule(static) if (n >= TL_PAR_MIN && !omp_in_parallel())
        for (int64_t i = 0; i < n; i++) {  // the fill's code times s: fake_quant's value
            const float v = w[i] / s;
            tw->wdec[i] = (float)((v > 0.5f) - (v < -0.5f)) * s;
        }
    }
    tw->scale = s;
    tw->stale = false;
    tw->fills++;
}

trit_tensor *trit_ternary_linear(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b, trit_ternary_weight *tw) {
    if (g && trit_graph_dtype(g) != TRIT_F32) {
        trit_error(TRIT_ERR_DTYPE, "ternary_linear: float graphs only, this graph computes in %s",
                   trit_dtype_name(trit_graph_dtype(g)));
        return trit_graph_fail(g, TRIT_ERR_DTYPE);
    }
    const tl_attr a = {.tw = tw};
    trit_tensor *in[3] = {x, w, b};
    return TRIT_APPLY(g, trit_op_ternary_linear, b ? 3 : 2, in, &a);
}

#endif
