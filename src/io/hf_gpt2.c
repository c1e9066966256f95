// Hugging Face GPT-2 directories: config.json plus model.safetensors, or shards listed by
// model.safetensors.index.json. Names lose their "transformer." prefix so they read like
// trit's; the causal-mask buffers are skipped; Conv1D weights, stored (in, out), are transposed
// into trit's (out, in) on load. Every tensor is found, and its shape checked, before a byte of
// its data is trusted.
#define _POSIX_C_SOURCE 200809L
#include "trit/interop.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HF_INDEX "model.safetensors.index.json"
#define HF_PREFIX "transformer."
#define TRIT_PATH_MAX_HF 4096

typedef struct hf_entry {
    char *name;   // short name
    char *full;   // as stored
    int shard;
} hf_entry;

struct trit_hf_gpt2 {
    char *dir;
    trit_hf_gpt2_config cfg;
    int n_shards;
    trit_safetensors **shards;
    char **shard_names;
    int64_t n;
    hf_entry *e;
};

// ---- config.json ---------------------------------------------------------------------------

static trit_status cfg_int(const cJSON *o, const char *key, const char *where, bool required, int64_t *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v || cJSON_IsNull(v)) {
        if (!required) return *out = 0, TRIT_OK;
        return trit_error(TRIT_ERR_FORMAT, "%s: '%s' is missing: a GPT-2 config.json gives it (see transformers' "
                          "GPT2Config)", where, key);
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : -1;
    if (!(d >= 1 && d <= (double)(1 << 24)) || d != floor(d))
        return trit_error(TRIT_ERR_FORMAT, "%s: '%s' must be an integer in [1, 2^24], found %s", where, key,
                          cJSON_IsNumber(v) ? "a number outside that" : "another JSON type");
    *out = (int64_t)d;
    return TRIT_OK;
}

// A boolean flag that must have `want` (or be absent, when absent means `want`).
static trit_status cfg_flag(const cJSON *o, const char *key, bool want, const char *where, const char *why) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return TRIT_OK;
    if (!cJSON_IsBool(v))
        return trit_error(TRIT_ERR_FORMAT, "%s: '%s' must be true or false", where, key);
    if (cJSON_IsTrue(v) == want) return TRIT_OK;
    return trit_error(TRIT_ERR_UNSUPPORTED, "%s: '%s' is %s, which trit's GPT does not compute (%s)", where, key,
                      want ? "false" : "true", why);
}

static trit_status cfg_check_kind(const cJSON *o, const char *where) {
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "model_type");
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, "gpt2") != 0))
        return trit_error(TRIT_ERR_UNSUPPORTED, "%s: model_type is %s, trit imports GPT-2 models (model_type "
                          "\"gpt2\") only", where, cJSON_IsString(mt) ? mt->valuestring : "not a string");
    // GPT-2's activation is the tanh form of GELU, trit's; the exact (erf) GELU and others differ.
    static const char *const tanh_gelus[] = {"gelu_new", "gelu_pytorch_tanh", "gelu_fast"};
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(o, "activation_function");
    bool ok = !act;  // GPT2Config's default is gelu_new
    for (size_t i = 0; cJSON_IsString(act) && i < sizeof tanh_gelus / sizeof tanh_gelus[0]; i++)
        ok |= strcmp(act->valuestring, tanh_gelus[i]) == 0;
    if (!ok)
        return trit_error(TRIT_ERR_UNSUPPORTED, "%s: activation_function is %s; trit computes GELU's tanh form only "
                          "(gelu_new, gelu_pytorch_tanh or gelu_fast), so this model's outputs would differ", where,
                          cJSON_IsString(act) ? act->valuestring : "not a string");
    trit_status s = cfg_flag(o, "scale_attn_weights", true, where, "attention scores are always scaled by 1/sqrt(head size)");
    if (s == TRIT_OK) s = cfg_flag(o, "scale_attn_by_inverse_layer_idx", false, where, "no per-layer score scaling");
    if (s == TRIT_OK) s = cfg_flag(o, "reorder_and_upcast_attn", false, where, "no reordered attention");
    if (s == TRIT_OK) s = cfg_flag(o, "add_cross_attention", false, where, "decoder-only, no cross-attention");
    return s;
}

