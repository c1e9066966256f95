// Token shards in the llm.c layout: a 1024-byte header of 256 little-endian int32
// ([0] magic 20240520, [1] version 1, [2] token count, the rest zero) then the tokens as uint16.
// And `prepare`: text file -> tokenizer -> train/val shards.
#define _POSIX_C_SOURCE 200809L
#include "trit/io.h"
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

trit_status trit_shard_write(const char *path, const int32_t *tokens, int64_t n) {
    if (!path || (!tokens && n > 0) || n < 0)
        return trit_error(TRIT_ERR_INVALID, "trit_shard_write: NULL path/tokens or negative count");
    if (n > INT32_MAX)
        return trit_error(TRIT_ERR_RANGE, "shard '%s': %lld tokens do not fit the int32 count of the header; split them into shards of at most %d",
                          path, (long long)n, INT32_MAX);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] > UINT16_MAX)
            return trit_error(TRIT_ERR_RANGE, "shard '%s': token %d at position %lld does not fit uint16 (shards need a vocabulary of at most %d)",
                              path, (int)tokens[i], (long long)i, TRIT_SHARD_MAX_VOCAB);
    uint8_t header[TRIT_SHARD_HEADER_BYTES] = {0};
    trit_le32_store(header, TRIT_SHARD_MAGIC);
    trit_le32_store(header + 4, TRIT_SHARD_VERSION);
    trit_le32_store(header + 8, (uint32_t)n);
    trit_atomic_file f;
    trit_status s = trit_atomic_open(&f, path);
    if (s != TRIT_OK) return s;
    trit_atomic_write(&f, header, sizeof header);
    uint8_t buf[8192];
    for (int64_t i = 0; i < n;) {
        size_t k = 0;
        for (; k + 2 <= sizeof buf && i < n; i++, k += 2) {
            buf[k] = (uint8_t)tokens[i];
            buf[k + 1] = (uint8_t)(tokens[i] >> 8);
        }
        if (trit_atomic_write(&f, buf, k) != TRIT_OK) break;
    }
    return trit_atomic_commit(&f);
}

// Open `path` and check its header; on success the stream is positioned at the first token.
static trit_status shard_open(const char *path, FILE **out, int64_t *n) {
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return trit_error(TRIT_ERR_IO, "cannot open token shard '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return trit_error(TRIT_ERR_IO, "token shard '%s' is not a regular file", path);
    }
    int64_t size = (int64_t)st.st_size;
    uint8_t header[TRIT_SHARD_HEADER_BYTES];
    trit_status s = TRIT_OK;
    if (size == 0) {
        s = trit_error(TRIT_ERR_FORMAT, "token shard '%s' is empty: expected a %d-byte header (magic %d) and tokens; "
                       "re-run the data preparation", path, TRIT_SHARD_HEADER_BYTES, TRIT_SHARD_MAGIC);
    } else if (size < TRIT_SHARD_HEADER_BYTES) {
        s = trit_error(TRIT_ERR_FORMAT, "token shard '%s' is truncated: %lld bytes, shorter than its %d-byte header",
                       path, (long long)size, TRIT_SHARD_HEADER_BYTES);
    } else if (fread(header, 1, sizeof header, fp) != sizeof header) {
        s = trit_error(TRIT_ERR_IO, "cannot read the header of token shard '%s'", path);
    }
    int32_t magic = 0, version = 0, count = 0;
    if (s == TRIT_OK) {
        magic = (int32_t)trit_le32_load(header);
        version = (int32_t)trit_le32_load(header + 4);
        count = (int32_t)trit_le32_load(header + 8);
    }
    if (s == TRIT_OK && magic != TRIT_SHARD_MAGIC)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' is not a token shard: magic is %d, expected %d (llm.c layout); "
                       "make shards with trit_shards_prepare", path, (int)magic, TRIT_SHARD_MAGIC);
    else if (s == TRIT_OK && version != TRIT_SHARD_VERSION)
        s = trit_error(TRIT_ERR_FORMAT, "token shard '%s' has version %d, expected %d (uint16 tokens)", path,
                       (int)version, TRIT_SHARD_VERSION);
    else if (s == TRIT_OK && count < 0)
        s = trit_error(TRIT_ERR_FORMAT, "token shard '%s' has a negative token count %d", path, (int)count);
    else if (s == TRIT_OK && size != TRIT_SHARD_HEADER_BYTES + 2 * (int64_t)count)
        s = trit_error(TRIT_ERR_FORMAT, "token shard '%s' is %s: header says %d tokens (%lld bytes), the file has %lld bytes",
                       path, size < TRIT_SHARD_HEADER_BYTES + 2 * (int64_t)count ? "truncated" : "longer than its header says",
                       (int)count, (long long)TRIT_SHARD_HEADER_BYTES + 2 * (long long)count, (long long)size);
    if (s != TRIT_OK) {
        fclose(fp);
        return s;
    }
    *out = fp;
    *n = count;
    return TRIT_OK;
}

