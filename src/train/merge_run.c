// `trit merge`: a run whose weights are a base's with a LoRA adapter folded in (W + s B A), as a
// plain f32 model any verb reads. Everything is read and merged before the output is written;
// a failed write removes what it made.
#include "trit/io.h"
#include "trit/train.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// The base part of m (its first tensors, by name) as a model of its own.
static trit_gpt *plain_copy(const trit_gpt *m) {
    trit_gpt_config c = *trit_gpt_get_config(m);
    c.adapter = (trit_adapter_config){.kind = TRIT_ADAPTER_NONE};
    trit_gpt *p = trit_gpt_new(&c, 0);
    for (int i = 0; p && i < trit_gpt_num_tensors(p); i++) {
        trit_tensor *dst = trit_gpt_tensor(p, i);
        const trit_tensor *src = trit_gpt_tensor(m, i);
        if (strcmp(dst->name, src->name) != 0 || trit_tensor_copy(dst, src) != TRIT_OK) {
            trit_error(TRIT_ERR_STATE, "merge: parameter %d is '%s' in the merged model but '%s' in the base", i,
                       dst->name, src->name);
            trit_gpt_free(p);
            return NULL;
        }
    }
    return p;
}

static trit_status write_run(const trit_gpt *p, const char *base, const char *out) {
    char model[TRIT_PATH_MAX + 32], tok_src[TRIT_PATH_MAX + 32], tok_dst[TRIT_PATH_MAX + 32];
    trit_status s = trit_path_join(model, sizeof model, out, TRIT_CKPT_MODEL);
    if (s == TRIT_OK) s = trit_path_join(tok_src, sizeof tok_src, base, TRIT_CKPT_TOKENIZER);
    if (s == TRIT_OK) s = trit_path_join(tok_dst, sizeof tok_dst, out, TRIT_CKPT_TOKENIZER);
    if (s != TRIT_OK) return s;
    struct stat st;
    if (stat(model, &st) == 0)
        return trit_error(TRIT_ERR_INVALID, "'%s' holds a model already: choose another --out", out);
    const bool has_tok = stat(tok_src, &st) == 0;
    bool made = false;
    s = trit_make_dir(out, &made);
    if (s == TRIT_OK) s = trit_checkpoint_save_model(p, model, 0);
    if (s == TRIT_OK && has_tok) s = trit_file_copy(tok_src, tok_dst);
    if (s != TRIT_OK) {
        unlink(model);
        if (made) rmdir(out);
    }
    return s;
}

trit_status trit_merge_adapter_run(const char *base, const char *adapter_dir, const char *out) {
    if (!base || !adapter_dir || !out) return trit_error(TRIT_ERR_INVALID, "trit_merge_adapter_run: NULL argument");
    trit_gpt *m = trit_checkpoint_load_adapted(base, adapter_dir, false);
    if (!m) return TRIT_ERR_FORMAT;
    trit_status s = trit_gpt_merge_adapters(m);
    trit_gpt *p = s == TRIT_OK ? plain_copy(m) : NULL;
    trit_gpt_free(m);
    if (s == TRIT_OK && !p) s = TRIT_ERR_NOMEM;
    if (s == TRIT_OK) s = write_run(p, base, out);
    trit_gpt_free(p);
    return s;
}