trit_status trit_hf_gpt2_parse_config(const char *json, size_t len, const char *where, trit_hf_gpt2_config *out) {
    cJSON *o = json ? cJSON_ParseWithLength(json, len) : NULL;
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return trit_error(TRIT_ERR_FORMAT, "%s is not a JSON object: expected a transformers GPT2Config", where);
    }
    trit_hf_gpt2_config c;
    memset(&c, 0, sizeof c);
    trit_status s = cfg_check_kind(o, where);
    if (s == TRIT_OK) s = cfg_int(o, "n_layer", where, true, &c.n_layer);
    if (s == TRIT_OK) s = cfg_int(o, "n_head", where, true, &c.n_head);
    if (s == TRIT_OK) s = cfg_int(o, "n_embd", where, true, &c.n_embd);
    if (s == TRIT_OK) s = cfg_int(o, "n_positions", where, true, &c.n_positions);
    if (s == TRIT_OK) s = cfg_int(o, "vocab_size", where, true, &c.vocab_size);
    if (s == TRIT_OK) s = cfg_int(o, "n_inner", where, false, &c.n_inner);
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(o, "layer_norm_epsilon");
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(o, "tie_word_embeddings");
    if (s == TRIT_OK && eps && !(cJSON_IsNumber(eps) && eps->valuedouble > 0 && eps->valuedouble < 1))
        s = trit_error(TRIT_ERR_FORMAT, "%s: layer_norm_epsilon must be a number in (0, 1)", where);
    if (s == TRIT_OK && tie && !cJSON_IsBool(tie))
        s = trit_error(TRIT_ERR_FORMAT, "%s: tie_word_embeddings must be true or false", where);
    if (s == TRIT_OK && c.n_embd % c.n_head != 0)
        s = trit_error(TRIT_ERR_FORMAT, "%s: n_embd %lld is not a multiple of n_head %lld", where,
                       (long long)c.n_embd, (long long)c.n_head);
    if (s == TRIT_OK) {
        c.layer_norm_epsilon = eps ? eps->valuedouble : 1e-5;
        c.tie_word_embeddings = !tie || cJSON_IsTrue(tie);
        *out = c;
    }
    cJSON_Delete(o);
    return s;
}

// ---- names ---------------------------------------------------------------------------------

// After "h.<digits>.": the rest of the name, else NULL.
static const char *block_rest(const char *name) {
    if (strncmp(name, "h.", 2) != 0) return NULL;
    const char *p = name + 2;
    if (*p < '0' || *p > '9') return NULL;
    while (*p >= '0' && *p <= '9') p++;
    return *p == '.' ? p + 1 : NULL;
}

bool trit_hf_gpt2_is_conv1d(const char *name) {
    const char *r = name ? block_rest(name) : NULL;
    return r && (strcmp(r, "attn.c_attn.weight") == 0 || strcmp(r, "attn.c_proj.weight") == 0 ||
                 strcmp(r, "mlp.c_fc.weight") == 0 || strcmp(r, "mlp.c_proj.weight") == 0);
}

// transformers keeps the causal mask as a buffer; older files saved it.
static bool is_mask_buffer(const char *name) {
    const char *r = block_rest(name);
    return r && (strcmp(r, "attn.bias") == 0 || strcmp(r, "attn.masked_bias") == 0);
}

