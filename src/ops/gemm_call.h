// GEMM calls of ops written against `real` (matmul, linear, the fused classifier): operands
// of any dtype a matmul may read, and one call that picks the fp32 or the mixed-precision GEMM.
#ifndef TRIT_OPS_GEMM_CALL_H
#define TRIT_OPS_GEMM_CALL_H

#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "ops/op_def.h"

// Matmul operands may be stored in bf16 or f16 (the graph's activation dtype, through a cast
// node) in the f32 build; the f64 reference build takes f64 only.
static inline bool trit_gemm_operand_dtype_ok(trit_dtype dt) {
#ifdef TRIT_REAL_F64
    return dt == TRIT_F64;
#else
    return dt == TRIT_F32 || dt == TRIT_BF16 || dt == TRIT_F16;
#endif
}

// A matrix of any operand dtype, by its first element.
typedef struct trit_mm_ref {
    const void *p;
    trit_dtype dt;
} trit_mm_ref;

static inline trit_mm_ref trit_mm_of(const trit_tensor *t) { return (trit_mm_ref){trit_tensor_ptr(t), t->dtype}; }
static inline trit_mm_ref trit_mm_real(const real *p) { return (trit_mm_ref){p, TRIT_REAL_DTYPE}; }
static inline trit_mm_ref trit_mm_at(trit_mm_ref r, int64_t off) {
    r.p = (const char *)r.p + trit_dtype_nbytes(r.dt, off);
    return r;
}

// C (M, N) (+)= op(A) op(B) in the accumulate dtype. fp32 operands at the highest precision take
// the fp32 GEMM (so fp32 results are bit-identical to a graph without a policy); anything else
// (a bf16 or f16 operand, or a lower matmul precision) takes the mixed-precision GEMM.
static inline void trit_op_gemm(const trit_op_call *c, bool ta, bool tb, int64_t M, int64_t N, int64_t K, trit_mm_ref A, int64_t lda,
                                 trit_mm_ref B, int64_t ldb, real *C, int64_t ldc, bool accumulate) {
#ifndef TRIT_REAL_F64
    if (A.dt != TRIT_F32 || B.dt != TRIT_F32 || c->ctx->matmul != TRIT_MATMUL_HIGHEST) {
        const trit_gemm_operand a = {A.p, A.dt, lda, ta}, b = {B.p, B.dt, ldb, tb};
        trit_kernel_gemm_mixed(M, N, K, &a, &b, C, TRIT_F32, ldc, accumulate, c->ctx->matmul, NULL);
        return;
    }
#else
    (void)c;
#endif
    R(trit_kernel_gemm)(ta, tb, M, N, K, A.p, lda, B.p, ldb, C, ldc, accumulate);
}

#endif
