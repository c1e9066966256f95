// Losses over pairs and triplets of embeddings, row by row over the last dim C (inputs (..., C),
// one loss per row, then the mean or sum), with PyTorch's definitions:
//   triplet_margin (TripletMarginLoss, p = 2, no swap):
//     d(x, y) = ||x - y + eps||_2 with eps = 1e-6 (pairwise_distance adds it to the difference)
//     loss_r = max(d(a, p) - d(a, n) + margin, 0)
//   cosine_embedding (CosineEmbeddingLoss), targets y (...) of +1 (similar) or -1 (dissimilar):
//     cos = x1 . x2 / sqrt((|x1|^2 + eps) (|x2|^2 + eps)) with eps = 1e-12
//     loss_r = 1 - cos if y = 1, max(cos - margin, 0) if y = -1
// A hinge passes the gradient where its argument is >= 0 (clamp_min's rule); a distance of 0
// has gradient 0 (the norm's subgradient PyTorch takes). Per-row sums run in double; rows are
// split over threads and their losses added serially, so nothing depends on the thread count.
// A target other than +1 or -1 is an error at run time naming the row (PyTorch would give it a
// loss of 0 silently).
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "trit/ops.h"

#include <math.h>

#define TRIPLET_EPS 1e-6
#define COSINE_EPS 1e-12
// Below this many elements read a call stays on one thread.
#define EMB_LOSS_PAR_MIN ((int64_t)1 << 15)

typedef struct trit_embed_loss_attr {
    double margin;
    int reduction;  // trit_reduction
} trit_embed_loss_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_triplet_margin);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_cosine_embedding);

static int64_t rows_of(const trit_tensor *x) { return trit_tensor_numel(x) / x->shape[x->ndim - 1]; }

// Checks n inputs of one shape (..., C) with C >= 1 in the compute dtype.
static trit_status same_rows(const char *name, const char *what, const trit_tensor *const *in, int n) {
    char s0[128], s1[128];
    for (int i = 0; i < n; i++)
        if (in[i]->dtype != TRIT_REAL_DTYPE)
            return trit_error(TRIT_ERR_DTYPE, "%s: expected %s %s (the graph's compute dtype), input %d is %s", name,
                              trit_dtype_name(TRIT_REAL_DTYPE), what, i, trit_dtype_name(in[i]->dtype));
    const trit_tensor *x = in[0];
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1 || trit_tensor_numel(x) < 1)
        return trit_error(TRIT_ERR_SHAPE, "%s: expected %s (..., C) with C >= 1 and at least one row, got %s", name, what,
                          trit_tensor_shape_str(x, s0, sizeof s0));
    for (int i = 1; i < n; i++)
        if (!trit_tensor_same_shape(in[i], x))
            return trit_error(TRIT_ERR_SHAPE, "%s: expected %s of one shape, got %s and %s (input %d)", name, what,
                              trit_tensor_shape_str(x, s0, sizeof s0), trit_tensor_shape_str(in[i], s1, sizeof s1), i);
    return TRIT_OK;
}

// The loss from the row losses (added in order) and the backward's per-row factor.
static real reduce_rows(const double *row_loss, int64_t rows, int reduction) {
    double total = 0;
    for (int64_t r = 0; r < rows; r++) total += row_loss[r];
    return (real)(reduction == TRIT_REDUCE_MEAN ? total / (double)rows : total);
}

static double grad_scale(const trit_op_call *c, int64_t rows) {
    const double go = (double)*(const real *)c->gout->data;
    return ((const trit_embed_loss_attr *)c->attr)->reduction == TRIT_REDUCE_MEAN ? go / (double)rows : go;
}

// ---- triplet margin loss -------------------------------------------------------------------

static trit_status triplet_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    const trit_embed_loss_attr *a = attr;
    trit_status s = same_rows("triplet_margin", "anchor, positive and negative", in, 3);
    if (s != TRIT_OK) return s;
    if (!isfinite(a->margin))
        return trit_error(TRIT_ERR_INVALID, "triplet_margin: margin must be finite, got %g (PyTorch's default is 1)",
                          a->margin);
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 0, NULL);
}

// Per row: d(a, p), d(a, n), and the hinge's argument.
static size_t triplet_saved_bytes(const trit_op_call *c) { return sizeof(double) * 3 * (size_t)rows_of(c->in[0]); }
static size_t row_loss_scratch(const trit_op_call *c) { return sizeof(double) * (size_t)rows_of(c->in[0]); }

static double pair_distance(const real *x, const real *y, int64_t C) {
    double s = 0;
    for (int64_t k = 0; k < C; k++) {
        const double d = (double)x[k] - (double)y[k] + TRIPLET_EPS;
        s += d * d;
    }
    return sqrt(s);
}