static char *dup_str(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

static trit_status add_shard_names(trit_hf_gpt2 *h, int k) {
    const trit_safetensors *f = h->shards[k];
    int64_t cnt = trit_safetensors_count(f);
    hf_entry *e = realloc(h->e, (size_t)(h->n + cnt) * sizeof *e);
    if (!e) return trit_error(TRIT_ERR_NOMEM, "hf import: out of memory");
    h->e = e;
    for (int64_t i = 0; i < cnt; i++) {
        const char *full = trit_safetensors_at(f, i)->name;
        const char *name = strncmp(full, HF_PREFIX, strlen(HF_PREFIX)) == 0 ? full + strlen(HF_PREFIX) : full;
        if (is_mask_buffer(name)) continue;
        if (trit_hf_gpt2_has(h, name))
            return trit_error(TRIT_ERR_FORMAT, "'%s': tensor '%s' is stored twice (with and without the '" HF_PREFIX
                              "' prefix, or in two shards): the directory mixes two checkpoints", h->dir, name);
        hf_entry *x = &h->e[h->n];
        x->name = dup_str(name), x->full = dup_str(full), x->shard = k;
        h->n++;  // counted before the check so close frees what was allocated
        if (!x->name || !x->full) return trit_error(TRIT_ERR_NOMEM, "hf import: out of memory");
    }
    return TRIT_OK;
}

static const hf_entry *find(const trit_hf_gpt2 *h, const char *name) {
    for (int64_t i = 0; h && name && i < h->n; i++)
        if (strcmp(h->e[i].name, name) == 0) return &h->e[i];
    return NULL;
}

bool trit_hf_gpt2_has(const trit_hf_gpt2 *h, const char *name) { return find(h, name) != NULL; }
const trit_safetensors_info *trit_hf_gpt2_info(const trit_hf_gpt2 *h, const char *name) {
    const hf_entry *e = find(h, name);
    return e ? trit_safetensors_find(h->shards[e->shard], e->full) : NULL;
}
int64_t trit_hf_gpt2_count(const trit_hf_gpt2 *h) { return h ? h->n : 0; }
const char *trit_hf_gpt2_name(const trit_hf_gpt2 *h, int64_t i) { return h && i >= 0 && i < h->n ? h->e[i].name : NULL; }
const trit_hf_gpt2_config *trit_hf_gpt2_config_of(const trit_hf_gpt2 *h) { return h ? &h->cfg : NULL; }

// ---- opening the directory ----------------------------------------------------------------

static bool exists(const char *dir, const char *name) {
    char p[TRIT_PATH_MAX_HF];
    struct stat st;
    return snprintf(p, sizeof p, "%s/%s", dir, name) < (int)sizeof p && stat(p, &st) == 0;
}

static trit_status open_shard(trit_hf_gpt2 *h, const char *file, const char *listed_by) {
    for (int k = 0; k < h->n_shards; k++)
        if (strcmp(h->shard_names[k], file) == 0) return TRIT_OK;
    if (strchr(file, '/') || strcmp(file, "..") == 0)
        return trit_error(TRIT_ERR_FORMAT, "'%s/%s' names the shard '%s', which is not a file in the directory",
                          h->dir, listed_by, file);
    char p[TRIT_PATH_MAX_HF];
    if (snprintf(p, sizeof p, "%s/%s", h->dir, file) >= (int)sizeof p)
        return trit_error(TRIT_ERR_RANGE, "path '%s/%s' is too long", h->dir, file);
    if (listed_by && !exists(h->dir, file))
        return trit_error(TRIT_ERR_IO, "'%s/%s' lists the shard '%s', which is missing: copy every "
                          "model-*-of-*.safetensors file of the checkpoint into '%s'", h->dir, listed_by, file, h->dir);
    trit_safetensors **s = realloc(h->shards, (size_t)(h->n_shards + 1) * sizeof *s);
    char **names = s ? realloc(h->shard_names, (size_t)(h->n_shards + 1) * sizeof *names) : NULL;
    if (s) h->shards = s;
    if (names) h->shard_names = names;
    if (!s || !names) return trit_error(TRIT_ERR_NOMEM, "hf import: out of memory");
    h->shards[h->n_shards] = trit_safetensors_open(p);
    h->shard_names[h->n_shards] = dup_str(file);
    h->n_shards++;
    if (!h->shards[h->n_shards - 1]) return TRIT_ERR_FORMAT;  // the safetensors reader said why
    if (!h->shard_names[h->n_shards - 1]) return trit_error(TRIT_ERR_NOMEM, "hf import: out of memory");
    return add_shard_names(h, h->n_shards - 1);
}

// The index's weight_map: each shard it names is opened, and each tensor it places is in that shard.
static trit_status open_index(trit_hf_gpt2 *h) {
    char p[TRIT_PATH_MAX_HF];
    snprintf(p, sizeof p, "%s/" HF_INDEX, h->dir);
    uint8_t *text = NULL;
    size_t len = 0;
    trit_status s = trit_file_read_all(p, &text, &len);
    if (s != TRIT_OK) return s;
    cJSON *o = cJSON_ParseWithLength((const char *)text, len);
    free(text);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(o, "weight_map");
    if (!cJSON_IsObject(map) || !map->child)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' has no weight_map object naming each tensor's shard", p);
    for (const cJSON *e = map ? map->child : NULL; s == TRIT_OK && e; e = e->next) {
        if (!cJSON_IsString(e)) {
            s = trit_error(TRIT_ERR_FORMAT, "'%s': weight_map['%s'] is not a file name", p, e->string);
            break;
        }
        s = open_shard(h, e->valuestring, HF_INDEX);
        int k = 0;
        while (s == TRIT_OK && strcmp(h->shard_names[k], e->valuestring) != 0) k++;
        if (s == TRIT_OK && !trit_safetensors_find(h->shards[k], e->string))
            s = trit_error(TRIT_ERR_FORMAT, "'%s' places '%s' in '%s', which does not hold it: the index and the "
                           "shards are from different checkpoints", p, e->string, e->valuestring);
    }
    cJSON_Delete(o);
    return s;
}

static trit_status open_weights(trit_hf_gpt2 *h) {
    if (exists(h->dir, "model.safetensors")) return open_shard(h, "model.safetensors", NULL);
    if (exists(h->dir, HF_INDEX)) return open_index(h);
    if (exists(h->dir, "pytorch_model.bin") || exists(h->dir, "pytorch_model.bin.index.json"))
        return trit_error(TRIT_ERR_UNSUPPORTED, "'%s' holds pytorch_model.bin, a Python pickle, which trit does not "
                          "read (loading a pickle can run code): convert it to safetensors first, e.g. in Python "
                          "GPT2LMHeadModel.from_pretrained(DIR).save_pretrained(DIR2, safe_serialization=True)", h->dir);
    return trit_error(TRIT_ERR_IO, "'%s' has neither model.safetensors nor " HF_INDEX ": pass a directory written by "
                      "transformers' save_pretrained", h->dir);
}

trit_hf_gpt2 *trit_hf_gpt2_open(const char *dir) {
    if (!dir) {
        trit_error(TRIT_ERR_INVALID, "trit_hf_gpt2_open: NULL directory");
        return NULL;
    }
    trit_hf_gpt2 *h = calloc(1, sizeof *h);
    if (!h || !(h->dir = dup_str(dir))) {
        free(h);
        trit_error(TRIT_ERR_NOMEM, "hf import: out of memory");
        return NULL;
    }
    char p[TRIT_PATH_MAX_HF], where[TRIT_PATH_MAX_HF + 16];
    uint8_t *text = NULL;
    size_t len = 0;
    trit_status s = snprintf(p, sizeof p, "%s/config.json", dir) < (int)sizeof p
                        ? TRIT_OK
                        : trit_error(TRIT_ERR_RANGE, "path '%s' is too long", dir);
    if (s == TRIT_OK && !exists(dir, "config.json"))
        s = trit_error(TRIT_ERR_IO, "'%s' has no config.json: pass a transformers GPT-2 directory (save_pretrained "
                       "writes config.json beside the weights)", dir);
    if (s == TRIT_OK) s = trit_file_read_all(p, &text, &len);
    snprintf(where, sizeof where, "'%s'", p);
    if (s == TRIT_OK) s = trit_hf_gpt2_parse_config((const char *)text, len, where, &h->cfg);
    free(text);
    if (s == TRIT_OK) s = open_weights(h);
    if (s != TRIT_OK) {
        trit_hf_gpt2_close(h);
        return NULL;
    }
    return h;
}

void trit_hf_gpt2_close(trit_hf_gpt2 *h) {
    if (!h) return;
    for (int k = 0; k < h->n_shards; k++) {
        trit_safetensors_close(h->shards[k]);
        free(h->shard_names[k]);
    }
    for (int64_t i = 0; i < h->n; i++) free(h->e[i].name), free(h->e[i].full);
    free(h->shards), free(h->shard_names), free(h->e), free(h->dir), free(h);
}

// ---- loading -------------------------------------------------------------------------------

static const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < ndim && k < n; d++) k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)shape[d]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

