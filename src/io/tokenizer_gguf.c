// A tokenizer from a GGUF file's tokenizer.ggml.* keys (model "gpt2": tokens spelled in GPT-2's
// byte-to-unicode alphabet, merges as "left right" lines). A vocabulary that is a character
// table (no merges, single-byte tokens in increasing order) or trit's BPE (bytes 0..255 in
// order, then one token per merge) reads back as that kind, as trit's GGUF export wrote it; any
// other is GPT-2's tokenizer, made by the vocab.json + merges.txt reader from the same strings.
#include "trit/io.h"
#include "io/bytes_map.h"
#include "io/tokenizer_gpt2.h"
#include "io/tokenizer_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define K_TOKENS "tokenizer.ggml.tokens"
#define K_MERGES "tokenizer.ggml.merges"

typedef struct vocab {
    uint8_t *pool;
    int64_t *off;  // (V + 1)
    int32_t V;
    bool spelled;  // every token is spelled in the byte alphabet
} vocab;

static trit_status read_vocab(const trit_gguf_file *f, int32_t V, vocab *v) {
    size_t total = 0;
    for (int32_t i = 0; i < V; i++) {
        const char *s;
        size_t n;
        trit_gguf_arr_str(f, K_TOKENS, (uint64_t)i, &s, &n);
        total += n;
    }
    v->pool = malloc(total + 1), v->off = malloc(sizeof(int64_t) * ((size_t)V + 1));
    if (!v->pool || !v->off) return trit_error(TRIT_ERR_NOMEM, "gguf tokenizer: out of memory");
    v->V = V, v->spelled = true, v->off[0] = 0;
    for (int32_t i = 0; i < V; i++) {
        const char *s;
        size_t n;
        trit_gguf_arr_str(f, K_TOKENS, (uint64_t)i, &s, &n);
        const int64_t k = v->spelled ? trit_gpt2_unspell(s, n, v->pool + v->off[i]) : -1;
        v->spelled = k >= 0;
        v->off[i + 1] = v->off[i] + (k >= 0 ? k : 0);
    }
    return TRIT_OK;
}

static trit_tokenizer *char_kind(const vocab *v) {
    uint8_t bytes[256];
    for (int32_t i = 0; i < v->V; i++) {
        if (v->off[i + 1] - v->off[i] != 1 || (i && v->pool[v->off[i]] <= bytes[i - 1])) return NULL;
        bytes[i] = v->pool[v->off[i]];
    }
    trit_tokenizer *tok = trit_tokenizer_alloc(TRIT_TOKENIZER_CHAR);
    if (tok && trit_tokenizer_char_build(tok, bytes, v->V) != TRIT_OK) {
        trit_tokenizer_free(tok);
        return NULL;
    }
    return tok;
}

// trit's BPE: bytes 0..255, then merge r makes token 256 + r. NULL (no error) when v is not that.
static trit_tokenizer *bpe_kind(const trit_gguf_file *f, const vocab *v, uint64_t M) {
    if (v->V != 256 + (int64_t)M) return NULL;
    for (int32_t i = 0; i < 256; i++)
        if (v->off[i + 1] - v->off[i] != 1 || v->pool[v->off[i]] != i) return NULL;
    trit_bytes_map map;
    int32_t *merges = malloc(sizeof(int32_t) * 2 * (size_t)(M ? M : 1));
    uint8_t *buf = NULL;
    bool ok = merges && trit_bytes_map_init(&map, v->pool, v->off, v->V);
    for (int32_t i = 0; ok && i < v->V; i++) ok = trit_bytes_map_add(&map, i) < 0;
    for (uint64_t r = 0; ok && r < M; r++) {
        const char *s, *sp;
        size_t n;
        trit_gguf_arr_str(f, K_MERGES, r, &s, &n);
        ok = (sp = memchr(s, ' ', n)) != NULL && (buf = realloc(buf, n + 1)) != NULL;
        const int64_t a = ok ? trit_gpt2_unspell(s, (size_t)(sp - s), buf) : -1, b = a >= 0 ? trit_gpt2_unspell(sp + 1, n - (size_t)(sp - s) - 1, buf + a) : -1;
        merges[2 * r] = a > 0 ? trit_bytes_map_get(&map, buf, (size_t)a) : -1;
        merges[2 * r + 1] = b > 0 ? trit_bytes_map_get(&map, buf + a, (size_t)b) : -1;
        ok = ok && merges[2 * r] >= 0 && merges[2 * r + 1] >= 0 && trit_bytes_map_get(&map, buf, (size_t)(a + b)) == 256 + (int32_t)r;
    }
    if (merges) trit_bytes_map_free(&map);
    free(buf);
    trit_tokenizer *tok = ok ? trit_tokenizer_alloc(TRIT_TOKENIZER_BPE) : NULL;
    if (tok && trit_tokenizer_bpe_build(tok, merges, (int32_t)M) != TRIT_OK) {
        trit_tokenizer_free(tok);
        tok = NULL;
    }
    if (!tok) free(merges);
    return tok;
}