static trit_status triplet_forward(const trit_op_call *c) {
    const trit_embed_loss_attr *at = c->attr;
    const int64_t C = c->in[0]->shape[c->in[0]->ndim - 1], rows = rows_of(c->in[0]);
    const real *a = trit_tensor_ptr(c->in[0]), *p = trit_tensor_ptr(c->in[1]), *n = trit_tensor_ptr(c->in[2]);  // (rows, C)
    double *st = c->saved, *row_loss = c->scratch;  // (rows, 3), (rows)
#pragma omp parallel for schedule(static) if (rows * C >= EMB_LOSS_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const double dp = pair_distance(a + r * C, p + r * C, C), dn = pair_distance(a + r * C, n + r * C, C);
        const double h = dp - dn + at->margin;
        st[3 * r] = dp, st[3 * r + 1] = dn, st[3 * r + 2] = h;
        row_loss[r] = h > 0 ? h : 0;
    }
    *(real *)c->out->data = reduce_rows(row_loss, rows, at->reduction);
    return TRIT_OK;
}

// Where the hinge is active: d d(a, y) / d a = (a - y + eps) / d(a, y) = -d d(a, y) / d y.
static trit_status triplet_backward(const trit_op_call *c) {
    const int64_t C = c->in[0]->shape[c->in[0]->ndim - 1], rows = rows_of(c->in[0]);
    const real *a = trit_tensor_ptr(c->in[0]), *p = trit_tensor_ptr(c->in[1]), *n = trit_tensor_ptr(c->in[2]);  // (rows, C)
    real *da = c->gin[0] ? c->gin[0]->data : NULL, *dp = c->gin[1] ? c->gin[1]->data : NULL,
         *dn = c->gin[2] ? c->gin[2]->data : NULL;  // (rows, C)
    const double *st = c->saved;
    const double k = grad_scale(c, rows);
#pragma omp parallel for schedule(static) if (rows * C >= EMB_LOSS_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        if (!(st[3 * r + 2] >= 0)) continue;
        const double kp = st[3 * r] > 0 ? k / st[3 * r] : 0, kn = st[3 * r + 1] > 0 ? k / st[3 * r + 1] : 0;
        for (int64_t j = r * C; j < (r + 1) * C; j++) {
            const double gp = kp * ((double)a[j] - (double)p[j] + TRIPLET_EPS);
            const double gn = kn * ((double)a[j] - (double)n[j] + TRIPLET_EPS);
            if (da) da[j] += (real)(gp - gn);
            if (dp) dp[j] -= (real)gp;
            if (dn) dn[j] += (real)gn;
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_triplet_margin) = {
    .name = "triplet_margin",
    .infer = triplet_infer,
    .forward = triplet_forward,
    .backward = triplet_backward,
    .saved_bytes = triplet_saved_bytes,
    .scratch_bytes = row_loss_scratch,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2),
    .bwd_unread = TRIT_OUT,
    .attr_size = sizeof(trit_embed_loss_attr),
};

// ---- cosine embedding loss -----------------------------------------------------------------

static trit_status cosine_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    const trit_embed_loss_attr *a = attr;
    char s0[128], s1[128];
    trit_status s = same_rows("cosine_embedding", "x1 and x2", in, 2);
    if (s != TRIT_OK) return s;
    const trit_tensor *x = in[0], *y = in[2];
    bool ok = y->ndim == x->ndim - 1;
    for (int d = 0; ok && d < y->ndim; d++) ok = y->shape[d] == x->shape[d];
    if (!ok)
        return trit_error(TRIT_ERR_SHAPE, "cosine_embedding: expected targets of x1's shape without its last dim for x1 %s, got %s",
                          trit_tensor_shape_str(x, s0, sizeof s0), trit_tensor_shape_str(y, s1, sizeof s1));
    if (trit_dtype_is_quantized(y->dtype) || trit_dtype_size(y->dtype) == 0)
        return trit_error(TRIT_ERR_DTYPE, "cosine_embedding: expected integer or float targets (+1 or -1), got %s",
                          trit_dtype_name(y->dtype));
    if (!(a->margin >= -1 && a->margin <= 1))
        return trit_error(TRIT_ERR_INVALID, "cosine_embedding: margin must be in [-1, 1] (a cosine is), got %g "
                          "(PyTorch suggests 0 to 0.5)", a->margin);
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 0, NULL);
}

// Per row: cos, |x1|^2 + eps, |x2|^2 + eps, and d loss_r / d cos.
static size_t cosine_saved_bytes(const trit_op_call *c) { return sizeof(double) * 4 * (size_t)rows_of(c->in[0]); }

