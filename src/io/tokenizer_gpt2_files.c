// Readers of GPT-2's tokenizer files. The vocabulary maps tokens to ids, each token spelled in
// GPT-2's byte alphabet (a printable character per byte: bytes 33-126, 161-172 and 174-255 as
// themselves, the other 68 as U+0100.. in byte order); each merge line "A B" joins two tokens
// into the token spelled AB. Formats: OpenAI's encoder.json + vocab.bpe, Hugging Face's
// vocab.json + merges.txt (the same contents), and tokenizer.json (model.vocab, model.merges as
// "A B" strings or [A, B] pairs, added_tokens as the special tokens).
#define _POSIX_C_SOURCE 200809L
#include "io/tokenizer_internal.h"
#include "io/tokenizer_gpt2.h"
#include "trit/io.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

unsigned trit_gpt2_byte_code_point(uint8_t b) {
    if (b <= 32) return 256u + b;                   // 0..32 -> U+0100..U+0120
    if (b >= 127 && b <= 160) return 256u + 33u + (b - 127u);  // -> U+0121..U+0142
    if (b == 173) return 256u + 67u;                // -> U+0143
    return b;
}

// The byte code point cp spells, or -1.
static int byte_of(unsigned cp) {
    if (cp < 256) return trit_gpt2_byte_code_point((uint8_t)cp) == cp ? (int)cp : -1;
    const unsigned k = cp - 256;
    return k < 33 ? (int)k : k < 67 ? (int)(127 + k - 33) : k == 67 ? 173 : -1;
}

int64_t trit_gpt2_unspell(const char *s, size_t n, uint8_t *out) {
    const uint8_t *u = (const uint8_t *)s;
    int64_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned cp;
        if (u[i] < 0x80) {
            cp = u[i++];
        } else if ((u[i] & 0xE0) == 0xC0 && i + 1 < n && (u[i + 1] & 0xC0) == 0x80) {
            cp = (unsigned)(u[i] & 0x1F) << 6 | (u[i + 1] & 0x3F);
            i += 2;
        } else {
            return -1;
        }
        const int b = byte_of(cp);
        if (b < 0) return -1;
        if (out) out[k] = (uint8_t)b;
        k++;
    }
    return k;
}

typedef struct reader {
    const char *vocab_name, *merges_name;
    trit_gpt2_spec sp;
    trit_bytes_map map;
    bool *made;                  // (V) made by a merge
    char msg[512];
} reader;

static void reader_init(reader *r, const char *vocab_name, const char *merges_name) {
    memset(r, 0, sizeof *r);
    r->vocab_name = vocab_name;
    r->merges_name = merges_name;
}

static void reader_free(reader *r) {
    free(r->sp.pool);
    free(r->sp.off);
    free(r->sp.merges);
    free(r->sp.special);
    free(r->made);
    trit_bytes_map_free(&r->map);
}

// ---- the vocabulary --------------------------------------------------------------------------

// Ids of `vocab` (a JSON object token -> id) must be 0..V-1, each once.
static trit_status read_ids(reader *r, const cJSON *vocab, int32_t V) {
    int64_t *len = r->sp.off + 1;
    for (int32_t i = 0; i < V; i++) len[i] = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        const double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!(d >= 0 && d < V && d == (double)(int32_t)d))
            return trit_error(TRIT_ERR_FORMAT, "'%s': token \"%.60s\" has id %s, expected an integer in [0, %d) (the "
                              "ids of %d tokens are 0..%d, each once)", r->vocab_name, e->string ? e->string : "",
                              cJSON_IsNumber(e) ? "out of range" : "that is not a number", (int)V, (int)V, (int)V - 1);
        const int32_t id = (int32_t)d;
        if (len[id] >= 0)
            return trit_error(TRIT_ERR_FORMAT, "'%s': id %d is given to two tokens (the ids of %d tokens are 0..%d, "
                              "each once)", r->vocab_name, (int)id, (int)V, (int)V - 1);
        const int64_t k = e->string ? trit_gpt2_unspell(e->string, strlen(e->string), NULL) : -1;
        if (k <= 0)
            return trit_error(TRIT_ERR_FORMAT, "'%s': token \"%.60s\" (id %d) is %s GPT-2's byte alphabet", r->vocab_name,
                              e->string ? e->string : "", (int)id, k == 0 ? "empty, not a word of" : "not spelled in");
        len[id] = k;
    }
    return TRIT_OK;
}

