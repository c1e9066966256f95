// Hugging Face GPT-2 <-> trit GPT. trit's GPT computes GPT-2 exactly as transformers does
// (LayerNorm with the config's epsilon, tanh GELU, learned positions, biases, scores scaled by
// 1/sqrt(head size), the head tied to the token embedding), and its parameter names are GPT-2's
// without the "transformer." prefix, so the mapping is the names plus the Conv1D transposes.
#define _POSIX_C_SOURCE 200809L
#include "trit/interop.h"
#include "trit/train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static trit_gpt_config config_from_hf(const trit_hf_gpt2_config *h) {
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = h->vocab_size;
    c.seq_len = h->n_positions;
    c.n_layer = h->n_layer;
    c.n_head = h->n_head;
    c.n_embd = h->n_embd;
    c.mlp_hidden = h->n_inner == 4 * h->n_embd ? 0 : h->n_inner;
    c.norm_eps = h->layer_norm_epsilon;
    c.dropout = 0;
    c.bias = true;
    c.norm = TRIT_NORM_LAYER;
    c.mlp = TRIT_MLP_GELU;
    c.pos = TRIT_POS_LEARNED;
    return c;
}

// The embedding's shape decides whether config.json and the weights agree before the whole
// model is allocated (a config of a few bytes may describe gigabytes).
static trit_status check_embedding(const trit_hf_gpt2 *h, const char *dir) {
    const trit_hf_gpt2_config *c = trit_hf_gpt2_config_of(h);
    const trit_safetensors_info *wte = trit_hf_gpt2_info(h, "wte.weight");
    const trit_safetensors_info *wpe = trit_hf_gpt2_info(h, "wpe.weight");
    if (!wte || !wpe)
        return trit_error(TRIT_ERR_FORMAT, "'%s' has no %s: not a GPT-2 checkpoint, or an incomplete one", dir,
                          wte ? "wpe.weight" : "wte.weight");
    if (wte->ndim != 2 || wte->shape[0] != c->vocab_size || wte->shape[1] != c->n_embd || wpe->ndim != 2 ||
        wpe->shape[0] != c->n_positions || wpe->shape[1] != c->n_embd)
        return trit_error(TRIT_ERR_SHAPE, "'%s': config.json says vocab_size %lld, n_positions %lld, n_embd %lld, but "
                          "wte.weight is (%lld, %lld) and wpe.weight (%lld, %lld): config.json and the weights disagree",
                          dir, (long long)c->vocab_size, (long long)c->n_positions, (long long)c->n_embd,
                          (long long)wte->shape[0], (long long)(wte->ndim > 1 ? wte->shape[1] : 0),
                          (long long)wpe->shape[0], (long long)(wpe->ndim > 1 ? wpe->shape[1] : 0));
    return TRIT_OK;
}

// The tensors hold at least 2 bytes (F16, BF16) for each parameter config.json implies: a
// config that describes more than the files hold is refused before anything is allocated.
static trit_status check_sizes(const trit_hf_gpt2 *h, const trit_gpt_config *c, const char *dir) {
    const double C = (double)c->n_embd, F = (double)trit_gpt_mlp_hidden(c);
    const double elems = ((double)c->vocab_size + (double)c->seq_len) * C +
                         (double)c->n_layer * (4 * C * C + 2 * C * F + 9 * C + F) + 2 * C;
    double bytes = 0;
    for (int64_t i = 0; i < trit_hf_gpt2_count(h); i++) {
        const trit_safetensors_info *t = trit_hf_gpt2_info(h, trit_hf_gpt2_name(h, i));
        bytes += (double)(t->end - t->begin);
    }
    if (bytes >= 2 * elems) return TRIT_OK;
    return trit_error(TRIT_ERR_FORMAT, "'%s': config.json describes a model of %.0f parameters (n_layer %lld, n_embd "
                      "%lld), the weights hold %.0f bytes, fewer than 2 per parameter: config.json and the weights "
                      "disagree, or tensors are missing", dir, elems, (long long)c->n_layer, (long long)c->n_embd, bytes);
}

// Every stored tensor is a parameter of m or the head.
static trit_status check_strays(const trit_hf_gpt2 *h, const trit_gpt *m, const char *dir) {
    for (int64_t i = 0; i < trit_hf_gpt2_count(h); i++) {
        const char *name = trit_hf_gpt2_name(h, i);
        if (!trit_gpt_find(m, name) && strcmp(name, "lm_head.weight") != 0)
            return trit_error(TRIT_ERR_FORMAT, "'%s' holds '%s', which a GPT-2 of its config.json (n_layer %lld) does "
                              "not have: config.json and the weights disagree, or the model is not a GPT-2", dir, name,
                              (long long)trit_gpt_get_config(m)->n_layer);
    }
    return TRIT_OK;
}

