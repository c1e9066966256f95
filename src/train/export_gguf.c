// A GPT as a GGUF file of llama.cpp's `gpt2` architecture: hyperparameters under gpt2.*, the
// tokenizer as a byte-level BPE vocabulary (tokens spelled in GPT-2's byte-to-unicode alphabet,
// merges as "left right"), and the tensors under llama.cpp's names with ggml's dims (an (out,
// in) matrix is {in, out}). The head is tied in trit and written again as output.weight, which
// the gpt2 loader requires. 2-D matrices take the asked type; norms, biases and the position
// table stay f32. A matrix whose quantized copy is already that type's blocks (an imported
// GGUF's) is written from its codes, so an import exports again to the same bytes. llama.cpp
// needs an end-of-text token and bans it under --ignore-eos, so the file gets one more token than
// the model, "<|endoftext|>" (id V, a control token) with zero embedding and head rows: no token
// of the model is ever banned or mistaken for the end.
#include "trit/io.h"
#include "trit/quant.h"
#include "trit/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// GPT-2's byte-level alphabet: bytes 33-126, 161-172 and 174-255 stand for themselves, the
// other 68 take code points 256, 257, ... in byte order.
static bool printable(unsigned b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174; }

static uint32_t byte_char(uint8_t b) {
    if (printable(b)) return b;
    uint32_t n = 0;
    for (unsigned c = 0; c < b; c++) n += !printable(c);
    return 256 + n;
}

// Appends the UTF-8 spelling of bytes[0..n) in the byte alphabet to out (4 bytes per byte at most).
static size_t spell(const uint8_t *bytes, size_t n, char *out) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t c = byte_char(bytes[i]);
        if (c < 0x80) {
            out[k++] = (char)c;
        } else {
            out[k++] = (char)(0xc0 | c >> 6);
            out[k++] = (char)(0x80 | (c & 0x3f));
        }
    }
    return k;
}

typedef struct export_buf {
    char **strs;
    size_t *lens;
    int64_t n;
} export_buf;

static void strs_free(export_buf *b) {
    for (int64_t i = 0; b->strs && i < b->n; i++) free(b->strs[i]);
    free(b->strs), free(b->lens);
}

#define EOT_TOKEN "<|endoftext|>"

// Token i of a model without a tokenizer: byte i for i < 256, then numbered placeholders.
static trit_status placeholder_token(int32_t i, const uint8_t **b, size_t *n, uint8_t *byte, char *name, size_t cap) {
    if (i < 256) {
        *byte = (uint8_t)i;
        *b = byte, *n = 1;
    } else {
        *n = (size_t)snprintf(name, cap, "<|t%d|>", (int)i);
        *b = (const uint8_t *)name;
    }
    return TRIT_OK;
}

