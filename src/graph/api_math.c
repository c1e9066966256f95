// Graph constructors for element-wise ops, reductions, matmul and linear.
#include "graph/graph_internal.h"
#include "ops/binary.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "trit/ops.h"

#include <math.h>

static trit_tensor *fail(trit_graph *g, trit_status s) { return trit_graph_fail(g, s); }

// ---- element-wise -----------------------------------------------------------------------

trit_tensor *trit_add(trit_graph *g, trit_tensor *a, trit_tensor *b) {
    trit_tensor *in[2] = {a, b};
    return TRIT_APPLY(g, trit_op_add, 2, in, NULL);
}

trit_tensor *trit_sub(trit_graph *g, trit_tensor *a, trit_tensor *b) {
    trit_tensor *in[2] = {a, b};
    return TRIT_APPLY(g, trit_op_sub, 2, in, NULL);
}

trit_tensor *trit_mul(trit_graph *g, trit_tensor *a, trit_tensor *b) {
    trit_tensor *in[2] = {a, b};
    return TRIT_APPLY(g, trit_op_mul, 2, in, NULL);
}

trit_tensor *trit_div(trit_graph *g, trit_tensor *a, trit_tensor *b) {
    trit_tensor *in[2] = {a, b};
    return TRIT_APPLY(g, trit_op_div, 2, in, NULL);
}

static bool finite_scalar(trit_graph *g, const char *op, double s) {
    if (isfinite(s)) return true;
    trit_error(TRIT_ERR_INVALID, "%s: expected a finite scalar, got %g", op, s);
    fail(g, TRIT_ERR_INVALID);
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

// ---- reductions -------------------------------------------------------------------------

// Axes become a mask of non-negative dims here, where x's rank is known; naxes == 0 is all.
static bool axes_mask(trit_graph *g, const char *op, const trit_tensor *x, int naxes, const int *axes, uint32_t *mask) {
    char buf[128];
    if (!x) {
        trit_error(TRIT_ERR_INVALID, "%s: input is NULL (did an earlier op fail?)", op);
        fail(g, TRIT_ERR_INVALID);
        return false;
    }
    if (naxes < 0 || naxes > TRIT_MAX_DIMS || (naxes > 0 && !axes)) {
        trit_error(TRIT_ERR_INVALID, "%s: expected 0 to %d axes (0 = all), got %d%s", op, TRIT_MAX_DIMS, naxes,
                   naxes > 0 && !axes ? " with a NULL axes array" : "");
        fail(g, TRIT_ERR_INVALID);
        return false;
    }
    *mask = naxes == 0 ? (uint32_t)((1u << x->ndim) - 1u) : 0;
    for (int i = 0; i < naxes; i++) {
        const int ax = axes[i] < 0 ? axes[i] + x->ndim : axes[i];
        if (ax < 0 || ax >= x->ndim || (*mask >> ax & 1u)) {
            trit_error(TRIT_ERR_INVALID, "%s: axis %d is %s for %s; use distinct axes in [-%d, %d)", op, axes[i],
                       ax >= 0 && ax < x->ndim ? "repeated" : "out of range", trit_tensor_shape_str(x, buf, sizeof buf),
                       x->ndim, x->ndim);
            fail(g, TRIT_ERR_INVALID);
            return false;
        }
        *mask |= 1u << ax;
    }
    return true;
}

trit_tensor *trit_sum(trit_graph *g, trit_tensor *x, int naxes, const int *axes, bool keepdim) {
    trit_reduce_attr a = {.keepdim = keepdim};
    if (!axes_mask(g, "sum", x, naxes, axes, &a.mask)) return NULL;
    return TRIT_APPLY(g, trit_op_sum, 1, &x, &a);
}

trit_tensor *trit_mean(trit_graph *g, trit_tensor *x, int naxes, const int *axes, bool keepdim) {
    trit_reduce_attr a = {.keepdim = keepdim};
    if (!axes_mask(g, "mean", x, naxes, axes, &a.mask)) return NULL;
    return TRIT_APPLY(g, trit_op_mean, 1, &x, &a);
}

trit_tensor *trit_max(trit_graph *g, trit_tensor *x, int naxes, const int *axes, bool keepdim) {
    trit_reduce_attr a = {.keepdim = keepdim};
    if (!axes_mask(g, "max", x, naxes, axes, &a.mask)) return NULL;
    return TRIT_APPLY(g, trit_op_max, 1, &x, &a);
}

// ---- matmul and linear ------------------------------------------------------------------

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
// cast node: the cast value is what backward keeps, and for a parameter it is the compute copy
// refreshed every forward. Operands already in a 16-bit dtype stay as they are.
static trit_tensor *matmul_operand(trit_graph *g, trit_tensor *t) {
    const trit_dtype act = g ? g->policy.activation : TRIT_F32;
    if (!t || (act != TRIT_BF16 && act != TRIT_F16) || t->dtype != g->dtype) return t;
    return trit_cast(g, t, act);
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
