// qlinear: x W^T + b over a frozen quantized W with the decoder's kernels (kernels/qgemm.h), for
// inference graphs. Where a kernel takes W, it runs as the decoder runs it: qint8, qint4 and
// 2-bit ternary (symmetric, groups the plain-layout integer kernels take) with x quantized per
// row to int8 (absmax / 127), exact int32 group sums scaled in fp32; NF4 and FP8 with the
// weight-only kernels (f32 x) for up to WEIGHT_ONLY_ROWS rows, above which the f32 GEMM over
// decoded chunks is faster (the decoder's rule). Anything else (zero points, q8_0/q4_0, base 3,
// int2, other groups, the f64 build) takes linear's decoded path (ops/qweight.h), exact with
// respect to the decoded weight. The int8 activations make this a different function from
// trit_linear's (within sum |w| * max|x| / 254 of it), so it has no gradient: backward is an
// error that names trit_linear. The decoder's 16-row panels are not used (they are a copy of
// the codes packed once, which an op that allocates nothing per call cannot keep); every
// kernel gives the portable reference's bits anyway, so only speed differs.
#include "ops/matmul.h"

#include "ops/op_build.h"
#include "ops/qweight.h"
#include "kernels/qgemm.h"
#include "trit/ops.h"

#include <string.h>

// Rows up to which NF4 and FP8 take their weight-only kernels (gpt_decode.c's WEIGHT_ONLY_ROWS).
enum { WEIGHT_ONLY_ROWS = 4 };
// Below this many values the bias is added on one thread.
#define QL_PAR_MIN ((int64_t)1 << 15)

typedef enum ql_path { QL_DECODED, QL_INT8, QL_NF4, QL_FP8 } ql_path;

static int64_t ql_rows(const trit_op_call *c) { return trit_tensor_numel(c->in[0]) / (c->in[1]->shape[1] > 0 ? c->in[1]->shape[1] : 1); }

// The group the kernels see: W's groups when they divide its rows, one per row when a group spans
// whole rows (per tensor, per channel), 0 when neither.
static int64_t ql_group(const trit_tensor *w) {
    const int64_t K = w->shape[1], gs = w->quant ? w->quant->group_size : K * w->shape[0];
    if (K <= 0) return 0;
    return gs % K == 0 ? K : K % gs == 0 ? gs : 0;
}

static ql_path ql_choose(const trit_op_call *c) {
#ifdef TRIT_REAL_F64
    (void)c;
    return QL_DECODED;
#else
    const trit_tensor *w = c->in[1];
    const int64_t K = w->shape[1], G = ql_group(w), rows = ql_rows(c);
    if (G <= 0 || w->offset != 0 || !trit_tensor_is_contiguous(w) || (w->quant && w->quant->zero_points)) return QL_DECODED;
    switch (w->dtype) {
    case TRIT_QINT8:
    case TRIT_QINT4:
    case TRIT_TERNARY: return trit_qgemm_supported(w->dtype, K, G) ? QL_INT8 : QL_DECODED;
    case TRIT_NF4: return rows <= WEIGHT_ONLY_ROWS && G % 64 == 0 && K % G == 0 ? QL_NF4 : QL_DECODED;
    case TRIT_F8_E4M3:
    case TRIT_F8_E5M2: return rows <= WEIGHT_ONLY_ROWS && trit_fp8_gemm_supported(w->dtype, K, G) ? QL_FP8 : QL_DECODED;
    default: return QL_DECODED;
    }
#endif
}

static size_t al64(size_t b) { return (b + 63) / 64 * 64; }

// Kernel paths: the scales (N, K / G) as f32, then the activations: int8 codes (rows, K), row
// scales (rows) and group sums (rows, K / G), or NF4's reordered rows (rows, K) f32. The decoded
// path: a decoded chunk of W.
static size_t ql_scratch(const trit_op_call *c) {
    const trit_tensor *w = c->in[1];
    const ql_path path = ql_choose(c);
    if (path == QL_DECODED) return R(trit_qw_scratch_bytes)(w, TRIT_REAL_DTYPE);
    const size_t N = (size_t)w->shape[0], K = (size_t)w->shape[1], groups = K / (size_t)ql_group(w), rows = (size_t)ql_rows(c);
    size_t b = al64(4 * N * groups);
    if (path == QL_INT8) b += al64(rows * K) + al64(4 * rows) + al64(4 * rows * groups);
    if (path == QL_NF4) b += al64(4 * rows * K);
    return b;
}

