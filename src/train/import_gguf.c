// A GGUF of llama.cpp's gpt2 architecture as a trit GPT: the names, dims and keys export_gguf.c
// writes, read back. Each tensor is f32, f16, q8_0, q4_0, tq1_0 or tq2_0. The matrices the model
// multiplies by (the token embedding, which is also the tied head, and the blocks' attention and
// MLP weights) stay quantized when the file has them in a block type: their codes and f16 scales
// move into trit's side-scaled codes without rounding (trit_quant_from_ggml: q8_0 and q4_0 as
// qint8 and qint4 in groups of 32, tq2_0 and tq1_0 as ternary in groups of 256), attached to a
// model made without their f32 values, so the import never widens them. Everything else (norms,
// biases, the position table) is read as f32: ggml's block layouts are rows of trit's dtype table,
// decoded by the table. The head must be the token embedding (trit ties them). A file trit
// exported carries one more token than its model (the "<|endoftext|>" llama.cpp needs): its row
// and token are dropped, so the import is the model that was exported.
#include "trit/interop.h"
#include "trit/io.h"
#include "trit/quant.h"
#include "trit/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EOT_TOKEN "<|endoftext|>"

static const char *const layer_pairs[][2] = {
    {"ln_1.weight", "attn_norm.weight"},          {"ln_1.bias", "attn_norm.bias"},
    {"attn.c_attn.weight", "attn_qkv.weight"},    {"attn.c_attn.bias", "attn_qkv.bias"},
    {"attn.c_proj.weight", "attn_output.weight"}, {"attn.c_proj.bias", "attn_output.bias"},
    {"ln_2.weight", "ffn_norm.weight"},           {"ln_2.bias", "ffn_norm.bias"},
    {"mlp.c_fc.weight", "ffn_up.weight"},         {"mlp.c_fc.bias", "ffn_up.bias"},
    {"mlp.c_proj.weight", "ffn_down.weight"},     {"mlp.c_proj.bias", "ffn_down.bias"},
};
enum { LAYER_PAIRS = sizeof layer_pairs / sizeof layer_pairs[0] };

static trit_dtype dtype_of(uint32_t ggml) {
    switch (ggml) {
    case TRIT_GGML_F16: return TRIT_F16;
    case TRIT_GGML_Q8_0: return TRIT_Q8_0;
    case TRIT_GGML_Q4_0: return TRIT_Q4_0;
    case TRIT_GGML_TQ1_0: return TRIT_TQ1_0;
    case TRIT_GGML_TQ2_0: return TRIT_TQ2_0;
    default: return TRIT_F32;  // the reader refused every other type
    }
}

// trit's export: named "trit", its last token the end-of-text one it appended.
static bool trit_exported(const trit_gguf_file *f) {
    const char *s;
    size_t n;
    uint64_t nt;
    if (trit_gguf_get_str(f, "general.name", &s, &n) != TRIT_OK || n != 4 || memcmp(s, "trit", 4) != 0) return false;
    if (trit_gguf_get_arr(f, "tokenizer.ggml.tokens", TRIT_GGUF_TYPE_STRING, &nt) != TRIT_OK || nt == 0) return false;
    trit_gguf_arr_str(f, "tokenizer.ggml.tokens", nt - 1, &s, &n);
    return n == sizeof EOT_TOKEN - 1 && memcmp(s, EOT_TOKEN, n) == 0;
}

static trit_status u32_key(const trit_gguf_file *f, const char *key, int64_t *out) {
    uint32_t v = 0;
    trit_status s = trit_gguf_get_u32(f, key, &v);
    *out = v;
    return s;
}

// The shortest decimal that is x as an f32 (the file's 1e-5 is 1e-5 again, not 9.99999974e-06).
static double shortest(float x) {
    for (int digits = 1; digits < 10; digits++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%.*g", digits, (double)x);
        const double d = strtod(buf, NULL);
        if ((float)d == x) return d;
    }
    return x;
}

