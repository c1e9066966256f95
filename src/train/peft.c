// LoRA adapters in PEFT's file layout, so the peft library loads trit's adapters onto the same
// base (transformers' GPT2LMHeadModel) and trit loads peft's (a bottleneck adapter is written the
// same way with trit's own peft_type "BOTTLENECK", which peft does not read):
//   adapter_model.safetensors  base_model.model.transformer.h.<i>.<module>.lora_A.weight (r, in)
//                              and .lora_B.weight (out, r), in the adapter's dtype (F32, or
//                              BF16 for --adapter-dtype bf16), metadata {"format": "pt"}
//   adapter_config.json        {"peft_type": "LORA", "r", "lora_alpha", "lora_dropout",
//                              "target_modules": [...], "use_rslora", "fan_in_fan_out": true, ...}
// GPT-2's Conv1D stores W as (in, out) (fan_in_fan_out), but PEFT keeps lora_A and lora_B as
// nn.Linear weights either way, (r, in) and (out, r): exactly trit's A and B.
#include "trit/io.h"
#include "trit/train.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PEFT_PREFIX "base_model.model.transformer."

// ---- writing ----------------------------------------------------------------------------------

// target_modules as a JSON list of a's patterns.
static cJSON *targets_json(const trit_adapter_config *a) {
    cJSON *list = cJSON_CreateArray();
    for (const char *p = a->targets; list && *p;) {
        const size_t n = strcspn(p, ",");
        char pat[TRIT_ADAPTER_TARGETS_MAX];
        snprintf(pat, sizeof pat, "%.*s", (int)n, p);
        if (n > 0) cJSON_AddItemToArray(list, cJSON_CreateString(pat));
        p += n + (p[n] == ',');
    }
    return list;
}

static char *config_json(const trit_adapter_config *a, const char *base_name) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    bool ok = cJSON_AddStringToObject(o, "peft_type", "LORA") && cJSON_AddStringToObject(o, "task_type", "CAUSAL_LM") &&
              cJSON_AddStringToObject(o, "base_model_name_or_path", base_name ? base_name : "") &&
              cJSON_AddNumberToObject(o, "r", (double)a->r) && cJSON_AddNumberToObject(o, "lora_alpha", a->alpha) &&
              cJSON_AddNumberToObject(o, "lora_dropout", a->dropout) && cJSON_AddBoolToObject(o, "use_rslora", a->rslora) &&
              cJSON_AddTrueToObject(o, "fan_in_fan_out") && cJSON_AddStringToObject(o, "bias", "none") &&
              cJSON_AddTrueToObject(o, "inference_mode") && cJSON_AddTrueToObject(o, "init_lora_weights") &&
              cJSON_AddFalseToObject(o, "use_dora") && cJSON_AddNullToObject(o, "modules_to_save") &&
              cJSON_AddNullToObject(o, "layers_to_transform") && cJSON_AddObjectToObject(o, "rank_pattern") &&
              cJSON_AddObjectToObject(o, "alpha_pattern");
    cJSON *t = ok ? targets_json(a) : NULL;
    if (t && !cJSON_AddItemToObject(o, "target_modules", t)) {
        cJSON_Delete(t);
        t = NULL;
    }
    ok = ok && t;
    char *s = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

// Whether parameter name is an adapter's (LoRA's "...lora_A.weight", "...lora_B.weight", a
// bottleneck's "...adapter.down.weight", ...).
static bool is_lora_name(const char *name) {
    return strstr(name, ".lora_A.weight") || strstr(name, ".lora_B.weight") || strstr(name, ".adapter.down.") ||
           strstr(name, ".adapter.up.");
}

// A bottleneck adapter's config: peft has no such type, so this is trit's own ("BOTTLENECK").
static char *bottleneck_json(const trit_adapter_config *a, const char *base_name) {
    cJSON *o = cJSON_CreateObject(), *pos = NULL;
    bool ok = o && cJSON_AddStringToObject(o, "peft_type", "BOTTLENECK") &&
              cJSON_AddStringToObject(o, "base_model_name_or_path", base_name ? base_name : "") &&
              cJSON_AddNumberToObject(o, "adapter_size", (double)a->r) &&
              cJSON_AddStringToObject(o, "non_linearity", "gelu_new") && (pos = cJSON_AddArrayToObject(o, "positions"));
    if (ok) {
        cJSON_AddItemToArray(pos, cJSON_CreateString("attn"));
        cJSON_AddItemToArray(pos, cJSON_CreateString("mlp"));
    }
    char *s = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    return s;
}