// Tokens (V + 1: the model's, then the end-of-text token) and merges of tok, spelled for GGUF.
// tok NULL: V placeholder tokens and no merges.
static trit_status vocab(const trit_tokenizer *tok, int32_t V, export_buf *tokens, export_buf *merges) {
    const int32_t M = tok ? trit_tokenizer_num_merges(tok) : 0;
    tokens->strs = calloc((size_t)V + 1, sizeof(char *)), tokens->lens = calloc((size_t)V + 1, sizeof(size_t));
    merges->strs = calloc((size_t)M + 1, sizeof(char *)), merges->lens = calloc((size_t)M + 1, sizeof(size_t));
    if (!tokens->strs || !tokens->lens || !merges->strs || !merges->lens) return trit_error(TRIT_ERR_NOMEM, "gguf export: out of memory");
    for (int32_t i = 0; i < V; i++, tokens->n++) {
        const uint8_t *b;
        size_t n;
        uint8_t byte;
        char name[32];
        if (tok ? trit_tokenizer_token_bytes(tok, i, &b, &n) : placeholder_token(i, &b, &n, &byte, name, sizeof name))
            return TRIT_ERR_FORMAT;
        if (!tok && i >= 256) {  // placeholders are spelled as they are
            if (!(tokens->strs[i] = malloc(n + 1))) return trit_error(TRIT_ERR_NOMEM, "gguf export: out of memory");
            memcpy(tokens->strs[i], b, n + 1);
            tokens->lens[i] = n;
            continue;
        }
        if (!(tokens->strs[i] = malloc(2 * n + 1))) return trit_error(TRIT_ERR_NOMEM, "gguf export: out of memory");
        tokens->lens[i] = spell(b, n, tokens->strs[i]);
    }
    if (!(tokens->strs[V] = malloc(sizeof EOT_TOKEN))) return trit_error(TRIT_ERR_NOMEM, "gguf export: out of memory");
    memcpy(tokens->strs[V], EOT_TOKEN, sizeof EOT_TOKEN);
    tokens->lens[V] = sizeof EOT_TOKEN - 1;
    tokens->n++;
    for (int32_t r = 0; r < M; r++, merges->n++) {
        int32_t l, rt;
        const uint8_t *lb, *rb;
        size_t ln, rn;
        if (trit_tokenizer_merge(tok, r, &l, &rt) != TRIT_OK || trit_tokenizer_token_bytes(tok, l, &lb, &ln) != TRIT_OK ||
            trit_tokenizer_token_bytes(tok, rt, &rb, &rn) != TRIT_OK)
            return TRIT_ERR_FORMAT;
        char *s = malloc(2 * (ln + rn) + 2);
        if (!(merges->strs[r] = s)) return trit_error(TRIT_ERR_NOMEM, "gguf export: out of memory");
        size_t k = spell(lb, ln, s);
        s[k++] = ' ';
        merges->lens[r] = k + spell(rb, rn, s + k);
    }
    return TRIT_OK;
}

typedef struct tensor_list {
    trit_tensor **owned;  // (cap) converted copies, alive until the file is written
    int n, cap;
} tensor_list;

static uint32_t ggml_type_of(trit_dtype dt) {
    return dt == TRIT_F16    ? TRIT_GGML_F16
           : dt == TRIT_Q8_0 ? TRIT_GGML_Q8_0
           : dt == TRIT_Q4_0 ? TRIT_GGML_Q4_0
           : dt == TRIT_TQ2_0 ? TRIT_GGML_TQ2_0
           : dt == TRIT_TQ1_0 ? TRIT_GGML_TQ1_0
                              : TRIT_GGML_F32;
}

// The quantized copy of m's parameter t, or NULL.
static const trit_tensor *quantized_copy(const trit_gpt *m, const trit_tensor *t) {
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        if (trit_gpt_tensor(m, i) == t) return trit_gpt_quantized(m, i);
    return NULL;
}

// q (N, K) as dt blocks with `extra` rows after its own, when q's codes and scales are such
// blocks exactly (an imported GGUF's matrices): the file then gets the codes the run holds. NULL
// otherwise, and the values are encoded instead (ggml's quantizer rounds from the values before
// its scale is rounded to f16, so encoding decoded values again can pick other codes). The extra
// rows are zeros encoded by the dtype table, as for any other matrix.
static trit_tensor *as_blocks(const trit_tensor *q, trit_dtype dt, int64_t extra) {
    if (!q || trit_quant_ggml_side_dtype(dt) != q->dtype || q->ndim != 2) return NULL;
    trit_tensor *b = trit_quant_to_ggml(q, dt);
    if (!b || !extra) return b;
    const int64_t shape[2] = {q->shape[0] + extra, q->shape[1]}, K = q->shape[1];
    trit_tensor *p = trit_tensor_new(dt, 2, shape);
    float *zeros = p ? calloc((size_t)K, sizeof(float)) : NULL;
    if (zeros) {
        memcpy(trit_tensor_ptr(p), trit_tensor_ptr(b), trit_tensor_nbytes(b));
        for (int64_t r = q->shape[0]; r < shape[0]; r++)
            trit_dtype_traits_of(dt)->from_f32((uint8_t *)trit_tensor_ptr(p) + trit_dtype_nbytes(dt, r * K), zeros, K,
                                               NULL, r * K);
    } else {
        trit_tensor_free(p);
        p = NULL;
    }
    free(zeros);
    trit_tensor_free(b);
    return p;
}

