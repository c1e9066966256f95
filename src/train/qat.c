// Quantization-aware training as the trainer config gives it, and the trained model made ready
// for inference: --qat, --group and --qat-acts become fake quantization of the block matrices
// (symmetric codes with the group rule of trit_quantize, or BitNet's ternary absmean) and of
// their inputs per token; freezing quantizes the matrices with the very same rule, so the
// packed model computes what training's graph computed.
#include "trit/train.h"

#include <sys/stat.h>

static const trit_dtype qat_dtypes[] = {TRIT_F32, TRIT_QINT8, TRIT_QINT4, TRIT_QINT2, TRIT_F8_E4M3, TRIT_TERNARY};

// The codes of --qat and their group size (0 for per tensor).
static trit_quant_spec freeze_spec(const trit_train_config *c) {
    const trit_dtype dt = qat_dtypes[c->qat];
    trit_quant_spec s = trit_quant_spec_default(dt);
    if (c->group && dt != TRIT_TERNARY) s.group_size = c->group;
    return s;
}

static trit_fake_quant_spec act_spec(const trit_train_config *c) {
    const trit_dtype dt = qat_dtypes[c->qat];
    return (trit_fake_quant_spec){.dtype = dt == TRIT_F8_E4M3 ? dt : TRIT_QINT8, .mode = TRIT_FQ_TOKEN};
}

trit_status trit_train_set_qat(trit_gpt *m, const trit_train_config *c) {
    if (!m || !c) return trit_error(TRIT_ERR_INVALID, "trit_train_set_qat: NULL argument");
    if (c->qat == TRIT_QAT_OFF) return TRIT_OK;
    const trit_quant_spec q = freeze_spec(c);
    trit_fake_quant_spec w = {.dtype = q.dtype, .group_size = q.group_size, .mode = TRIT_FQ_GROUPS};
    if (q.dtype == TRIT_TERNARY) w = (trit_fake_quant_spec){.dtype = TRIT_QINT2, .mode = TRIT_FQ_TERNARY};
    const trit_fake_quant_spec a = act_spec(c);
    trit_status s = trit_gpt_set_qat(m, &w, c->qat_acts ? &a : NULL);
    if (s == TRIT_OK && q.dtype == TRIT_TERNARY) s = trit_gpt_set_ternary_matmul(m, (trit_ternary_matmul)c->ternary_matmul);
    return s;
}

trit_status trit_train_freeze_qat(trit_gpt *m, const trit_train_config *c) {
    if (!m || !c) return trit_error(TRIT_ERR_INVALID, "trit_train_freeze_qat: NULL argument");
    if (c->qat == TRIT_QAT_OFF) return TRIT_OK;
    const trit_quant_spec q = freeze_spec(c);
    trit_quantize_report r;
    trit_status s = trit_gpt_quantize(m, &q, TRIT_QUANTIZE_BLOCKS, &r);
    const trit_fake_quant_spec a = act_spec(c);
    if (s == TRIT_OK) s = trit_gpt_set_qat(m, NULL, c->qat_acts ? &a : NULL);
    if (s == TRIT_OK) s = trit_gpt_set_ternary_matmul(m, TRIT_TERNARY_MATMUL_FAKE);  // frozen: no latent weights to pack
    return s;
}

trit_gpt *trit_checkpoint_load_decoding(const char *path, int64_t *step) {
    struct stat st;
    trit_train_config qc;
    const bool qat = stat(path, &st) == 0 && S_ISDIR(st.st_mode) && trit_train_run_config(path, &qc) == TRIT_OK &&
                     qc.qat != TRIT_QAT_OFF;
    trit_clear_error();
    if (!qat) return trit_checkpoint_load_decoder(path, step);  // a quantized run's codes are read as codes
    trit_gpt *m = trit_checkpoint_load_as_trained(path, step);  // latent weights, frozen by the run's rule
    if (m && trit_gpt_make_decode_only(m) != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    return m;
}

trit_gpt *trit_checkpoint_load_as_trained_codes(const char *path, int64_t *step) {
    return trit_checkpoint_load_base(path, step, NULL, NULL);
}

trit_gpt *trit_checkpoint_load_base(const char *path, int64_t *step, const trit_quant_spec *spec, bool *made) {
    struct stat st;
    trit_train_config qc;
    const bool qat = stat(path, &st) == 0 && S_ISDIR(st.st_mode) && trit_train_run_config(path, &qc) == TRIT_OK &&
                     qc.qat != TRIT_QAT_OFF;
    trit_clear_error();
    if (made) *made = false;
    if (qat) return trit_checkpoint_load_as_trained(path, step);
    return spec ? trit_checkpoint_load_quantizing(path, step, spec, made) : trit_checkpoint_load_codes(path, step);
}

trit_gpt *trit_checkpoint_load_as_trained(const char *path, int64_t *step) {
    trit_gpt *m = trit_checkpoint_load_model(path, step);
    if (!m) return NULL;
    struct stat st;
    trit_train_config qc;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && trit_train_run_config(path, &qc) == TRIT_OK &&
        trit_train_freeze_qat(m, &qc) != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    trit_clear_error();  // a checkpoint without a run's train state is no error
    return m;
}
