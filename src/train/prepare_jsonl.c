// JSON Lines into token shards, as llm.c's data scripts write them: every document (a string
// field of one JSON object per line) becomes <|endoftext|> followed by its tokens, its text
// encoded as ordinary text; the last val_fraction of the tokens is the validation shard.
#define _POSIX_C_SOURCE 200809L
#include "trit/io.h"
#include "trit/train.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct id_buf {
    int32_t *ids;
    size_t n, cap;
} id_buf;

static trit_status append(id_buf *b, const int32_t *ids, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1 << 16;
        while (cap < b->n + n) cap *= 2;
        int32_t *grown = realloc(b->ids, cap * sizeof *grown);
        if (!grown) return trit_error(TRIT_ERR_NOMEM, "cannot hold %zu tokens", cap);
        b->ids = grown;
        b->cap = cap;
    }
    memcpy(b->ids + b->n, ids, n * sizeof *ids);
    b->n += n;
    return TRIT_OK;
}

static trit_status document(const trit_tokenizer *tok, int32_t eot, const char *path, int64_t line, const char *text,
                            size_t len, const char *field, id_buf *out) {
    cJSON *j = cJSON_ParseWithLength(text, len);
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(j, field);
    trit_status s = TRIT_OK;
    if (!cJSON_IsObject(j))
        s = trit_error(TRIT_ERR_FORMAT, "'%s' line %lld is not a JSON object: JSON Lines holds one object per line",
                       path, (long long)line);
    else if (!cJSON_IsString(f))
        s = trit_error(TRIT_ERR_FORMAT, "'%s' line %lld has no string field \"%s\": pass --field with the name of "
                       "the field that holds the text", path, (long long)line, field);
    int32_t *ids = NULL;
    size_t n = 0;
    if (s == TRIT_OK) s = append(out, &eot, 1);
    if (s == TRIT_OK) s = trit_tokenizer_encode_ordinary(tok, f->valuestring, strlen(f->valuestring), &ids, &n);
    if (s == TRIT_OK) s = append(out, ids, n);
    free(ids);
    cJSON_Delete(j);
    return s;
}

static trit_status tokenize_jsonl(const trit_tokenizer *tok, const char *path, const char *field, id_buf *out,
                                  int64_t *docs) {
    const int32_t eot = trit_tokenizer_special_id(tok, "<|endoftext|>");
    if (eot < 0)
        return trit_error(TRIT_ERR_INVALID, "JSON Lines documents are separated by <|endoftext|>, which this %s "
                          "tokenizer does not have: pass --tokenizer gpt2:DIR",
                          trit_tokenizer_kind_name(trit_tokenizer_get_kind(tok)));
    uint8_t *data;
    size_t len;
    trit_status s = trit_file_read_all(path, &data, &len);
    int64_t line = 0;
    *docs = 0;
    for (size_t i = 0; s == TRIT_OK && i < len;) {
        const uint8_t *nl = memchr(data + i, '\n', len - i);
        const size_t end = nl ? (size_t)(nl - data) : len;
        line++;
        size_t k = i;
        while (k < end && (data[k] == ' ' || data[k] == '\t' || data[k] == '\r')) k++;
        if (k < end) {
            s = document(tok, eot, path, line, (const char *)data + i, end - i, field, out);
            *docs += 1;
        }
        i = end + 1;
    }
    free(data);
    if (s == TRIT_OK && *docs == 0)
        s = trit_error(TRIT_ERR_INVALID, "'%s' has no documents: expected one JSON object per line", path);
    return s;
}

trit_status trit_prepare_jsonl(const char *path, const char *field, const trit_tokenizer *tok, double val_fraction,
                               const char *out_dir, trit_prepare_result *res) {
    if (!path || !field || !tok || !out_dir) return trit_error(TRIT_ERR_INVALID, "trit_prepare_jsonl: NULL argument");
    if (!(val_fraction > 0 && val_fraction < 1))
        return trit_error(TRIT_ERR_RANGE, "validation fraction must be in (0, 1), got %g", val_fraction);
    if (trit_tokenizer_vocab_size(tok) > TRIT_SHARD_MAX_VOCAB)
        return trit_error(TRIT_ERR_RANGE, "a vocabulary of %d tokens does not fit the uint16 tokens of a shard",
                          (int)trit_tokenizer_vocab_size(tok));
    id_buf b = {0};
    int64_t docs = 0;
    trit_status s = tokenize_jsonl(tok, path, field, &b, &docs);
    const int64_t nv = (int64_t)((double)b.n * val_fraction), nt = (int64_t)b.n - nv;
    if (s == TRIT_OK && (nt < 1 || nv < 1))
        s = trit_error(TRIT_ERR_INVALID, "'%s' gives only %zu tokens: too few to split %g for validation", path, b.n,
                       val_fraction);
    char tok_path[TRIT_PATH_MAX + 32], train[TRIT_PATH_MAX + 32], val[TRIT_PATH_MAX + 32];
    bool made_dir = false;
    if (s == TRIT_OK) s = trit_path_join(tok_path, sizeof tok_path, out_dir, TRIT_CKPT_TOKENIZER);
    if (s == TRIT_OK) s = trit_path_join(train, sizeof train, out_dir, TRIT_DATA_TRAIN);
    if (s == TRIT_OK) s = trit_path_join(val, sizeof val, out_dir, TRIT_DATA_VAL);
    if (s == TRIT_OK) s = trit_make_dir(out_dir, &made_dir);
    if (s == TRIT_OK) {
        s = trit_shard_write(train, b.ids, nt);
        if (s == TRIT_OK) s = trit_shard_write(val, b.ids + nt, nv);
        if (s == TRIT_OK) s = trit_tokenizer_save(tok, tok_path);
        if (s != TRIT_OK) {  // each file is written atomically: whole or absent
            char why[1024];
            snprintf(why, sizeof why, "%s", trit_last_error());
            unlink(val), unlink(train), unlink(tok_path);
            if (made_dir) rmdir(out_dir);
            trit_error(s, "%s", why);
        }
    }
    free(b.ids);
    if (s == TRIT_OK && res) *res = (trit_prepare_result){trit_tokenizer_vocab_size(tok), nt, nv};
    if (s == TRIT_OK) trit_log(TRIT_LOG_INFO, "%s: %lld documents", path, (long long)docs);
    return s;
}
