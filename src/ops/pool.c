// Pooling works plane by plane: each (n, c) plane of the input maps to the same plane of the
// output, so planes are independent and are split over threads.
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "trit/ops.h"

typedef struct trit_pool2d_attr {
    int64_t kernel;   // >= 1
    int64_t stride;   // >= 1
    int64_t padding;  // 0 <= padding <= kernel / 2, as PyTorch requires
} trit_pool2d_attr;

// Input x (N, C, H, W); out (N, C, OH, OW) with OH = (H + 2 padding - kernel) / stride + 1.
// maxpool2d pads with -inf and sends the gradient to the first maximum of each window;
// avgpool2d counts the padding zeros in the mean (PyTorch's count_include_pad=True).
TRIT_DECLARE_REAL(const trit_op_def, trit_op_maxpool2d);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_avgpool2d);

// Below this many window reads a call stays on one thread (a team costs more than it saves).
#define POOL_PARALLEL_MIN ((int64_t)1 << 15)

typedef struct pool_dims {
    int64_t planes, H, W, OH, OW, K, S, P;
} pool_dims;

static pool_dims dims_of(const trit_tensor *x, const trit_pool2d_attr *a) {
    pool_dims d = {x->shape[0] * x->shape[1], x->shape[2], x->shape[3], 0, 0, a->kernel, a->stride, a->padding};
    d.OH = (d.H + 2 * d.P - d.K) / d.S + 1;
    d.OW = (d.W + 2 * d.P - d.K) / d.S + 1;
    return d;
}

// The input rows [h_lo, h_hi) and columns [w_lo, w_hi) under output pixel (oh, ow)'s window,
// with the padding cut off.
typedef struct pool_window {
    int64_t h_lo, h_hi, w_lo, w_hi;
} pool_window;

static inline pool_window window_of(const pool_dims *d, int64_t oh, int64_t ow) {
    const int64_t h0 = oh * d->S - d->P, w0 = ow * d->S - d->P;
    return (pool_window){h0 < 0 ? 0 : h0, h0 + d->K < d->H ? h0 + d->K : d->H, w0 < 0 ? 0 : w0,
                         w0 + d->K < d->W ? w0 + d->K : d->W};
}

static bool worth_threads(const pool_dims *d) { return d->planes * d->OH * d->OW * d->K * d->K >= POOL_PARALLEL_MIN; }

static trit_status pool_infer(const char *name, const trit_tensor *const *in, int n_in, const trit_pool2d_attr *a,
                              trit_tensor *out) {
    char s0[96];
    if (n_in != 1) return trit_error(TRIT_ERR_INVALID, "%s: expected 1 input, got %d", name, n_in);
    const trit_tensor *x = in[0];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "%s: x must be %s (the graph's compute dtype), got %s", name,
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (x->ndim != 4)
        return trit_error(TRIT_ERR_SHAPE, "%s: expected x (N, C, H, W), got %s", name, trit_tensor_shape_str(x, s0, sizeof s0));
    if (a->kernel < 1 || a->stride < 1 || a->padding < 0 || a->padding > a->kernel / 2)
        return trit_error(TRIT_ERR_INVALID, "%s: need kernel >= 1, stride >= 1 and 0 <= padding <= kernel / 2; got kernel %lld, stride %lld, padding %lld",
                          name, (long long)a->kernel, (long long)a->stride, (long long)a->padding);
    if (x->shape[2] + 2 * a->padding < a->kernel || x->shape[3] + 2 * a->padding < a->kernel)
        return trit_error(TRIT_ERR_SHAPE, "%s: the %lldx%lld window does not fit x %s with padding %lld (output would be empty)",
                          name, (long long)a->kernel, (long long)a->kernel, trit_tensor_shape_str(x, s0, sizeof s0),
                          (long long)a->padding);
    pool_dims d = dims_of(x, a);
    int64_t shape[4] = {x->shape[0], x->shape[1], d.OH, d.OW};
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 4, shape);
}

// ---- maxpool2d ---------------------------------------------------------------------

static trit_status maxpool_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    return pool_infer("maxpool2d", in, n_in, attr, out);
}

// One int64 per output element: the winning pixel's index within its input plane.
static size_t maxpool_saved_bytes(const trit_op_call *c) {
    return sizeof(int64_t) * (size_t)trit_tensor_numel(c->out);
}

