// sum, mean and max over a set of axes, with or without the reduced dims kept as size 1.
// One strided reduction serves them all (and the broadcast gradients of binary ops): the shape
// is split into outer kept dims, reduced dims and an inner kept run; each task owns a block of
// output elements and walks the reduced dims in row-major order, so every result is summed (in
// double) in the same order whatever the thread count.
#include "ops/reduce.h"

#include "ops/op_build.h"
#include "ops/binary.h"
#include "trit/ops.h"

#include <math.h>

#define RED_BLOCK 64

enum { RED_SUM, RED_MAX };

typedef struct red_plan {
    int nk, nr;
    int64_t kshape[TRIT_MAX_DIMS], kstr[3][TRIT_MAX_DIMS];  // outer kept dims: one task per index
    int64_t rshape[TRIT_MAX_DIMS], rstr[3][TRIT_MAX_DIMS];  // reduced dims
    int64_t cols, cstr[3];                                  // inner kept run (1 if the last dim is reduced)
    int64_t G, R, numel;
} red_plan;

// Operands: 0 = destination (stride 0 on reduced dims), 1 = source, 2 = the source's row-major
// logical index (for argmax; all zero when not wanted).
static void red_plan_init(red_plan *p, int ndim, const int64_t *shape, const int64_t (*st)[TRIT_MAX_DIMS]) {
    trit_ew_layout l;
    trit_ew_layout_init(&l, ndim, shape, 3, st);
    const int last = l.ndim - 1;
    const bool inner = l.strides[0][last] != 0;
    p->numel = l.numel;
    p->nk = p->nr = 0;
    p->G = p->R = 1;
    p->cols = inner ? l.shape[last] : 1;
    for (int k = 0; k < 3; k++) p->cstr[k] = inner ? l.strides[k][last] : 0;
    for (int d = 0; d < (inner ? last : l.ndim); d++) {
        if (l.strides[0][d] != 0) {
            p->kshape[p->nk] = l.shape[d];
            for (int k = 0; k < 3; k++) p->kstr[k][p->nk] = l.strides[k][d];
            p->G *= l.shape[d];
            p->nk++;
        } else {
            p->rshape[p->nr] = l.shape[d];
            for (int k = 0; k < 3; k++) p->rstr[k][p->nr] = l.strides[k][d];
            p->R *= l.shape[d];
            p->nr++;
        }
    }
}

// One task: up to RED_BLOCK neighbouring outputs of outer index gi, starting at column c0.
static void red_task(const red_plan *p, int mode, int64_t gi, int64_t c0, real *dst, int64_t *arg, const real *src,
                     double scale, bool accumulate) {
    const int64_t nc = p->cols - c0 < RED_BLOCK ? p->cols - c0 : RED_BLOCK;
    int64_t base[3];
    for (int k = 0; k < 3; k++) base[k] = c0 * p->cstr[k];
    for (int d = p->nk - 1; d >= 0; d--) {
        const int64_t i = gi % p->kshape[d];
        gi /= p->kshape[d];
        for (int k = 0; k < 3; k++) base[k] += i * p->kstr[k][d];
    }
    const int64_t cs = p->cstr[1];
    double acc[RED_BLOCK] = {0};
    int64_t at[RED_BLOCK] = {0};
    int64_t ridx[TRIT_MAX_DIMS] = {0}, roff = 0, rlog = 0;
    for (int64_t r = 0; r < p->R; r++) {
        const real *s = src + base[1] + roff;
        if (mode == RED_SUM) {
            for (int64_t c = 0; c < nc; c++) acc[c] += (double)s[c * cs];
        } else {
            // The first maximum wins (strict >); a NaN wins over numbers, as in PyTorch.
            for (int64_t c = 0; c < nc; c++) {
                const double v = (double)s[c * cs];
                if (r == 0 || v > acc[c] || (isnan(v) && !isnan(acc[c]))) {
                    acc[c] = v;
                    at[c] = base[2] + rlog + c * p->cstr[2];
                }
            }
        }
        for (int d = p->nr - 1; d >= 0; d--) {  // next reduced index, row-major
            roff += p->rstr[1][d];
            rlog += p->rstr[2][d];
            if (++ridx[d] < p->rshape[d]) break;
            roff -= p->rshape[d] * p->rstr[1][d];
            rlog -= p->rshape[d] * p->rstr[2][d];
            ridx[d] = 0;
        }
    }
    real *o = dst + base[0];
    const int64_t os = p->cstr[0];
    for (int64_t c = 0; c < nc; c++) {
        const real v = (real)(acc[c] * scale);
        o[c * os] = accumulate ? o[c * os] + v : v;
        if (arg) arg[base[0] + c * os] = at[c];
    }
}