// trit's head is the token embedding: an untied lm_head.weight is taken only when it equals it.
static trit_status check_head(const trit_hf_gpt2 *h, const trit_gpt *m, const char *dir) {
    const trit_hf_gpt2_config *c = trit_hf_gpt2_config_of(h);
    const bool has = trit_hf_gpt2_has(h, "lm_head.weight");
    if (c->tie_word_embeddings && !has) return TRIT_OK;
    if (!has)
        return trit_error(TRIT_ERR_FORMAT, "'%s': config.json sets tie_word_embeddings false but there is no "
                          "lm_head.weight: the checkpoint is incomplete", dir);
    const trit_tensor *wte = trit_gpt_find(m, "wte.weight");  // (V, C)
    trit_tensor *head = trit_tensor_new(TRIT_F32, 2, wte->shape);  // (V, C)
    if (!head) return TRIT_ERR_NOMEM;
    trit_status s = trit_hf_gpt2_load(h, "lm_head.weight", head);
    double diff = 0;
    const float *a = trit_tensor_ptr(head), *b = trit_tensor_ptr(wte);
    for (int64_t i = 0; s == TRIT_OK && i < trit_tensor_numel(head); i++) diff = fmax(diff, fabs((double)a[i] - b[i]));
    trit_tensor_free(head);
    if (s != TRIT_OK || diff == 0 || c->tie_word_embeddings) return s;  // tied: transformers ignores the copy too
    return trit_error(TRIT_ERR_UNSUPPORTED, "'%s' has an untied lm_head.weight that differs from wte.weight (max "
                      "|difference| %.3g); trit's GPT computes the logits with the token embedding, so it cannot "
                      "hold this model", dir, diff);
}

// Paged QLoRA base loading: the block matrices a quantize spec takes get no f32 values.
static bool quantized_on_read(const char *name, void *spec) {
    (void)spec;
    return trit_hf_gpt2_is_conv1d(name) && trit_quantize_takes_block_matrix(name);
}

typedef struct hf_read {
    const trit_hf_gpt2 *h;
} hf_read;

static trit_status read_hf(void *ctx, trit_tensor *x) { return trit_hf_gpt2_load(((hf_read *)ctx)->h, x->name, x); }

static bool every_tensor(const char *name, void *ctx) {
    (void)name, (void)ctx;
    return true;
}

// A tensor without values is read as codes (spec's matrices) or, in a layout, only checked.
static trit_status load_weights(const trit_hf_gpt2 *h, trit_gpt *m, const trit_quant_spec *spec, const char *dir) {
    hf_read r = {h};
    trit_status s = TRIT_OK;
    for (int i = 0; s == TRIT_OK && i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        s = t->data                                  ? trit_hf_gpt2_load(h, t->name, t)
            : spec && quantized_on_read(t->name, NULL) ? trit_gpt_quantize_read(m, i, spec, read_hf, &r, dir)
                                                     : trit_hf_gpt2_check(h, t->name, t);
    }
    return s;
}