static trit_status maxpool_forward(const trit_op_call *c) {
    const pool_dims d = dims_of(c->in[0], c->attr);
    const real *x = trit_tensor_ptr(c->in[0]);  // (N*C, H, W)
    real *out = c->out->data;        // (N*C, OH, OW)
    int64_t *arg = c->saved;         // (N*C, OH, OW)
#pragma omp parallel for schedule(static) if (worth_threads(&d))
    for (int64_t pl = 0; pl < d.planes; pl++) {
        const real *xp = x + pl * d.H * d.W;
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                const pool_window win = window_of(&d, oh, ow);
                // Padding is -inf, so it never wins; padding <= kernel / 2 leaves a real pixel
                // in every window. A NaN wins and stays (it spreads, as in PyTorch).
                real best = RMAX_NEG;
                int64_t at = -1;
                for (int64_t ih = win.h_lo; ih < win.h_hi; ih++)
                    for (int64_t iw = win.w_lo; iw < win.w_hi; iw++) {
                        const real v = xp[ih * d.W + iw];
                        if (at < 0 || (!isnan(best) && (v > best || isnan(v)))) {
                            best = v;
                            at = ih * d.W + iw;
                        }
                    }
                const int64_t o = (pl * d.OH + oh) * d.OW + ow;
                out[o] = best;
                arg[o] = at;
            }
    }
    return TRIT_OK;
}

static trit_status maxpool_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const pool_dims d = dims_of(c->in[0], c->attr);
    const real *go = c->gout->data;  // (N*C, OH, OW)
    const int64_t *arg = c->saved;   // (N*C, OH, OW)
    real *gx = c->gin[0]->data;      // (N*C, H, W)
#pragma omp parallel for schedule(static) if (worth_threads(&d))
    for (int64_t pl = 0; pl < d.planes; pl++) {
        const int64_t o0 = pl * d.OH * d.OW;
        for (int64_t o = o0; o < o0 + d.OH * d.OW; o++)
            if (arg[o] >= 0) gx[pl * d.H * d.W + arg[o]] += go[o];
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_maxpool2d) = {
    .name = "maxpool2d",
    .infer = maxpool_infer,
    .forward = maxpool_forward,
    .backward = maxpool_backward,
    .saved_bytes = maxpool_saved_bytes,
    .contiguous_inputs = TRIT_IN(0),
    .attr_size = sizeof(trit_pool2d_attr),
};

// ---- avgpool2d ---------------------------------------------------------------------
// With count_include_pad and windows that never pass the padded edge (padding <= kernel / 2,
// floor rounding), every window divides by kernel * kernel.

static trit_status avgpool_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    return pool_infer("avgpool2d", in, n_in, attr, out);
}

static trit_status avgpool_forward(const trit_op_call *c) {
    const pool_dims d = dims_of(c->in[0], c->attr);
    const real *x = trit_tensor_ptr(c->in[0]);  // (N*C, H, W)
    real *out = c->out->data;        // (N*C, OH, OW)
    const double area = (double)(d.K * d.K);
#pragma omp parallel for schedule(static) if (worth_threads(&d))
    for (int64_t pl = 0; pl < d.planes; pl++) {
        const real *xp = x + pl * d.H * d.W;
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                const pool_window win = window_of(&d, oh, ow);
                double s = 0;
                for (int64_t ih = win.h_lo; ih < win.h_hi; ih++)
                    for (int64_t iw = win.w_lo; iw < win.w_hi; iw++) s += (double)xp[ih * d.W + iw];
                out[(pl * d.OH + oh) * d.OW + ow] = (real)(s / area);
            }
    }
    return TRIT_OK;
}

static trit_status avgpool_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const pool_dims d = dims_of(c->in[0], c->attr);
    const real *go = c->gout->data;  // (N*C, OH, OW)
    real *gx = c->gin[0]->data;      // (N*C, H, W)
    const real inv_area = (real)(1.0 / (double)(d.K * d.K));
#pragma omp parallel for schedule(static) if (worth_threads(&d))
    for (int64_t pl = 0; pl < d.planes; pl++) {
        real *gp = gx + pl * d.H * d.W;
        for (int64_t oh = 0; oh < d.OH; oh++)
            for (int64_t ow = 0; ow < d.OW; ow++) {
                const pool_window win = window_of(&d, oh, ow);
                const real g = go[(pl * d.OH + oh) * d.OW + ow] * inv_area;
                for (int64_t ih = win.h_lo; ih < win.h_hi; ih++)
                    for (int64_t iw = win.w_lo; iw < win.w_hi; iw++) gp[ih * d.W + iw] += g;
            }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_avgpool2d) = {
    .name = "avgpool2d",
    .infer = avgpool_infer,
    .forward = avgpool_forward,
    .backward = avgpool_backward,
    .contiguous_inputs = TRIT_IN(0),
    .attr_size = sizeof(trit_pool2d_attr),
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_maxpool2d(trit_graph *g, trit_tensor *x, int kernel, int stride, int padding) {
    trit_pool2d_attr a = {.kernel = kernel, .stride = stride, .padding = padding};
    return TRIT_APPLY(g, trit_op_maxpool2d, 1, &x, &a);
}

trit_tensor *trit_avgpool2d(trit_graph *g, trit_tensor *x, int kernel, int stride, int padding) {
    trit_pool2d_attr a = {.kernel = kernel, .stride = stride, .padding = padding};
    return TRIT_APPLY(g, trit_op_avgpool2d, 1, &x, &a);
}

#endif
