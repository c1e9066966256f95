// GPT-2's tokenizer written in Hugging Face's layout: vocab.json (token -> id, tokens spelled in
// GPT-2's byte alphabet), merges.txt ("#version: 0.2" then "A B" per merge in rank order), and
// tokenizer_config.json + special_tokens_map.json naming the special tokens, the files
// transformers' GPT2TokenizerFast.from_pretrained reads. trit_tokenizer_load_gpt2 reads them back.
#define _POSIX_C_SOURCE 200809L
#include "io/tokenizer_internal.h"
#include "io/tokenizer_gpt2.h"
#include "trit/io.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char eot_text[] = "<|endoftext|>";

// dir/name into path (4096 bytes), or a message when it does not fit.
static trit_status join(char *path, const char *dir, const char *name) {
    const int n = snprintf(path, 4096, "%s/%s", dir, name);
    if (n < 0 || n >= 4096) return trit_error(TRIT_ERR_INVALID, "path '%s/%s' is too long", dir, name);
    return TRIT_OK;
}

// Writes `n` bytes of `data` as dir/name, atomically.
static trit_status put(const char *dir, const char *name, const char *data, size_t n) {
    char path[4096];
    trit_status s = join(path, dir, name);
    return s == TRIT_OK ? trit_file_write_atomic(path, data, n) : s;
}

// Token `id` spelled in the alphabet as UTF-8 into out (2 bytes per byte at most, NUL-ended).
static size_t spell(const trit_tokenizer *tok, const unsigned cp[256], int32_t id, char *out) {
    size_t k = 0;
    for (int64_t i = tok->off[id]; i < tok->off[id + 1]; i++) {
        const unsigned c = cp[tok->pool[i]];
        if (c < 0x80) {
            out[k++] = (char)c;
        } else {
            out[k++] = (char)(0xC0 | c >> 6);
            out[k++] = (char)(0x80 | (c & 0x3F));
        }
    }
    out[k] = 0;
    return k;
}

static int64_t longest_token(const trit_tokenizer *tok) {
    int64_t n = 0;
    for (int32_t i = 0; i < tok->vocab_size; i++)
        if (tok->off[i + 1] - tok->off[i] > n) n = tok->off[i + 1] - tok->off[i];
    return n;
}