// out (cols, rows) = in (rows, cols)^T, in tiles so both sides stay in cache.
static void transpose_f32(float *out, const float *in, int64_t rows, int64_t cols) {
    enum { TILE = 32 };
    for (int64_t r0 = 0; r0 < rows; r0 += TILE)
        for (int64_t c0 = 0; c0 < cols; c0 += TILE)
            for (int64_t r = r0; r < r0 + TILE && r < rows; r++)
                for (int64_t c = c0; c < c0 + TILE && c < cols; c++) out[c * rows + r] = in[r * cols + c];
}

trit_status trit_hf_gpt2_check(const trit_hf_gpt2 *h, const char *name, const trit_tensor *dst /* trit's shape */) {
    if (!h || !name || !dst) return trit_error(TRIT_ERR_INVALID, "trit_hf_gpt2_check: NULL argument");
    const hf_entry *e = find(h, name);
    if (!e)
        return trit_error(TRIT_ERR_FORMAT, "'%s' has no tensor '%s' (nor '" HF_PREFIX "%s') that its config.json "
                          "calls for: the checkpoint is incomplete or not a GPT-2", h->dir, name, name);
    const trit_safetensors *f = h->shards[e->shard];
    const trit_safetensors_info *t = trit_safetensors_find(f, e->full);
    const bool conv = trit_hf_gpt2_is_conv1d(name) && dst->ndim == 2;
    int64_t want[TRIT_MAX_DIMS];
    for (int d = 0; d < dst->ndim; d++) want[d] = dst->shape[conv ? 1 - d : d];
    bool same = t->ndim == dst->ndim;
    for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == want[d];
    char got_s[160], want_s[160];
    if (!same)
        return trit_error(TRIT_ERR_SHAPE, "'%s/%s': tensor '%s' is %s, config.json (n_layer %lld, n_head %lld, n_embd "
                          "%lld, n_positions %lld, vocab_size %lld) calls for %s: config.json and the weights "
                          "disagree", h->dir, h->shard_names[e->shard], e->full, shape_str(t->ndim, t->shape, got_s, sizeof got_s),
                          (long long)h->cfg.n_layer, (long long)h->cfg.n_head, (long long)h->cfg.n_embd,
                          (long long)h->cfg.n_positions, (long long)h->cfg.vocab_size,
                          shape_str(dst->ndim, want, want_s, sizeof want_s));
    if (t->dtype != TRIT_F32 && t->dtype != TRIT_F16 && t->dtype != TRIT_BF16)
        return trit_error(TRIT_ERR_DTYPE, "'%s/%s': tensor '%s' is %s; trit reads F32, F16 and BF16 weights", h->dir,
                          h->shard_names[e->shard], e->full, t->dtype_name);
    return TRIT_OK;
}

