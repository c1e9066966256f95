// Quantized weights as matmul operands (linear, classifier_ce, embedding). A frozen weight W
// (N, K) in any quantized row of the dtype table is read through its decoded values: a chunk of
// rows at a time is decoded into the op's scratch (sized by the planner, at most about
// TRIT_QW_CHUNK_BYTES) and multiplied by the same GEMM an f32 weight takes, so results equal
// those of the linear over trit_dequantize(W) up to the GEMM's summation order, and no decoded
// copy of W outlives the call (backward decodes the chunks again). Under 16-bit activations the
// chunks are decoded into the activation dtype, the value a cast of the decoded weight would
// hold. W gets no gradient: quantized weights must be frozen (or constants).
#ifndef TRIT_OPS_QWEIGHT_H
#define TRIT_OPS_QWEIGHT_H

#include "ops/gemm_call.h"

// Bytes of decoded weight the scratch holds at once (all threads' chunks together). A chunk of
// 256 or more rows is a multiple of 256 (the GEMM's K slices then line up in backward, where the
// rows are the sum's dimension); in forward each of nt threads takes 1/nt of it.
#define TRIT_QW_CHUNK_BYTES ((size_t)2 << 20)

// Whether a weight operand is quantized (read through this file) rather than a float matrix.
static inline bool trit_qw_is(const trit_tensor *w) { return trit_dtype_is_quantized(w->dtype); }

// The dtype W's chunks are decoded into for a GEMM whose other operand has dtype xdt: a 16-bit
// activation dtype as it is (f32 build), else the compute dtype.
static inline trit_dtype trit_qw_decode_dtype(trit_dtype xdt) {
    return trit_op_lowp_ok(xdt) ? xdt : TRIT_REAL_DTYPE;
}

// infer's check of a quantized weight of `op` (named `what` in messages): not a trainable
// parameter (quantized weights get no gradient), a 2-D matrix whose rows are whole blocks, with
// its scales where the dtype needs them.
trit_status R(trit_qw_check)(const trit_tensor *w, const char *op, const char *what);

// Scratch bytes the chunked products below need for w (N, K) decoded into dt (a multiple of 64).
size_t R(trit_qw_scratch_bytes)(const trit_tensor *w, trit_dtype dt);

// Elements [k0, k0 + n) of row `row` of w decoded into dst (n) of dtype dt (real, bf16 or f16);
// k0 and n whole blocks of w's dtype (n may end the row).
void R(trit_qw_decode)(const trit_tensor *w, int64_t row, int64_t k0, int64_t n, void *dst, trit_dtype dt);

// y (M, N) at ldy (+)= op(x) W^T, x (M, K) (stored transposed when xt) at ldx. y is real, or
// (f32 build) bf16/f16 written once from the fp32 sum started at bias (N, or NULL; never with
// accumulate), as trit_kernel_gemm_mixed does.
void R(trit_qw_gemm_xwt)(const trit_op_call *c, int64_t M, trit_mm_ref x, bool xt, int64_t ldx, const trit_tensor *w,
                         void *y, trit_dtype ydt, int64_t ldy, bool accumulate, const real *bias, void *scratch);

// dx (M, K) at lddx += dy (M, N) at lddy times W, W decoded into dt (trit_qw_decode_dtype of
// the forward's x), chunks of W's rows summed into dx in order.
void R(trit_qw_gemm_dyw)(const trit_op_call *c, int64_t M, trit_mm_ref dy, int64_t lddy, const trit_tensor *w, real *dx,
                         int64_t lddx, trit_dtype dt, void *scratch);

#endif
