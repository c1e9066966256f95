// llm.c model file <-> trit GPT. llm.c's GPT-2 is trit's GPT-2 layout (weights (out, in), q k v
// rows in c_attn, tanh GELU, LayerNorm eps 1e-5, tied head); its file stores each parameter kind
// for all layers in one array, and pads the embedding to a multiple of 128 rows, rows that its
// softmax never reads. So import skips the padding and export writes zero rows there.
#define _POSIX_C_SOURCE 200809L
#include "trit/interop.h"
#include "trit/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// trit's name of each llm.c kind ("%d": the layer); in llm.c's file order.
static const char *const kind_names[TRIT_LLMC_NUM_KINDS] = {
    "wte.weight",           "wpe.weight",           "h.%d.ln_1.weight",      "h.%d.ln_1.bias",
    "h.%d.attn.c_attn.weight", "h.%d.attn.c_attn.bias", "h.%d.attn.c_proj.weight", "h.%d.attn.c_proj.bias",
    "h.%d.ln_2.weight",     "h.%d.ln_2.bias",       "h.%d.mlp.c_fc.weight",  "h.%d.mlp.c_fc.bias",
    "h.%d.mlp.c_proj.weight", "h.%d.mlp.c_proj.bias", "ln_f.weight",          "ln_f.bias"};

static bool per_layer(int k) { return k >= 2 && k < 14; }

// Calls visit(ctx, tensor, file offset) for every trit tensor of m in llm.c's order.
typedef trit_status (*visit_fn)(void *ctx, trit_tensor *t /* one layer's slice of a kind */, int64_t offset);
static trit_status walk(const trit_gpt *m, const trit_llmc_header *h, visit_fn visit, void *ctx) {
    int64_t sizes[TRIT_LLMC_NUM_KINDS], offset = 0;
    trit_llmc_kind_sizes(h, sizes);
    trit_status s = TRIT_OK;
    for (int k = 0; k < TRIT_LLMC_NUM_KINDS && s == TRIT_OK; k++) {
        const int layers = per_layer(k) ? h->L : 1;
        for (int l = 0; l < layers && s == TRIT_OK; l++) {
            char name[64];
            snprintf(name, sizeof name, kind_names[k], l);
            trit_tensor *t = trit_gpt_find(m, name);  // e.g. (3C, C) for c_attn
            if (!t) return trit_error(TRIT_ERR_STATE, "llm.c: the model has no '%s'", name);
            s = visit(ctx, t, offset + (per_layer(k) ? l * (sizes[k] / h->L) : 0));
        }
        offset += sizes[k];
    }
    return s;
}

static trit_status read_one(void *f, trit_tensor *t /* any parameter */, int64_t offset) {
    // wte's first V rows: its padding rows follow them in the file and are skipped.
    return trit_llmc_read(f, offset, trit_tensor_numel(t), trit_tensor_ptr(t));
}

trit_gpt *trit_import_llmc(const char *path) {
    trit_llmc_header h;
    trit_llmc_file *f = trit_llmc_open(path, &h);
    if (!f) return NULL;
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = h.V, c.seq_len = h.max_T, c.n_layer = h.L, c.n_head = h.H, c.n_embd = h.C;
    c.mlp_hidden = 0, c.norm_eps = 1e-5, c.dropout = 0, c.bias = true;  // llm.c's fixed choices
    c.norm = TRIT_NORM_LAYER, c.mlp = TRIT_MLP_GELU, c.pos = TRIT_POS_LEARNED;
    trit_gpt *m = NULL;
    trit_status s = trit_gpt_config_check(&c);
    if (s == TRIT_OK && !(m = trit_gpt_new_zeroed(&c))) s = TRIT_ERR_NOMEM;
    if (s == TRIT_OK) s = walk(m, &h, read_one, f);
    trit_llmc_close(f);
    if (s != TRIT_OK) {
        trit_gpt_free(m);
        return NULL;
    }
    return m;
}

// ---- export ---------------------------------------------------------------------------------

typedef struct writer {
    trit_atomic_file f;
    int version;
    int64_t at;      // elements written so far
    int64_t pad;     // zero elements to write after wte
    uint16_t *buf;   // bf16 staging
} writer;

static trit_status put(writer *w, const float *x, int64_t n) {
    if (w->version == 3) return trit_atomic_write(&w->f, x, (size_t)n * 4);
    for (int64_t i = 0; i < n;) {
        const int64_t k = n - i < 4096 ? n - i : 4096;
        for (int64_t j = 0; j < k; j++) w->buf[j] = x ? trit_f32_to_bf16(x[i + j]) : 0;
        trit_atomic_write(&w->f, w->buf, (size_t)k * 2);
        i += k;
    }
    return w->f.status;
}