static trit_status read_config(const trit_gguf_file *f, const char *path, trit_gpt_config *c, int64_t *rows) {
    const char *arch;
    size_t n;
    trit_status s = trit_gguf_get_str(f, "general.architecture", &arch, &n);
    if (s != TRIT_OK) return s;
    if (n != 4 || memcmp(arch, "gpt2", 4) != 0)
        return trit_error(TRIT_ERR_UNSUPPORTED, "'%s' is a GGUF of architecture '%.*s'; trit imports llama.cpp's gpt2 "
                          "architecture only (LayerNorm, GELU, learned positions, biases)", path, (int)(n > 40 ? 40 : n), arch);
    *c = trit_gpt_config_default();
    float eps = 0;
    s = u32_key(f, "gpt2.block_count", &c->n_layer);
    if (s == TRIT_OK) s = u32_key(f, "gpt2.embedding_length", &c->n_embd);
    if (s == TRIT_OK) s = u32_key(f, "gpt2.attention.head_count", &c->n_head);
    if (s == TRIT_OK) s = u32_key(f, "gpt2.context_length", &c->seq_len);
    if (s == TRIT_OK) s = u32_key(f, "gpt2.feed_forward_length", &c->mlp_hidden);
    if (s == TRIT_OK) s = trit_gguf_get_f32(f, "gpt2.attention.layer_norm_epsilon", &eps);
    if (s != TRIT_OK) return s;
    const trit_gguf_tensor *e = trit_gguf_find_tensor(f, "token_embd.weight");
    if (!e || e->ndim != 2)
        return trit_error(TRIT_ERR_FORMAT, "'%s' has no 2-D token_embd.weight: a gpt2 GGUF needs one", path);
    *rows = (int64_t)e->ne[1];
    const trit_gguf_tensor *pe = trit_gguf_find_tensor(f, "position_embd.weight"), *up = trit_gguf_find_tensor(f, "blk.0.ffn_up.weight");
    const int64_t want = 4 + 12 * c->n_layer + (trit_gguf_find_tensor(f, "output.weight") ? 1 : 0);
    // Checked before the model is made: the keys cannot ask for more than the file holds.
    if (e->ne[0] != (uint64_t)c->n_embd || !pe || pe->ndim != 2 || pe->ne[0] != (uint64_t)c->n_embd ||
        pe->ne[1] != (uint64_t)c->seq_len || (c->n_layer && (!up || up->ndim != 2 || up->ne[1] != (uint64_t)c->mlp_hidden)))
        return trit_error(TRIT_ERR_SHAPE, "'%s': its gpt2 keys (width %lld, context %lld, MLP %lld) disagree with its "
                          "tensors token_embd, position_embd and blk.0.ffn_up", path, (long long)c->n_embd,
                          (long long)c->seq_len, (long long)c->mlp_hidden);
    if (trit_gguf_num_tensors(f) != want)
        return trit_error(TRIT_ERR_FORMAT, "'%s' holds %lld tensors where a gpt2 model of %lld layers has %lld: it holds "
                          "tensors trit does not know, or lacks some", path, (long long)trit_gguf_num_tensors(f),
                          (long long)c->n_layer, (long long)want);
    c->vocab_size = *rows - (trit_exported(f) ? 1 : 0);
    c->norm = TRIT_NORM_LAYER, c->mlp = TRIT_MLP_GELU, c->pos = TRIT_POS_LEARNED, c->bias = true;
    c->dropout = 0, c->norm_eps = shortest(eps);
    if (c->mlp_hidden == 4 * c->n_embd) c->mlp_hidden = 0;  // the default, as trit's own configs say it
    return trit_gpt_config_check(c);
}

