// Placeholder until the mixed-precision GEMM lands: same contract as described in the issue.
#ifndef TRIT_KERNELS_GEMM_LOWP_H
#define TRIT_KERNELS_GEMM_LOWP_H
#include "trit/tensor.h"
typedef struct trit_gemm_operand {
    const void *p;
    trit_dtype dt;
    int64_t ld;
    bool trans;
} trit_gemm_operand;
void trit_kernel_gemm_mixed(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A, const trit_gemm_operand *B,
                            void *C, trit_dtype cdt, int64_t ldc, bool accumulate, trit_matmul_precision prec);
#endif