// Adds parameter `from` of m under `name`, converted to dt (matrices) or f32 (the rest), with
// `extra_rows` zero rows after its own (the end-of-text token's).
static trit_status add_rows(trit_gguf *g, tensor_list *l, const trit_gpt *m, const char *from, const char *name,
                            trit_dtype dt, int64_t extra_rows) {
    const trit_tensor *t = trit_gpt_find(m, from);
    if (!t) return TRIT_ERR_INVALID;
    if (t->ndim != 2) dt = TRIT_F32;
    if (l->n == l->cap) return trit_error(TRIT_ERR_RANGE, "gguf export: more tensors than the config gives");
    int64_t shape[2] = {t->shape[0] + extra_rows, t->ndim == 2 ? t->shape[1] : 1};
    const trit_tensor *q = quantized_copy(m, t);
    trit_tensor *c = as_blocks(q, dt, extra_rows);
    if (!t->data && !q) return trit_error(TRIT_ERR_STATE, "gguf export: '%s' has neither values nor codes", t->name);
    if (!t->data) t = q;  // a model made without the values of its quantized matrices: their codes
    if (c) {
        l->owned[l->n++] = c;
        const uint64_t ne[2] = {(uint64_t)shape[1], (uint64_t)shape[0]};
        return trit_gguf_add_tensor(g, name, ggml_type_of(dt), 2, ne, trit_tensor_ptr(c), trit_tensor_nbytes(c));
    }
    if (!(c = trit_tensor_new(dt, t->ndim, shape))) return TRIT_ERR_NOMEM;
    l->owned[l->n++] = c;
    // The zero rows are encoded like any other (so q4_0 blocks of zeros hold code 8, scale 0).
    trit_tensor *padded = extra_rows ? trit_tensor_new(TRIT_F32, t->ndim, shape) : NULL;
    trit_tensor rows;  // padded's first rows, the parameter's shape
    trit_status s = extra_rows && !padded ? TRIT_ERR_NOMEM : TRIT_OK;
    if (s == TRIT_OK && padded) s = trit_tensor_view_slice(padded, 0, 0, t->shape[0], 1, &rows);
    if (s == TRIT_OK && padded) s = trit_tensor_copy(&rows, t);
    if (s == TRIT_OK) s = trit_tensor_copy(c, padded ? padded : t);
    trit_tensor_free(padded);
    const uint64_t ne[2] = {(uint64_t)shape[t->ndim - 1], t->ndim == 2 ? (uint64_t)shape[0] : 1};
    if (s == TRIT_OK) s = trit_gguf_add_tensor(g, name, ggml_type_of(dt), t->ndim, ne, trit_tensor_ptr(c), trit_tensor_nbytes(c));
    return s;
}

static trit_status add(trit_gguf *g, tensor_list *l, const trit_gpt *m, const char *from, const char *name, trit_dtype dt) {
    return add_rows(g, l, m, from, name, dt, 0);
}

