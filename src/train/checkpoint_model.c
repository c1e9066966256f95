// Model checkpoints: the weights in safetensors under their GPT-2 names, with the model config
// as JSON in the metadata so a file alone is enough to rebuild the model. Loading checks each
// tensor's dtype and shape against the model the config describes.
#include "trit/interop.h"
#include "trit/io.h"
#include "trit/train.h"
#include "train/train_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

trit_status trit_path_join(char *buf, size_t n, const char *dir, const char *name) {
    int k = snprintf(buf, n, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= n)
        return trit_error(TRIT_ERR_RANGE, "path '%s/%s' is longer than %zu bytes", dir, name, n - 1);
    return TRIT_OK;
}

static const char *const norm_names[] = {"layer", "rms"};
static const char *const mlp_names[] = {"gelu", "swiglu"};
static const char *const pos_names[] = {"learned", "rope"};

char *trit_checkpoint_config_to_json(const trit_gpt_config *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    bool ok = cJSON_AddNumberToObject(o, "vocab_size", (double)c->vocab_size) &&
              cJSON_AddNumberToObject(o, "seq_len", (double)c->seq_len) &&
              cJSON_AddNumberToObject(o, "n_layer", (double)c->n_layer) &&
              cJSON_AddNumberToObject(o, "n_head", (double)c->n_head) &&
              cJSON_AddNumberToObject(o, "n_embd", (double)c->n_embd) &&
              cJSON_AddNumberToObject(o, "mlp_hidden", (double)c->mlp_hidden) &&
              cJSON_AddNumberToObject(o, "dropout", c->dropout) &&
              cJSON_AddBoolToObject(o, "bias", c->bias) &&
              cJSON_AddStringToObject(o, "norm", norm_names[c->norm == TRIT_NORM_RMS]) &&
              cJSON_AddStringToObject(o, "mlp", mlp_names[c->mlp == TRIT_MLP_SWIGLU]) &&
              cJSON_AddStringToObject(o, "pos", pos_names[c->pos == TRIT_POS_ROPE]) &&
              cJSON_AddNumberToObject(o, "rope_theta", c->rope_theta) &&
              cJSON_AddNumberToObject(o, "norm_eps", c->norm_eps) &&
              (!c->subln || cJSON_AddTrueToObject(o, "subln"));
    char lora[TRIT_ADAPTER_TARGETS_MAX + 128];  // a LoRA model: its spec, which reads back the same
    if (ok && c->adapter.kind == TRIT_ADAPTER_LORA)
        ok = trit_adapter_format_lora(&c->adapter, lora, sizeof lora) == TRIT_OK && cJSON_AddStringToObject(o, "lora", lora);
    if (ok && c->adapter.kind == TRIT_ADAPTER_BOTTLENECK) ok = cJSON_AddNumberToObject(o, "bottleneck", (double)c->adapter.r);
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static trit_status get_int(const cJSON *o, const char *key, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !trit_f64_to_i64_exact(v->valuedouble, 0, INT64_MAX, out))
        return trit_error(TRIT_ERR_FORMAT, "model config: '%s' is missing or not a non-negative integer", key);
    return TRIT_OK;
}

static trit_status get_name(const cJSON *o, const char *key, const char *const names[2], int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    for (int i = 0; i < 2 && cJSON_IsString(v); i++)
        if (strcmp(v->valuestring, names[i]) == 0) return *out = i, TRIT_OK;
    return trit_error(TRIT_ERR_FORMAT, "model config: '%s' must be %s or %s", key, names[0], names[1]);
}

