// The op table entry: what the graph compiler needs to know of an op. An op's forward,
// backward and shape rule live together in one file under src/ops/, which is compiled twice
// (see base/real.h), giving trit_op_<name>_f32 and trit_op_<name>_f64.
#ifndef TRIT_OPS_OP_DEF_H
#define TRIT_OPS_OP_DEF_H

#include "base/real.h"
#include "trit/tensor.h"

#include <string.h>

#define TRIT_OP_MAX_IN 16
// Bit of input i in an op's input masks.
#define TRIT_IN(i) (1u << (i))
// The output in trit_op_def.bwd_unread.
#define TRIT_OUT (1u << 31)

// What the executor knows at run time.
typedef struct trit_exec_ctx {
    bool training;
    uint64_t seed;   // trit_graph_set_rng
    uint64_t step;
    bool recompute;  // a recompute step: the forward again inside backward (no state updates)
    trit_matmul_precision matmul;  // the graph policy's, for fp32 operands of matmuls
} trit_exec_ctx;

// One prepared call of an op: everything is planned at compile time, nothing is allocated.
typedef struct trit_op_call {
    int n_in;
    const trit_tensor *in[TRIT_OP_MAX_IN];  // forward inputs; strided unless the op asks for contiguous
    trit_tensor *out;                       // forward output (contiguous unless the op is a view)
    const trit_tensor *gout;                // backward: d loss / d out, contiguous, out's shape
    trit_tensor *gin[TRIT_OP_MAX_IN];       // backward: add d loss / d in[i] here (contiguous); NULL = not needed
    void *saved;                            // saved_bytes: written by forward, read by backward
    void *scratch;                          // scratch_bytes: free for this call only
    const void *attr;                       // the op's attribute struct
    const trit_exec_ctx *ctx;
    // Bit TRIT_IN(i) set: backward will be asked for in[i]'s gradient (known from compile on, in
    // the forward call too, so an op can size saved memory for work it moves into forward).
    uint32_t grad_inputs;
    // Bit TRIT_IN(i) set: gin[i] holds no values yet (this backward is its first writer), so
    // backward stores d loss / d in[i] there instead of adding. Set only for inputs the op's
    // bwd_stores names; the executor then skips zeroing that buffer.
    uint32_t store_inputs;
} trit_op_call;

typedef struct trit_op_def {
    const char *name;
    // Checks dtypes and shapes of in[0..n_in) and sets out's dtype and shape (layout is
    // contiguous unless the op is a view, which sets strides and offset relative to in[0]).
    // Errors go through trit_error with both shapes in the message.
    trit_status (*infer)(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out);
    trit_status (*forward)(const trit_op_call *c);
    // NULL when the op has no gradient. Must add into (never overwrite) each non-NULL gin[i],
    // except those the call's store_inputs names, which it stores.
    trit_status (*backward)(const trit_op_call *c);
    // Bytes forward keeps for backward, and bytes of per-call scratch (NULL = none).
    size_t (*saved_bytes)(const trit_op_call *c);
    size_t (*scratch_bytes)(const trit_op_call *c);
    uint32_t contiguous_inputs;  // bit i set: in[i] must be contiguous (the compiler copies if not)
    uint32_t no_grad_inputs;     // bit i set: in[i] never receives a gradient (indices, state)
    // bit i set: in[i] may be bf16 or f16 (read as such by the forward and backward); any other
    // 16-bit input is cast to the graph's accumulate dtype by the builder first.
    uint32_t lowp_inputs;
    // The op can write its output in bf16/f16: under a policy with 16-bit activations the
    // builder gives its output that dtype (the op's infer sets the accumulate dtype as usual).
    bool lowp_output;
    // Bit TRIT_IN(i) or TRIT_OUT set: backward never reads that value's data (shapes only), so
    // the memory planner may reuse its storage once forward is done with it.
    uint32_t bwd_unread;
    // Backward may write in[0]'s gradient over the output's gradient: it reads each element of
    // gout before writing the same element of gin[0], and when the two tensors share data it
    // stores (gin[0] = ...) instead of adding. The planner gives them one buffer when this op is
    // in[0]'s only consumer, so an elementwise op's backward needs no second gradient buffer.
    bool bwd_in_place;
    // in[1]'s gradient is the output's gradient itself (add): the planner may give in[1] that
    // buffer too (backward then finds gin[1] == gout and writes nothing).
    bool bwd_passes_b;
    // Bit TRIT_IN(i) set: backward writes gin[i] through its strides and offset, so gin[i] may be
    // a view of a larger gradient (the planner then hands a view's readers its root's gradient
    // seen through the view, instead of a gradient of its own added in by the view's backward).
    uint32_t bwd_strided_gin;
    // Bit TRIT_IN(i) set: backward honours store_inputs for in[i] (writes every element of gin[i]
    // exactly as adding to zeros would), so the first writer of a gradient needs no zeroed buffer.
    uint32_t bwd_stores;
    bool is_view;                // out aliases in[0]'s storage; forward does nothing
    size_t attr_size;
} trit_op_def;

// Zeroes gin[i] where the call stores it (store_inputs) but backward has nothing to write there
// (an empty product), or adds into it over several passes (a gradient summed over broadcast
// batches). Returns whether it zeroed, so the caller adds from then on.
static inline bool trit_op_zero_stored(const trit_op_call *c, int i) {
    if (!c->gin[i] || !(c->store_inputs & TRIT_IN(i))) return false;
    memset(c->gin[i]->data, 0, trit_tensor_nbytes(c->gin[i]));
    return true;
}

// A 16-bit float dtype an op may read or write under a policy with 16-bit activations; only in
// the f32 build (the f64 reference path has none).
static inline bool trit_op_lowp_ok(trit_dtype dt) {
#ifdef TRIT_REAL_F64
    (void)dt;
    return false;
#else
    return dt == TRIT_BF16 || dt == TRIT_F16;
#endif
}

// Element i of an index tensor (I32 or I64: ops that take indices check which in infer).
static inline int64_t trit_op_index_at(const trit_tensor *t /* (n) */, int64_t i) {
    const void *p = trit_tensor_ptr(t);
    return t->dtype == TRIT_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

#endif