static trit_gpt *import(const char *dir, const trit_quant_spec *spec, bool layout) {
    trit_hf_gpt2 *h = trit_hf_gpt2_open(dir);
    if (!h) return NULL;
    trit_gpt_config cfg = config_from_hf(trit_hf_gpt2_config_of(h));
    trit_gpt *m = NULL;
    trit_status s = trit_gpt_config_check(&cfg);
    if (s == TRIT_OK) s = check_embedding(h, dir);
    if (s == TRIT_OK) s = check_sizes(h, &cfg, dir);
    layout = layout && !trit_hf_gpt2_has(h, "lm_head.weight");  // compared with the embedding's values
    bool (*without)(const char *, void *) = layout ? every_tensor : spec ? quantized_on_read : NULL;
    if (s == TRIT_OK && !(m = trit_gpt_new_zeroed_without(&cfg, 0, without, NULL))) s = TRIT_ERR_NOMEM;
    if (s == TRIT_OK) s = check_strays(h, m, dir);
    if (s == TRIT_OK) s = load_weights(h, m, spec, dir);
    if (s == TRIT_OK) s = check_head(h, m, dir);
    trit_hf_gpt2_close(h);
    if (s != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    return m;
}

trit_gpt *trit_import_hf_gpt2_quantizing(const char *dir, const trit_quant_spec *spec) { return import(dir, spec, false); }

trit_gpt *trit_import_hf_gpt2_layout(const char *dir, const trit_quant_spec *spec) { return import(dir, spec, true); }

trit_gpt *trit_import_hf_gpt2(const char *dir) { return import(dir, NULL, false); }

trit_status trit_import_hf_gpt2_read_values(const char *dir, trit_gpt *dst, const trit_gpt *layout) {
    if (!dst || !layout) return trit_error(TRIT_ERR_INVALID, "trit_import_hf_gpt2_read_values: NULL argument");
    trit_hf_gpt2 *h = trit_hf_gpt2_open(dir);
    if (!h) return TRIT_ERR_FORMAT;
    trit_status s = TRIT_OK;
    for (int i = 0; s == TRIT_OK && i < trit_gpt_num_tensors(layout) && i < trit_gpt_num_tensors(dst); i++) {
        trit_tensor *t = trit_gpt_tensor(dst, i);
        const trit_tensor *l = trit_gpt_tensor(layout, i);
        if (!t->data || l->data || trit_gpt_quantized(layout, i)) continue;  // no room, or held by the layout
        s = strcmp(t->name, l->name) == 0 ? trit_hf_gpt2_load(h, t->name, t)
                                          : trit_error(TRIT_ERR_STATE, "reading '%s': tensor %d is '%s' here but '%s' in "
                                                       "its layout", dir, i, t->name, l->name);
    }
    trit_hf_gpt2_close(h);
    return s;
}

// ---- export ---------------------------------------------------------------------------------

static trit_status check_gpt2_shaped(const trit_gpt_config *c, const char *format) {
    if (c->norm != TRIT_NORM_LAYER || c->mlp != TRIT_MLP_GELU || c->pos != TRIT_POS_LEARNED || !c->bias || c->subln)
        return trit_error(TRIT_ERR_UNSUPPORTED, "%s export: GPT-2 has LayerNorm, GELU, learned positions, biases and no "
                          "SubLN; this model has --norm %s --mlp %s --pos %s --bias %d%s", format,
                          c->norm == TRIT_NORM_LAYER ? "layer" : "rms", c->mlp == TRIT_MLP_GELU ? "gelu" : "swiglu",
                          c->pos == TRIT_POS_LEARNED ? "learned" : "rope", c->bias ? 1 : 0, c->subln ? " --subln" : "");
    return TRIT_OK;
}

// eot: the end-of-text id, -1 for none, -2 when no tokenizer says (then GPT-2's own vocabulary
// size implies its last token).
static char *hf_config_json(const trit_gpt_config *c, int32_t eot) {
    cJSON *o = cJSON_CreateObject(), *arch = cJSON_CreateStringArray((const char *const[]){"GPT2LMHeadModel"}, 1);
    if (!o || !arch) {
        cJSON_Delete(o), cJSON_Delete(arch);
        return NULL;
    }
    cJSON_AddItemToObject(o, "architectures", arch);
    cJSON_AddStringToObject(o, "model_type", "gpt2");
    cJSON_AddStringToObject(o, "activation_function", "gelu_new");
    cJSON_AddNumberToObject(o, "n_layer", (double)c->n_layer);
    cJSON_AddNumberToObject(o, "n_head", (double)c->n_head);
    cJSON_AddNumberToObject(o, "n_embd", (double)c->n_embd);
    cJSON_AddNumberToObject(o, "n_positions", (double)c->seq_len);
    cJSON_AddNumberToObject(o, "n_ctx", (double)c->seq_len);
    cJSON_AddNumberToObject(o, "vocab_size", (double)c->vocab_size);
    if (c->mlp_hidden && c->mlp_hidden != 4 * c->n_embd)
        cJSON_AddNumberToObject(o, "n_inner", (double)c->mlp_hidden);
    else
        cJSON_AddNullToObject(o, "n_inner");
    cJSON_AddNumberToObject(o, "layer_norm_epsilon", c->norm_eps);
    cJSON_AddNumberToObject(o, "resid_pdrop", c->dropout);
    cJSON_AddNumberToObject(o, "embd_pdrop", c->dropout);
    cJSON_AddNumberToObject(o, "attn_pdrop", c->dropout);
    cJSON_AddTrueToObject(o, "tie_word_embeddings");
    cJSON_AddTrueToObject(o, "scale_attn_weights");
    if (eot == -2 && c->vocab_size == 50257) eot = 50256;
    if (eot >= 0) {
        cJSON_AddNumberToObject(o, "bos_token_id", eot);
        cJSON_AddNumberToObject(o, "eos_token_id", eot);
    } else {
        cJSON_AddNullToObject(o, "bos_token_id");
        cJSON_AddNullToObject(o, "eos_token_id");
    }
    cJSON_AddStringToObject(o, "torch_dtype", "float32");
    char *s = cJSON_Print(o);
    cJSON_Delete(o);
    return s;
}

// The tensors under transformers' names, Conv1D weights as transposed views (copied as written).
static trit_status write_weights(const trit_gpt *m, const char *path) {
    const int n = trit_gpt_num_tensors(m);
    trit_safetensors_entry *e = calloc((size_t)n, sizeof *e);
    trit_tensor *views = calloc((size_t)n, sizeof *views);  // (n) each (in, out) over an (out, in) weight
    char (*names)[TRIT_NAME_MAX + 16] = calloc((size_t)n, sizeof *names);
    trit_status s = e && views && names ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "hf export: out of memory");
    for (int i = 0; s == TRIT_OK && i < n; i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);  // any parameter's shape
        snprintf(names[i], sizeof names[i], "transformer.%s", t->name);
        e[i].name = names[i];
        if (trit_hf_gpt2_is_conv1d(t->name)) {
            s = trit_tensor_view_transpose(t, 0, 1, &views[i]);
            e[i].tensor = &views[i];
        } else {
            e[i].tensor = t;
        }
    }
    const trit_safetensors_kv meta[] = {{"format", "pt"}};  // transformers refuses files without it
    if (s == TRIT_OK) s = trit_safetensors_write(path, e, n, meta, 1);
    free(e), free(views), free(names);
    return s;
}