// Every token spelled in the alphabet, specials too (GPT-2's own vocab.json does the same; a
// special of printable ASCII, like <|endoftext|>, is spelled as itself).
static char *vocab_json(const trit_tokenizer *tok, const unsigned cp[256], char *buf) {
    cJSON *o = cJSON_CreateObject();
    for (int32_t id = 0; o && id < tok->vocab_size; id++) {
        spell(tok, cp, id, buf);
        if (!cJSON_AddNumberToObject(o, buf, id)) cJSON_Delete(o), o = NULL;
    }
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static char *merges_txt(const trit_tokenizer *tok, const unsigned cp[256], size_t *len) {
    const int32_t n = trit_tokenizer_num_merges(tok);
    size_t cap = 64, k = 0;
    int32_t a, b;
    for (int32_t r = 0; r < n; r++) {
        trit_tokenizer_merge(tok, r, &a, &b);
        cap += 2 * (size_t)(tok->off[a + 1] - tok->off[a] + tok->off[b + 1] - tok->off[b]) + 3;
    }
    char *out = malloc(cap);
    if (!out) return NULL;
    k += (size_t)snprintf(out, cap, "#version: 0.2\n");
    for (int32_t r = 0; r < n; r++) {
        trit_tokenizer_merge(tok, r, &a, &b);
        k += spell(tok, cp, a, out + k);
        out[k++] = ' ';
        k += spell(tok, cp, b, out + k);
        out[k++] = '\n';
    }
    *len = k;
    return out;
}

// transformers' two small files: the special tokens, and <|endoftext|> (if the vocabulary has it)
// as the beginning, end and unknown token the way GPT-2's own repository names it.
static trit_status write_configs(const trit_tokenizer *tok, const char *dir) {
    const int32_t eot = trit_tokenizer_gpt2_special_id(tok, eot_text);
    cJSON *cfg = cJSON_CreateObject(), *map = cJSON_CreateObject(), *dec = cJSON_CreateObject();
    cJSON *extra = cJSON_CreateArray();
    char key[16], text[4096];
    for (int32_t i = 0; cfg && map && dec && extra && i < tok->gpt2->n_special; i++) {
        const int32_t id = tok->gpt2->special[i];
        const int64_t n = tok->off[id + 1] - tok->off[id];
        snprintf(text, sizeof text, "%.*s", (int)n, (const char *)tok->pool + tok->off[id]);
        snprintf(key, sizeof key, "%d", (int)id);
        cJSON *e = cJSON_AddObjectToObject(dec, key);
        cJSON_AddStringToObject(e, "content", text);
        cJSON_AddFalseToObject(e, "lstrip");
        cJSON_AddFalseToObject(e, "normalized");
        cJSON_AddFalseToObject(e, "rstrip");
        cJSON_AddFalseToObject(e, "single_word");
        cJSON_AddTrueToObject(e, "special");
        if (id != eot) cJSON_AddItemToArray(extra, cJSON_CreateString(text));
    }
    cJSON_AddFalseToObject(cfg, "add_prefix_space");
    cJSON_AddItemToObject(cfg, "added_tokens_decoder", dec);
    for (int k = 0; eot >= 0 && k < 3; k++) {
        static const char *const roles[] = {"bos_token", "eos_token", "unk_token"};
        cJSON_AddStringToObject(cfg, roles[k], eot_text);
        cJSON_AddStringToObject(map, roles[k], eot_text);
    }
    if (cJSON_GetArraySize(extra) > 0) {
        cJSON_AddItemToObject(cfg, "additional_special_tokens", cJSON_Duplicate(extra, true));
        cJSON_AddItemToObject(map, "additional_special_tokens", extra);
    } else {
        cJSON_Delete(extra);
    }
    cJSON_AddFalseToObject(cfg, "clean_up_tokenization_spaces");
    cJSON_AddStringToObject(cfg, "tokenizer_class", "GPT2Tokenizer");
    char *a = cJSON_Print(cfg), *b = cJSON_Print(map);
    cJSON_Delete(cfg), cJSON_Delete(map);
    trit_status s = a && b ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "tokenizer export: out of memory");
    if (s == TRIT_OK) s = put(dir, "tokenizer_config.json", a, strlen(a));
    if (s == TRIT_OK) s = put(dir, "special_tokens_map.json", b, strlen(b));
    free(a), free(b);
    return s;
}

trit_status trit_tokenizer_save_gpt2_hf(const trit_tokenizer *tok, const char *dir) {
    if (!tok || !dir) return trit_error(TRIT_ERR_INVALID, "trit_tokenizer_save_gpt2_hf: NULL argument");
    if (tok->kind != TRIT_TOKENIZER_GPT2)
        return trit_error(TRIT_ERR_UNSUPPORTED, "Hugging Face's GPT-2 tokenizer files hold GPT-2's tokenizer; this one "
                          "is a %s tokenizer (`trit prepare --tokenizer gpt2:DIR` makes a run with GPT-2's)",
                          trit_tokenizer_kind_name(tok->kind));
    unsigned cp[256];
    for (unsigned b = 0; b < 256; b++) cp[b] = trit_gpt2_byte_code_point((uint8_t)b);
    char *buf = malloc(2 * (size_t)longest_token(tok) + 1);
    size_t merges_len = 0;
    char *vocab = buf ? vocab_json(tok, cp, buf) : NULL;
    char *merges = vocab ? merges_txt(tok, cp, &merges_len) : NULL;
    trit_status s = merges ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "tokenizer export: out of memory");
    if (s == TRIT_OK) s = put(dir, "vocab.json", vocab, strlen(vocab));
    if (s == TRIT_OK) s = put(dir, "merges.txt", merges, merges_len);
    if (s == TRIT_OK) s = write_configs(tok, dir);
    free(buf), free(vocab), free(merges);
    return s;
}