trit_status trit_peft_save(const trit_gpt *m, const char *dir, const char *base_name) {
    const trit_gpt_config *c = trit_gpt_get_config(m);
    if (!c || !dir) return trit_error(TRIT_ERR_INVALID, "trit_peft_save: NULL model or directory");
    if (c->adapter.kind == TRIT_ADAPTER_NONE) return trit_error(TRIT_ERR_STATE, "trit_peft_save: the model has no adapter");
    const int n = trit_gpt_num_tensors(m);
    trit_safetensors_entry *e = calloc((size_t)n, sizeof *e);
    char (*names)[TRIT_NAME_MAX + 32] = calloc((size_t)n, sizeof *names);
    char *json = c->adapter.kind == TRIT_ADAPTER_BOTTLENECK ? bottleneck_json(&c->adapter, base_name)
                                                             : config_json(&c->adapter, base_name);
    char path[TRIT_PATH_MAX + 32];
    trit_status s = e && names && json ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "trit_peft_save: out of memory");
    int k = 0;
    for (int i = 0; s == TRIT_OK && i < n; i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        if (!is_lora_name(t->name)) continue;
        snprintf(names[k], sizeof names[k], PEFT_PREFIX "%s", t->name);
        e[k] = (trit_safetensors_entry){names[k], t};
        k++;
    }
    const trit_safetensors_kv meta[] = {{"format", "pt"}};
    if (s == TRIT_OK) s = trit_path_join(path, sizeof path, dir, TRIT_PEFT_WEIGHTS);
    if (s == TRIT_OK) s = trit_safetensors_write(path, e, k, meta, 1);
    if (s == TRIT_OK) s = trit_path_join(path, sizeof path, dir, TRIT_PEFT_CONFIG);
    if (s == TRIT_OK) s = trit_file_write_atomic(path, json, strlen(json));
    free(e);
    free(names);
    free(json);
    return s;
}

// ---- reading ----------------------------------------------------------------------------------

static trit_status cfg_error(const char *file, const char *what) {
    return trit_error(TRIT_ERR_FORMAT, "'%s': %s", file, what);
}

// target_modules (a list of names; PEFT's single-string form is a regular expression, which
// trit does not match) joined with commas.
static trit_status read_targets(const cJSON *t, const char *file, trit_adapter_config *a) {
    if (cJSON_IsString(t))
        return cfg_error(file, "target_modules is a string (PEFT reads it as a regular expression); trit takes a list "
                               "of module names such as [\"c_attn\", \"mlp.c_fc\"]");
    if (!cJSON_IsArray(t) || cJSON_GetArraySize(t) == 0) return cfg_error(file, "target_modules must be a non-empty list");
    a->targets[0] = 0;
    for (const cJSON *x = t->child; x; x = x->next) {
        const size_t have = strlen(a->targets);
        if (!cJSON_IsString(x) || !x->valuestring[0] || strchr(x->valuestring, ','))
            return cfg_error(file, "target_modules must hold module names (strings without commas)");
        if (have + strlen(x->valuestring) + 2 > sizeof a->targets) return cfg_error(file, "target_modules is too long");
        snprintf(a->targets + have, sizeof a->targets - have, "%s%s", have ? "," : "", x->valuestring);
    }
    return TRIT_OK;
}

// A setting trit does not implement must be absent or at its neutral value.
static bool neutral(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return !v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsObject(v) && !v->child) ||
           (cJSON_IsString(v) && strcmp(v->valuestring, "none") == 0);
}

// peft settings that change what an adapter computes or where it applies, which trit's LoRA
// does not implement.
static const char *const UNSUPPORTED[] = {"use_dora", "bias", "lora_bias", "modules_to_save", "layers_to_transform",
                                          "rank_pattern", "alpha_pattern", "exclude_modules", "layer_replication",
                                          "target_parameters", "trainable_token_indices", "use_qalora",
                                          "alora_invocation_tokens"};

static bool all_neutral(const cJSON *o) {
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++)
        if (!neutral(o, UNSUPPORTED[i])) return false;
    return true;
}