static trit_status add_tensors(trit_gguf *g, tensor_list *l, const trit_gpt *m, trit_dtype dt) {
    const trit_gpt_config *c = trit_gpt_get_config(m);
    // Ternary models keep a higher-precision embedding and head (as BitNet's do): q8_0.
    const trit_dtype et = dt == TRIT_TQ2_0 || dt == TRIT_TQ1_0 ? TRIT_Q8_0 : dt;
    trit_status s = add_rows(g, l, m, "wte.weight", "token_embd.weight", et, 1);
    if (s == TRIT_OK) s = add(g, l, m, "wpe.weight", "position_embd.weight", TRIT_F32);
    if (s == TRIT_OK) s = add(g, l, m, "ln_f.weight", "output_norm.weight", TRIT_F32);
    if (s == TRIT_OK) s = add(g, l, m, "ln_f.bias", "output_norm.bias", TRIT_F32);
    if (s == TRIT_OK) s = add_rows(g, l, m, "wte.weight", "output.weight", et, 1);
    static const char *const pairs[][2] = {
        {"ln_1.weight", "attn_norm.weight"},  {"ln_1.bias", "attn_norm.bias"},
        {"attn.c_attn.weight", "attn_qkv.weight"}, {"attn.c_attn.bias", "attn_qkv.bias"},
        {"attn.c_proj.weight", "attn_output.weight"}, {"attn.c_proj.bias", "attn_output.bias"},
        {"ln_2.weight", "ffn_norm.weight"},   {"ln_2.bias", "ffn_norm.bias"},
        {"mlp.c_fc.weight", "ffn_up.weight"}, {"mlp.c_fc.bias", "ffn_up.bias"},
        {"mlp.c_proj.weight", "ffn_down.weight"}, {"mlp.c_proj.bias", "ffn_down.bias"},
    };
    for (int64_t i = 0; i < c->n_layer && s == TRIT_OK; i++)
        for (size_t p = 0; p < sizeof pairs / sizeof pairs[0] && s == TRIT_OK; p++) {
            char from[64], to[64];
            snprintf(from, sizeof from, "h.%lld.%s", (long long)i, pairs[p][0]);
            snprintf(to, sizeof to, "blk.%lld.%s", (long long)i, pairs[p][1]);
            s = add(g, l, m, from, to, dt);
        }
    return s;
}

static trit_status check(const trit_gpt *m, const trit_tokenizer *tok, trit_dtype dt) {
    const trit_gpt_config *c = trit_gpt_get_config(m);
    if (dt != TRIT_F32 && dt != TRIT_F16 && dt != TRIT_Q8_0 && dt != TRIT_Q4_0 && dt != TRIT_TQ2_0 && dt != TRIT_TQ1_0)
        return trit_error(TRIT_ERR_INVALID, "gguf export: --type must be f32, f16, q8_0, q4_0, tq2_0 or tq1_0");
    if (c->norm != TRIT_NORM_LAYER || c->mlp != TRIT_MLP_GELU || c->pos != TRIT_POS_LEARNED || !c->bias)
        return trit_error(TRIT_ERR_UNSUPPORTED, "gguf export: llama.cpp's gpt2 architecture needs LayerNorm, GELU, "
                          "learned positions and biases (this model has --norm %s --mlp %s --pos %s --bias %d)",
                          c->norm == TRIT_NORM_LAYER ? "layer" : "rms", c->mlp == TRIT_MLP_GELU ? "gelu" : "swiglu",
                          c->pos == TRIT_POS_LEARNED ? "learned" : "rope", c->bias ? 1 : 0);
    if (c->subln)
        return trit_error(TRIT_ERR_UNSUPPORTED, "gguf export: llama.cpp's gpt2 architecture has no SubLN norms "
                          "(this model was trained with --subln)");
    const int64_t blk = trit_dtype_block(dt);
    if (blk > 1 && (c->n_embd % blk || trit_gpt_mlp_hidden(c) % blk))
        return trit_error(TRIT_ERR_SHAPE, "gguf export: %s needs rows that are multiples of %lld (width %lld, MLP %lld)",
                          trit_dtype_name(dt), (long long)blk, (long long)c->n_embd, (long long)trit_gpt_mlp_hidden(c));
    if (tok && trit_tokenizer_vocab_size(tok) != c->vocab_size)
        return trit_error(TRIT_ERR_FORMAT, "gguf export: the tokenizer has %d tokens, the model %lld",
                          (int)trit_tokenizer_vocab_size(tok), (long long)c->vocab_size);
    return TRIT_OK;
}