static trit_status read_vocab(reader *r, const cJSON *vocab) {
    if (!cJSON_IsObject(vocab))
        return trit_error(TRIT_ERR_FORMAT, "'%s' is not a JSON object of token -> id", r->vocab_name);
    const int V = cJSON_GetArraySize(vocab);
    if (V < 256 || V > TRIT_BPE_MAX_VOCAB)
        return trit_error(TRIT_ERR_FORMAT, "'%s' has %d tokens, a GPT-2 vocabulary has 256..%d", r->vocab_name, V,
                          TRIT_BPE_MAX_VOCAB);
    r->sp.vocab = V;
    r->sp.off = malloc(((size_t)V + 1) * sizeof *r->sp.off);
    r->made = calloc((size_t)V, sizeof *r->made);
    if (!r->sp.off || !r->made) return trit_error(TRIT_ERR_NOMEM, "cannot allocate a vocabulary of %d tokens", V);
    trit_status s = read_ids(r, vocab, V);
    if (s != TRIT_OK) return s;
    r->sp.off[0] = 0;
    for (int32_t i = 0; i < V; i++) r->sp.off[i + 1] += r->sp.off[i];
    r->sp.pool = malloc((size_t)r->sp.off[V]);
    if (!r->sp.pool) return trit_error(TRIT_ERR_NOMEM, "cannot allocate the vocabulary's text");
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        const int32_t id = (int32_t)e->valuedouble;
        trit_gpt2_unspell(e->string, strlen(e->string), r->sp.pool + r->sp.off[id]);
    }
    if (!trit_bytes_map_init(&r->map, r->sp.pool, r->sp.off, V))
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate the vocabulary's index");
    for (int32_t id = 0; id < V; id++) {
        const int32_t dup = trit_bytes_map_add(&r->map, id);
        if (dup >= 0)
            return trit_error(TRIT_ERR_FORMAT, "'%s': ids %d and %d spell the same token", r->vocab_name, (int)dup, (int)id);
    }
    r->sp.merges = malloc(((size_t)V + 1) * 3 * sizeof *r->sp.merges);
    r->sp.special = malloc((size_t)V * sizeof *r->sp.special);
    if (!r->sp.merges || !r->sp.special) return trit_error(TRIT_ERR_NOMEM, "cannot allocate the merge list");
    return TRIT_OK;
}

// ---- the merges --------------------------------------------------------------------------

static int32_t token_id(reader *r, const char *s, size_t n, uint8_t *buf) {
    const int64_t k = trit_gpt2_unspell(s, n, buf);
    return k > 0 ? trit_bytes_map_get(&r->map, buf, (size_t)k) : -1;
}