static trit_status unsupported(const char *file, const cJSON *o) {
    for (size_t i = 0; i < sizeof UNSUPPORTED / sizeof UNSUPPORTED[0]; i++)
        if (!neutral(o, UNSUPPORTED[i]))
            return trit_error(TRIT_ERR_FORMAT, "'%s': it sets %s, which trit's LoRA does not implement (trit reads plain "
                              "LoRA adapters: no DoRA, biases, extra saved modules or per-layer patterns)", file,
                              UNSUPPORTED[i]);
    return TRIT_OK;
}

static trit_status read_config(const char *file, trit_adapter_config *a) {
    uint8_t *data = NULL;
    size_t len = 0;
    trit_status s = trit_file_read_all(file, &data, &len);
    if (s != TRIT_OK) return s;
    cJSON *o = cJSON_Parse((const char *)data);
    free(data);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "peft_type");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "r"), *alpha = cJSON_GetObjectItemCaseSensitive(o, "lora_alpha");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(o, "lora_dropout");
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(o, "use_rslora");
    *a = (trit_adapter_config){.kind = TRIT_ADAPTER_LORA};
    if (cJSON_IsObject(o) && cJSON_IsString(type) && strcmp(type->valuestring, "BOTTLENECK") == 0) {
        const cJSON *size = cJSON_GetObjectItemCaseSensitive(o, "adapter_size");
        a->kind = TRIT_ADAPTER_BOTTLENECK;
        if (!cJSON_IsNumber(size) || !trit_f64_to_i64_exact(size->valuedouble, 1, 65536, &a->r))
            s = cfg_error(file, "adapter_size must be a whole number in [1, 65536]");
        cJSON_Delete(o);
        return s;
    }
    if (!cJSON_IsObject(o)) s = cfg_error(file, "not a JSON object");
    else if (!cJSON_IsString(type) || strcmp(type->valuestring, "LORA") != 0)
        s = cfg_error(file, "peft_type is not \"LORA\" (or trit's \"BOTTLENECK\"): trit reads those adapters");
    else if (!cJSON_IsNumber(r) || !trit_f64_to_i64_exact(r->valuedouble, 1, 65536, &a->r))
        s = cfg_error(file, "r must be a whole number in [1, 65536]");
    else if (!cJSON_IsNumber(alpha) || !(alpha->valuedouble > 0))
        s = cfg_error(file, "lora_alpha must be a number > 0");
    else if (drop && !cJSON_IsNumber(drop)) s = cfg_error(file, "lora_dropout must be a number");
    else if (rs && !cJSON_IsBool(rs)) s = cfg_error(file, "use_rslora must be true or false");
    else if (!all_neutral(o)) s = unsupported(file, o);
    else s = read_targets(cJSON_GetObjectItemCaseSensitive(o, "target_modules"), file, a);
    if (s == TRIT_OK) {
        a->alpha = alpha->valuedouble;
        a->dropout = drop ? drop->valuedouble : 0.0;
        a->rslora = cJSON_IsTrue(rs);
    }
    cJSON_Delete(o);
    return s;
}

static trit_status shape_error(const char *file, const char *name, const trit_safetensors_info *i, const trit_tensor *t) {
    char want[160], got[160];
    trit_tensor stored;
    memset(&stored, 0, sizeof stored);
    trit_tensor_init_layout(&stored, TRIT_F32, i->ndim, i->shape);
    return trit_error(TRIT_ERR_SHAPE, "'%s': '%s' is %s, the base model needs %s: the adapter was made for another "
                      "base model", file, name, trit_tensor_shape_str(&stored, got, sizeof got),
                      trit_tensor_shape_str(t, want, sizeof want));
}

