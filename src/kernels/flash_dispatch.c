// Chooses the f32 flash-attention tile kernels for the CPU level in force (read on every call,
// so trit_cpu_set_level takes effect at once). AVX-512 has its own kernels; every other level,
// AVX2 included, runs the portable ones, which the compiler vectorizes for the base ISA.
#include "kernels/flash.h"
#include "trit/base.h"

static bool use_avx512(void) {
    trit_cpu_isa level = trit_cpu_level();
    return level == TRIT_CPU_AVX512 || level == TRIT_CPU_AMX;
}

void trit_kernel_flash_scores_f32(TRIT_FLASH_SCORES_ARGS(float)) {
    if (use_avx512())
        trit_kernel_flash_scores_avx512_f32(nr, hs, x, ldx, yt, st);
    else
        trit_kernel_flash_scores_ref_f32(nr, hs, x, ldx, yt, st);
}

void trit_kernel_flash_accum_f32(TRIT_FLASH_ACCUM_ARGS(float)) {
    if (use_avx512())
        trit_kernel_flash_accum_avx512_f32(nr, nk, hs, coef, rs, ks, y, ldy, acc, ldacc, rowscale, accumulate);
    else
        trit_kernel_flash_accum_ref_f32(nr, nk, hs, coef, rs, ks, y, ldy, acc, ldacc, rowscale, accumulate);
}

void trit_kernel_flash_softmax_f32(TRIT_FLASH_SOFTMAX_ARGS(float)) {
    if (use_avx512())
        trit_kernel_flash_softmax_avx512_f32(st, nr, nq, kofs, scale, m, l, alpha);
    else
        trit_kernel_flash_softmax_ref_f32(st, nr, nq, kofs, scale, m, l, alpha);
}

void trit_kernel_flash_probs_f32(TRIT_FLASH_PROBS_ARGS(float)) {
    if (use_avx512())
        trit_kernel_flash_probs_avx512_f32(st, nr, nq, kofs, scale, lse);
    else
        trit_kernel_flash_probs_ref_f32(st, nr, nq, kofs, scale, lse);
}

void trit_kernel_flash_dscores_f32(TRIT_FLASH_DSCORES_ARGS(float)) {
    if (use_avx512())
        trit_kernel_flash_dscores_avx512_f32(dp, p, nr, d, scale);
    else
        trit_kernel_flash_dscores_ref_f32(dp, p, nr, d, scale);
}