static trit_status write_one(void *ctx, trit_tensor *t /* any parameter */, int64_t offset) {
    writer *w = ctx;
    if (offset != w->at)
        return trit_error(TRIT_ERR_STATE, "llm.c export: '%s' at element %lld, the file is at %lld", t->name,
                          (long long)offset, (long long)w->at);
    if (t->dtype != TRIT_F32 || !trit_tensor_is_contiguous(t))
        return trit_error(TRIT_ERR_DTYPE, "llm.c export: '%s' is not contiguous f32", t->name);
    trit_status s = put(w, trit_tensor_ptr(t), trit_tensor_numel(t));
    w->at += trit_tensor_numel(t);
    if (s == TRIT_OK && strcmp(t->name, "wte.weight") == 0) {  // the padding rows
        static const float zeros[4096];
        for (int64_t i = 0; i < w->pad && s == TRIT_OK; i += 4096) s = put(w, zeros, w->pad - i < 4096 ? w->pad - i : 4096);
        w->at += w->pad;
    }
    return s;
}

trit_status trit_export_llmc(const trit_gpt *m, int version, const char *path) {
    if (!m || !path) return trit_error(TRIT_ERR_INVALID, "llm.c export: NULL argument");
    if (version != 3 && version != 5)
        return trit_error(TRIT_ERR_INVALID, "llm.c export: version %d; llm.c reads 3 (fp32) and 5 (bf16)", version);
    const trit_gpt_config *c = trit_gpt_get_config(m);
    if (c->norm != TRIT_NORM_LAYER || c->mlp != TRIT_MLP_GELU || c->pos != TRIT_POS_LEARNED || !c->bias || c->subln ||
        trit_gpt_mlp_hidden(c) != 4 * c->n_embd || c->norm_eps != 1e-5)
        return trit_error(TRIT_ERR_UNSUPPORTED, "llm.c export: llm.c's GPT-2 has LayerNorm (eps 1e-5), GELU with a 4C "
                          "MLP, learned positions, biases and no SubLN; this model has %s, %s, MLP %lld for C %lld, %s, "
                          "eps %g, %s%s", c->norm == TRIT_NORM_LAYER ? "LayerNorm" : "RMSNorm",
                          c->mlp == TRIT_MLP_GELU ? "GELU" : "SwiGLU", (long long)trit_gpt_mlp_hidden(c),
                          (long long)c->n_embd, c->pos == TRIT_POS_LEARNED ? "learned positions" : "RoPE", c->norm_eps,
                          c->bias ? "biases" : "no biases", c->subln ? ", SubLN" : "");
    if (trit_gpt_decode_only(m))
        return trit_error(TRIT_ERR_STATE, "llm.c export: a decode-only model no longer has its f32 weights");
    trit_llmc_header h = {.version = version, .max_T = (int32_t)c->seq_len, .V = (int32_t)c->vocab_size,
                          .L = (int32_t)c->n_layer, .H = (int32_t)c->n_head, .C = (int32_t)c->n_embd,
                          .Vp = (int32_t)((c->vocab_size + 127) / 128 * 128)};
    trit_status s = trit_llmc_header_check(&h, "llm.c export");
    if (s != TRIT_OK) return s;
    writer w = {.version = version, .pad = (int64_t)(h.Vp - h.V) * h.C, .buf = malloc(4096 * sizeof(uint16_t))};
    if (!w.buf) return trit_error(TRIT_ERR_NOMEM, "llm.c export: out of memory");
    uint8_t head[TRIT_LLMC_HEADER_BYTES];
    trit_llmc_header_encode(&h, head);
    s = trit_atomic_open(&w.f, path);
    if (s == TRIT_OK) s = trit_atomic_write(&w.f, head, sizeof head);
    if (s == TRIT_OK) s = walk(m, &h, write_one, &w);
    if (s == TRIT_OK) {
        s = trit_atomic_commit(&w.f);
    } else if (w.f.fp) {
        trit_atomic_abort(&w.f);
    }
    free(w.buf);
    return s;
}

trit_tokenizer *trit_tokenizer_from_llmc(const trit_llmc_vocab *v) {
    if (!v || v->n < 1) {
        trit_error(TRIT_ERR_INVALID, "llm.c tokenizer: empty table");
        return NULL;
    }
    uint8_t bytes[256];
    bool ok = v->n <= 256;
    for (int32_t i = 0; ok && i < v->n; i++) {
        ok = v->len[i] == 1 && (i == 0 || v->bytes[i][0] > bytes[i - 1]);
        if (ok) bytes[i] = v->bytes[i][0];
    }
    if (!ok) {
        trit_error(TRIT_ERR_UNSUPPORTED, "the llm.c tokenizer file lists %d tokens' bytes but not the merges that "
                   "encode text into them; trit can take it only when it is character level (distinct single "
                   "bytes in increasing order). Give the run GPT-2's own tokenizer files instead, or none", (int)v->n);
        return NULL;
    }
    return trit_tokenizer_train_char(bytes, (size_t)v->n);
}
