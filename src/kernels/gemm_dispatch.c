// Chooses the f32 GEMM for the CPU level in force. The level is read on every call (an atomic
// load) so trit_cpu_set_level takes effect at once, e.g. when a test compares levels.
#include "kernels/gemm.h"
#include "kernels/x86/gemm_x86.h"
#include "trit/base.h"

void trit_kernel_gemm_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                          const float *A, int64_t lda, const float *B, int64_t ldb,
                          float *C, int64_t ldc, bool accumulate) {
    switch (trit_cpu_level()) {
    case TRIT_CPU_AMX:  // AMX has no fp32 tiles; the AVX-512 kernel is the fp32 path there
    case TRIT_CPU_AVX512:
        trit_kernel_gemm_avx512_f32(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc,
                                    accumulate);
        return;
    case TRIT_CPU_AVX2:
        trit_kernel_gemm_avx2_f32(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
        return;
    case TRIT_CPU_REF:
    default:
        trit_kernel_gemm_ref_f32(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
        return;
    }
}
