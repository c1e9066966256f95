// The portable mixed-precision GEMM (the oracle of kernels/gemm_lowp.h): every operand value
// through the scalar converters, sums in fp32 over k in order.
#include "kernels/gemm_lowp.h"

float trit_gemm_piece_value(const void *p, trit_dtype dt, int64_t i, trit_gemm_piece piece) {
    if (dt == TRIT_BF16) return piece == TRIT_GEMM_BF16_LO ? 0.0f : trit_bf16_to_f32(((const uint16_t *)p)[i]);
    if (dt == TRIT_F16) return piece == TRIT_GEMM_BF16_LO ? 0.0f : trit_f16_to_f32(((const uint16_t *)p)[i]);
    const float x = ((const float *)p)[i];
    if (piece == TRIT_GEMM_VALUE) return x;
    const float hi = trit_bf16_to_f32(trit_f32_to_bf16(x));
    return piece == TRIT_GEMM_BF16_HI ? hi : trit_bf16_to_f32(trit_f32_to_bf16(x - hi));
}

// op(X)[r, c] of an operand.
static float at(const trit_gemm_operand *o, int64_t r, int64_t c, trit_gemm_piece piece) {
    return trit_gemm_piece_value(o->p, o->dt, o->trans ? c * o->ld + r : r * o->ld + c, piece);
}

void trit_kernel_gemm_mixed_ref(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc, bool accumulate,
                                trit_matmul_precision prec, const float *bias) {
    const bool split = prec == TRIT_MATMUL_HIGH, round = prec == TRIT_MATMUL_MEDIUM;
    const trit_gemm_piece first = split || round ? TRIT_GEMM_BF16_HI : TRIT_GEMM_VALUE;
#pragma omp parallel for schedule(static) if (M * N * K > (1 << 20))
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            float s = bias && !accumulate ? bias[j] : 0.0f;
            for (int64_t k = 0; k < K; k++) {
                s += at(A, i, k, first) * at(B, k, j, first);
                if (split)
                    s += at(A, i, k, TRIT_GEMM_BF16_HI) * at(B, k, j, TRIT_GEMM_BF16_LO) +
                         at(A, i, k, TRIT_GEMM_BF16_LO) * at(B, k, j, TRIT_GEMM_BF16_HI);
            }
            if (cdt != TRIT_F32) {
                uint16_t *c = (uint16_t *)C + i * ldc + j;
                float old = 0.0f;
                if (accumulate) trit_gemm_c16_widen(cdt, &old, c, 1);
                const float sum = accumulate ? old + s : s;
                trit_gemm_c16_round(cdt, c, &sum, 1);
            } else {
                float *c = (float *)C + i * ldc + j;
                *c = accumulate ? *c + s : s;
            }
        }
}
