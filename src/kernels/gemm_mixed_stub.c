// A plain triple-loop mixed-precision GEMM (the contract of kernels/gemm_lowp.h), in use until
// the packed kernels land.
#include "kernels/gemm_lowp.h"
static float ld(const trit_gemm_operand *o, int64_t r, int64_t c, trit_matmul_precision prec, int piece) {
    const int64_t i = o->trans ? c * o->ld + r : r * o->ld + c;
    float v;
    if (o->dt != TRIT_F32 && piece) return 0;
    if (o->dt == TRIT_BF16) return trit_bf16_to_f32(((const uint16_t *)o->p)[i]);
    if (o->dt == TRIT_F16) return trit_f16_to_f32(((const uint16_t *)o->p)[i]);
    v = ((const float *)o->p)[i];
    if (prec == TRIT_MATMUL_HIGHEST) return piece == 0 ? v : 0;
    float hi = trit_bf16_to_f32(trit_f32_to_bf16(v));
    if (prec == TRIT_MATMUL_MEDIUM) return piece == 0 ? hi : 0;
    return piece == 0 ? hi : trit_bf16_to_f32(trit_f32_to_bf16(v - hi));
}
void trit_kernel_gemm_mixed(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A, const trit_gemm_operand *B,
                            void *C, trit_dtype cdt, int64_t ldc, bool accumulate, trit_matmul_precision prec) {
#pragma omp parallel for
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = 0;
            for (int64_t k = 0; k < K; k++) {
                float ah = ld(A, i, k, prec, 0), al = ld(A, i, k, prec, 1), bh = ld(B, k, j, prec, 0), bl = ld(B, k, j, prec, 1);
                s += ah * bh + ah * bl + al * bh;
            }
            if (cdt == TRIT_BF16) {
                uint16_t *c = (uint16_t *)C + i * ldc + j;
                *c = trit_f32_to_bf16(accumulate ? trit_bf16_to_f32(*c) + s : s);
            } else {
                float *c = (float *)C + i * ldc + j;
                *c = accumulate ? *c + s : s;
            }
        }
}
