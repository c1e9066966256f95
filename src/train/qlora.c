// --quantize-base (QLoRA): the frozen base of a LoRA run quantized block by block and then kept
// only as codes (trit_gpt_use_quantized_base), so training holds the quantized base, the adapter
// in f32 and its optimizer state. A run directory's base is quantized matrix by matrix as it is
// read (trit_base_load_quantizing), so no f32 copy of the whole base is ever held. A resumed run quantizes the same base again (its --init-from,
// or the seed's random base): the codes are a pure function of the base values and the spec.
// With keep, the --init-from run is quantized already (`trit quantize`) and its codes are taken
// as they are (trit_trainer_init_weights moves them over).
#include "trit/train.h"
#include "train/trainer.h"

#include <stdio.h>

trit_quant_spec trit_train_qbase_spec(const trit_train_config *c) {
    static const trit_dtype dt[] = {TRIT_DTYPE_COUNT, TRIT_NF4, TRIT_QINT8, TRIT_QINT4, TRIT_TERNARY, TRIT_DTYPE_COUNT};
    const int64_t k = c->quantize_base;
    trit_quant_spec s = trit_quant_spec_default(k >= 0 && k < (int64_t)(sizeof dt / sizeof dt[0]) ? dt[k] : TRIT_DTYPE_COUNT);
    if (c->quantize_base == TRIT_QBASE_INT4) s.group_size = 64;  // the integer kernels' groups: multiples of 64
    s.double_quant_block = c->double_quant ? 256 : 0;
    return s;
}

trit_status trit_train_quantize_base(trainer *t) {
    const trit_train_config *c = &t->cfg;
    if (c->quantize_base == TRIT_QBASE_OFF) return TRIT_OK;
    trit_status s = TRIT_OK;
    const trit_quant_spec spec = trit_train_qbase_spec(c);
    if (t->resumed && c->init_from[0]) {  // the base the run started from, as it was then
        t->init_model = c->quantize_base == TRIT_QBASE_KEEP
                            ? trit_checkpoint_load_as_trained(c->init_from, NULL)
                            : trit_checkpoint_load_base(c->init_from, NULL, &spec, &t->base_codes);
        t->init_deferred = false;  // its values (or codes) all read here
        if (!t->init_model) {
            char why[600];
            snprintf(why, sizeof why, "%s", trit_last_error());
            return trit_error(TRIT_ERR_IO, "resuming a --quantize-base run quantizes its base '%s' again, which failed: "
                              "%s", c->init_from, why);
        }
        s = trit_trainer_init_weights(t);
    }
    trit_quantize_report r;
    if (s == TRIT_OK && c->quantize_base != TRIT_QBASE_KEEP && !t->base_codes)
        s = trit_gpt_quantize(t->model, &spec, TRIT_QUANTIZE_BLOCKS, &r);
    if (s == TRIT_OK) s = trit_gpt_use_quantized_base(t->model);
    return s;
}