trit_status trit_checkpoint_config_from_json(trit_gpt_config *c, const char *json) {
    cJSON *o = json ? cJSON_Parse(json) : NULL;
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return trit_error(TRIT_ERR_FORMAT, "model config is not a JSON object");
    }
    trit_gpt_config g = trit_gpt_config_default();
    int norm = 0, mlp = 0, pos = 0;
    trit_status s = TRIT_OK;
    if (s == TRIT_OK) s = get_int(o, "vocab_size", &g.vocab_size);
    if (s == TRIT_OK) s = get_int(o, "seq_len", &g.seq_len);
    if (s == TRIT_OK) s = get_int(o, "n_layer", &g.n_layer);
    if (s == TRIT_OK) s = get_int(o, "n_head", &g.n_head);
    if (s == TRIT_OK) s = get_int(o, "n_embd", &g.n_embd);
    if (s == TRIT_OK) s = get_int(o, "mlp_hidden", &g.mlp_hidden);
    if (s == TRIT_OK) s = get_name(o, "norm", norm_names, &norm);
    if (s == TRIT_OK) s = get_name(o, "mlp", mlp_names, &mlp);
    if (s == TRIT_OK) s = get_name(o, "pos", pos_names, &pos);
    const cJSON *bias = cJSON_GetObjectItemCaseSensitive(o, "bias");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(o, "dropout");
    const cJSON *theta = cJSON_GetObjectItemCaseSensitive(o, "rope_theta");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(o, "norm_eps");
    const cJSON *subln = cJSON_GetObjectItemCaseSensitive(o, "subln");  // absent in models without it
    if (s == TRIT_OK && subln && !cJSON_IsBool(subln))
        s = trit_error(TRIT_ERR_FORMAT, "model config: 'subln' must be true or false");
    if (s == TRIT_OK && (!cJSON_IsBool(bias) || !cJSON_IsNumber(drop) || !cJSON_IsNumber(theta) ||
                         !cJSON_IsNumber(eps)))
        s = trit_error(TRIT_ERR_FORMAT, "model config: bias, dropout, rope_theta or norm_eps missing");
    const cJSON *lora = cJSON_GetObjectItemCaseSensitive(o, "lora");  // absent in models without an adapter
    if (s == TRIT_OK && lora && (!cJSON_IsString(lora) || trit_adapter_parse_lora(lora->valuestring, &g.adapter) != TRIT_OK))
        s = trit_error(TRIT_ERR_FORMAT, "model config: 'lora' is not a LoRA spec (r=8,alpha=16,...)");
    const cJSON *bn = cJSON_GetObjectItemCaseSensitive(o, "bottleneck");  // absent in models without one
    int64_t width = 0;
    if (s == TRIT_OK && bn && (lora || !cJSON_IsNumber(bn) || !trit_f64_to_i64_exact(bn->valuedouble, 1, INT64_MAX, &width)))
        s = trit_error(TRIT_ERR_FORMAT, "model config: 'bottleneck' must be a width >= 1, without 'lora'");
    if (s == TRIT_OK && bn) g.adapter = trit_adapter_bottleneck(width);
    if (s == TRIT_OK) {
        g.bias = cJSON_IsTrue(bias);
        g.dropout = drop->valuedouble;
        g.rope_theta = theta->valuedouble;
        g.norm_eps = eps->valuedouble;
        g.subln = cJSON_IsTrue(subln);
        g.norm = norm ? TRIT_NORM_RMS : TRIT_NORM_LAYER;
        g.mlp = mlp ? TRIT_MLP_SWIGLU : TRIT_MLP_GELU;
        g.pos = pos ? TRIT_POS_ROPE : TRIT_POS_LEARNED;
        s = trit_gpt_config_check(&g);
    }
    cJSON_Delete(o);
    if (s == TRIT_OK) *c = g;
    return s;
}

