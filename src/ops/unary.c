// Unary element-wise ops. Each is a value rule f(x, s) and a slope rule f'(x, y, s) (y = f(x)),
// turned into strided row loops by one macro; backward adds g * f' into the input's gradient.
//
// Domains follow PyTorch: pow(x, p) with x < 0 and a non-integer p is NaN, pow(0, p < 0) is
// +Inf, ln(x <= 0) is NaN or -Inf; NaN inputs give NaN outputs (relu included).
#include "ops/unary.h"

#include "ops/op_build.h"
#include "kernels/rowops.h"
#include "ops/binary.h"
#include "trit/ops.h"

#include <math.h>

// ---- value and slope rules --------------------------------------------------------------

static inline real f_scale(real x, real s) { return s * x; }
static inline real d_scale(real x, real y, real s) { (void)x, (void)y; return s; }

static inline real f_add_scalar(real x, real s) { return x + s; }
static inline real d_add_scalar(real x, real y, real s) { (void)x, (void)y, (void)s; return 1; }

static inline real f_pow(real x, real p) {
    if (p == 2) return x * x;  // the common square, exactly rounded
    if (p == 1) return x;
    return RPOW(x, p);
}
static inline real d_pow(real x, real y, real p) {
    (void)y;
    if (p == 0) return 0;  // d x^0 / dx is 0 everywhere, x = 0 included (as in PyTorch)
    if (p == 2) return 2 * x;
    if (p == 1) return 1;
    return p * RPOW(x, p - 1);
}

static inline real f_exp(real x, real s) { (void)s; return REXP(x); }
static inline real d_exp(real x, real y, real s) { (void)x, (void)s; return y; }

static inline real f_ln(real x, real s) { (void)s; return RLOG(x); }
static inline real d_ln(real x, real y, real s) { (void)y, (void)s; return 1 / x; }

static inline real f_tanh(real x, real s) { (void)s; return RTANH(x); }
static inline real d_tanh(real x, real y, real s) { (void)x, (void)s; return 1 - y * y; }

// exp of a non-positive number only, so large |x| neither overflows nor loses the small tail.
static inline real sigmoid(real x) {
    if (x >= 0) return 1 / (1 + REXP(-x));
    const real e = REXP(x);
    return e / (1 + e);
}
static inline real f_sigmoid(real x, real s) { (void)s; return sigmoid(x); }
static inline real d_sigmoid(real x, real y, real s) { (void)x, (void)s; return y * (1 - y); }

static inline real f_relu(real x, real s) { (void)s; return x < 0 ? 0 : x; }  // NaN stays NaN
static inline real d_relu(real x, real y, real s) { (void)x, (void)s; return y > 0 ? 1 : 0; }

static inline real f_silu(real x, real s) { (void)s; return x * sigmoid(x); }
static inline real d_silu(real x, real y, real s) {
    (void)y, (void)s;
    const real sg = sigmoid(x);
    return sg * (1 + x * (1 - sg));
}

// GELU, tanh form: y = 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
// With e = exp(-2|u|): (1 + tanh u) / 2 = (u >= 0 ? 1 : e) / (1 + e) and
// 1 - tanh^2 u = 4e / (1 + e)^2, so neither the value nor the exact slope
//   dy/dx = (1 + tanh u) / 2 + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2)
// suffers the cancellation of 1 - tanh^2 near saturation; once e underflows the second term is
// exactly 0 (skipped, so x^2 overflowing to Inf cannot make 0 * Inf = NaN).
#define GELU_C ((real)0.79788456080286535588)  // sqrt(2/pi)
#define GELU_A ((real)0.044715)

static inline real gelu_half(real u, real e) { return (u >= 0 ? 1 : e) / (1 + e); }
static inline real f_gelu(real x, real s) {
    (void)s;
    const real u = GELU_C * (x + GELU_A * x * x * x), e = REXP(-2 * RFABS(u));
    return x * gelu_half(u, e);
}
static inline real d_gelu(real x, real y, real s) {
    (void)y, (void)s;
    const real u = GELU_C * (x + GELU_A * x * x * x), e = REXP(-2 * RFABS(u));
    const real h = gelu_half(u, e);
    if (e == 0) return h;
    const real den = 1 + e;
    return h + x * (2 * e / (den * den)) * GELU_C * (1 + 3 * GELU_A * x * x);
}

// ---- shared drivers ---------------------------------------------------------------------

