// The mixed-precision GEMM: operands stored in f32, bf16 or f16, products summed in fp32.
//
// C (M, N) = op(A) (M, K) @ op(B) (K, N), or C += when accumulate; layouts as trit_kernel_gemm_f32
// (kernels/gemm.h): each operand is row-major storage with a leading dimension, transposed when
// `trans`. C is f32, bf16 or f16 (cdt) with leading dim ldc. `bias` (N f32 values, or NULL)
// starts every row of C's sum instead of zero: C = bias + op(A) op(B), summed in fp32 and
// rounded once (bias is NULL when accumulating).
//
// Precision. 16-bit operands are used as they are: a bf16 x bf16 or f16 x f16 product is exact
// in fp32, so only the fp32 summation rounds. `prec` applies to f32 operands only:
//   TRIT_MATMUL_HIGHEST  f32 as it is (f32 x f32 gives exactly trit_kernel_gemm_f32's result);
//   TRIT_MATMUL_HIGH     each f32 value x split into hi = bf16(x) and lo = bf16(x - hi) (round to
//                        nearest even), and A B = Ahi Bhi + Ahi Blo + Alo Bhi, three products
//                        summed in fp32 (about 16 significant bits, PyTorch's "high");
//   TRIT_MATMUL_MEDIUM   f32 values rounded to bf16 (nearest even) once.
// A bf16 or f16 C receives the whole fp32 sum (plus the old value, read as f32, when
// accumulating) rounded to nearest even once. NaN stays NaN through every conversion.
//
// Threads: as the f32 GEMM, every C element is summed in an order fixed by the data alone, so
// 1 and 2 threads give identical bits.
#ifndef TRIT_KERNELS_GEMM_LOWP_H
#define TRIT_KERNELS_GEMM_LOWP_H

#include "trit/tensor.h"

typedef struct trit_gemm_operand {
    const void *p;  // element (0, 0) as stored
    trit_dtype dt;  // TRIT_F32, TRIT_BF16 or TRIT_F16
    int64_t ld;     // elements between stored rows
    bool trans;     // stored transposed: A as (K, M), B as (N, K)
} trit_gemm_operand;

// C: (M, N) f32, bf16 or f16; bias: (N) or NULL.
typedef void trit_kernel_gemm_mixed_fn(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                       const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc,
                                       bool accumulate, trit_matmul_precision prec, const float *bias);
// trit_kernel_gemm_mixed takes the kernel table's choice; _ref is the portable oracle; the AVX2
// and AVX-512 ones widen 16-bit operands to f32 while packing, so their inner loops are the f32
// kernels'; the AVX512-BF16 one multiplies bf16 pairs (vdpbf16ps) where every product is
// bf16 x bf16, flushing subnormals to zero as that instruction does.
trit_kernel_gemm_mixed_fn trit_kernel_gemm_mixed, trit_kernel_gemm_mixed_ref, trit_kernel_gemm_mixed_avx2,
    trit_kernel_gemm_mixed_avx512, trit_kernel_gemm_mixed_avx512bf16;
// Whether trit_kernel_gemm_mixed runs bf16 x bf16 products on bf16 dot-product instructions at
// the CPU level in use (then at twice the fp32 FMA rate), rather than widening them to fp32.
bool trit_kernel_gemm_mixed_bf16_native(void);

// The x86 kernels' core (x86/gemm_avx2.c, x86/gemm_avx512.c), the same contract except that a
// 16-bit C is taken only at one pass (not TRIT_MATMUL_HIGH with an f32 operand); gemm_mixed.c
// sums the three passes of that case in an f32 buffer around it. C: (M, N); bias: (N) or NULL.
// The AVX512-BF16 one runs every bf16 x bf16 product on vdpbf16ps (x86/gemm_mixed_avx512bf16.c).
trit_kernel_gemm_mixed_fn trit_kernel_gemm_mixed_avx2_core, trit_kernel_gemm_mixed_avx512_core,
    trit_kernel_gemm_mixed_avx512bf16_core;
// Rows of a 16-bit C (bf16 or f16) to f32 and back (round to nearest even).
static inline void trit_gemm_c16_widen(trit_dtype dt, float *out, const uint16_t *in, int64_t n) {
    if (dt == TRIT_BF16)
        trit_bf16_to_f32_n(out, in, n);
    else
        trit_f16_to_f32_n(out, in, n);
}
static inline void trit_gemm_c16_round(trit_dtype dt, uint16_t *out, const float *in, int64_t n) {
    if (dt == TRIT_BF16)
        trit_f32_to_bf16_n(out, in, n);
    else
        trit_f32_to_f16_n(out, in, n);
}

// A 16-bit C that the core does not take in one pass (TRIT_MATMUL_HIGH with an f32 operand) is
// summed by gemm_mixed.c in blocks of this many fp32 rows of C, a per-thread buffer of
// TRIT_GEMM_C16_SPLIT_ROWS x N floats.
enum { TRIT_GEMM_C16_SPLIT_ROWS = 64 };

// Whether the core takes this C at this precision in one pass.
static inline bool trit_gemm_mixed_one_pass(const trit_gemm_operand *A, const trit_gemm_operand *B,
                                            trit_matmul_precision prec) {
    return prec != TRIT_MATMUL_HIGH || (A->dt != TRIT_F32 && B->dt != TRIT_F32);
}

// How an operand's values enter the products (the packing modes of the x86 kernels).
typedef enum trit_gemm_piece {
    TRIT_GEMM_VALUE = 0,  // the stored value (16-bit widened exactly)
    TRIT_GEMM_BF16_HI,    // bf16(x)
    TRIT_GEMM_BF16_LO,    // bf16(x - bf16(x))
} trit_gemm_piece;

// The value of element i of an operand (storage dt) as the products see it in `piece`.
float trit_gemm_piece_value(const void *p, trit_dtype dt, int64_t i, trit_gemm_piece piece);

#endif
