// Portable GEMM: the oracle every SIMD GEMM is tested against. Compiled for float and double.
#include "base/real.h"
#include "kernels/gemm.h"

#include <string.h>

void R(trit_kernel_gemm_ref)(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                             const real *A, int64_t lda, const real *B, int64_t ldb,
                             real *C, int64_t ldc, bool accumulate) {
#pragma omp parallel for schedule(static) if (M * N * K > ((int64_t)1 << 15))
    for (int64_t i = 0; i < M; i++) {
        real *c = C + i * ldc;
        if (!accumulate) memset(c, 0, sizeof(real) * (size_t)N);
        for (int64_t k = 0; k < K; k++) {
            real a = trans_a ? A[k * lda + i] : A[i * lda + k];
            if (trans_b) {
                for (int64_t j = 0; j < N; j++) c[j] += a * B[j * ldb + k];
            } else {
                const real *b = B + k * ldb;
                for (int64_t j = 0; j < N; j++) c[j] += a * b[j];
            }
        }
    }
}