trit_status trit_checkpoint_save_model(const trit_gpt *m, const char *path, int64_t step) {
    if (trit_gpt_decode_only(m))
        return trit_error(TRIT_ERR_STATE, "checkpoint: a decode-only model keeps its weights only as its kernels read "
                          "them; save the model it was loaded from instead");
    int n = trit_gpt_num_tensors(m);
    trit_safetensors_entry *e = calloc((size_t)n, sizeof *e);
    char *cfg = trit_checkpoint_config_to_json(trit_gpt_get_config(m));
    if (!e || !cfg) {
        free(e);
        free(cfg);
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate the checkpoint header");
    }
    bool quantized = false;
    for (int i = 0; i < n; i++) {
        const trit_tensor *q = trit_gpt_quantized(m, i);
        e[i].tensor = q ? q : trit_gpt_tensor(m, i);
        e[i].name = trit_gpt_tensor(m, i)->name;
        quantized |= q != NULL;
    }
    char step_s[32];
    snprintf(step_s, sizeof step_s, "%lld", (long long)step);
    trit_safetensors_kv meta[] = {{"format", "trit-gpt"}, {"config", cfg}, {"step", step_s}};
    trit_status s = quantized ? trit_safetensors_write_quantized(path, e, n, meta, 3)
                              : trit_safetensors_write(path, e, n, meta, 3);
    free(e);
    free(cfg);
    return s;
}

// A run directory means its model.safetensors.
static trit_status model_path(const char *path, char *buf, size_t n) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return trit_path_join(buf, n, path, TRIT_CKPT_MODEL);
    int k = snprintf(buf, n, "%s", path);
    return k >= 0 && (size_t)k < n ? TRIT_OK : trit_error(TRIT_ERR_RANGE, "path too long: '%s'", path);
}

// A quantized tensor is decoded into the model's parameter (unless the model was made without
// its values, to decode only) and attached to the model for decoding.
static trit_status load_quantized(const trit_safetensors *f, trit_gpt *m, int i, const char *file) {
    trit_tensor *t = trit_gpt_tensor(m, i), *q = trit_safetensors_read_tensor(f, t->name);
    if (!q) return TRIT_ERR_FORMAT;
    char want[160], got[160];
    trit_status s = trit_tensor_same_shape(q, t)
                        ? (t->data ? trit_tensor_copy(t, q) : TRIT_OK)
                        : trit_error(TRIT_ERR_SHAPE, "'%s': the quantization map gives '%s' the shape %s, its config %s: "
                                     "the file was edited or made for another model", file, t->name,
                                     trit_tensor_shape_str(q, got, sizeof got), trit_tensor_shape_str(t, want, sizeof want));
    if (s != TRIT_OK) {
        trit_tensor_free(q);
        return s;
    }
    return trit_gpt_attach_quantized(m, i, q);
}

// A plain tensor: a float dtype (converted on load) and the config's shape.
// The file's tensor t->name is a float tensor of t's shape (nothing is read).
static trit_status check_plain(const trit_safetensors *f, const trit_tensor *t, const char *file) {
    const trit_safetensors_info *i = trit_safetensors_find(f, t->name);
    if (i->dtype == TRIT_DTYPE_COUNT || !trit_dtype_is_float(i->dtype) || trit_dtype_is_quantized(i->dtype))
        return trit_error(TRIT_ERR_DTYPE, "'%s': tensor '%s' is %s, neither a float dtype (F32, BF16, F16) nor listed "
                          "in the quantization map: the file was edited or made by another program", file, t->name,
                          i->dtype_name);
    bool same = i->ndim == t->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = i->shape[d] == t->shape[d];
    if (same) return TRIT_OK;
    char want[160], got[160];
    trit_tensor stored;  // the file's layout, for its shape's text
    memset(&stored, 0, sizeof stored);
    trit_tensor_init_layout(&stored, i->dtype, i->ndim, i->shape);
    trit_tensor_shape_str(&stored, got, sizeof got);
    return trit_error(TRIT_ERR_SHAPE, "'%s': tensor '%s' is %s in the file, its config gives %s: the file was edited or "
                      "made for another model", file, t->name, got, trit_tensor_shape_str(t, want, sizeof want));
}

static trit_status load_plain(const trit_safetensors *f, trit_tensor *t, const char *file) {
    trit_status s = check_plain(f, t, file);
    return s == TRIT_OK ? trit_safetensors_load(f, t->name, t) : s;
}