static void red_run(const red_plan *p, int mode, real *dst, int64_t *arg, const real *src, double scale,
                    bool accumulate) {
    if (p->numel == 0) return;  // empty inputs are handled by the callers
    const int64_t nblk = (p->cols + RED_BLOCK - 1) / RED_BLOCK, tasks = p->G * nblk;
#pragma omp parallel for schedule(static) if (p->numel >= TRIT_EW_PAR_MIN && tasks > 1)
    for (int64_t t = 0; t < tasks; t++)
        red_task(p, mode, t / nblk, t % nblk * RED_BLOCK, dst, arg, src, scale, accumulate);
}

void R(trit_reduce_sum_strided)(real *dst, const int64_t *dst_strides, const real *src, const int64_t *src_strides,
                                int ndim, const int64_t *shape, double scale, bool accumulate) {
    int64_t st[3][TRIT_MAX_DIMS] = {{0}};
    for (int d = 0; d < ndim; d++) {
        st[0][d] = dst_strides[d];
        st[1][d] = src_strides[d];
    }
    red_plan p;
    red_plan_init(&p, ndim, shape, (const int64_t(*)[TRIT_MAX_DIMS])st);
    red_run(&p, RED_SUM, dst, NULL, src, scale, accumulate);
}

// ---- shape rule -------------------------------------------------------------------------

static trit_status reduce_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out,
                                const char *name, bool is_max) {
    const trit_reduce_attr *a = attr;
    const trit_tensor *x = in[0];
    char buf[128];
    if (n_in != 1) return trit_error(TRIT_ERR_INVALID, "%s: expected 1 input, got %d", name, n_in);
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "%s: expected a %s input (the graph's compute dtype), got %s", name,
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (x->ndim < 32 && (a->mask >> x->ndim) != 0)
        return trit_error(TRIT_ERR_INVALID, "%s: axes mask 0x%x names a dim beyond the %d dims of %s", name,
                          (unsigned)a->mask, x->ndim, trit_tensor_shape_str(x, buf, sizeof buf));
    int ndim = 0;
    int64_t shape[TRIT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        const bool red = a->mask >> d & 1u;
        if (red && x->shape[d] == 0 && is_max)  // an empty set has no maximum
            return trit_error(TRIT_ERR_SHAPE, "max: cannot reduce over dim %d of %s, which is empty", d,
                              trit_tensor_shape_str(x, buf, sizeof buf));
        if (!red) shape[ndim++] = x->shape[d];
        else if (a->keepdim) shape[ndim++] = 1;
    }
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, ndim, shape);
}

static trit_status sum_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    return reduce_infer(in, n_in, attr, out, "sum", false);
}
static trit_status mean_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    return reduce_infer(in, n_in, attr, out, "mean", false);
}
static trit_status max_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    return reduce_infer(in, n_in, attr, out, "max", true);
}

// ---- forward ----------------------------------------------------------------------------

// Strides, aligned to x's shape, of the output seen with kept dims (0 on reduced dims).
static void out_strides(const trit_tensor *x, uint32_t mask, int64_t *st) {
    int64_t s = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (mask >> d & 1u) {
            st[d] = 0;
        } else {
            st[d] = s;
            s *= x->shape[d];
        }
    }
}

static int64_t reduced_count(const trit_tensor *x, uint32_t mask) {
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        if (mask >> d & 1u) n *= x->shape[d];
    return n;
}

static trit_status reduce_forward(const trit_op_call *c, int mode, double scale) {
    const trit_tensor *x = c->in[0];
    const trit_reduce_attr *a = c->attr;
    if (trit_tensor_numel(x) == 0) {  // sums of nothing are 0 (means NaN); max rejected this in infer
        real *o = c->out->data;
        for (int64_t i = 0; i < trit_tensor_numel(c->out); i++) o[i] = (real)(0.0 * scale);
        return TRIT_OK;
    }
    int64_t st[3][TRIT_MAX_DIMS] = {{0}};
    out_strides(x, a->mask, st[0]);
    for (int d = 0; d < x->ndim; d++) st[1][d] = x->strides[d];
    if (mode == RED_MAX) trit_ew_contig_strides(x->ndim, x->shape, st[2]);
    red_plan p;
    red_plan_init(&p, x->ndim, x->shape, (const int64_t(*)[TRIT_MAX_DIMS])st);
    red_run(&p, mode, c->out->data, mode == RED_MAX ? c->saved : NULL, (const real *)x->data + x->offset, scale,
            false);
    return TRIT_OK;
}

static double mean_scale(const trit_op_call *c) {
    const int64_t n = reduced_count(c->in[0], ((const trit_reduce_attr *)c->attr)->mask);
    return n > 0 ? 1.0 / (double)n : NAN;  // the mean of nothing is NaN, as in PyTorch
}