// The adapter tensors of m from f: each one present with its shape, and nothing else in f.
static trit_status read_weights(trit_gpt *m, const trit_safetensors *f, const char *file) {
    int expected = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        if (!is_lora_name(t->name)) continue;
        expected++;
        char name[TRIT_NAME_MAX + 32];
        snprintf(name, sizeof name, PEFT_PREFIX "%s", t->name);
        const trit_safetensors_info *info = trit_safetensors_find(f, name);
        if (!info)
            return trit_error(TRIT_ERR_FORMAT, "'%s' has no tensor '%s', which its adapter_config.json calls for: the "
                              "file is incomplete or was written for another model", file, name);
        bool same = info->ndim == t->ndim;
        for (int d = 0; same && d < t->ndim; d++) same = info->shape[d] == t->shape[d];
        if (!same) return shape_error(file, name, info, t);
        if (info->dtype == TRIT_DTYPE_COUNT || !trit_dtype_is_float(info->dtype) || trit_dtype_is_quantized(info->dtype))
            return trit_error(TRIT_ERR_DTYPE, "'%s': '%s' is %s; an adapter's tensors are floating point (F32 or BF16 as "
                              "trit and peft save them, F16, F64), read into the model's %s: the file is damaged or "
                              "not an adapter", file, name, info->dtype_name, trit_dtype_name(t->dtype));
        trit_status s = trit_safetensors_load(f, name, t);
        if (s != TRIT_OK) return s;
    }
    if (trit_safetensors_count(f) == expected) return TRIT_OK;
    for (int64_t i = 0; i < trit_safetensors_count(f); i++) {  // name the first one no target accounts for
        const char *name = trit_safetensors_at(f, i)->name;
        const size_t p = strlen(PEFT_PREFIX);
        if (strncmp(name, PEFT_PREFIX, p) != 0 || !is_lora_name(name) || !trit_gpt_find(m, name + p))
            return trit_error(TRIT_ERR_FORMAT, "'%s' holds '%s', which is no adapter tensor of this base model with "
                              "the adapter's config: the adapter was made for another model", file, name);
    }
    return trit_error(TRIT_ERR_FORMAT, "'%s': tensor count does not match the adapter's targets", file);
}

trit_status trit_peft_load(trit_gpt *m, const char *dir) {
    if (!m || !dir) return trit_error(TRIT_ERR_INVALID, "trit_peft_load: NULL model or directory");
    char cfg_path[TRIT_PATH_MAX + 32], w_path[TRIT_PATH_MAX + 32];
    trit_status s = trit_path_join(cfg_path, sizeof cfg_path, dir, TRIT_PEFT_CONFIG);
    if (s == TRIT_OK) s = trit_path_join(w_path, sizeof w_path, dir, TRIT_PEFT_WEIGHTS);
    trit_adapter_config a;
    if (s == TRIT_OK) s = read_config(cfg_path, &a);
    if (s != TRIT_OK) return s;
    trit_safetensors *f = trit_safetensors_open(w_path);
    if (!f) return TRIT_ERR_FORMAT;
    s = trit_gpt_add_adapter(m, &a, 0);
    if (s != TRIT_OK) {
        char why[600];
        snprintf(why, sizeof why, "%s", trit_last_error());
        s = trit_error(s, "'%s' does not fit this base model: %s", cfg_path, why);
    }
    if (s == TRIT_OK) s = read_weights(m, f, w_path);
    trit_safetensors_close(f);
    return s;
}

trit_status trit_peft_read_values(trit_gpt *m, const char *dir) {
    if (!m || !dir) return trit_error(TRIT_ERR_INVALID, "trit_peft_read_values: NULL model or directory");
    char w_path[TRIT_PATH_MAX + 32];
    trit_status s = trit_path_join(w_path, sizeof w_path, dir, TRIT_PEFT_WEIGHTS);
    trit_safetensors *f = s == TRIT_OK ? trit_safetensors_open(w_path) : NULL;
    if (!f) return s == TRIT_OK ? TRIT_ERR_FORMAT : s;
    s = read_weights(m, f, w_path);
    trit_safetensors_close(f);
    return s;
}

trit_gpt *trit_checkpoint_load_adapted(const char *base, const char *adapter_dir, bool decoding) {
    trit_gpt *m = trit_checkpoint_load_as_trained(base, NULL);
    if (!m) return NULL;
    trit_status s = TRIT_OK;
    if (trit_gpt_get_config(m)->adapter.kind != TRIT_ADAPTER_NONE)
        s = trit_error(TRIT_ERR_INVALID, "'%s' carries an adapter already: `trit merge` it into a plain run first", base);
    if (s == TRIT_OK) s = trit_peft_load(m, adapter_dir);
    if (s == TRIT_OK && decoding) s = trit_gpt_make_decode_only(m);
    if (s != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    return m;
}