// The file holds nothing the config does not call for: each tensor is a parameter of the model
// or a side tensor (scales, zero points) of one the quantization map lists, and each map entry
// names a parameter. trit_safetensors_check_quantized has matched the map with the tensors.
static trit_status check_no_strays(const trit_safetensors *f, const trit_gpt *m, const char *file) {
    static const char *const suffixes[] = {".scales", ".qscales", ".scales2", ".zero_points"};
    for (int64_t i = 0; i < trit_safetensors_count(f); i++) {
        const char *name = trit_safetensors_at(f, i)->name;
        bool known = trit_gpt_find(m, name) != NULL;
        const size_t len = strlen(name);
        for (size_t k = 0; !known && k < sizeof suffixes / sizeof suffixes[0]; k++) {
            const size_t sl = strlen(suffixes[k]);
            char stem[TRIT_NAME_MAX];
            if (len <= sl || len - sl >= sizeof stem || strcmp(name + len - sl, suffixes[k]) != 0) continue;
            memcpy(stem, name, len - sl);
            stem[len - sl] = 0;
            known = trit_gpt_find(m, stem) && trit_safetensors_is_quantized(f, stem);
        }
        if (!known)
            return trit_error(TRIT_ERR_FORMAT, "'%s' holds a tensor '%s' that its config does not call for (nor is it "
                              "the scales or zero points of a quantized one): the file was edited or made for another "
                              "model", file, name);
    }
    cJSON *map = cJSON_Parse(trit_safetensors_meta(f, "quantization"));  // an object: checked
    trit_status s = TRIT_OK;
    for (const cJSON *e = map ? map->child : NULL; e && s == TRIT_OK; e = e->next)
        if (!trit_gpt_find(m, e->string))
            s = trit_error(TRIT_ERR_FORMAT, "'%s': the quantization map describes '%s', which its config does not call "
                           "for: the file was edited or made for another model", file, e->string);
    cJSON_Delete(map);
    return s;
}

typedef struct plain_read {
    const trit_safetensors *f;
    const char *file;
} plain_read;

static trit_status read_plain(void *ctx, trit_tensor *x) {
    const plain_read *r = ctx;
    return load_plain(r->f, x, r->file);
}

// A float matrix of the file made into codes as it is read (paged base loading): one
// matrix-sized f32 buffer at a time (trit_gpt_quantize_read).
static trit_status load_quantizing(const trit_safetensors *f, trit_gpt *m, int i, const trit_quant_spec *spec,
                                   const char *file) {
    plain_read r = {f, file};
    return trit_gpt_quantize_read(m, i, spec, read_plain, &r, file);
}

// Whether a float tensor of the file is made codes as it is read (with spec: a block matrix).
static bool quantized_on_read(const trit_safetensors *f, const char *name, const trit_quant_spec *spec) {
    const trit_safetensors_info *i = trit_safetensors_find(f, name);
    return spec && i && i->ndim == 2 && trit_quantize_takes_block_matrix(name);
}

// A parameter made without values is read as codes (quantized in the file, or with spec), or
// else (a layout: its values are read later, trit_checkpoint_read_values) only checked.
static trit_status load_tensors(const trit_safetensors *f, trit_gpt *m, const char *file, const trit_quant_spec *spec) {
    trit_status s = trit_safetensors_check_quantized(f);
    if (s != TRIT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", trit_last_error());
        return trit_error(s, "'%s': %s", file, why);
    }
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        if (!trit_safetensors_find(f, t->name))
            return trit_error(TRIT_ERR_FORMAT,
                              "'%s' has no tensor '%s' that its config needs: the file is incomplete "
                              "or was made for another model", file, t->name);
        s = trit_safetensors_is_quantized(f, t->name)   ? load_quantized(f, m, i, file)
            : t->data                                    ? load_plain(f, t, file)
            : quantized_on_read(f, t->name, spec)        ? load_quantizing(f, m, i, spec, file)
                                                         : check_plain(f, t, file);
        if (s != TRIT_OK) return s;
    }
    return check_no_strays(f, m, file);
}

