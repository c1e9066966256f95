// Post-training quantization of a GPT: its 2-D weights inside the blocks (attention and MLP
// matrices), and optionally the token embedding (which is also the tied output head), become
// quantized tensors; the model's own f32 parameters receive the decoded values, so evaluating
// the model afterwards measures exactly what the quantized checkpoint computes.
#include "trit/quant.h"
#include "trit/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool trit_quantize_takes_block_matrix(const char *name) {
    return strncmp(name, "h.", 2) == 0 && !strstr(name, ".lora_") && !strstr(name, ".adapter.");  // adapters train
}

trit_status trit_gpt_quantize_read(trit_gpt *m, int i, const trit_quant_spec *spec,
                                   trit_status (*read)(void *ctx, trit_tensor *x), void *ctx, const char *from) {
    const trit_tensor *t = trit_gpt_tensor(m, i);
    if (!t || t->data || !spec || !read)
        return trit_error(TRIT_ERR_INVALID, "trit_gpt_quantize_read: parameter %d needs to be one made without values, "
                          "with a spec and a reader", i);
    trit_tensor *x = trit_tensor_new(TRIT_F32, t->ndim, t->shape);  // (out, in)
    if (!x) return TRIT_ERR_NOMEM;
    snprintf(x->name, sizeof x->name, "%s", t->name);
    trit_status s = read(ctx, x);
    trit_tensor *q = s == TRIT_OK ? trit_quantize(x, spec) : NULL;
    trit_tensor_free(x);
    if (s != TRIT_OK) return s;  // the reader said why
    if (!q) {
        char why[400];
        snprintf(why, sizeof why, "%s", trit_last_error());
        return trit_error(TRIT_ERR_INVALID, "'%s': quantizing '%s' as it is read: %s", from, t->name, why);
    }
    return trit_gpt_attach_quantized(m, i, q);
}

static bool wants(const trit_tensor *t, unsigned which) {
    if (t->ndim != 2) return false;
    if (strncmp(t->name, "h.", 2) == 0) return (which & TRIT_QUANTIZE_BLOCKS) && trit_quantize_takes_block_matrix(t->name);
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

// ---- a quantized model made in pieces ----------------------------------------------------------

typedef struct new_quantized {
    const trit_quant_spec *blocks, *head;
} new_quantized;

static bool made_quantized(const char *name, void *ctx) {
    const new_quantized *q = ctx;
    if (strcmp(name, "wte.weight") == 0) return q->head != NULL;
    const char *w = strrchr(name, '.');  // the block matrices: h.N.attn.c_attn.weight, ...
    return q->blocks && strncmp(name, "h.", 2) == 0 && w && strcmp(w, ".weight") == 0 && !strstr(name, "ln_") &&
           !strstr(name, "sub_norm") && !strstr(name, ".lora_") && !strstr(name, ".adapter.");
}

enum { PIECE_VALUES = 1 << 21 };  // f32 values made at once (8 MB)

// Parameter i of m (made without values) quantized with spec from its initial values, a run of
// whole rows at a time when the spec's groups lie within rows (no f32 copy of the whole matrix
// ever exists), else whole.
static trit_tensor *quantize_in_pieces(const trit_gpt *m, int i, uint64_t seed, const trit_quant_spec *spec) {
    const trit_tensor *t = trit_gpt_tensor(m, i);
    const int64_t N = t->shape[0], K = t->shape[1], numel = N * K, G = trit_quant_group_elems(spec, numel, K);
    const bool rows = G <= K && K % G == 0 && spec->double_quant_block == 0;
    const int64_t R = rows ? (PIECE_VALUES / K > 0 ? PIECE_VALUES / K : 1) : N;
    if (trit_quant_spec_check(spec, numel, K) != TRIT_OK) return NULL;
    trit_tensor *q = trit_tensor_new(spec->dtype, 2, t->shape);
    trit_quant_info *info = q ? trit_quant_info_new(numel, G, spec->scheme == TRIT_QSCHEME_AFFINE, 0) : NULL;
    float *x = info ? malloc(sizeof(float) * (size_t)((R < N ? R : N) * K)) : NULL;
    trit_status s = x ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "quantized model: out of memory for '%s'", t->name);
    for (int64_t r0 = 0; s == TRIT_OK && r0 < N; r0 += R) {
        const int64_t n = (r0 + R < N ? R : N - r0) * K, g0 = r0 * K / G;
        trit_quant_info *part = NULL;
        s = trit_gpt_init_values(m, i, seed, r0 * K, n, x);
        if (s == TRIT_OK)
            s = trit_quant_encode(spec, x, n, K, (char *)trit_tensor_ptr(q) + trit_dtype_nbytes(spec->dtype, r0 * K), &part);
        if (s == TRIT_OK && !rows) {  // one piece: its info is the tensor's (double quantization too)
            trit_quant_info_free(info);
            info = part;
            part = NULL;
        } else if (s == TRIT_OK) {
            memcpy(info->scales + g0, part->scales, sizeof(float) * (size_t)part->num_groups);
            if (info->zero_points) memcpy(info->zero_points + g0, part->zero_points, sizeof(float) * (size_t)part->num_groups);
        }
        trit_quant_info_free(part);
    }
    free(x);
    if (s == TRIT_OK) s = trit_tensor_set_quant(q, info);  // takes info, also on failure
    else trit_quant_info_free(info);
    if (s != TRIT_OK) {
        trit_tensor_free(q);
        return NULL;
    }
    return q;
}

trit_gpt *trit_gpt_new_quantized(const trit_gpt_config *c, uint64_t seed, const trit_quant_spec *blocks,
                                 const trit_quant_spec *head) {
    new_quantized ctx = {blocks, head};
    trit_gpt *m = trit_gpt_new_without(c, seed, made_quantized, &ctx);
    trit_status s = m ? TRIT_OK : TRIT_ERR_NOMEM;
    for (int i = 0; s == TRIT_OK && i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        if (t->data) continue;
        trit_tensor *q = quantize_in_pieces(m, i, seed, strcmp(t->name, "wte.weight") == 0 ? head : blocks);
        s = q ? trit_gpt_attach_quantized(m, i, q) : TRIT_ERR_INVALID;
    }
    if (s == TRIT_OK) s = trit_gpt_make_decode_only(m);
    if (s != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    return m;
}
