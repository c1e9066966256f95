// conv2d by im2col + GEMM. For one sample, the columns matrix col (Cin*KH*KW, OH*OW) holds at
// row (ci, kh, kw) and column (oh, ow) the input pixel under that kernel tap (0 in the padding),
// so the convolution is one product out_n (Cout, OH*OW) = w (Cout, Cin*KH*KW) @ col.
// Backward reuses the same picture: dW += dout_n @ col^T, dcol = w^T @ dout_n and col2im adds
// each column entry back onto the pixel it came from; db sums dout over samples and pixels.
// Samples run one after another so the columns buffer is one sample's worth; the GEMMs and
// the (im2col, col2im, bias) loops are threaded over independent rows or channels.
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "kernels/gemm.h"
#include "trit/ops.h"

typedef struct trit_conv2d_attr {
    int64_t stride;   // >= 1, both spatial dims
    int64_t padding;  // >= 0 zeros on every side
} trit_conv2d_attr;

// Inputs: x (N, Cin, H, W), w (Cout, Cin, KH, KW), optionally b (Cout);
// out: (N, Cout, OH, OW) with OH = (H + 2 padding - KH) / stride + 1, likewise OW.
TRIT_DECLARE_REAL(const trit_op_def, trit_op_conv2d);

// Below this many elements touched, a loop stays on one thread (a team costs more than it saves).
#define CONV_PARALLEL_MIN ((int64_t)1 << 15)

typedef struct conv_dims {
    int64_t N, Cin, H, W, Cout, KH, KW, OH, OW, S, P;
    int64_t K, L;  // Cin*KH*KW rows and OH*OW columns of col
} conv_dims;

static conv_dims dims_of(const trit_tensor *x, const trit_tensor *w, const trit_conv2d_attr *a) {
    conv_dims d = {x->shape[0], x->shape[1], x->shape[2], x->shape[3], w->shape[0], w->shape[2], w->shape[3],
                   0, 0, a->stride, a->padding, 0, 0};
    d.OH = (d.H + 2 * d.P - d.KH) / d.S + 1;
    d.OW = (d.W + 2 * d.P - d.KW) / d.S + 1;
    d.K = d.Cin * d.KH * d.KW;
    d.L = d.OH * d.OW;
    return d;
}

static trit_status conv2d_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_conv2d_attr *a = attr;
    char s0[96], s1[96];
    if (n_in != 2 && n_in != 3) return trit_error(TRIT_ERR_INVALID, "conv2d: expected inputs x, w and optional b, got %d", n_in);
    static const char *names[3] = {"x", "w", "b"};
    for (int i = 0; i < n_in; i++)
        if (in[i]->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "conv2d: %s must be %s (the graph's compute dtype), got %s", names[i],
                              trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(in[i]->dtype));
    const trit_tensor *x = in[0], *w = in[1];
    if (x->ndim != 4 || w->ndim != 4)
        return trit_error(TRIT_ERR_SHAPE, "conv2d: expected x (N, Cin, H, W) and w (Cout, Cin, KH, KW), got x %s, w %s",
                          trit_tensor_shape_str(x, s0, sizeof s0), trit_tensor_shape_str(w, s1, sizeof s1));
    if (x->shape[1] != w->shape[1])
        return trit_error(TRIT_ERR_SHAPE, "conv2d: x has %lld input channels (x %s) but w expects %lld (w %s)",
                          (long long)x->shape[1], trit_tensor_shape_str(x, s0, sizeof s0), (long long)w->shape[1],
                          trit_tensor_shape_str(w, s1, sizeof s1));
    if (n_in == 3 && (in[2]->ndim != 1 || in[2]->shape[0] != w->shape[0]))
        return trit_error(TRIT_ERR_SHAPE, "conv2d: bias must be (%lld) for w %s, got %s", (long long)w->shape[0],
                          trit_tensor_shape_str(w, s0, sizeof s0), trit_tensor_shape_str(in[2], s1, sizeof s1));
    if (a->stride < 1 || a->padding < 0)
        return trit_error(TRIT_ERR_INVALID, "conv2d: stride must be >= 1 and padding >= 0, got stride %lld, padding %lld",
                          (long long)a->stride, (long long)a->padding);
    if (w->shape[2] < 1 || w->shape[3] < 1 || x->shape[2] + 2 * a->padding < w->shape[2] ||
        x->shape[3] + 2 * a->padding < w->shape[3])
        return trit_error(TRIT_ERR_SHAPE, "conv2d: the %lldx%lld kernel does not fit the %lldx%lld input with padding %lld "
                          "(output would be empty); use a smaller kernel or more padding",
                          (long long)w->shape[2], (long long)w->shape[3], (long long)x->shape[2],
                          (long long)x->shape[3], (long long)a->padding);
    conv_dims d = dims_of(x, w, a);
    int64_t shape[4] = {d.N, d.Cout, d.OH, d.OW};
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 4, shape);
}

static size_t conv2d_scratch_bytes(const trit_op_call *c) {
    conv_dims d = dims_of(c->in[0], c->in[1], c->attr);
    return 2 * sizeof(real) * (size_t)(d.K * d.L);  // col and dcol
}

