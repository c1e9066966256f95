// The f32 flash-attention tile kernels' entry points: each takes the kernel table's choice for
// the features usable now and remembers it in its own slot (they are called once per tile).
// AVX2-only machines run the AVX2 (+FMA) kernels; machines without AVX2 the portable ones, which
// the compiler vectorizes for the base ISA. The bf16 pair kernels (kernels/flash_bf16.h) exist
// only where the CPU has bf16 dot products.
#include "kernels/flash.h"
#include "kernels/flash_bf16.h"
#include "kernels/kernel_table.h"

#define FLASH(ID, name)                                                                            \
    static trit_kernel_slot slot;                                                                  \
    TRIT_KERNEL_FN_OR(trit_kernel_flash_##name##_fn, &slot, TRIT_KERNEL_FLASH_##ID, TRIT_F32, TRIT_F32, \
                      trit_kernel_flash_##name##_ref_f32)

void trit_kernel_flash_scores_f32(TRIT_FLASH_SCORES_ARGS(float)) {
    FLASH(SCORES, scores)(nr, hs, x, ldx, yt, st);
}

void trit_kernel_flash_accum_f32(TRIT_FLASH_ACCUM_ARGS(float)) {
    FLASH(ACCUM, accum)(nr, nk, hs, coef, rs, ks, y, ldy, acc, ldacc, rowscale, accumulate);
}

void trit_kernel_flash_softmax_f32(TRIT_FLASH_SOFTMAX_ARGS(float)) {
    FLASH(SOFTMAX, softmax)(st, nr, nq, kofs, scale, m, l, alpha);
}

void trit_kernel_flash_probs_f32(TRIT_FLASH_PROBS_ARGS(float)) {
    FLASH(PROBS, probs)(st, nr, nq, kofs, scale, lse);
}

void trit_kernel_flash_dscores_f32(TRIT_FLASH_DSCORES_ARGS(float)) {
    FLASH(DSCORES, dscores)(dp, p, nr, d, scale);
}

const trit_flash_bf16_kernels *trit_kernel_flash_bf16(void) {
    const uint32_t need = TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512 | TRIT_FEAT_AVX512_BF16;
    return (trit_cpu_usable_features() & need) == need ? &trit_kernel_flash_bf16_avx512bf16 : NULL;
}