trit_status trit_export_gguf(const trit_gpt *m, const trit_tokenizer *tok, trit_dtype dt, const char *path) {
    if (!m || !path) return trit_error(TRIT_ERR_INVALID, "gguf export: NULL argument");
    trit_status s = check(m, tok, dt);
    if (s != TRIT_OK) return s;
    const trit_gpt_config *c = trit_gpt_get_config(m);
    trit_gguf *g = trit_gguf_new();
    export_buf tokens = {0}, merges = {0};
    tensor_list l = {.cap = (int)(5 + 12 * c->n_layer)};
    l.owned = calloc((size_t)l.cap, sizeof *l.owned);
    int32_t *types = calloc((size_t)c->vocab_size + 1, sizeof *types);
    if (!g || !types || !l.owned) s = trit_error(TRIT_ERR_NOMEM, "gguf export: out of memory");
    if (s == TRIT_OK) s = vocab(tok, (int32_t)c->vocab_size, &tokens, &merges);
    if (s == TRIT_OK) {
        static const uint32_t file_type[] = {[TRIT_F32] = 0, [TRIT_F16] = 1, [TRIT_Q8_0] = 7, [TRIT_Q4_0] = 2,
                                             [TRIT_TQ2_0] = 37, [TRIT_TQ1_0] = 36};
        trit_gguf_kv_str(g, "general.architecture", "gpt2");
        trit_gguf_kv_str(g, "general.name", "trit");
        trit_gguf_kv_u32(g, "general.file_type", file_type[dt]);
        trit_gguf_kv_u32(g, "gpt2.context_length", (uint32_t)c->seq_len);
        trit_gguf_kv_u32(g, "gpt2.embedding_length", (uint32_t)c->n_embd);
        trit_gguf_kv_u32(g, "gpt2.feed_forward_length", (uint32_t)trit_gpt_mlp_hidden(c));
        trit_gguf_kv_u32(g, "gpt2.block_count", (uint32_t)c->n_layer);
        trit_gguf_kv_u32(g, "gpt2.attention.head_count", (uint32_t)c->n_head);
        trit_gguf_kv_f32(g, "gpt2.attention.layer_norm_epsilon", (float)c->norm_eps);
        trit_gguf_kv_str(g, "tokenizer.ggml.model", "gpt2");
        trit_gguf_kv_str(g, "tokenizer.ggml.pre", "gpt-2");
        trit_gguf_kv_strs(g, "tokenizer.ggml.tokens", (const char *const *)tokens.strs, tokens.lens, (uint64_t)tokens.n);
        for (int64_t i = 0; i < c->vocab_size; i++) types[i] = !tok && i >= 256 ? 3 : 1;  // normal, or placeholders
        types[c->vocab_size] = 3;                                   // control
        trit_gguf_kv_i32s(g, "tokenizer.ggml.token_type", types, (uint64_t)c->vocab_size + 1);
        trit_gguf_kv_strs(g, "tokenizer.ggml.merges", (const char *const *)merges.strs, merges.lens, (uint64_t)merges.n);
        trit_gguf_kv_u32(g, "tokenizer.ggml.bos_token_id", (uint32_t)c->vocab_size);
        trit_gguf_kv_u32(g, "tokenizer.ggml.eos_token_id", (uint32_t)c->vocab_size);
        s = add_tensors(g, &l, m, dt);
    }
    if (s == TRIT_OK) s = trit_gguf_write(g, path);
    for (int i = 0; i < l.n; i++) trit_tensor_free(l.owned[i]);
    free(l.owned);
    strs_free(&tokens), strs_free(&merges);
    free(types);
    trit_gguf_free(g);
    return s;
}