// GPT-2's tokenizer from the same strings vocab.json and merges.txt hold.
static trit_tokenizer *gpt2_kind(const trit_gguf_file *f, int32_t V, uint64_t M, const char *name) {
    cJSON *o = cJSON_CreateObject();
    char *json = NULL, *merges = NULL, *buf = NULL;
    size_t len = 0, cap = 0;
    bool ok = o != NULL;
    for (int32_t i = 0; ok && i < V; i++) {
        const char *s;
        size_t n;
        trit_gguf_arr_str(f, K_TOKENS, (uint64_t)i, &s, &n);
        ok = (buf = realloc(buf, n + 1)) != NULL && memchr(s, 0, n) == NULL;
        if (ok) memcpy(buf, s, n), buf[n] = 0;
        ok = ok && cJSON_AddNumberToObject(o, buf, i) != NULL;
    }
    free(buf);
    buf = NULL;
    for (uint64_t r = 0; ok && r < M; r++) {
        const char *s;
        size_t n;
        trit_gguf_arr_str(f, K_MERGES, r, &s, &n);
        if (len + n + 2 > cap) {
            cap = 2 * (len + n + 2);
            char *grown = realloc(merges, cap);
            ok = grown != NULL;
            if (ok) merges = grown;
        }
        if (ok) memcpy(merges + len, s, n), merges[len + n] = '\n', len += n + 1;
    }
    json = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    free(buf);
    trit_tokenizer *tok = NULL;
    if (!json) trit_error(TRIT_ERR_NOMEM, "gguf tokenizer: out of memory, or a token holds a NUL byte");
    else tok = trit_tokenizer_gpt2_parse(json, strlen(json), name, merges ? merges : "", len, name);
    free(json), free(merges);
    return tok;
}

trit_status trit_tokenizer_from_gguf(const trit_gguf_file *f, int32_t V, trit_tokenizer **out) {
    *out = NULL;
    const char *model;
    size_t mn;
    uint64_t n_tokens, M = 0;
    trit_status s = trit_gguf_get_str(f, "tokenizer.ggml.model", &model, &mn);
    if (s == TRIT_OK && !(mn == 4 && memcmp(model, "gpt2", 4) == 0))
        return trit_error(TRIT_ERR_UNSUPPORTED, "gguf: tokenizer.ggml.model is '%.*s'; trit reads GPT-2's byte-level BPE "
                          "(\"gpt2\") only", (int)(mn > 40 ? 40 : mn), model);
    if (s == TRIT_OK) s = trit_gguf_get_arr(f, K_TOKENS, TRIT_GGUF_TYPE_STRING, &n_tokens);
    if (s == TRIT_OK && trit_gguf_has(f, K_MERGES)) s = trit_gguf_get_arr(f, K_MERGES, TRIT_GGUF_TYPE_STRING, &M);
    if (s != TRIT_OK) return s;
    if (V < 1 || (uint64_t)V > n_tokens)
        return trit_error(TRIT_ERR_FORMAT, "gguf: the model has %d tokens but tokenizer.ggml.tokens lists %llu", (int)V,
                          (unsigned long long)n_tokens);
    uint64_t nt = 0;
    if (trit_gguf_has(f, "tokenizer.ggml.token_type") &&
        trit_gguf_get_arr(f, "tokenizer.ggml.token_type", TRIT_GGUF_TYPE_I32, &nt) == TRIT_OK && nt >= (uint64_t)V &&
        V > 256 && M == 0) {
        bool placeholders = true;  // trit's export of a model without a tokenizer: no tokenizer
        for (int32_t i = 256; i < V && placeholders; i++) placeholders = trit_gguf_arr_i32(f, "tokenizer.ggml.token_type", (uint64_t)i) == 3;
        if (placeholders) return TRIT_OK;
    }
    vocab v = {0};
    s = read_vocab(f, V, &v);
    trit_tokenizer *tok = NULL;
    if (s == TRIT_OK && v.spelled) tok = M == 0 && V <= 256 ? char_kind(&v) : bpe_kind(f, &v, M);
    free(v.pool), free(v.off);
    if (s == TRIT_OK && !tok) tok = gpt2_kind(f, V, M, "the GGUF's tokenizer.ggml.tokens/merges");
    if (s == TRIT_OK && !tok) return TRIT_ERR_FORMAT;
    *out = tok;
    return s;
}
