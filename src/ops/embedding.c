// Embedding: out[n, :] = weight[idx[n], :]. Backward scatter-adds rows of the output gradient
// into the weight gradient. Repeated indices make that a reduction, so it is split across
// threads by column blocks: each thread owns a slice of every row and adds tokens in order, and
// the result does not depend on the thread count (no atomics). The loops are the kernels of
// kernels/rowops.h. The table may be a frozen quantized matrix (ops/qweight.h): each gathered
// row is decoded straight into the output, and the table gets no gradient.
#include "ops/embedding.h"

#include "ops/op_build.h"
#include "ops/qweight.h"
#include "kernels/rowops.h"
#include "trit/ops.h"

// Below this many output values a quantized table's rows are decoded on one thread.
#define EMB_PAR_MIN ((int64_t)1 << 14)

static trit_status embedding_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    (void)attr;
    const trit_tensor *w = in[0], *idx = in[1];
    char a[128], b[128];
    if (trit_qw_is(w)) {
        trit_status s = R(trit_qw_check)(w, "embedding", "weight");
        if (s != TRIT_OK) return s;
    } else if (w->dtype != TRIT_REAL_DTYPE) {
        return trit_error(TRIT_ERR_DTYPE, "embedding: expected a %s weight (the graph's compute dtype) or a frozen "
                          "quantized one, got %s", trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(w->dtype));
    }
    if (idx->dtype != TRIT_I32 && idx->dtype != TRIT_I64)
        return trit_error(TRIT_ERR_DTYPE, "embedding: expected i32 or i64 indices, got %s", trit_dtype_name(idx->dtype));
    if (w->ndim != 2 || idx->ndim + 1 > TRIT_MAX_DIMS)
        return trit_error(TRIT_ERR_SHAPE, "embedding: expected weight (V, C) and indices (...) of at most %d dims, got weight %s and indices %s",
                          TRIT_MAX_DIMS - 1, trit_tensor_shape_str(w, a, sizeof a), trit_tensor_shape_str(idx, b, sizeof b));
    int64_t shape[TRIT_MAX_DIMS];
    for (int i = 0; i < idx->ndim; i++) shape[i] = idx->shape[i];
    shape[idx->ndim] = w->shape[1];
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, idx->ndim + 1, shape);
}

// idx: (n); every index must lie in [0, V).
static trit_status check_indices(const trit_tensor *idx, int64_t n, int64_t V) {
    for (int64_t i = 0; i < n; i++) {
        const int64_t k = trit_op_index_at(idx, i);
        if (k < 0 || k >= V)
            return trit_error(TRIT_ERR_RANGE, "embedding: index %lld at position %lld is outside [0, %lld); check the token ids against the table size",
                              (long long)k, (long long)i, (long long)V);
    }
    return TRIT_OK;
}

static trit_status embedding_forward(const trit_op_call *c) {
    const trit_tensor *idx = c->in[1];
    const int64_t V = c->in[0]->shape[0], C = c->in[0]->shape[1], n = trit_tensor_numel(idx);
    const real *w = trit_tensor_ptr(c->in[0]);  // (V, C)
    real *out = c->out->data;                   // (n, C)
    trit_status s = check_indices(idx, n, V);
    if (s != TRIT_OK) return s;
    if (trit_qw_is(c->in[0])) {
#pragma omp parallel for schedule(static) if (n * C >= EMB_PAR_MIN)
        for (int64_t i = 0; i < n; i++)
            R(trit_qw_decode)(c->in[0], trit_op_index_at(idx, i), 0, C, out + i * C, TRIT_REAL_DTYPE);
        return TRIT_OK;
    }
    R(trit_kernel_embedding_fwd)(out, w, trit_tensor_ptr(idx), idx->dtype == TRIT_I64, n, C);
    return TRIT_OK;
}

static trit_status embedding_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    if (trit_qw_is(c->in[0]))
        return trit_error(TRIT_ERR_STATE, "embedding: the %s table '%s' was asked for a gradient; quantized tables "
                          "get none: freeze it", trit_dtype_name(c->in[0]->dtype), c->in[0]->name);
    const trit_tensor *idx = c->in[1];
    const int64_t V = c->in[0]->shape[0], C = c->in[0]->shape[1], n = trit_tensor_numel(idx);
    const real *go = c->gout->data;  // (n, C)
    real *gw = c->gin[0]->data;      // (V, C)
    // The indices may have been refilled since forward; never write outside the table.
    trit_status s = check_indices(idx, n, V);
    if (s != TRIT_OK) return s;
    R(trit_kernel_embedding_bwd)(gw, go, trit_tensor_ptr(idx), idx->dtype == TRIT_I64, n, C);
    return TRIT_OK;
}

const trit_op_def R(trit_op_embedding) = {
    .name = "embedding",
    .infer = embedding_infer,
    .forward = embedding_forward,
    .backward = embedding_backward,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1),
    .no_grad_inputs = TRIT_IN(1),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_embedding(trit_graph *g, trit_tensor *weight, trit_tensor *idx) {
    trit_tensor *in[2] = {weight, idx};
    return TRIT_APPLY(g, trit_op_embedding, 2, in, NULL);
}

#endif