trit_status trit_hf_gpt2_load(const trit_hf_gpt2 *h, const char *name, trit_tensor *dst /* trit's shape */) {
    trit_status s = trit_hf_gpt2_check(h, name, dst);
    if (s != TRIT_OK) return s;
    const hf_entry *e = find(h, name);
    const trit_safetensors *f = h->shards[e->shard];
    const bool conv = trit_hf_gpt2_is_conv1d(name) && dst->ndim == 2;
    int64_t want[TRIT_MAX_DIMS];
    for (int d = 0; d < dst->ndim; d++) want[d] = dst->shape[conv ? 1 - d : d];
    if (!conv) return trit_safetensors_load(f, e->full, dst);
    if (dst->dtype != TRIT_F32 || !trit_tensor_is_contiguous(dst))
        return trit_error(TRIT_ERR_INVALID, "trit_hf_gpt2_load: '%s' needs a contiguous f32 destination", name);
    trit_tensor *tmp = trit_tensor_new(TRIT_F32, 2, want);  // (in, out) as stored
    if (!tmp) return TRIT_ERR_NOMEM;
    s = trit_safetensors_load(f, e->full, tmp);
    if (s == TRIT_OK) transpose_f32(trit_tensor_ptr(dst), trit_tensor_ptr(tmp), want[0], want[1]);
    trit_tensor_free(tmp);
    return s;
}
