// x86 fp32 GEMM kernels behind trit_kernel_gemm_f32 (kernels/gemm.h has the contract).
// Each is compiled with its own ISA flags; call one only after run-time dispatch has
// confirmed the CPU and OS support it.
#ifndef TRIT_KERNELS_GEMM_X86_H
#define TRIT_KERNELS_GEMM_X86_H

#include <stdbool.h>
#include <stdint.h>

// A: (M, K) or stored (K, M) when trans_a; B: (K, N) or stored (N, K) when trans_b; C: (M, N).
void trit_kernel_gemm_avx512_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                                 const float *A, int64_t lda, const float *B, int64_t ldb,
                                 float *C, int64_t ldc, bool accumulate);
// Same contract with AVX2 + FMA.
void trit_kernel_gemm_avx2_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                               const float *A, int64_t lda, const float *B, int64_t ldb,
                               float *C, int64_t ldc, bool accumulate);

#endif