// The file's name of parameter `param`, or NULL for a name no gpt2 GGUF has.
static const char *file_name(const char *param, char *buf, size_t n) {
    static const char *const fixed[][2] = {{"wte.weight", "token_embd.weight"}, {"wpe.weight", "position_embd.weight"},
                                           {"ln_f.weight", "output_norm.weight"}, {"ln_f.bias", "output_norm.bias"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (strcmp(param, fixed[i][0]) == 0) return fixed[i][1];
    long long layer;
    int at = 0;
    if (sscanf(param, "h.%lld.%n", &layer, &at) != 1 || at == 0) return NULL;
    for (int p = 0; p < LAYER_PAIRS; p++)
        if (strcmp(param + at, layer_pairs[p][0]) == 0) {
            snprintf(buf, n, "blk.%lld.%s", layer, layer_pairs[p][1]);
            return buf;
        }
    return NULL;
}

static bool block_type(uint32_t ggml) {
    return ggml == TRIT_GGML_Q8_0 || ggml == TRIT_GGML_Q4_0 || ggml == TRIT_GGML_TQ1_0 || ggml == TRIT_GGML_TQ2_0;
}

// Whether parameter `name` is kept as codes: a matrix the model multiplies by (not the position
// table, which is added), stored in a block type. The model is made without its f32 values.
static bool kept_quantized(const char *name, const trit_gguf_file *f) {
    char buf[64];
    const char *fn = file_name(name, buf, sizeof buf);
    const trit_gguf_tensor *g = fn && strcmp(name, "wpe.weight") != 0 ? trit_gguf_find_tensor(f, fn) : NULL;
    return g && g->ndim == 2 && block_type(g->type);
}

// What the model is made without: the matrices kept as codes, and with spec (paged QLoRA base
// loading, only for a file with no matrix in a block type) the float block matrices, which
// become codes as they are read.
typedef struct made_without {
    const trit_gguf_file *f;
    const trit_quant_spec *spec;
    bool layout;  // every tensor: float values read later (trit_import_gguf_read_values)
} made_without;

static bool without_values(const char *name, void *ctx) {
    const made_without *w = ctx;
    char buf[64];
    const char *fn = file_name(name, buf, sizeof buf);
    const trit_gguf_tensor *g = fn ? trit_gguf_find_tensor(w->f, fn) : NULL;
    return w->layout || kept_quantized(name, w->f) || (w->spec && g && g->ndim == 2 && trit_quantize_takes_block_matrix(name));
}

static bool any_block_type(const trit_gguf_file *f) {
    for (int64_t i = 0; i < trit_gguf_num_tensors(f); i++)
        if (block_type(trit_gguf_tensor_at(f, i)->type)) return true;
    return false;
}

static trit_status read_float(void *file_bytes, trit_tensor *x) { return trit_tensor_copy(x, file_bytes); }

// Parameter t from the file's tensor `name`: its dims must be t's (innermost first), with
// `rows` rows in the file for a matrix (the first t->shape[0] of them are read). A parameter
// made without values (kept_quantized) gets the file's codes as its quantized copy.
static trit_status load_one(const trit_gguf_file *f, const char *path, trit_gpt *m, trit_tensor *t /* (N, K) or (N) */,
                            const char *name, int64_t rows, const trit_quant_spec *spec) {
    const trit_gguf_tensor *g = trit_gguf_find_tensor(f, name);
    if (!g) return trit_error(TRIT_ERR_FORMAT, "'%s' has no tensor '%s' that its gpt2 keys call for", path, name);
    const bool ok = g->ndim == t->ndim && (t->ndim == 1 ? g->ne[0] == (uint64_t)t->shape[0]
                                                         : g->ne[0] == (uint64_t)t->shape[1] && g->ne[1] == (uint64_t)rows);
    if (!ok)
        return trit_error(TRIT_ERR_SHAPE, "'%s': tensor '%s' has dims {%llu, %llu} (ndim %d); its keys call for {%lld, %lld}",
                          path, name, (unsigned long long)g->ne[0], (unsigned long long)(g->ndim > 1 ? g->ne[1] : 1),
                          g->ndim, (long long)t->shape[t->ndim - 1], (long long)(t->ndim == 2 ? rows : 1));
    trit_tensor w;  // t's shape: the file's bytes
    memset(&w, 0, sizeof w);
    trit_status s = trit_tensor_init_layout(&w, dtype_of(g->type), t->ndim, t->shape);
    w.data = (void *)(uintptr_t)g->data;
    if (s != TRIT_OK) return s;
    if (t->data) {
        s = trit_tensor_copy(t, &w);
        trit_gguf_release(f, g);  // its values are the model's now
        return s;
    }
    int i = 0;
    while (i < trit_gpt_num_tensors(m) && trit_gpt_tensor(m, i) != t) i++;
    const bool on_read = spec && g->ndim == 2 && trit_quantize_takes_block_matrix(t->name);
    if (!block_type(g->type) && !on_read) return TRIT_OK;  // a layout's: its values are read later
    if (!block_type(g->type)) {  // made without values: with spec
        s = trit_gpt_quantize_read(m, i, spec, read_float, &w, path);
        trit_gguf_release(f, g);
        return s;
    }
    snprintf(w.name, sizeof w.name, "%s", name);
    trit_tensor *q = trit_quant_from_ggml(&w);
    if (!q) {
        char why[512];
        snprintf(why, sizeof why, "%s", trit_last_error());
        return trit_error(TRIT_ERR_FORMAT, "'%s': %s", path, why);
    }
    snprintf(q->name, sizeof q->name, "%s", t->name);
    return trit_gpt_attach_quantized(m, i, q);
}

// output.weight, when present, must be the embedding (trit's head is tied).
static trit_status check_head(const trit_gguf_file *f, const char *path) {
    const trit_gguf_tensor *o = trit_gguf_find_tensor(f, "output.weight"), *e = trit_gguf_find_tensor(f, "token_embd.weight");
    if (!o) return TRIT_OK;
    if (o->type != e->type || o->ndim != e->ndim || o->ne[0] != e->ne[0] || o->ne[1] != e->ne[1] ||
        memcmp(o->data, e->data, e->nbytes) != 0)
        return trit_error(TRIT_ERR_UNSUPPORTED, "'%s': output.weight differs from token_embd.weight; trit's head is the "
                          "token embedding (tied), so an untied head cannot be imported", path);
    return TRIT_OK;
}

static trit_status load_all(const trit_gguf_file *f, const char *path, trit_gpt *m, int64_t rows,
                            const trit_quant_spec *spec) {
    const trit_gpt_config *c = trit_gpt_get_config(m);
    trit_status s = load_one(f, path, m, trit_gpt_find(m, "wte.weight"), "token_embd.weight", rows, spec);
    if (s == TRIT_OK) s = load_one(f, path, m, trit_gpt_find(m, "wpe.weight"), "position_embd.weight", c->seq_len, spec);
    if (s == TRIT_OK) s = load_one(f, path, m, trit_gpt_find(m, "ln_f.weight"), "output_norm.weight", 1, spec);
    if (s == TRIT_OK) s = load_one(f, path, m, trit_gpt_find(m, "ln_f.bias"), "output_norm.bias", 1, spec);
    if (s == TRIT_OK) s = check_head(f, path);
    for (int64_t i = 0; i < c->n_layer && s == TRIT_OK; i++)
        for (int p = 0; p < LAYER_PAIRS && s == TRIT_OK; p++) {
            char from[64], to[64];
            snprintf(from, sizeof from, "h.%lld.%s", (long long)i, layer_pairs[p][0]);
            snprintf(to, sizeof to, "blk.%lld.%s", (long long)i, layer_pairs[p][1]);
            trit_tensor *t = trit_gpt_find(m, from);  // (N, K) or (N)
            s = load_one(f, path, m, t, to, t->ndim == 2 ? t->shape[0] : 1, spec);
        }
    return s;  // with the count checked, every tensor was one of these (or the same name twice: refused by a miss)
}

static trit_gpt *import(const char *path, const trit_quant_spec *spec, bool layout, trit_tokenizer **tok, bool *made) {
    if (tok) *tok = NULL;
    if (made) *made = false;
    trit_gguf_file *f = trit_gguf_open(path);
    if (!f) return NULL;
    if (any_block_type(f)) spec = NULL;  // a quantized file's codes are its base
    trit_gpt_config c;
    int64_t rows = 0;
    trit_gpt *m = NULL;
    trit_status s = read_config(f, path, &c, &rows);
    if (s == TRIT_OK && !(m = trit_gpt_new_zeroed_without(&c, 0, without_values, &(made_without){f, spec, layout}))) s = TRIT_ERR_NOMEM;
    if (s == TRIT_OK) s = load_all(f, path, m, rows, spec);
    if (s == TRIT_OK && tok) s = trit_tokenizer_from_gguf(f, (int32_t)c.vocab_size, tok);
    trit_gguf_close(f);
    if (s != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    if (made) *made = spec != NULL;
    return m;
}

trit_gpt *trit_import_gguf_quantizing(const char *path, const trit_quant_spec *spec, trit_tokenizer **tok, bool *made) {
    return import(path, spec, false, tok, made);
}

trit_gpt *trit_import_gguf_layout(const char *path, const trit_quant_spec *spec, trit_tokenizer **tok, bool *made) {
    return import(path, spec, true, tok, made);
}

trit_gpt *trit_import_gguf(const char *path, trit_tokenizer **tok) { return import(path, NULL, false, tok, NULL); }

trit_status trit_import_gguf_read_values(const char *path, trit_gpt *dst, const trit_gpt *layout) {
    if (!dst || !layout) return trit_error(TRIT_ERR_INVALID, "trit_import_gguf_read_values: NULL argument");
    trit_gguf_file *f = trit_gguf_open(path);
    if (!f) return TRIT_ERR_IO;
    trit_gpt_config c;
    int64_t rows = 0;
    trit_status s = read_config(f, path, &c, &rows);
    for (int i = 0; s == TRIT_OK && i < trit_gpt_num_tensors(layout) && i < trit_gpt_num_tensors(dst); i++) {
        trit_tensor *t = trit_gpt_tensor(dst, i);
        const trit_tensor *l = trit_gpt_tensor(layout, i);
        if (!t->data || l->data || trit_gpt_quantized(layout, i)) continue;  // no room, or held by the layout
        char buf[64];
        const char *fn = strcmp(t->name, l->name) == 0 ? file_name(t->name, buf, sizeof buf) : NULL;
        s = fn ? load_one(f, path, dst, t, fn, strcmp(t->name, "wte.weight") == 0 ? rows : t->ndim == 2 ? t->shape[0] : 1, NULL)
               : trit_error(TRIT_ERR_STATE, "reading '%s': tensor %d is '%s' here but '%s' in its layout", path, i,
                            t->name, l->name);
    }
    trit_gguf_close(f);
    return s;
}
