// From a text file to a data directory: validate the text, train a tokenizer on it, write the
// tokenizer and the train/val token shards. Used by `trit prepare` and by `trit train --data
// FILE`. A failure removes what this call created, so a bad input leaves no partial output.
#define _POSIX_C_SOURCE 200809L
#include "trit/io.h"
#include "trit/train.h"
#include "train/train_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Length of the valid UTF-8 sequence at s (n bytes left), 0 if invalid.
static size_t utf8_seq(const uint8_t *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t k = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (k == 0 || k > n || (k == 2 && s[0] < 0xC2) || (k == 4 && s[0] > 0xF4)) return 0;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return k;
}

trit_status trit_text_check(const char *path, const uint8_t *data, size_t len) {
    if (len == 0)
        return trit_error(TRIT_ERR_INVALID, "'%s' is empty: pass a text file with some content to train on", path);
    const uint8_t *nul = memchr(data, 0, len);
    if (nul)
        return trit_error(TRIT_ERR_FORMAT,
                          "'%s' looks binary (NUL byte at offset %zu): pass a plain UTF-8 text file, "
                          "or a directory made by `trit prepare`", path, (size_t)(nul - data));
    size_t bad = 0;
    for (size_t i = 0; i < len;) {
        size_t k = utf8_seq(data + i, len - i);
        bad += k == 0;
        i += k ? k : 1;
    }
    if (bad * 100 > len)
        return trit_error(TRIT_ERR_FORMAT,
                          "'%s' looks binary (%zu of %zu bytes are not UTF-8): pass a plain text file",
                          path, bad, len);
    return TRIT_OK;
}

trit_status trit_make_dir(const char *path, bool *created) {
    if (created) *created = false;
    if (!path || !*path) return trit_error(TRIT_ERR_INVALID, "empty directory name");
    char buf[TRIT_PATH_MAX];
    if (strlen(path) >= sizeof buf) return trit_error(TRIT_ERR_RANGE, "path too long: '%s'", path);
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        bool end = *p == 0;
        if (*p != '/' && !end) continue;
        *p = 0;
        struct stat st;
        if (stat(buf, &st) != 0) {
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return trit_error(TRIT_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
            if (end && created) *created = true;
        } else if (!S_ISDIR(st.st_mode)) {
            return trit_error(TRIT_ERR_IO, "'%s' exists and is not a directory", buf);
        }
        if (end) return TRIT_OK;
        *p = '/';
    }
}

static trit_tokenizer *train_tokenizer(const uint8_t *text, size_t len, trit_tokenizer_kind kind,
                                       int64_t vocab) {
    if (kind == TRIT_TOKENIZER_CHAR) return trit_tokenizer_train_char(text, len);
    if (vocab > TRIT_SHARD_MAX_VOCAB) {
        trit_error(TRIT_ERR_RANGE, "--vocab %lld is larger than %d, the most a uint16 token shard can "
                   "hold: pass --vocab %d or less", (long long)vocab, TRIT_SHARD_MAX_VOCAB, TRIT_SHARD_MAX_VOCAB);
        return NULL;
    }
    if (vocab <= 256) {
        trit_error(TRIT_ERR_RANGE, "--vocab %lld: a byte-level BPE needs more than its 256 byte tokens",
                   (long long)vocab);
        return NULL;
    }
    return trit_tokenizer_train_bpe(text, len, (int32_t)vocab);
}

// The tokenizer and the shards of the text at text_path, written into out_dir.
static trit_status write_prepared(const trit_tokenizer *tok, const char *text_path, double val_fraction,
                                  const char *out_dir, trit_prepare_result *res) {
    char tok_path[TRIT_PATH_MAX + 32], train_path[TRIT_PATH_MAX + 32], val_path[TRIT_PATH_MAX + 32];
    bool made_dir = false;
    trit_status s = trit_path_join(tok_path, sizeof tok_path, out_dir, TRIT_CKPT_TOKENIZER);
    if (s == TRIT_OK) s = trit_path_join(train_path, sizeof train_path, out_dir, TRIT_DATA_TRAIN);
    if (s == TRIT_OK) s = trit_path_join(val_path, sizeof val_path, out_dir, TRIT_DATA_VAL);
    if (s == TRIT_OK) s = trit_make_dir(out_dir, &made_dir);
    int64_t nt = 0, nv = 0;
    if (s == TRIT_OK) s = trit_shards_prepare(tok, text_path, train_path, val_path, val_fraction, &nt, &nv);
    if (s == TRIT_OK) s = trit_tokenizer_save(tok, tok_path);
    if (s == TRIT_OK && res) *res = (trit_prepare_result){trit_tokenizer_vocab_size(tok), nt, nv};
    if (s != TRIT_OK) {
        // The shards are written atomically: each exists whole or not at all; remove them all.
        char why[1024];
        snprintf(why, sizeof why, "%s", trit_last_error());
        unlink(val_path);
        unlink(train_path);
        unlink(tok_path);
        if (made_dir) rmdir(out_dir);
        trit_error(s, "%s", why);
    }
    return s;
}

static trit_status check_fraction(double val_fraction) {
    if (!(val_fraction > 0 && val_fraction < 1))
        return trit_error(TRIT_ERR_RANGE, "validation fraction must be in (0, 1), got %g", val_fraction);
    return TRIT_OK;
}

trit_status trit_prepare_text(const char *text_path, trit_tokenizer_kind kind, int64_t vocab,
                              double val_fraction, const char *out_dir, trit_prepare_result *res) {
    if (kind != TRIT_TOKENIZER_CHAR && kind != TRIT_TOKENIZER_BPE)
        return trit_error(TRIT_ERR_INVALID, "tokenizer must be char or bpe");
    trit_status s = check_fraction(val_fraction);
    uint8_t *text = NULL;
    size_t len = 0;
    if (s == TRIT_OK) s = trit_file_read_all(text_path, &text, &len);
    if (s == TRIT_OK) s = trit_text_check(text_path, text, len);
    trit_tokenizer *tok = s == TRIT_OK ? train_tokenizer(text, len, kind, vocab) : NULL;
    free(text);
    if (!tok) return s != TRIT_OK ? s : (trit_status)TRIT_ERR_INVALID;
    s = write_prepared(tok, text_path, val_fraction, out_dir, res);
    trit_tokenizer_free(tok);
    return s;
}

trit_status trit_prepare_text_with(const char *text_path, const trit_tokenizer *tok, double val_fraction,
                                   const char *out_dir, trit_prepare_result *res) {
    if (!tok) return trit_error(TRIT_ERR_INVALID, "trit_prepare_text_with: NULL tokenizer");
    trit_status s = check_fraction(val_fraction);
    uint8_t *text = NULL;
    size_t len = 0;
    if (s == TRIT_OK) s = trit_file_read_all(text_path, &text, &len);
    if (s == TRIT_OK) s = trit_text_check(text_path, text, len);
    free(text);
    return s == TRIT_OK ? write_prepared(tok, text_path, val_fraction, out_dir, res) : s;
}
