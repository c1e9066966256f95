// The mixed-precision GEMM's entry point (the kernel table's choice) and, around the x86 kernels'
// cores, the one case they leave out: a 16-bit C under TRIT_MATMUL_HIGH with an f32 operand,
// whose three passes are summed in fp32 rows of a per-thread buffer, blocks of ROWS, then
// rounded once.
#include "kernels/gemm_lowp.h"
#include "kernels/kernel_table.h"
#include "kernels/thread_buffer.h"

#include <string.h>

enum { ROWS = TRIT_GEMM_C16_SPLIT_ROWS };

static _Thread_local float *rows_mem;
static _Thread_local size_t rows_floats;

static void with_c(trit_kernel_gemm_mixed_fn *core, int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                   const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc, bool accumulate,
                   trit_matmul_precision prec, const float *bias) {
    if (cdt == TRIT_F32 || trit_gemm_mixed_one_pass(A, B, prec)) {
        core(M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
        return;
    }
    float *buf = trit_thread_buffer(&rows_mem, &rows_floats, (size_t)(ROWS * (N > 0 ? N : 1)));
    if (!buf) {  // out of memory: the portable kernel needs no buffer
        trit_kernel_gemm_mixed_ref(M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
        return;
    }
    uint16_t *c16 = C;
    for (int64_t r0 = 0; r0 < M; r0 += ROWS) {
        const int64_t m = M - r0 < ROWS ? M - r0 : ROWS;
        trit_gemm_operand a = *A;
        a.p = (const char *)A->p + (A->trans ? r0 : r0 * A->ld) * (A->dt == TRIT_F32 ? 4 : 2);
        for (int64_t i = 0; accumulate && i < m; i++) trit_gemm_c16_widen(cdt, buf + i * N, c16 + (r0 + i) * ldc, N);
        core(m, N, K, &a, B, buf, TRIT_F32, N, accumulate, prec, bias);
        for (int64_t i = 0; i < m; i++) trit_gemm_c16_round(cdt, c16 + (r0 + i) * ldc, buf + i * N, N);
    }
}

void trit_kernel_gemm_mixed_avx512(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                   const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc, bool accumulate,
                                   trit_matmul_precision prec, const float *bias) {
    with_c(trit_kernel_gemm_mixed_avx512_core, M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
}

void trit_kernel_gemm_mixed_avx512bf16(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                       const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc,
                                       bool accumulate, trit_matmul_precision prec, const float *bias) {
    with_c(trit_kernel_gemm_mixed_avx512bf16_core, M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
}

void trit_kernel_gemm_mixed_avx2(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                 const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc, bool accumulate,
                                 trit_matmul_precision prec, const float *bias) {
    with_c(trit_kernel_gemm_mixed_avx2_core, M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
}

void trit_kernel_gemm_mixed(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A, const trit_gemm_operand *B,
                            void *C, trit_dtype cdt, int64_t ldc, bool accumulate, trit_matmul_precision prec,
                            const float *bias) {
    static trit_kernel_slot slot;
    TRIT_KERNEL_FN_OR(trit_kernel_gemm_mixed_fn, &slot, TRIT_KERNEL_GEMM_MIXED, TRIT_BF16, TRIT_F32,
                      trit_kernel_gemm_mixed_ref)
    (M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
}

// The kernel table's choice decides, so this stays true to whatever rows it holds.
bool trit_kernel_gemm_mixed_bf16_native(void) {
    const trit_kernel_entry *e = trit_kernel_find(TRIT_KERNEL_GEMM_MIXED, TRIT_BF16, TRIT_F32);
    return e && e->fn == (trit_kernel_fn)trit_kernel_gemm_mixed_avx512bf16;
}