// No storage trit writes takes under 1 bit an element, so a file whose tensors hold fewer bytes
// than an eighth of the config's matrix elements cannot be that model: refused before the
// model is allocated (a config in a few hundred header bytes may describe terabytes).
static trit_status check_file_fits(const trit_safetensors *f, const trit_gpt_config *c, const char *file) {
    const double C = (double)c->n_embd, hidden = (double)trit_gpt_mlp_hidden(c);
    double elems = (double)c->vocab_size * C + (c->pos == TRIT_POS_LEARNED ? (double)c->seq_len * C : 0.0);
    elems += (double)c->n_layer * (4.0 * C * C + (c->mlp == TRIT_MLP_SWIGLU ? 3.0 : 2.0) * C * hidden);
    double bytes = 0;
    for (int64_t i = 0; i < trit_safetensors_count(f); i++)
        bytes += (double)(trit_safetensors_at(f, i)->end - trit_safetensors_at(f, i)->begin);
    if (bytes >= elems / 8) return TRIT_OK;
    return trit_error(TRIT_ERR_FORMAT, "'%s': its config describes a model of at least %.0f weight elements, but the "
                      "file holds only %.0f bytes of tensors: the file is truncated or its config is damaged",
                      file, elems, bytes);
}

// What a model made to load file f is made without (no f32 values): its matrices quantized in
// the file when codes (decode-only or codes-only loading), and with spec (paged QLoRA base
// loading) the block matrices trit_gpt_quantize's TRIT_QUANTIZE_BLOCKS takes, to be quantized as
// they are read.
// layout: every float tensor, its values to be read later into another model.
typedef struct made_without {
    const trit_safetensors *f;
    bool codes, layout;
    const trit_quant_spec *spec;
} made_without;

static bool without_values(const char *name, void *ctx) {
    const made_without *w = ctx;
    if (trit_safetensors_is_quantized(w->f, name)) return w->codes;
    return w->layout || quantized_on_read(w->f, name, w->spec);
}

