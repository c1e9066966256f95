// The kernel table and its lookup (see kernel_table.h). Rows of one key are listed best first.
#include "kernels/kernel_table.h"
#include "kernels/dequant.h"

#include "kernels/flash.h"
#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"
#include "kernels/peak.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_panel.h"
#include "kernels/rowops.h"

#include <stdio.h>

#define ROW(id, in, out, needs, fn) {TRIT_KERNEL_##id, TRIT_##in, TRIT_##out, needs, #fn, (trit_kernel_fn)fn}
#define AVX2 TRIT_FEAT_AVX2
#define AVX512 (TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512)
// A row kernel: AVX-512 and AVX2 versions (one body) and the portable reference.
#define ROWOP(ID, name)                                                    \
    ROW(ID, F32, F32, AVX512, trit_kernel_##name##_avx512),               \
    ROW(ID, F32, F32, AVX2, trit_kernel_##name##_avx2),                   \
    ROW(ID, F32, F32, 0, trit_kernel_##name##_ref_f32)
#define FLASH(ID, name)                                                    \
    ROW(ID, F32, F32, AVX512, trit_kernel_flash_##name##_avx512_f32),     \
    ROW(ID, F32, F32, AVX2, trit_kernel_flash_##name##_avx2_f32),         \
    ROW(ID, F32, F32, 0, trit_kernel_flash_##name##_ref_f32)

static const trit_kernel_entry table[] = {
    // AMX has no fp32 tiles: the AVX-512 kernel is the fp32 path on AMX machines too.
    ROW(GEMM, F32, F32, AVX512, trit_kernel_gemm_avx512_f32),
    ROW(GEMM, F32, F32, AVX2, trit_kernel_gemm_avx2_f32),
    ROW(GEMM, F32, F32, 0, trit_kernel_gemm_ref_f32),
    ROW(GEMV, F32, F32, AVX512, trit_kernel_gemv_avx512_f32),
    ROW(GEMV, F32, F32, AVX2, trit_kernel_gemv_avx2_f32),
    ROW(GEMV, F32, F32, 0, trit_kernel_gemm_ref_f32),
    // Any mix of f32/bf16/f16 operands, keyed by bf16 -> f32: bf16 pairs on vdpbf16ps where the
    // CPU has it, else 16-bit operands widened while packing for the f32 micro-kernels.
    ROW(GEMM_MIXED, BF16, F32, AVX512 | TRIT_FEAT_AVX512_BF16, trit_kernel_gemm_mixed_avx512bf16),
    ROW(GEMM_MIXED, BF16, F32, AVX512, trit_kernel_gemm_mixed_avx512),
    ROW(GEMM_MIXED, BF16, F32, AVX2, trit_kernel_gemm_mixed_avx2),
    ROW(GEMM_MIXED, BF16, F32, 0, trit_kernel_gemm_mixed_ref),
    ROWOP(NORM_FWD, norm_fwd),
    ROWOP(NORM_BWD_X, norm_bwd_x),
    ROWOP(NORM_BWD_PARAMS, norm_bwd_params),
    ROWOP(GELU_FWD, gelu_fwd),
    ROWOP(GELU_BWD, gelu_bwd),
    ROWOP(SOFTMAX_FWD, softmax_fwd),
    ROWOP(SOFTMAX_BWD, softmax_bwd),
    ROWOP(LOG_SOFTMAX_FWD, log_softmax_fwd),
    ROWOP(LOG_SOFTMAX_BWD, log_softmax_bwd),
    ROWOP(CE_FWD, ce_fwd),
    ROWOP(CE_BWD, ce_bwd),
    ROWOP(CE_DLOGITS, ce_dlogits),
    ROWOP(ATTEND, attend),
    ROW(ATTEND, F16, F32, AVX512, trit_kernel_attend_f16_avx512),
    ROW(ATTEND, F16, F32, AVX2, trit_kernel_attend_f16_avx2),
    ROW(ATTEND, F16, F32, 0, trit_kernel_attend_f16_ref_f32),
    // A row memcpy: libc's copy is already as wide as the CPU allows.
    ROW(EMBEDDING_FWD, F32, F32, 0, trit_kernel_embedding_fwd_ref_f32),
    ROWOP(EMBEDDING_BWD, embedding_bwd),
    ROWOP(ADAM, adam),
    FLASH(FLASH_SCORES, scores),
    FLASH(FLASH_ACCUM, accum),
    FLASH(FLASH_SOFTMAX, softmax),
    FLASH(FLASH_PROBS, probs),
    FLASH(FLASH_DSCORES, dscores),
    // Integer codes of the weight (keyed by its dtype) times per-token int8 activations.
    ROW(QGEMM, QINT8, F32, AVX512 | TRIT_FEAT_AVX512_VNNI, trit_kernel_qgemm_q8_avx512vnni),
    ROW(QGEMM, QINT8, F32, AVX2, trit_kernel_qgemm_q8_avx2),
    ROW(QGEMM, QINT8, F32, 0, trit_kernel_qgemm_q8_ref),
    ROW(QGEMM, QINT4, F32, AVX512 | TRIT_FEAT_AVX512_VNNI, trit_kernel_qgemm_q4_avx512vnni),
    ROW(QGEMM, QINT4, F32, AVX2, trit_kernel_qgemm_q4_avx2),
    ROW(QGEMM, QINT4, F32, 0, trit_kernel_qgemm_q4_ref),
    ROW(QGEMM, TERNARY, F32, AVX512 | TRIT_FEAT_AVX512_VNNI, trit_kernel_qgemm_t2_avx512vnni),
    ROW(QGEMM, TERNARY, F32, AVX2, trit_kernel_qgemm_t2_avx2),
    ROW(QGEMM, TERNARY, F32, 0, trit_kernel_qgemm_t2_ref),
    // The same over 16-row panels; one function per ISA takes every dtype it is listed for (the
    // panels say which).
    ROW(QPANEL, QINT8, F32, AVX512 | TRIT_FEAT_AVX512_VNNI, trit_kernel_qpanel_avx512vnni),
    ROW(QPANEL, QINT8, F32, AVX2, trit_kernel_qpanel_avx2),
    ROW(QPANEL, QINT8, F32, 0, trit_kernel_qpanel_ref),
    ROW(QPANEL, QINT4, F32, AVX512 | TRIT_FEAT_AVX512_VNNI, trit_kernel_qpanel_avx512vnni),
    ROW(QPANEL, QINT4, F32, AVX2, trit_kernel_qpanel_avx2),
    ROW(QPANEL, QINT4, F32, 0, trit_kernel_qpanel_ref),
    ROW(QPANEL, TERNARY, F32, AVX512 | TRIT_FEAT_AVX512_VNNI, trit_kernel_qpanel_avx512vnni),
    ROW(QPANEL, TERNARY, F32, AVX2, trit_kernel_qpanel_avx2),
    ROW(QPANEL, TERNARY, F32, 0, trit_kernel_qpanel_ref),
    // The per-token activation quantizer of the integer kernels, keyed f32 -> qint8 codes.
    ROW(QACT, F32, QINT8, AVX512, trit_kernel_qact_avx512),
    ROW(QACT, F32, QINT8, AVX2, trit_kernel_qact_avx2),
    ROW(QACT, F32, QINT8, 0, trit_kernel_qact_ref),
    ROW(QACT_DIV, F32, QINT8, AVX512, trit_kernel_qact_div_avx512),
    ROW(QACT_DIV, F32, QINT8, AVX2, trit_kernel_qact_div_avx2),
    ROW(QACT_DIV, F32, QINT8, 0, trit_kernel_qact_div_ref),
    // Weight-only codes times f32 activations.
    ROW(WGEMM, NF4, F32, AVX512 | TRIT_FEAT_AVX512_BF16, trit_kernel_nf4_avx512bf16),
    ROW(WGEMM, NF4, F32, AVX2, trit_kernel_nf4_avx2),
    ROW(WGEMM, NF4, F32, 0, trit_kernel_nf4_ref),
    ROW(WGEMM, F8_E4M3, F32, AVX512, trit_kernel_fp8_e4m3_avx512),
    ROW(WGEMM, F8_E4M3, F32, AVX2, trit_kernel_fp8_e4m3_avx2),
    ROW(WGEMM, F8_E4M3, F32, 0, trit_kernel_fp8_e4m3_ref),
    ROW(WGEMM, F8_E5M2, F32, AVX512, trit_kernel_fp8_e5m2_avx512),
    ROW(WGEMM, F8_E5M2, F32, AVX2, trit_kernel_fp8_e5m2_avx2),
    ROW(WGEMM, F8_E5M2, F32, 0, trit_kernel_fp8_e5m2_ref),
    // Weight-only codes decoded (a prompt's GEMMs read a decode-only model's NF4 and FP8 matrices so).
    ROW(DEQUANT, NF4, F32, AVX512, trit_kernel_dequant_avx512),
    ROW(DEQUANT, NF4, F32, AVX2, trit_kernel_dequant_avx2),
    ROW(DEQUANT, NF4, F32, 0, trit_kernel_dequant_ref),
    ROW(DEQUANT, F8_E4M3, F32, AVX512, trit_kernel_dequant_avx512),
    ROW(DEQUANT, F8_E4M3, F32, AVX2, trit_kernel_dequant_avx2),
    ROW(DEQUANT, F8_E4M3, F32, 0, trit_kernel_dequant_ref),
    ROW(DEQUANT, F8_E5M2, F32, AVX512, trit_kernel_dequant_avx512),
    ROW(DEQUANT, F8_E5M2, F32, AVX2, trit_kernel_dequant_avx2),
    ROW(DEQUANT, F8_E5M2, F32, 0, trit_kernel_dequant_ref),
    // The machine's limits (`trit bench --peak`): fp32 FMA, bf16 and int8 dot products, each at
    // the widths the GEMMs use; the best usable row of a key is the peak of the kernels the
    // dispatch picks, and the bench measures the others too.
    ROW(PEAK, F32, F32, AVX512, trit_kernel_peak_fma_avx512),
    ROW(PEAK, F32, F32, AVX2, trit_kernel_peak_fma_avx2),
    ROW(PEAK, F32, F32, 0, trit_kernel_peak_fma_ref),
    ROW(PEAK, BF16, F32, AVX512 | TRIT_FEAT_AVX512_BF16, trit_kernel_peak_bf16_avx512bf16),
    ROW(PEAK, BF16, F32, 0, trit_kernel_peak_bf16_ref),
    ROW(PEAK, QINT8, I32, AVX512 | TRIT_FEAT_AVX512_VNNI, trit_kernel_peak_int8_avx512vnni),
    ROW(PEAK, QINT8, I32, AVX2, trit_kernel_peak_int8_avx2),
    ROW(PEAK, QINT8, I32, 0, trit_kernel_peak_int8_ref),
    ROW(READ, F32, F32, AVX512, trit_kernel_read_avx512),
    ROW(READ, F32, F32, AVX2, trit_kernel_read_avx2),
    ROW(READ, F32, F32, 0, trit_kernel_read_ref),
};

static const char *const id_names[TRIT_KERNEL_COUNT] = {
    [TRIT_KERNEL_GEMM] = "gemm",
    [TRIT_KERNEL_GEMV] = "gemv",
    [TRIT_KERNEL_GEMM_MIXED] = "gemm_mixed",
    [TRIT_KERNEL_NORM_FWD] = "norm_fwd",
    [TRIT_KERNEL_NORM_BWD_X] = "norm_bwd_x",
    [TRIT_KERNEL_NORM_BWD_PARAMS] = "norm_bwd_params",
    [TRIT_KERNEL_GELU_FWD] = "gelu_fwd",
    [TRIT_KERNEL_GELU_BWD] = "gelu_bwd",
    [TRIT_KERNEL_SOFTMAX_FWD] = "softmax_fwd",
    [TRIT_KERNEL_SOFTMAX_BWD] = "softmax_bwd",
    [TRIT_KERNEL_LOG_SOFTMAX_FWD] = "log_softmax_fwd",
    [TRIT_KERNEL_LOG_SOFTMAX_BWD] = "log_softmax_bwd",
    [TRIT_KERNEL_CE_FWD] = "ce_fwd",
    [TRIT_KERNEL_CE_BWD] = "ce_bwd",
    [TRIT_KERNEL_CE_DLOGITS] = "ce_dlogits",
    [TRIT_KERNEL_ATTEND] = "attend",
    [TRIT_KERNEL_EMBEDDING_FWD] = "embedding_fwd",
    [TRIT_KERNEL_EMBEDDING_BWD] = "embedding_bwd",
    [TRIT_KERNEL_ADAM] = "adam",
    [TRIT_KERNEL_FLASH_SCORES] = "flash_scores",
    [TRIT_KERNEL_FLASH_ACCUM] = "flash_accum",
    [TRIT_KERNEL_FLASH_SOFTMAX] = "flash_softmax",
    [TRIT_KERNEL_FLASH_PROBS] = "flash_probs",
    [TRIT_KERNEL_FLASH_DSCORES] = "flash_dscores",
    [TRIT_KERNEL_QGEMM] = "qgemm",
    [TRIT_KERNEL_QPANEL] = "qpanel",
    [TRIT_KERNEL_QACT] = "qact",
    [TRIT_KERNEL_QACT_DIV] = "qact_div",
    [TRIT_KERNEL_WGEMM] = "wgemm",
    [TRIT_KERNEL_DEQUANT] = "dequant",
    [TRIT_KERNEL_PEAK] = "peak",
    [TRIT_KERNEL_READ] = "read",
};

const char *trit_kernel_id_name(trit_kernel_id id) {
    return (int)id >= 0 && id < TRIT_KERNEL_COUNT && id_names[id] ? id_names[id] : "?";
}

const trit_kernel_entry *trit_kernel_table(int *n) {
    *n = (int)(sizeof table / sizeof table[0]);
    return table;
}

static int find_index(trit_kernel_id id, trit_dtype in, trit_dtype out, uint32_t usable) {
    for (int i = 0; i < (int)(sizeof table / sizeof table[0]); i++) {
        const trit_kernel_entry *e = &table[i];
        if (e->id != id || e->in != in || e->out != out || (e->needs & ~usable)) continue;
        if ((e->needs & (TRIT_FEAT_AMX_BF16 | TRIT_FEAT_AMX_INT8)) && trit_cpu_amx_request() != TRIT_OK) {
            trit_clear_error();  // refused: AMX rows are skipped from now on
            continue;
        }
        return i;
    }
    return -1;
}

// The message for a key without a usable row; every key listed has a portable row, so this is a
// key the table does not list at all.
static void no_row(trit_kernel_id id, trit_dtype in, trit_dtype out) {
    char keys[256] = "none";
    size_t k = 0;
    for (int i = 0; i < (int)(sizeof table / sizeof table[0]); i++)
        if (table[i].id == id && table[i].needs == 0 && k < sizeof keys)  // one portable row per key
            k += (size_t)snprintf(keys + k, sizeof keys - k, "%s%s -> %s", k ? ", " : "", trit_dtype_name(table[i].in),
                                  trit_dtype_name(table[i].out));
    trit_error(TRIT_ERR_UNSUPPORTED, "no kernel %s for %s -> %s in the kernel table (it has %s for: %s)",
               trit_kernel_id_name(id), trit_dtype_name(in), trit_dtype_name(out), trit_kernel_id_name(id), keys);
}

const trit_kernel_entry *trit_kernel_find(trit_kernel_id id, trit_dtype in, trit_dtype out) {
    const int i = find_index(id, in, out, trit_cpu_usable_features());
    if (i < 0) no_row(id, in, out);
    return i < 0 ? NULL : &table[i];
}

// The slot word is (usable mask << 32) | (row index + 1), or | NO_ROW for a key the table does
// not have; 0 means empty. One word, so a reader never sees a row paired with another mask's
// choice. *fresh says whether this call made the lookup.
#define NO_ROW UINT32_MAX

static const trit_kernel_entry *pick(trit_kernel_slot *slot, trit_kernel_id id, trit_dtype in, trit_dtype out,
                                     bool *fresh) {
    const uint32_t usable = trit_cpu_usable_features();
    const uint64_t w = atomic_load_explicit(slot, memory_order_relaxed);
    *fresh = !(w && (uint32_t)(w >> 32) == usable);
    int i = *fresh ? find_index(id, in, out, usable) : (uint32_t)w == NO_ROW ? -1 : (int)(uint32_t)w - 1;
    if (*fresh)
        atomic_store_explicit(slot, ((uint64_t)usable << 32) | (i < 0 ? NO_ROW : (uint64_t)(i + 1)),
                              memory_order_relaxed);
    if (i < 0) no_row(id, in, out);
    return i < 0 ? NULL : &table[i];
}

const trit_kernel_entry *trit_kernel_pick(trit_kernel_slot *slot, trit_kernel_id id, trit_dtype in, trit_dtype out) {
    bool fresh;
    return pick(slot, id, in, out, &fresh);
}

trit_kernel_fn trit_kernel_pick_or(trit_kernel_slot *slot, trit_kernel_id id, trit_dtype in, trit_dtype out,
                                   trit_kernel_fn portable) {
    bool fresh;
    const trit_kernel_entry *e = pick(slot, id, in, out, &fresh);
    if (e) return e->fn;
    if (portable && fresh) trit_log(TRIT_LOG_WARN, "%s; running the portable kernel instead", trit_last_error());
    return portable;
}