trit_status trit_shard_read_count(const char *path, int64_t *n) {
    if (!path || !n) return trit_error(TRIT_ERR_INVALID, "trit_shard_read_count: NULL argument");
    FILE *fp;
    trit_status s = shard_open(path, &fp, n);
    if (s == TRIT_OK) fclose(fp);
    return s;
}

trit_status trit_shard_read(const char *path, uint16_t **tokens, int64_t *n) {
    if (!path || !tokens || !n) return trit_error(TRIT_ERR_INVALID, "trit_shard_read: NULL argument");
    *tokens = NULL;
    *n = 0;
    FILE *fp;
    int64_t count;
    trit_status s = shard_open(path, &fp, &count);
    if (s != TRIT_OK) return s;
    uint16_t *buf = malloc((size_t)(count ? count : 1) * sizeof *buf);
    if (!buf) {
        fclose(fp);
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate %lld tokens for shard '%s'", (long long)count, path);
    }
    size_t got = fread(buf, 2, (size_t)count, fp);
    fclose(fp);
    if (got != (size_t)count) {
        free(buf);
        return trit_error(TRIT_ERR_IO, "token shard '%s': read %zu of %lld tokens (file changed while reading?)",
                          path, got, (long long)count);
    }
    for (int64_t i = 0; i < count; i++) { // stored little-endian; a no-op on x86
        const uint8_t *b = (const uint8_t *)&buf[i];
        buf[i] = (uint16_t)(b[0] | b[1] << 8);
    }
    *tokens = buf;
    *n = count;
    return TRIT_OK;
}

// ---- prepare -----------------------------------------------------------------------------

static trit_status read_text(const char *path, uint8_t **text, size_t *len) {
    trit_status s = trit_file_read_all(path, text, len);
    if (s != TRIT_OK) return s;
    if (*len == 0) {
        free(*text);
        return trit_error(TRIT_ERR_INVALID, "text file '%s' is empty: nothing to tokenize", path);
    }
    // A NUL byte means a binary file (a shard, a checkpoint, an archive) passed by mistake.
    const uint8_t *nul = memchr(*text, 0, *len);
    if (nul) {
        size_t at = (size_t)(nul - *text);
        free(*text);
        return trit_error(TRIT_ERR_FORMAT, "'%s' looks binary (NUL byte at offset %zu): pass a plain text file",
                          path, at);
    }
    return TRIT_OK;
}

trit_status trit_shards_prepare(const trit_tokenizer *tok, const char *text_path, const char *train_path,
                                const char *val_path, double val_fraction, int64_t *n_train, int64_t *n_val) {
    if (!tok || !text_path || !train_path)
        return trit_error(TRIT_ERR_INVALID, "trit_shards_prepare: NULL tokenizer or path");
    if (!(val_fraction >= 0.0 && val_fraction < 1.0))
        return trit_error(TRIT_ERR_RANGE, "validation fraction %g is outside [0, 1) (default %g)", val_fraction,
                          TRIT_DEFAULT_VAL_FRACTION);
    if (val_fraction > 0.0 && !val_path)
        return trit_error(TRIT_ERR_INVALID, "validation fraction %g needs a validation shard path", val_fraction);
    if (trit_tokenizer_vocab_size(tok) > TRIT_SHARD_MAX_VOCAB)
        return trit_error(TRIT_ERR_RANGE, "vocabulary of %d tokens does not fit the uint16 tokens of a shard (at most %d)",
                          (int)trit_tokenizer_vocab_size(tok), TRIT_SHARD_MAX_VOCAB);
    uint8_t *text;
    size_t len;
    trit_status s = read_text(text_path, &text, &len);
    if (s != TRIT_OK) return s;
    int32_t *ids;
    size_t n;
    s = trit_tokenizer_encode(tok, text, len, &ids, &n);
    free(text);
    if (s != TRIT_OK) return s;
    int64_t nv = (int64_t)((double)n * val_fraction);
    int64_t nt = (int64_t)n - nv;
    if (nt < 1 || (val_fraction > 0.0 && nv < 1)) {
        free(ids);
        return trit_error(TRIT_ERR_INVALID, "'%s' gives only %zu tokens: too few to split %g for validation",
                          text_path, n, val_fraction);
    }
    s = trit_shard_write(train_path, ids, nt);
    if (s == TRIT_OK && val_fraction > 0.0) s = trit_shard_write(val_path, ids + nt, nv);
    free(ids);
    if (s != TRIT_OK) return s;
    if (n_train) *n_train = nt;
    if (n_val) *n_val = nv;
    return TRIT_OK;
}
