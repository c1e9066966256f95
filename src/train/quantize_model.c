// Post-training quantization of a GPT: its 2-D weights inside the blocks (attention and MLP
// matrices), and optionally the token embedding (which is also the tied output head), become
// quantized tensors; the model's own f32 parameters receive the decoded values, so evaluating
// the model afterwards measures exactly what the quantized checkpoint computes.
#include "trit/quant.h"
#include "trit/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool wants(const trit_tensor *t, unsigned which) {
    if (t->ndim != 2) return false;
    if (strncmp(t->name, "h.", 2) == 0) return which & TRIT_QUANTIZE_BLOCKS;
    return (which & TRIT_QUANTIZE_EMBEDDING) && strcmp(t->name, "wte.weight") == 0;
}

size_t trit_gpt_stored_bytes(const trit_gpt *m) {
    size_t b = 0;
    for (int i = 0; m && i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *q = trit_gpt_quantized(m, i);
        b += q ? trit_tensor_nbytes(q) + trit_quant_info_bytes(q->quant) : trit_tensor_nbytes(trit_gpt_tensor(m, i));
    }
    return b;
}

trit_status trit_gpt_quantize(trit_gpt *m, const trit_quant_spec *spec, unsigned which, trit_quantize_report *r) {
    if (!m || !spec || !r) return trit_error(TRIT_ERR_INVALID, "trit_gpt_quantize: NULL argument");
    if (trit_gpt_decode_only(m))
        return trit_error(TRIT_ERR_STATE, "trit_gpt_quantize: the model decodes only (its f32 values are gone); "
                          "quantize the model it was loaded from");
    const int n = trit_gpt_num_tensors(m);
    memset(r, 0, sizeof *r);
    for (int i = 0; i < n; i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        const int64_t numel = trit_tensor_numel(t);
        r->params_total += numel;
        if (!wants(t, which)) {
            const trit_tensor *q = trit_gpt_quantized(m, i);  // quantized by an earlier call
            r->bytes_total += q ? trit_tensor_nbytes(q) + trit_quant_info_bytes(q->quant) : trit_tensor_nbytes(t);
            continue;
        }
        trit_tensor *q = trit_quantize(t, spec);
        if (!q) {
            char why[400];
            snprintf(why, sizeof why, "%s", trit_last_error());
            return trit_error(TRIT_ERR_INVALID, "quantizing '%s': %s", t->name, why);
        }
        const size_t bytes = trit_tensor_nbytes(q) + trit_quant_info_bytes(q->quant);
        trit_status s = trit_tensor_copy(t, q);
        if (s != TRIT_OK) {
            trit_tensor_free(q);
            return s;
        }
        if ((s = trit_gpt_attach_quantized(m, i, q)) != TRIT_OK) return s;
        r->tensors++;
        r->params_quantized += numel;
        r->bytes_quantized += bytes;
        r->bytes_total += bytes;
    }
    return TRIT_OK;
}