// x: (Cin, H, W) one sample; col: (K, L).
static void im2col(const conv_dims *d, const real *x, real *col) {
#pragma omp parallel for schedule(static) if (d->K * d->L >= CONV_PARALLEL_MIN)
    for (int64_t r = 0; r < d->K; r++) {
        const int64_t ci = r / (d->KH * d->KW), kh = r / d->KW % d->KH, kw = r % d->KW;
        const real *xc = x + ci * d->H * d->W;
        real *row = col + r * d->L;
        for (int64_t oh = 0; oh < d->OH; oh++) {
            const int64_t ih = oh * d->S - d->P + kh;
            real *o = row + oh * d->OW;
            if (ih < 0 || ih >= d->H) {
                for (int64_t ow = 0; ow < d->OW; ow++) o[ow] = 0;
                continue;
            }
            for (int64_t ow = 0; ow < d->OW; ow++) {
                const int64_t iw = ow * d->S - d->P + kw;
                o[ow] = iw >= 0 && iw < d->W ? xc[ih * d->W + iw] : 0;
            }
        }
    }
}

// gx: (Cin, H, W) one sample's gradient, added to; dcol: (K, L). One thread per input channel
// owns every tap that lands in that channel, so the sums have a fixed order.
static void col2im_add(const conv_dims *d, const real *dcol, real *gx) {
#pragma omp parallel for schedule(static) if (d->K * d->L >= CONV_PARALLEL_MIN)
    for (int64_t ci = 0; ci < d->Cin; ci++) {
        real *gc = gx + ci * d->H * d->W;
        for (int64_t kh = 0; kh < d->KH; kh++)
            for (int64_t kw = 0; kw < d->KW; kw++) {
                const real *row = dcol + ((ci * d->KH + kh) * d->KW + kw) * d->L;
                for (int64_t oh = 0; oh < d->OH; oh++) {
                    const int64_t ih = oh * d->S - d->P + kh;
                    if (ih < 0 || ih >= d->H) continue;
                    for (int64_t ow = 0; ow < d->OW; ow++) {
                        const int64_t iw = ow * d->S - d->P + kw;
                        if (iw >= 0 && iw < d->W) gc[ih * d->W + iw] += row[oh * d->OW + ow];
                    }
                }
            }
    }
}

static trit_status conv2d_forward(const trit_op_call *c) {
    const conv_dims d = dims_of(c->in[0], c->in[1], c->attr);
    const real *x = trit_tensor_ptr(c->in[0]);                        // (N, Cin, H, W)
    const real *w = trit_tensor_ptr(c->in[1]);                        // (Cout, K)
    const real *b = c->n_in == 3 ? trit_tensor_ptr(c->in[2]) : NULL;  // (Cout)
    real *out = c->out->data;                                         // (N, Cout, L)
    real *col = c->scratch;                                           // (K, L)
    for (int64_t n = 0; n < d.N; n++) {
        real *on = out + n * d.Cout * d.L;
        im2col(&d, x + n * d.Cin * d.H * d.W, col);
        R(trit_kernel_gemm)(false, false, d.Cout, d.L, d.K, w, d.K, col, d.L, on, d.L, false);
        if (!b) continue;
#pragma omp parallel for schedule(static) if (d.Cout * d.L >= CONV_PARALLEL_MIN)
        for (int64_t co = 0; co < d.Cout; co++)
            for (int64_t l = 0; l < d.L; l++) on[co * d.L + l] += b[co];
    }
    return TRIT_OK;
}

static trit_status conv2d_backward(const trit_op_call *c) {
    const conv_dims d = dims_of(c->in[0], c->in[1], c->attr);
    const real *x = trit_tensor_ptr(c->in[0]);                      // (N, Cin, H, W)
    const real *w = trit_tensor_ptr(c->in[1]);                      // (Cout, K)
    const real *go = c->gout->data;                                 // (N, Cout, L)
    real *gx = c->gin[0] ? c->gin[0]->data : NULL;                  // (N, Cin, H, W)
    real *gw = c->gin[1] ? c->gin[1]->data : NULL;                  // (Cout, K)
    real *gb = c->n_in == 3 && c->gin[2] ? c->gin[2]->data : NULL;  // (Cout)
    real *col = c->scratch, *dcol = (real *)c->scratch + d.K * d.L;  // (K, L) each
    if (gb) {
#pragma omp parallel for schedule(static) if (d.N * d.Cout * d.L >= CONV_PARALLEL_MIN)
        for (int64_t co = 0; co < d.Cout; co++) {
            double s = 0;
            for (int64_t n = 0; n < d.N; n++)
                for (int64_t l = 0; l < d.L; l++) s += (double)go[(n * d.Cout + co) * d.L + l];
            gb[co] += (real)s;
        }
    }
    for (int64_t n = 0; n < d.N && (gw || gx); n++) {
        const real *gon = go + n * d.Cout * d.L;
        if (gw) {
            im2col(&d, x + n * d.Cin * d.H * d.W, col);
            R(trit_kernel_gemm)(false, true, d.Cout, d.K, d.L, gon, d.L, col, d.L, gw, d.K, true);
        }
        if (gx) {
            R(trit_kernel_gemm)(true, false, d.K, d.L, d.Cout, w, d.K, gon, d.L, dcol, d.L, false);
            col2im_add(&d, dcol, gx + n * d.Cin * d.H * d.W);
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_conv2d) = {
    .name = "conv2d",
    .infer = conv2d_infer,
    .forward = conv2d_forward,
    .backward = conv2d_backward,
    .scratch_bytes = conv2d_scratch_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2),
    .attr_size = sizeof(trit_conv2d_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_conv2d(trit_graph *g, trit_tensor *x, trit_tensor *w, trit_tensor *b, int stride, int padding) {
    trit_tensor *in[3] = {x, w, b};
    trit_conv2d_attr a = {.stride = stride, .padding = padding};
    return TRIT_APPLY(g, trit_op_conv2d, b ? 3 : 2, in, &a);
}

#endif
