// Rotary position embedding, rotate-half form (as in GPT-NeoX and Llama). Within each head of
// size hs, the pair (x1, x2) = (x[i], x[i + hs/2]) at position p = pos0 + t is rotated by the
// angle p * theta^(-2i / hs):
//   y1 = x1 cos - x2 sin,   y2 = x2 cos + x1 sin.
// A rotation is orthogonal, so backward applies the inverse rotation (angle -a) to the output
// gradient. The cos/sin table is computed in double in the call's scratch (both passes), so the
// f32 and f64 builds rotate by the same angles and nothing is allocated.
#include "ops/rope.h"

#include "ops/op_build.h"
#include "trit/ops.h"

#include <math.h>

typedef struct rope_dims {
    int64_t B, T, C, H, hs, half;
} rope_dims;

static rope_dims dims_of(const trit_tensor *x, const trit_rope_attr *a) {
    rope_dims d = {x->shape[0], x->shape[1], x->shape[2], a->n_head, 0, 0};
    d.hs = d.C / d.H;
    d.half = d.hs / 2;
    return d;
}

static trit_status rope_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_rope_attr *a = attr;
    char s0[96];
    if (n_in != 1) return trit_error(TRIT_ERR_INVALID, "rope: expected 1 input, got %d", n_in);
    const trit_tensor *x = in[0];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "rope: x must be %s (the graph's compute dtype), got %s",
                          trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (x->ndim != 3)
        return trit_error(TRIT_ERR_SHAPE, "rope: expected x of shape (B, T, C), got %s",
                          trit_tensor_shape_str(x, s0, sizeof s0));
    if (a->n_head < 1 || x->shape[2] % a->n_head != 0)
        return trit_error(TRIT_ERR_SHAPE, "rope: C = %lld does not split into %d heads; C must be a multiple of n_head",
                          (long long)x->shape[2], a->n_head);
    if ((x->shape[2] / a->n_head) % 2 != 0)
        return trit_error(TRIT_ERR_SHAPE, "rope: head size %lld (C = %lld, %d heads) must be even to form rotation pairs",
                          (long long)(x->shape[2] / a->n_head), (long long)x->shape[2], a->n_head);
    if (!(a->theta > 0) || !isfinite(a->theta))
        return trit_error(TRIT_ERR_INVALID, "rope: theta must be a finite number > 0, got %g", a->theta);
    if (a->pos0 < 0) return trit_error(TRIT_ERR_INVALID, "rope: first position must be >= 0, got %lld", (long long)a->pos0);
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 3, x->shape);
}

// cos table then sin table, each (T, hs/2) doubles.
static size_t rope_scratch_bytes(const trit_op_call *c) {
    rope_dims d = dims_of(c->in[0], c->attr);
    return 2 * sizeof(double) * (size_t)(d.T * d.half);
}

// Below this many angles one thread computes the table (a decoded token's, say).
#define ROPE_TABLE_PAR_MIN 4096

#ifndef TRIT_REAL_F64  // once: the table is in double for both builds
void trit_rope_table(double *cs, double *sn, int64_t pos0, int64_t T, int64_t hs, double theta) {
    const int64_t half = hs / 2;
#pragma omp parallel for schedule(static) if (T * half >= ROPE_TABLE_PAR_MIN)
    for (int64_t t = 0; t < T; t++) {
        const double p = (double)(pos0 + t);
        for (int64_t i = 0; i < half; i++) {
            const double ang = p * pow(theta, -2.0 * (double)i / (double)hs);
            cs[t * half + i] = cos(ang);
            sn[t * half + i] = sin(ang);
        }
    }
}
#endif

void R(trit_rope_row)(real *y, const real *x, int64_t sx, const double *cs, const double *sn, int64_t H, int64_t hs) {
    const int64_t half = hs / 2;
    for (int64_t h = 0; h < H; h++) {
        for (int64_t i = 0; i < half; i++) {
            const real co = (real)cs[i], si = (real)sn[i];
            const int64_t j1 = h * hs + i, j2 = j1 + half;
            const real x1 = x[j1 * sx], x2 = x[j2 * sx];
            y[j1] = x1 * co - x2 * si;
            y[j2] = x2 * co + x1 * si;
        }
    }
}

static void rope_table(const rope_dims *d, const trit_rope_attr *a, double *cs, double *sn) {
    trit_rope_table(cs, sn, a->pos0, d->T, d->hs, a->theta);
}

static trit_status rope_forward(const trit_op_call *c) {
    const trit_rope_attr *a = c->attr;
    const trit_tensor *x = c->in[0];  // (B, T, C), any strides
    const rope_dims d = dims_of(x, a);
    double *cs = c->scratch, *sn = cs + d.T * d.half;
    rope_table(&d, a, cs, sn);
    const real *xd = (const real *)x->data + x->offset;
    const int64_t s0 = x->strides[0], s1 = x->strides[1], s2 = x->strides[2];
    real *y = c->out->data;  // (B, T, C)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < d.B * d.T; r++) {
        const int64_t b = r / d.T, t = r % d.T;
        R(trit_rope_row)(y + r * d.C, xd + b * s0 + t * s1, s2, cs + t * d.half, sn + t * d.half, d.H, d.hs);
    }
    return TRIT_OK;
}

static trit_status rope_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const trit_rope_attr *a = c->attr;
    const rope_dims d = dims_of(c->in[0], a);
    double *cs = c->scratch, *sn = cs + d.T * d.half;
    rope_table(&d, a, cs, sn);
    const real *go = c->gout->data;  // (B, T, C)
    real *gi = c->gin[0]->data;      // (B, T, C)
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < d.B * d.T; r++) {
        const int64_t t = r % d.T;
        const real *gr = go + r * d.C;
        real *ir = gi + r * d.C;
        for (int64_t h = 0; h < d.H; h++) {
            for (int64_t i = 0; i < d.half; i++) {
                const real co = (real)cs[t * d.half + i], si = (real)sn[t * d.half + i];
                const int64_t j1 = h * d.hs + i, j2 = j1 + d.half;
                const real g1 = gr[j1], g2 = gr[j2];
                ir[j1] += g1 * co + g2 * si;
                ir[j2] += g2 * co - g1 * si;
            }
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_rope) = {
    .name = "rope",
    .infer = rope_infer,
    .forward = rope_forward,
    .backward = rope_backward,
    .scratch_bytes = rope_scratch_bytes,
    .attr_size = sizeof(trit_rope_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_rope(trit_graph *g, trit_tensor *x, int n_head, double theta) {
    trit_rope_attr a = {.n_head = n_head, .theta = theta, .pos0 = 0};
    return TRIT_APPLY(g, trit_op_rope, 1, &x, &a);
}

#endif