typedef void (*fwd_row_fn)(real *y, const real *x, int64_t sx, int64_t n, real s);
typedef void (*bwd_row_fn)(real *gi, const real *g, const real *x, int64_t sx, const real *y, int64_t n, real s);

// {contiguous (out, gout, gin), x} over x's shape.
static void unary_layout(const trit_tensor *x, trit_ew_layout *l) {
    int64_t st[2][TRIT_MAX_DIMS];
    trit_ew_contig_strides(x->ndim, x->shape, st[0]);
    for (int d = 0; d < x->ndim; d++) st[1][d] = x->strides[d];
    trit_ew_layout_init(l, x->ndim, x->shape, 2, (const int64_t(*)[TRIT_MAX_DIMS])st);
}

static real attr_s(const trit_op_call *c) { return c->attr ? (real)((const trit_unary_attr *)c->attr)->s : 0; }

static trit_status run_forward(const trit_op_call *c, fwd_row_fn row) {
    const trit_tensor *x = c->in[0];
    if (trit_tensor_numel(x) == 0) return TRIT_OK;
    trit_ew_layout l;
    unary_layout(x, &l);
    const int64_t n = l.shape[l.ndim - 1], rows = trit_ew_rows(&l), sx = l.strides[1][l.ndim - 1];
    const real *px = (const real *)x->data + x->offset, s = attr_s(c);
    real *py = c->out->data;
#pragma omp parallel for schedule(static) if (l.numel >= TRIT_EW_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off[2];
        trit_ew_row_offsets(&l, r, off);
        row(py + off[0], px + off[1], sx, n, s);
    }
    return TRIT_OK;
}

static trit_status run_backward(const trit_op_call *c, bwd_row_fn row) {
    const trit_tensor *x = c->in[0];
    if (!c->gin[0] || trit_tensor_numel(x) == 0) return TRIT_OK;
    trit_ew_layout l;
    unary_layout(x, &l);
    const int64_t n = l.shape[l.ndim - 1], rows = trit_ew_rows(&l), sx = l.strides[1][l.ndim - 1];
    const real *px = (const real *)x->data + x->offset, *py = c->out->data, *pg = c->gout->data, s = attr_s(c);
    real *gi = c->gin[0]->data;
#pragma omp parallel for schedule(static) if (l.numel >= TRIT_EW_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off[2];
        trit_ew_row_offsets(&l, r, off);
        row(gi + off[0], pg + off[0], px + off[1], sx, py + off[0], n, s);
    }
    return TRIT_OK;
}

static trit_status unary_infer(const trit_tensor *const *in, int n_in, trit_tensor *out, const char *name) {
    char buf[128];
    if (n_in != 1) return trit_error(TRIT_ERR_INVALID, "%s: expected 1 input, got %d", name, n_in);
    if (in[0]->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "%s: expected a %s input (the graph's compute dtype), got %s %s", name,
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(in[0]->dtype),
                          trit_tensor_shape_str(in[0], buf, sizeof buf));
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, in[0]->ndim, in[0]->shape);
}

// Row loops (a unit-stride version the compiler can vectorize, and a strided one) and the shape rule.
#define UNARY_ROWS(NAME)                                                                                   \
    static void NAME##_fwd_row(real *y, const real *x, int64_t sx, int64_t n, real s) {                   \
        if (sx == 1)                                                                                       \
            for (int64_t j = 0; j < n; j++) y[j] = f_##NAME(x[j], s);                                      \
        else                                                                                               \
            for (int64_t j = 0; j < n; j++) y[j] = f_##NAME(x[j * sx], s);                                 \
    }                                                                                                      \
    static void NAME##_bwd_row(real *gi, const real *g, const real *x, int64_t sx, const real *y, int64_t n, \
                               real s) {                                                                   \
        if (sx == 1)                                                                                       \
            for (int64_t j = 0; j < n; j++) gi[j] += g[j] * d_##NAME(x[j], y[j], s);                       \
        else                                                                                               \
            for (int64_t j = 0; j < n; j++) gi[j] += g[j] * d_##NAME(x[j * sx], y[j], s);                  \
    }                                                                                                      \
    static trit_status NAME##_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) { \
        (void)attr;                                                                                        \
        return unary_infer(in, n_in, out, #NAME);                                                          \
    }

