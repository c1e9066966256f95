// GEMM kernels: the hot loop of matmul, linear and convolution.
// C (M, N) = op(A) @ op(B), or C += op(A) @ op(B) when accumulate.
// Row-major with leading dimensions (elements between rows):
//   A: (M, K) with lda >= K, or stored (K, M) with lda >= M when trans_a
//   B: (K, N) with ldb >= N, or stored (N, K) with ldb >= K when trans_b
//   C: (M, N) with ldc >= N
// Every element of C is summed over K in an order that does not depend on the thread count,
// so results are bit-identical with 1 or 2 threads. Kernels never allocate per call beyond
// thread-local packing buffers reused across calls.
#ifndef TRIT_KERNELS_GEMM_H
#define TRIT_KERNELS_GEMM_H

#include <stdbool.h>
#include <stdint.h>

// A: (M, K) or (K, M), B: (K, N) or (N, K), C: (M, N), as above.
typedef void trit_kernel_gemm_f32_fn(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                                     const float *A, int64_t lda, const float *B, int64_t ldb,
                                     float *C, int64_t ldc, bool accumulate);
// trit_kernel_gemm_f32 takes the kernel table's choice; _ref_f32 is the portable oracle
// (kernels/ref/gemm.c, compiled for float and double); the x86 ones run only where the table
// found their features (x86/gemm_avx2.c, x86/gemm_avx512.c).
trit_kernel_gemm_f32_fn trit_kernel_gemm_f32, trit_kernel_gemm_ref_f32, trit_kernel_gemm_avx2_f32,
    trit_kernel_gemm_avx512_f32;
// The same product for a few rows of A (decoding): no packing, dot products or row axpys. Its
// sums run in another order than the GEMM's, so results differ from it by rounding.
trit_kernel_gemm_f32_fn trit_kernel_gemv_f32, trit_kernel_gemv_avx2_f32, trit_kernel_gemv_avx512_f32;
void trit_kernel_gemm_ref_f64(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                              const double *A, int64_t lda, const double *B, int64_t ldb,
                              double *C, int64_t ldc, bool accumulate);
// f64 has only the reference path; this name lets `real` code call R(trit_kernel_gemm).
#define trit_kernel_gemm_f64 trit_kernel_gemm_ref_f64

#endif