static trit_status export_into(const trit_gpt *m, int32_t eot, const char *dir) {
    if (!m || !dir) return trit_error(TRIT_ERR_INVALID, "hf export: NULL argument");
    const trit_gpt_config *c = trit_gpt_get_config(m);
    trit_status s = check_gpt2_shaped(c, "hf");
    if (s == TRIT_OK && trit_gpt_decode_only(m))
        s = trit_error(TRIT_ERR_STATE, "hf export: a decode-only model no longer has its f32 weights");
    char path[TRIT_PATH_MAX + 96];
    char *json = s == TRIT_OK ? hf_config_json(c, eot) : NULL;
    if (s == TRIT_OK && !json) s = trit_error(TRIT_ERR_NOMEM, "hf export: out of memory");
    if (s == TRIT_OK) s = trit_path_join(path, sizeof path, dir, "model.safetensors");
    if (s == TRIT_OK) s = write_weights(m, path);
    if (s == TRIT_OK) s = trit_path_join(path, sizeof path, dir, "config.json");
    if (s == TRIT_OK) s = trit_file_write_atomic(path, json, strlen(json));
    free(json);
    return s;
}

trit_status trit_export_hf_gpt2_into(const trit_gpt *m, const char *dir) { return export_into(m, -2, dir); }

trit_status trit_export_hf_gpt2_with(const trit_gpt *m, const trit_tokenizer *tok, const char *dir) {
    if (!m || !dir) return trit_error(TRIT_ERR_INVALID, "hf export: NULL argument");
    trit_status s = check_gpt2_shaped(trit_gpt_get_config(m), "hf");  // before anything is made
    if (s == TRIT_OK && tok && trit_tokenizer_get_kind(tok) != TRIT_TOKENIZER_GPT2)
        s = trit_error(TRIT_ERR_UNSUPPORTED, "hf export: the tokenizer is a %s one; Hugging Face's GPT-2 tokenizer "
                       "files hold GPT-2's byte-level BPE only", trit_tokenizer_kind_name(trit_tokenizer_get_kind(tok)));
    if (s == TRIT_OK && tok && trit_tokenizer_vocab_size(tok) != trit_gpt_get_config(m)->vocab_size)
        s = trit_error(TRIT_ERR_FORMAT, "hf export: the tokenizer has %d tokens, the model's vocabulary %lld",
                       (int)trit_tokenizer_vocab_size(tok), (long long)trit_gpt_get_config(m)->vocab_size);
    char stage[TRIT_PATH_MAX + 64];
    if (s == TRIT_OK) s = trit_stage_open(dir, stage, sizeof stage);
    if (s != TRIT_OK) return s;
    s = export_into(m, tok ? trit_tokenizer_special_id(tok, "<|endoftext|>") : -2, stage);
    if (s == TRIT_OK && tok) s = trit_tokenizer_save_gpt2_hf(tok, stage);
    if (s == TRIT_OK) return trit_stage_commit(stage, dir);
    trit_stage_abort(stage);
    return s;
}

trit_status trit_export_hf_gpt2(const trit_gpt *m, const char *dir) { return trit_export_hf_gpt2_with(m, NULL, dir); }