// The op entry, forward and backward through the row loops.
#define UNARY_OP(NAME, ATTR_SIZE)                                                                          \
    UNARY_ROWS(NAME)                                                                                       \
    static trit_status NAME##_forward(const trit_op_call *c) { return run_forward(c, NAME##_fwd_row); }   \
    static trit_status NAME##_backward(const trit_op_call *c) { return run_backward(c, NAME##_bwd_row); } \
    const trit_op_def R(trit_op_##NAME) = {                                                                \
        .name = #NAME, .infer = NAME##_infer, .forward = NAME##_forward, .backward = NAME##_backward,       \
        .attr_size = ATTR_SIZE,                                                                            \
    };

UNARY_OP(scale, sizeof(trit_unary_attr))
UNARY_OP(add_scalar, sizeof(trit_unary_attr))
UNARY_OP(pow, sizeof(trit_unary_attr))
UNARY_OP(exp, 0)
UNARY_OP(ln, 0)
UNARY_OP(tanh, 0)
UNARY_OP(sigmoid, 0)
UNARY_OP(relu, 0)
UNARY_OP(silu, 0)

// GELU on a contiguous input runs the row kernel of kernels/rowops.h (vectorized for f32, the same
// formulas as f_gelu/d_gelu for f64); a strided view goes through the row loops.
UNARY_ROWS(gelu)

static bool is_contiguous(const trit_tensor *x) {
    int64_t st[TRIT_MAX_DIMS];
    trit_ew_contig_strides(x->ndim, x->shape, st);
    for (int d = 0; d < x->ndim; d++)
        if (x->shape[d] != 1 && x->strides[d] != st[d]) return false;
    return true;
}

static trit_status gelu_forward(const trit_op_call *c) {
    const trit_tensor *x = c->in[0];
    if (!is_contiguous(x)) return run_forward(c, gelu_fwd_row);
    R(trit_kernel_gelu_fwd)(c->out->data, trit_tensor_ptr(x), NULL, 1, trit_tensor_numel(x));  // (numel) each
    return TRIT_OK;
}

static trit_status gelu_backward(const trit_op_call *c) {
    const trit_tensor *x = c->in[0];
    if (!c->gin[0]) return TRIT_OK;
    if (!is_contiguous(x)) return run_backward(c, gelu_bwd_row);
    R(trit_kernel_gelu_bwd)(c->gin[0]->data, NULL, trit_tensor_ptr(x), NULL, c->gout->data, 1, trit_tensor_numel(x));
    return TRIT_OK;
}

const trit_op_def R(trit_op_gelu) = {
    .name = "gelu", .infer = gelu_infer, .forward = gelu_forward, .backward = gelu_backward,
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

static bool finite_scalar(trit_graph *g, const char *op, double s) {
    if (isfinite(s)) return true;
    trit_error(TRIT_ERR_INVALID, "%s: expected a finite scalar, got %g", op, s);
    trit_graph_fail(g, TRIT_ERR_INVALID);
    return false;
}

trit_tensor *trit_scale(trit_graph *g, trit_tensor *x, double s) {
    if (!finite_scalar(g, "scale", s)) return NULL;
    const trit_unary_attr a = {.s = s};
    return TRIT_APPLY(g, trit_op_scale, 1, &x, &a);
}

trit_tensor *trit_add_scalar(trit_graph *g, trit_tensor *x, double s) {
    if (!finite_scalar(g, "add_scalar", s)) return NULL;
    const trit_unary_attr a = {.s = s};
    return TRIT_APPLY(g, trit_op_add_scalar, 1, &x, &a);
}

trit_tensor *trit_pow(trit_graph *g, trit_tensor *x, double p) {
    if (!finite_scalar(g, "pow", p)) return NULL;
    const trit_unary_attr a = {.s = p};
    return TRIT_APPLY(g, trit_op_pow, 1, &x, &a);
}

trit_tensor *trit_exp(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_exp, 1, &x, NULL); }
trit_tensor *trit_ln(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_ln, 1, &x, NULL); }
trit_tensor *trit_tanh(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_tanh, 1, &x, NULL); }
trit_tensor *trit_sigmoid(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_sigmoid, 1, &x, NULL); }
trit_tensor *trit_relu(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_relu, 1, &x, NULL); }
trit_tensor *trit_gelu(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_gelu, 1, &x, NULL); }
trit_tensor *trit_silu(trit_graph *g, trit_tensor *x) { return TRIT_APPLY(g, trit_op_silu, 1, &x, NULL); }

#endif