// Merge "a b" from line `line` of the merges.
static trit_status add_merge(reader *r, const char *a, size_t na, const char *b, size_t nb, int64_t line) {
    uint8_t *buf = malloc(na + nb + 1);
    if (!buf) return trit_error(TRIT_ERR_NOMEM, "cannot allocate a merge");
    const int32_t ia = token_id(r, a, na, buf), ib = token_id(r, b, nb, buf);
    trit_status s = TRIT_OK;
    if (ia < 0 || ib < 0) {
        const bool left = ia < 0;
        s = trit_error(TRIT_ERR_FORMAT, "'%s' line %lld: merge \"%.*s %.*s\" uses \"%.*s\", which '%s' does not have: "
                       "the two files do not belong together", r->merges_name, (long long)line, (int)na, a, (int)nb, b,
                       (int)(left ? na : nb), left ? a : b, r->vocab_name);
    } else if (r->sp.n_merges >= r->sp.vocab) {
        s = trit_error(TRIT_ERR_FORMAT, "'%s' has more merges than '%s' has tokens", r->merges_name, r->vocab_name);
    } else {
        const int64_t la = r->sp.off[ia + 1] - r->sp.off[ia], lb = r->sp.off[ib + 1] - r->sp.off[ib];
        memcpy(buf, r->sp.pool + r->sp.off[ia], (size_t)la);
        memcpy(buf + la, r->sp.pool + r->sp.off[ib], (size_t)lb);
        const int32_t t = trit_bytes_map_get(&r->map, buf, (size_t)(la + lb));
        if (t < 0)
            s = trit_error(TRIT_ERR_FORMAT, "'%s' line %lld: merge \"%.*s %.*s\" makes a token '%s' does not have: "
                           "the two files do not belong together", r->merges_name, (long long)line, (int)na, a, (int)nb,
                           b, r->vocab_name);
        else if (r->made[t])
            s = trit_error(TRIT_ERR_FORMAT, "'%s' line %lld: merge \"%.*s %.*s\" repeats an earlier merge's token",
                           r->merges_name, (long long)line, (int)na, a, (int)nb, b);
        if (s == TRIT_OK) {
            int32_t *m = r->sp.merges + 3 * r->sp.n_merges++;
            m[0] = ia, m[1] = ib, m[2] = t;
            r->made[t] = true;
        }
    }
    free(buf);
    return s;
}

// vocab.bpe / merges.txt: an optional "#version" first line, then one "A B" per line.
static trit_status read_merges_text(reader *r, const char *text, size_t n) {
    int64_t line = 0;
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(text + i, '\n', n - i);
        const size_t end = nl ? (size_t)(nl - text) : n;
        size_t e = end;
        if (e > i && text[e - 1] == '\r') e--;
        const char *s = text + i;
        const size_t len = e - i;
        line++;
        i = end + 1;
        if (line == 1 && len >= 8 && memcmp(s, "#version", 8) == 0) continue;
        if (len == 0 && i >= n) break;  // the final newline
        const char *sp = memchr(s, ' ', len);
        if (len == 0 || !sp || sp == s || sp == s + len - 1 || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1)))
            return trit_error(TRIT_ERR_FORMAT, "'%s' line %lld: expected two tokens separated by one space (like "
                              "\"\xc4\xa0 t\"), found \"%.*s\"", r->merges_name, (long long)line, (int)(len > 60 ? 60 : len), s);
        trit_status st = add_merge(r, s, (size_t)(sp - s), sp + 1, (size_t)(s + len - sp - 1), line);
        if (st != TRIT_OK) return st;
    }
    return TRIT_OK;
}

// Tokens neither bytes nor made by a merge: "<|...|>" ones are the special tokens.
static trit_status find_specials(reader *r) {
    for (int32_t id = 0; id < r->sp.vocab; id++) {
        const uint8_t *s = r->sp.pool + r->sp.off[id];
        const int64_t n = r->sp.off[id + 1] - r->sp.off[id];
        if (n < 5 || r->made[id]) continue;
        if (memcmp(s, "<|", 2) == 0 && memcmp(s + n - 2, "|>", 2) == 0) r->sp.special[r->sp.n_special++] = id;
    }
    return TRIT_OK;
}

static trit_tokenizer *finish(reader *r, trit_status s) {
    trit_tokenizer *tok = NULL;
    if (s == TRIT_OK) tok = trit_tokenizer_alloc(TRIT_TOKENIZER_GPT2);
    if (tok) {
        trit_bytes_map_free(&r->map);
        s = trit_tokenizer_gpt2_build(tok, &r->sp);  // takes the arrays
        if (s != TRIT_OK) {
            char why[768];
            snprintf(why, sizeof why, "%s", trit_last_error());
            trit_error(s, "GPT-2 tokenizer from '%s' and '%s': %s", r->vocab_name, r->merges_name, why);
            trit_tokenizer_free(tok);
            tok = NULL;
        }
    }
    reader_free(r);
    return tok;
}