static trit_status ql_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)attr;
    const trit_tensor *x = in[0], *w = in[1], *b = n_in > 2 ? in[2] : NULL;
    char xs[128], ws[128];
    if (n_in != 2 && n_in != 3) return trit_error(TRIT_ERR_INVALID, "qlinear: expected 2 or 3 inputs, got %d", n_in);
    if (!trit_qw_is(w))
        return trit_error(TRIT_ERR_DTYPE, "qlinear: expected a quantized weight, got %s; use trit_linear for a float "
                          "weight", trit_dtype_name(w->dtype));
    trit_status s = R(trit_qw_check)(w, "qlinear", "w");
    if (s != TRIT_OK) return s;
    if (x->dtype != TRIT_REAL_DTYPE || (b && b->dtype != TRIT_REAL_DTYPE))
        return trit_error(TRIT_ERR_DTYPE, "qlinear: expected x and b in %s, got %s and %s", trit_dtype_name(TRIT_REAL_DTYPE),
                          trit_dtype_name(x->dtype), b ? trit_dtype_name(b->dtype) : "no bias");
    trit_tensor_shape_str(x, xs, sizeof xs);
    trit_tensor_shape_str(w, ws, sizeof ws);
    if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1])
        return trit_error(TRIT_ERR_SHAPE, "qlinear: expected x (..., K) and w (N, K), got x %s and w %s", xs, ws);
    if (b && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return trit_error(TRIT_ERR_SHAPE, "qlinear: expected b (%lld,) to match w %s", (long long)w->shape[0], ws);
    int64_t shape[TRIT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = w->shape[0];
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, x->ndim, shape);
}

#ifndef TRIT_REAL_F64
// y (rows, N) = x W^T on the kernel of `path`.
static void ql_kernel(const trit_op_call *c, ql_path path, int64_t rows, float *y) {
    const trit_tensor *w = c->in[1];
    const int64_t N = w->shape[0], K = w->shape[1], G = ql_group(w), groups = K / G;
    const int64_t gs = w->quant ? w->quant->group_size : N * K;
    const float *x = trit_tensor_ptr(c->in[0]);  // (rows, K)
    const uint8_t *codes = trit_tensor_ptr(w);
    char *at = c->scratch;
    float *ws = (float *)at;  // (N, groups): the scale of each kernel group
    at += al64(sizeof(float) * (size_t)(N * groups));
    for (int64_t j = 0; j < N * groups; j++) ws[j] = w->quant ? trit_quant_info_scale(w->quant, j * G / gs) : 1.0f;
    if (path == QL_INT8) {
        int8_t *q = (int8_t *)at;
        float *xs = (float *)(at + al64((size_t)(rows * K)));
        int32_t *gsum = (int32_t *)((char *)xs + al64(sizeof(float) * (size_t)rows));
        const trit_qact a = {q, xs, gsum};
        trit_qact_quantize(x, rows, K, G, w->dtype, &a);
        trit_kernel_qgemm(w->dtype, rows, N, K, G, &a, codes, ws, y, N);
    } else if (path == QL_NF4) {
        float *xf = (float *)at;  // (rows, K) in the NF4 kernels' order
        trit_nf4_act_order(x, rows, K, xf);
        trit_kernel_nf4_gemm(rows, N, K, G, xf, codes, ws, y, N);
    } else {
        trit_kernel_fp8_gemm(w->dtype, rows, N, K, G, x, codes, ws, y, N);
    }
}
#endif

static trit_status ql_forward(const trit_op_call *c) {
    const trit_tensor *x = c->in[0], *w = c->in[1], *b = c->n_in > 2 ? c->in[2] : NULL;
    const int64_t N = w->shape[0], K = w->shape[1], rows = ql_rows(c);
    real *y = c->out->data;  // (rows, N)
    if (rows == 0 || N == 0) return TRIT_OK;
    const ql_path path = K > 0 ? ql_choose(c) : QL_DECODED;
    const real *pb = b ? trit_tensor_ptr(b) : NULL;
    const int64_t sb = b ? b->strides[0] : 0;
    if (path == QL_DECODED) {  // linear's decoded path: rows start as the bias, the GEMM adds onto them
        if (b || K == 0)
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < N; j++) y[r * N + j] = b ? pb[j * sb] : 0;
        if (K > 0)
            R(trit_qw_gemm_xwt)(c, rows, trit_mm_of(x), false, K, w, y, TRIT_REAL_DTYPE, N, b != NULL, NULL, c->scratch);
        return TRIT_OK;
    }
#ifndef TRIT_REAL_F64
    ql_kernel(c, path, rows, y);
    if (b) {
#pragma omp parallel for schedule(static) if (rows * N >= QL_PAR_MIN)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < N; j++) y[r * N + j] += pb[j * sb];
    }
#endif
    return TRIT_OK;
}

static trit_status ql_backward(const trit_op_call *c) {
    (void)c;
    return trit_error(TRIT_ERR_STATE, "qlinear: the quantized inference kernels (int8 activations) have no gradient; "
                      "build the layer with trit_linear, which computes with the decoded weight, to train through it");
}

const trit_op_def R(trit_op_qlinear) = {
    .name = "qlinear", .infer = ql_infer, .forward = ql_forward, .backward = ql_backward,
    .scratch_bytes = ql_scratch, .contiguous_inputs = TRIT_IN(0), .bwd_unread = TRIT_IN(2) | TRIT_OUT,
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_qlinear(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b) {
    trit_tensor *in[3] = {x, w, b};
    return TRIT_APPLY(g, trit_op_qlinear, b ? 3 : 2, in, NULL);
}

#endif
