// The two boundaries of a tensor-parallel region (Megatron-LM's f and g, Shoeybi et al. 2019):
//   tp_copy    y = x                     dx += sum over the group of dy
//   tp_reduce  y = sum over the group of x   dx += dy
// A column-split linear reads tp_copy(x), a row-split one's partial product goes through
// tp_reduce; between the two each rank works on its own columns, so a block costs one sum in
// forward and one in backward per split pair. The sum is the caller's function
// (trit_allreduce), called once per forward of tp_reduce and once per backward of tp_copy,
// with every rank of the group calling in the same order (the graphs are the same).
#include "ops/op_build.h"
#include "trit/ops.h"

#include <string.h>

TRIT_DECLARE_REAL(const trit_op_def, trit_op_tp_copy);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_tp_reduce);

static trit_status tp_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    const trit_allreduce *r = attr;
    const trit_tensor *x = in[0];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "tp_copy/tp_reduce: expected a %s input (the graph's accumulate dtype), "
                          "got %s", trit_dtype_name(TRIT_REAL_DTYPE), trit_dtype_name(x->dtype));
    if (!r->fn) return trit_error(TRIT_ERR_INVALID, "tp_copy/tp_reduce: no all-reduce function");
    return trit_tensor_init_layout(out, x->dtype, x->ndim, x->shape);
}

// The function's status and message are the op's.
static trit_status sum_over_group(const trit_allreduce *r, real *v /* (n) */, int64_t n) {
    return r->fn(r->ctx, v, TRIT_REAL_DTYPE, n);
}

static void add_into(real *dx /* (n) */, const real *v /* (n) */, int64_t n) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) dx[i] += v[i];
}

static trit_status copy_forward(const trit_op_call *c) {
    memcpy(c->out->data, trit_tensor_ptr(c->in[0]), sizeof(real) * (size_t)trit_tensor_numel(c->out));
    return TRIT_OK;
}

static size_t copy_scratch_bytes(const trit_op_call *c) { return sizeof(real) * (size_t)trit_tensor_numel(c->out); }

// Every rank calls the sum, also one whose input needs no gradient: the others wait for it.
static trit_status copy_backward(const trit_op_call *c) {
    const int64_t n = trit_tensor_numel(c->out);
    real *sum = c->scratch;  // (n)
    memcpy(sum, c->gout->data, sizeof(real) * (size_t)n);
    trit_status s = sum_over_group(c->attr, sum, n);
    if (s == TRIT_OK && c->gin[0]) add_into(c->gin[0]->data, sum, n);
    return s;
}

static trit_status reduce_forward(const trit_op_call *c) {
    const int64_t n = trit_tensor_numel(c->out);
    memcpy(c->out->data, trit_tensor_ptr(c->in[0]), sizeof(real) * (size_t)n);
    return sum_over_group(c->attr, c->out->data, n);
}

static trit_status reduce_backward(const trit_op_call *c) {
    if (c->gin[0]) add_into(c->gin[0]->data, c->gout->data, trit_tensor_numel(c->out));
    return TRIT_OK;
}

const trit_op_def R(trit_op_tp_copy) = {
    .name = "tp_copy",
    .bwd_unread = TRIT_IN(0) | TRIT_OUT,
    .infer = tp_infer,
    .forward = copy_forward,
    .backward = copy_backward,
    .scratch_bytes = copy_scratch_bytes,
    .contiguous_inputs = TRIT_IN(0),
    .attr_size = sizeof(trit_allreduce),
};

const trit_op_def R(trit_op_tp_reduce) = {
    .name = "tp_reduce",
    .bwd_unread = TRIT_IN(0) | TRIT_OUT,
    .infer = tp_infer,
    .forward = reduce_forward,
    .backward = reduce_backward,
    .contiguous_inputs = TRIT_IN(0),
    .attr_size = sizeof(trit_allreduce),
};

// ---- graph constructors ------------------------------------------------------------------
#ifndef TRIT_REAL_F64

static bool reduce_ok(trit_graph *g, const trit_allreduce *r, const char *op) {
    if (r && r->fn) return true;
    trit_error(TRIT_ERR_INVALID, "%s: needs an all-reduce function (trit_allreduce with fn set)", op);
    trit_graph_fail(g, TRIT_ERR_INVALID);
    return false;
}

trit_tensor *trit_tp_copy(trit_graph *g, trit_tensor *x, const trit_allreduce *r) {
    if (!reduce_ok(g, r, "tp_copy")) return NULL;
    return TRIT_APPLY(g, trit_op_tp_copy, 1, &x, r);
}

trit_tensor *trit_tp_reduce(trit_graph *g, trit_tensor *x, const trit_allreduce *r) {
    if (!reduce_ok(g, r, "tp_reduce")) return NULL;
    return TRIT_APPLY(g, trit_op_tp_reduce, 1, &x, r);
}

#endif