// A directory with a config.json is a transformers GPT-2 (a run never has one): imported.
static trit_gpt *load_hf(const char *dir, int64_t *step, bool decoder, const trit_quant_spec *spec, bool layout,
                         bool *made) {
    trit_gpt *m = layout ? trit_import_hf_gpt2_layout(dir, spec) : trit_import_hf_gpt2_quantizing(dir, spec);
    if (m && made) *made = spec != NULL;
    if (m && decoder && trit_gpt_make_decode_only(m) != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    if (m && step) *step = 0;
    return m;
}

// decoder: decode only; codes: quantized tensors as codes only (no f32 values), not decode-only;
// spec: the block matrices quantized with it as they are read (codes only) when the file holds
// no quantized tensor, which *made (may be NULL) then tells.
static trit_gpt *load_model(const char *path, int64_t *step, bool decoder, bool codes, const trit_quant_spec *spec,
                            bool layout, bool *made) {
    if (made) *made = false;
    char file[TRIT_PATH_MAX + 32];
    struct stat st;
    if (path && trit_path_join(file, sizeof file, path, "config.json") == TRIT_OK && stat(file, &st) == 0)
        return load_hf(path, step, decoder, spec, layout, made);
    if (!path || model_path(path, file, sizeof file) != TRIT_OK) {
        if (!path) trit_error(TRIT_ERR_INVALID, "trit_checkpoint_load_model: NULL path");
        return NULL;
    }
    trit_safetensors *f = trit_safetensors_open(file);
    if (!f) return NULL;
    const char *format = trit_safetensors_meta(f, "format");
    const char *cfg_json = trit_safetensors_meta(f, "config");
    trit_gpt_config cfg;
    trit_gpt *m = NULL;
    if (trit_safetensors_meta(f, "quantization")) spec = NULL;  // a quantized run's codes are its base
    if (!format || strcmp(format, "trit-gpt") != 0 || !cfg_json) {
        trit_error(TRIT_ERR_FORMAT,
                   "'%s' is a safetensors file without a trit GPT config in its metadata "
                   "(format=trit-gpt, config=...): it was not written by `trit train`", file);
    } else if (trit_checkpoint_config_from_json(&cfg, cfg_json) != TRIT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", trit_last_error());
        trit_error(TRIT_ERR_FORMAT, "'%s': %s", file, why);
    } else if (check_file_fits(f, &cfg, file) == TRIT_OK &&
               (m = trit_gpt_new_zeroed_without(&cfg, 0, decoder || codes || spec || layout ? without_values : NULL,
                                                &(made_without){f, decoder || codes, layout, spec})) != NULL &&
               (load_tensors(f, m, file, spec) != TRIT_OK || (decoder && trit_gpt_make_decode_only(m) != TRIT_OK))) {
        trit_gpt_free(m);
        m = NULL;
    }
    if (m && made) *made = spec != NULL;
    if (m && step) {
        const char *s = trit_safetensors_meta(f, "step");
        *step = s ? strtoll(s, NULL, 10) : 0;
    }
    trit_safetensors_close(f);
    return m;
}

trit_gpt *trit_checkpoint_load_model(const char *path, int64_t *step) {
    return load_model(path, step, false, false, NULL, false, NULL);
}

trit_gpt *trit_checkpoint_load_decoder(const char *path, int64_t *step) {
    return load_model(path, step, true, false, NULL, false, NULL);
}

trit_gpt *trit_checkpoint_load_codes(const char *path, int64_t *step) {
    return load_model(path, step, false, true, NULL, false, NULL);
}

trit_gpt *trit_checkpoint_load_quantizing(const char *path, int64_t *step, const trit_quant_spec *spec, bool *made) {
    if (!spec) {
        trit_error(TRIT_ERR_INVALID, "trit_checkpoint_load_quantizing: NULL spec");
        return NULL;
    }
    return load_model(path, step, false, true, spec, false, made);
}

trit_gpt *trit_checkpoint_load_layout(const char *path, int64_t *step, const trit_quant_spec *spec, bool *made) {
    return load_model(path, step, false, true, spec, true, made);
}

trit_status trit_checkpoint_read_values(const char *path, trit_gpt *dst, const trit_gpt *layout) {
    char file[TRIT_PATH_MAX + 32];
    struct stat st;
    if (!path || !dst || !layout) return trit_error(TRIT_ERR_INVALID, "trit_checkpoint_read_values: NULL argument");
    if (trit_path_join(file, sizeof file, path, "config.json") == TRIT_OK && stat(file, &st) == 0)
        return trit_import_hf_gpt2_read_values(path, dst, layout);
    trit_status s = model_path(path, file, sizeof file);
    trit_safetensors *f = s == TRIT_OK ? trit_safetensors_open(file) : NULL;
    if (!f) return s == TRIT_OK ? TRIT_ERR_IO : s;
    for (int i = 0; s == TRIT_OK && i < trit_gpt_num_tensors(layout) && i < trit_gpt_num_tensors(dst); i++) {
        trit_tensor *t = trit_gpt_tensor(dst, i);
        const trit_tensor *l = trit_gpt_tensor(layout, i);
        if (!t->data || l->data || trit_gpt_quantized(layout, i)) continue;  // no room, or held by the layout
        if (strcmp(t->name, l->name) != 0)
            s = trit_error(TRIT_ERR_STATE, "reading '%s': tensor %d is '%s' here but '%s' in its layout", file, i, t->name,
                           l->name);
        else if (!trit_safetensors_find(f, t->name))
            s = trit_error(TRIT_ERR_FORMAT, "'%s' has no tensor '%s' any more: the file changed since it was opened", file,
                           t->name);
        else
            s = load_plain(f, t, file);
    }
    trit_safetensors_close(f);
    return s;
}
