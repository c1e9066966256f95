// Ternary QAT on the integer kernels: the model keeps each block matrix's ternary codes packed
// for the panel kernels (ops/ternary_linear.h), which every graph built over it shares, and
// packs them again on the first forward after the weights changed.
#include "nn/gpt_internal.h"
#include "ops/ternary_linear.h"

#include <stdlib.h>

void trit_gpt_ternary_free(trit_gpt *m) {
    for (int i = 0; m->tern && i < m->n_tern; i++) trit_ternary_weight_free(&m->tern[i]);
    free(m->tern);
    m->tern = NULL;
    m->n_tern = 0;
}

trit_status trit_gpt_set_ternary_matmul(trit_gpt *m, trit_ternary_matmul mode) {
    if (!m) return trit_error(TRIT_ERR_INVALID, "trit_gpt_set_ternary_matmul: NULL model");
    if (mode != TRIT_TERNARY_MATMUL_FAKE && mode != TRIT_TERNARY_MATMUL_INT8 && mode != TRIT_TERNARY_MATMUL_INT8_F32_DX &&
        mode != TRIT_TERNARY_MATMUL_INT8_F32_DW)
        return trit_error(TRIT_ERR_INVALID, "trit_gpt_set_ternary_matmul: unknown mode %d", (int)mode);
    trit_gpt_ternary_free(m);
    if (mode == TRIT_TERNARY_MATMUL_FAKE) return TRIT_OK;
    m->tern = calloc((size_t)(m->n_tensors > 0 ? m->n_tensors : 1), sizeof *m->tern);
    if (!m->tern) return trit_error(TRIT_ERR_NOMEM, "trit_gpt_set_ternary_matmul: out of memory");
    m->n_tern = m->n_tensors;
    const trit_ternary_dx dx = mode == TRIT_TERNARY_MATMUL_INT8_F32_DX ? TRIT_TERNARY_DX_F32 : TRIT_TERNARY_DX_INT8;
    const trit_ternary_dw dw = mode == TRIT_TERNARY_MATMUL_INT8 ? TRIT_TERNARY_DW_AUTO : TRIT_TERNARY_DW_F32;
    for (int i = 0; i < m->n_prog; i++) {
        const gpt_step *s = &m->prog[i];
        if (s->op != GPT_OP_LINEAR || !s->block_matrix || s->w < 0 || m->tern[s->w].N) continue;
        const trit_tensor *w = m->tensors[s->w];
        if (!w->data || w->dtype != TRIT_F32 || w->ndim != 2 || !trit_ternary_linear_supported(w->shape[0], w->shape[1]))
            continue;  // QLoRA codes, 16-bit weights, or sides the panels do not take: the fake-quantized path
        trit_status st = trit_ternary_weight_init(&m->tern[s->w], w->shape[0], w->shape[1], dx);
        if (st != TRIT_OK) {
            trit_gpt_ternary_free(m);
            return st;
        }
        m->tern[s->w].dw = dw;
    }
    return TRIT_OK;
}

void trit_gpt_ternary_weights_changed(trit_gpt *m) {
    for (int i = 0; m && m->tern && i < m->n_tern; i++) m->tern[i].stale = true;
}

int64_t trit_gpt_ternary_fills(const trit_gpt *m, int i) {
    return m && m->tern && i >= 0 && i < m->n_tern ? m->tern[i].fills : 0;
}

// Ternary weights and per-token int8 inputs (the BitNet recipe) are what the kernels compute.
struct trit_ternary_weight *trit_gpt_ternary_of(const trit_gpt *m, int i) {
    if (!m->tern || i < 0 || i >= m->n_tern || !m->tern[i].N) return NULL;
    if (!m->qat_weights || m->qat_w.mode != TRIT_FQ_TERNARY) return NULL;
    if (!m->qat_acts || m->qat_a.mode != TRIT_FQ_TOKEN || m->qat_a.dtype != TRIT_QINT8) return NULL;
    const trit_tensor *w = m->tensors[i];
    if (!w->data || w->dtype != TRIT_F32) return NULL;
    return &m->tern[i];
}