static trit_status cosine_forward(const trit_op_call *c) {
    const trit_embed_loss_attr *at = c->attr;
    const int64_t C = c->in[0]->shape[c->in[0]->ndim - 1], rows = rows_of(c->in[0]);
    const real *x1 = trit_tensor_ptr(c->in[0]), *x2 = trit_tensor_ptr(c->in[1]);  // (rows, C)
    double *st = c->saved, *row_loss = c->scratch;                                 // (rows, 4), (rows)
    for (int64_t r = 0; r < rows; r++) {
        const double y = trit_tensor_get_flat(c->in[2], r);
        if (y != 1 && y != -1)
            return trit_error(TRIT_ERR_RANGE, "cosine_embedding: target %g at row %lld is not 1 (similar) or -1 (dissimilar)",
                              y, (long long)r);
        st[4 * r + 3] = y;  // the sign until the rows are done
    }
#pragma omp parallel for schedule(static) if (rows * C >= EMB_LOSS_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        double s = 0, q1 = 0, q2 = 0;
        for (int64_t j = r * C; j < (r + 1) * C; j++) {
            s += (double)x1[j] * (double)x2[j];
            q1 += (double)x1[j] * (double)x1[j];
            q2 += (double)x2[j] * (double)x2[j];
        }
        q1 += COSINE_EPS, q2 += COSINE_EPS;
        const double cs = s / sqrt(q1 * q2);
        st[4 * r] = cs, st[4 * r + 1] = q1, st[4 * r + 2] = q2;
        if (st[4 * r + 3] == 1) {
            row_loss[r] = 1 - cs;
            st[4 * r + 3] = -1;
        } else {
            row_loss[r] = cs - at->margin > 0 ? cs - at->margin : 0;
            st[4 * r + 3] = cs - at->margin >= 0 ? 1 : 0;
        }
    }
    *(real *)c->out->data = reduce_rows(row_loss, rows, at->reduction);
    return TRIT_OK;
}

// d cos / d x1 = x2 / sqrt(q1 q2) - cos x1 / q1, and symmetrically for x2.
static trit_status cosine_backward(const trit_op_call *c) {
    const int64_t C = c->in[0]->shape[c->in[0]->ndim - 1], rows = rows_of(c->in[0]);
    const real *x1 = trit_tensor_ptr(c->in[0]), *x2 = trit_tensor_ptr(c->in[1]);  // (rows, C)
    real *d1 = c->gin[0] ? c->gin[0]->data : NULL, *d2 = c->gin[1] ? c->gin[1]->data : NULL;
    const double *st = c->saved;
    const double k = grad_scale(c, rows);
#pragma omp parallel for schedule(static) if (rows * C >= EMB_LOSS_PAR_MIN)
    for (int64_t r = 0; r < rows; r++) {
        const double g = k * st[4 * r + 3];
        if (g == 0) continue;
        const double cs = st[4 * r], q1 = st[4 * r + 1], q2 = st[4 * r + 2], id = g / sqrt(q1 * q2);
        for (int64_t j = r * C; j < (r + 1) * C; j++) {
            if (d1) d1[j] += (real)(id * (double)x2[j] - g * cs * (double)x1[j] / q1);
            if (d2) d2[j] += (real)(id * (double)x1[j] - g * cs * (double)x2[j] / q2);
        }
    }
    return TRIT_OK;
}

const trit_op_def R(trit_op_cosine_embedding) = {
    .name = "cosine_embedding",
    .infer = cosine_infer,
    .forward = cosine_forward,
    .backward = cosine_backward,
    .saved_bytes = cosine_saved_bytes,
    .scratch_bytes = row_loss_scratch,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .no_grad_inputs = TRIT_IN(2),
    .bwd_unread = TRIT_IN(2) | TRIT_OUT,
    .attr_size = sizeof(trit_embed_loss_attr),
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_triplet_margin_loss(trit_graph *g, trit_tensor *anchor, trit_tensor *positive,
                                      trit_tensor *negative, double margin, trit_reduction red) {
    if (!trit_graph_reduction_ok(g, "triplet_margin", red)) return NULL;
    trit_embed_loss_attr a = {.margin = margin, .reduction = (int)red};
    trit_tensor *in[3] = {anchor, positive, negative};
    return TRIT_APPLY(g, trit_op_triplet_margin, 3, in, &a);
}

trit_tensor *trit_cosine_embedding_loss(trit_graph *g, trit_tensor *x1, trit_tensor *x2, trit_tensor *target,
                                        double margin, trit_reduction red) {
    if (!trit_graph_reduction_ok(g, "cosine_embedding", red)) return NULL;
    trit_embed_loss_attr a = {.margin = margin, .reduction = (int)red};
    trit_tensor *in[3] = {x1, x2, target};
    return TRIT_APPLY(g, trit_op_cosine_embedding, 3, in, &a);
}

#endif