static cJSON *parse_json(const char *text, size_t len, const char *name) {
    cJSON *j = cJSON_ParseWithLength(text, len);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        trit_error(TRIT_ERR_FORMAT, "'%s' is not valid JSON (error near byte %lld)", name,
                   at && at >= text && at <= text + len ? (long long)(at - text) : -1LL);
    }
    return j;
}

trit_tokenizer *trit_tokenizer_gpt2_parse(const char *vocab_json, size_t vocab_len, const char *vocab_name,
                                          const char *merges, size_t merges_len, const char *merges_name) {
    reader r;
    reader_init(&r, vocab_name, merges_name);
    cJSON *j = parse_json(vocab_json, vocab_len, vocab_name);
    trit_status s = j ? read_vocab(&r, j) : TRIT_ERR_FORMAT;
    cJSON_Delete(j);
    if (s == TRIT_OK) s = read_merges_text(&r, merges, merges_len);
    if (s == TRIT_OK) s = find_specials(&r);
    return finish(&r, s);
}

// ---- tokenizer.json ------------------------------------------------------------------------

static trit_status check_hf_kind(const cJSON *root, const char *name) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(model, "type");
    if (!cJSON_IsObject(model) || (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "BPE") != 0)))
        return trit_error(TRIT_ERR_FORMAT, "'%s': expected a \"model\" of type \"BPE\" (GPT-2's byte-level BPE)", name);
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const cJSON *pt = cJSON_GetObjectItemCaseSensitive(pre, "type");
    if (!cJSON_IsString(pt) || strcmp(pt->valuestring, "ByteLevel") != 0)
        return trit_error(TRIT_ERR_FORMAT, "'%s': the pre_tokenizer is %s, trit reads GPT-2's (\"ByteLevel\") only", name,
                          cJSON_IsString(pt) ? pt->valuestring : "missing");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pre, "add_prefix_space")))
        return trit_error(TRIT_ERR_FORMAT, "'%s': add_prefix_space is true; GPT-2's tokenizer adds no space", name);
    const cJSON *regex = cJSON_GetObjectItemCaseSensitive(pre, "use_regex");
    if (cJSON_IsFalse(regex))
        return trit_error(TRIT_ERR_FORMAT, "'%s': use_regex is false; GPT-2's tokenizer splits with its pattern", name);
    return TRIT_OK;
}

static trit_status read_hf_merges(reader *r, const cJSON *merges) {
    if (!cJSON_IsArray(merges))
        return trit_error(TRIT_ERR_FORMAT, "'%s': model.merges is missing or not an array", r->merges_name);
    int64_t line = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, merges) {
        line++;
        trit_status s;
        if (cJSON_IsString(m)) {  // "A B"
            const char *t = m->valuestring, *sp = strchr(t, ' ');
            if (!sp || sp == t || !sp[1] || strchr(sp + 1, ' '))
                return trit_error(TRIT_ERR_FORMAT, "'%s': merge %lld is \"%.60s\", expected two tokens separated by "
                                  "one space", r->merges_name, (long long)line, t);
            s = add_merge(r, t, (size_t)(sp - t), sp + 1, strlen(sp + 1), line);
        } else if (cJSON_GetArraySize(m) == 2 && cJSON_IsString(cJSON_GetArrayItem(m, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(m, 1))) {  // ["A", "B"]
            const char *a = cJSON_GetArrayItem(m, 0)->valuestring, *b = cJSON_GetArrayItem(m, 1)->valuestring;
            s = add_merge(r, a, strlen(a), b, strlen(b), line);
        } else {
            return trit_error(TRIT_ERR_FORMAT, "'%s': merge %lld is neither \"A B\" nor [\"A\", \"B\"]", r->merges_name,
                              (long long)line);
        }
        if (s != TRIT_OK) return s;
    }
    return TRIT_OK;
}