static trit_status sum_forward(const trit_op_call *c) { return reduce_forward(c, RED_SUM, 1.0); }
static trit_status mean_forward(const trit_op_call *c) { return reduce_forward(c, RED_SUM, mean_scale(c)); }
static trit_status max_forward(const trit_op_call *c) { return reduce_forward(c, RED_MAX, 1.0); }

// ---- backward ---------------------------------------------------------------------------

// gin (x's shape) += scale * gout broadcast back over the reduced dims.
static trit_status spread_backward(const trit_op_call *c, double scale) {
    if (!c->gin[0]) return TRIT_OK;
    const trit_tensor *x = c->in[0];
    if (trit_tensor_numel(x) == 0) return TRIT_OK;
    int64_t st[2][TRIT_MAX_DIMS];
    trit_ew_contig_strides(x->ndim, x->shape, st[0]);
    out_strides(x, ((const trit_reduce_attr *)c->attr)->mask, st[1]);
    trit_ew_layout l;
    trit_ew_layout_init(&l, x->ndim, x->shape, 2, (const int64_t(*)[TRIT_MAX_DIMS])st);
    const int last = l.ndim - 1;
    const int64_t n = l.shape[last], rows = trit_ew_rows(&l), sg = l.strides[1][last];
    real *gi = c->gin[0]->data;
    const real *go = c->gout->data;
    const real s = (real)scale;
#pragma omp parallel for schedule(static) if (l.numel >= TRIT_EW_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        int64_t off[2];
        trit_ew_row_offsets(&l, r, off);
        real *gr = gi + off[0];
        const real *g = go + off[1];
        for (int64_t j = 0; j < n; j++) gr[j] += s * g[j * sg];
    }
    return TRIT_OK;
}

static trit_status sum_backward(const trit_op_call *c) { return spread_backward(c, 1.0); }
static trit_status mean_backward(const trit_op_call *c) { return spread_backward(c, mean_scale(c)); }

// The whole gradient of each output goes to the element forward chose (the first maximum).
static trit_status max_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const int64_t n = trit_tensor_numel(c->out);
    const int64_t *arg = c->saved;
    real *gi = c->gin[0]->data;
    const real *go = c->gout->data;
    // Distinct outputs own distinct argmax elements, so rows never collide.
#pragma omp parallel for schedule(static) if (n >= TRIT_EW_PAR_MIN)
    for (int64_t j = 0; j < n; j++) gi[arg[j]] += go[j];
    return TRIT_OK;
}

static size_t max_saved(const trit_op_call *c) { return (size_t)trit_tensor_numel(c->out) * sizeof(int64_t); }

const trit_op_def R(trit_op_sum) = {
    .name = "sum", .infer = sum_infer, .forward = sum_forward, .backward = sum_backward,
    .attr_size = sizeof(trit_reduce_attr),
};
const trit_op_def R(trit_op_mean) = {
    .name = "mean", .infer = mean_infer, .forward = mean_forward, .backward = mean_backward,
    .attr_size = sizeof(trit_reduce_attr),
};
const trit_op_def R(trit_op_max) = {
    .name = "max", .infer = max_infer, .forward = max_forward, .backward = max_backward,
    .saved_bytes = max_saved, .attr_size = sizeof(trit_reduce_attr),
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

// Axes become a mask of non-negative dims here, where x's rank is known; naxes == 0 is all.
static bool axes_mask(trit_graph *g, const char *op, const trit_tensor *x, int naxes, const int *axes, uint32_t *mask) {
    char buf[128];
    if (!x) {
        trit_error(TRIT_ERR_INVALID, "%s: input is NULL (did an earlier op fail?)", op);
        trit_graph_fail(g, TRIT_ERR_INVALID);
        return false;
    }
    if (naxes < 0 || naxes > TRIT_MAX_DIMS || (naxes > 0 && !axes)) {
        trit_error(TRIT_ERR_INVALID, "%s: expected 0 to %d axes (0 = all), got %d%s", op, TRIT_MAX_DIMS, naxes,
                   naxes > 0 && !axes ? " with a NULL axes array" : "");
        trit_graph_fail(g, TRIT_ERR_INVALID);
        return false;
    }
    *mask = naxes == 0 ? (uint32_t)((1u << x->ndim) - 1u) : 0;
    for (int i = 0; i < naxes; i++) {
        const int ax = axes[i] < 0 ? axes[i] + x->ndim : axes[i];
        if (ax < 0 || ax >= x->ndim || (*mask >> ax & 1u)) {
            trit_error(TRIT_ERR_INVALID, "%s: axis %d is %s for %s; use distinct axes in [-%d, %d)", op, axes[i],
                       ax >= 0 && ax < x->ndim ? "repeated" : "out of range", trit_tensor_shape_str(x, buf, sizeof buf),
                       x->ndim, x->ndim);
            trit_graph_fail(g, TRIT_ERR_INVALID);
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

#endif
