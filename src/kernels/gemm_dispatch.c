// The f32 GEMM entry point: the kernel table's choice for the features usable now.
#include "kernels/gemm.h"
#include "kernels/kernel_table.h"

void trit_kernel_gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t lda, const float *B, int64_t ldb,
                          float *C, int64_t ldc, bool accumulate) {
    static trit_kernel_slot slot;
    TRIT_KERNEL_FN_OR(trit_kernel_gemm_f32_fn, &slot, TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32, trit_kernel_gemm_ref_f32)
    (trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

void trit_kernel_gemv_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                          const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    static trit_kernel_slot slot;
    TRIT_KERNEL_FN_OR(trit_kernel_gemm_f32_fn, &slot, TRIT_KERNEL_GEMV, TRIT_F32, TRIT_F32, trit_kernel_gemm_ref_f32)
    (trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}