// added_tokens: each must be a token of the vocabulary, spelled as its content.
static trit_status read_added(reader *r, const cJSON *added) {
    const cJSON *a;
    cJSON_ArrayForEach(a, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(a, "id");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(a, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(content))
            return trit_error(TRIT_ERR_FORMAT, "'%s': an added token without a numeric \"id\" and a \"content\"", r->vocab_name);
        const size_t n = strlen(content->valuestring);
        const int32_t t = n ? trit_bytes_map_get(&r->map, (const uint8_t *)content->valuestring, n) : -1;
        if (t < 0 || (double)t != id->valuedouble)
            return trit_error(TRIT_ERR_FORMAT, "'%s': added token \"%.60s\" (id %g) is not that token of model.vocab; "
                              "trit reads added tokens that are in the vocabulary only", r->vocab_name,
                              content->valuestring, id->valuedouble);
        if (!r->made[t] && r->sp.off[t + 1] - r->sp.off[t] > 1) r->sp.special[r->sp.n_special++] = t;
    }
    return TRIT_OK;
}

trit_tokenizer *trit_tokenizer_gpt2_parse_hf(const char *json, size_t len, const char *name) {
    reader r;
    reader_init(&r, name, name);
    cJSON *root = parse_json(json, len, name);
    trit_status s = root ? check_hf_kind(root, name) : TRIT_ERR_FORMAT;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (s == TRIT_OK) s = read_vocab(&r, cJSON_GetObjectItemCaseSensitive(model, "vocab"));
    if (s == TRIT_OK) s = read_hf_merges(&r, cJSON_GetObjectItemCaseSensitive(model, "merges"));
    if (s == TRIT_OK) s = read_added(&r, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"));
    cJSON_Delete(root);
    return finish(&r, s);
}

// ---- files -----------------------------------------------------------------------------------

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static trit_tokenizer *load_pair(const char *vocab_path, const char *merges_path) {
    uint8_t *v = NULL, *m = NULL;
    size_t nv = 0, nm = 0;
    trit_tokenizer *tok = NULL;
    if (trit_file_read_all(vocab_path, &v, &nv) == TRIT_OK && trit_file_read_all(merges_path, &m, &nm) == TRIT_OK)
        tok = trit_tokenizer_gpt2_parse((const char *)v, nv, vocab_path, (const char *)m, nm, merges_path);
    free(v);
    free(m);
    return tok;
}

static trit_tokenizer *load_hf(const char *path) {
    uint8_t *j = NULL;
    size_t n = 0;
    trit_tokenizer *tok = NULL;
    if (trit_file_read_all(path, &j, &n) == TRIT_OK) tok = trit_tokenizer_gpt2_parse_hf((const char *)j, n, path);
    free(j);
    return tok;
}

trit_tokenizer *trit_tokenizer_load_gpt2(const char *path) {
    if (!path) {
        trit_error(TRIT_ERR_INVALID, "trit_tokenizer_load_gpt2: NULL path");
        return NULL;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        trit_error(TRIT_ERR_IO, "cannot open '%s': %s (expected a directory with GPT-2's tokenizer files)", path,
                   strerror(errno));
        return NULL;
    }
    if (S_ISREG(st.st_mode)) return load_hf(path);
    static const char *const pairs[][2] = {{"encoder.json", "vocab.bpe"}, {"vocab.json", "merges.txt"}};
    char a[4096], b[4096];
    for (int i = 0; i < 2; i++) {
        snprintf(a, sizeof a, "%s/%s", path, pairs[i][0]);
        snprintf(b, sizeof b, "%s/%s", path, pairs[i][1]);
        const bool ha = is_file(a), hb = is_file(b);
        if (ha && hb) return load_pair(a, b);
        if (ha || hb) {
            trit_error(TRIT_ERR_IO, "'%s' has %s but not %s: GPT-2's tokenizer needs both", path,
                       pairs[i][ha ? 0 : 1], pairs[i][ha ? 1 : 0]);
            return NULL;
        }
    }
    snprintf(a, sizeof a, "%s/tokenizer.json", path);
    if (is_file(a)) return load_hf(a);
    trit_error(TRIT_ERR_IO, "'%s' has no GPT-2 tokenizer files: expected encoder.json + vocab.bpe (OpenAI), "
               "vocab.json + merges.txt or tokenizer.json (Hugging Face)", path);
    return NULL;
}
