// Quantizing and dequantizing whole tensors (their last dim is the row: per-channel scales of an
// (out, in) weight are per output row).
#include "trit/quant.h"

trit_tensor *trit_quantize(const trit_tensor *x, const trit_quant_spec *s) {
    if (!x || x->dtype != TRIT_F32 || x->ndim == 0) {
        trit_error(TRIT_ERR_DTYPE, "quantize: need an f32 tensor of at least one dim");
        return NULL;
    }
    const int64_t numel = trit_tensor_numel(x), row = x->shape[x->ndim - 1];
    if (trit_quant_spec_check(s, numel, row) != TRIT_OK) return NULL;
    trit_tensor *src = trit_tensor_is_contiguous(x) ? (trit_tensor *)x : trit_tensor_contiguous(x);
    trit_tensor *out = src ? trit_tensor_new(s->dtype, x->ndim, x->shape) : NULL;
    trit_quant_info *q = NULL;
    trit_status st = out ? trit_quant_encode(s, trit_tensor_ptr(src), numel, row, trit_tensor_ptr(out), &q)
                         : TRIT_ERR_NOMEM;
    if (st == TRIT_OK) st = trit_tensor_set_quant(out, q);
    if (st == TRIT_OK && x->name[0]) st = trit_tensor_set_name(out, x->name);
    if (src != x) trit_tensor_free(src);
    if (st != TRIT_OK) {
        trit_tensor_free(out);
        return NULL;
    }
    return out;
}

trit_tensor *trit_dequantize(const trit_tensor *q) {
    if (!q) {
        trit_error(TRIT_ERR_INVALID, "dequantize: NULL tensor");
        return NULL;
    }
    trit_tensor *out = trit_tensor_new(TRIT_F32, q->ndim, q->shape);
    if (out && trit_tensor_copy(out, q) != TRIT_OK) {
        trit_tensor_free(out);
        return NULL;
    }
    return out;
}
