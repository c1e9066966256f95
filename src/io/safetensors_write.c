// safetensors writing: the JSON header is written by hand (names and metadata escaped, offsets
// as plain integers) and padded with spaces to a multiple of 8 bytes so the data that follows
// stays aligned; tensors follow in the order given, back to back. The file is written atomically.
#include "trit/io.h"
#include "io/io_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} strbuf;

static void sb_put(strbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void sb_printf(strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(strbuf *b, const char *fmt, ...) {
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    sb_put(b, tmp, (size_t)k); // only used for numbers and short keys
}

// Length of the UTF-8 sequence at s (1..4), or 0 if it is not valid UTF-8.
static int utf8_len(const unsigned char *s) {
    if (s[0] < 0x80) return 1;
    int n = (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3 : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && s[0] < 0xC2) || (n == 4 && s[0] > 0xF4)) return 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0))) return 0; // overlong, surrogate
    if (n == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90))) return 0;
    return n;
}

// A JSON string literal; false if s is not valid UTF-8 (JSON text must be).
static bool sb_json_string(strbuf *b, const char *s) {
    sb_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        int n = utf8_len(p);
        if (n == 0) return false;
        if (*p == '"' || *p == '\\') {
            char esc[2] = {'\\', (char)*p};
            sb_put(b, esc, 2);
        } else if (*p < 0x20) {
            sb_printf(b, "\\u%04x", *p);
        } else {
            sb_put(b, (const char *)p, (size_t)n);
        }
        p += n;
    }
    sb_put(b, "\"", 1);
    return true;
}

static trit_status check_entries(const char *path, const trit_safetensors_entry *e, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const trit_tensor *t = e[i].tensor;
        if (!e[i].name || !*e[i].name || strcmp(e[i].name, "__metadata__") == 0)
            return trit_error(TRIT_ERR_INVALID, "safetensors '%s': entry %lld needs a non-empty name other than __metadata__",
                              path, (long long)i);
        if (!t) return trit_error(TRIT_ERR_INVALID, "safetensors '%s': tensor '%s' is NULL", path, e[i].name);
        if (t->quant || !trit_safetensors_dtype_name(t->dtype))
            return trit_error(TRIT_ERR_UNSUPPORTED, "safetensors '%s': tensor '%s' has dtype %s, which safetensors cannot hold; convert it first",
                              path, e[i].name, t->quant ? "(quantized)" : trit_dtype_name(t->dtype));
        if (!t->data && trit_tensor_numel(t) > 0)
            return trit_error(TRIT_ERR_STATE, "safetensors '%s': tensor '%s' has no data", path, e[i].name);
        for (int64_t j = 0; j < i; j++)
            if (strcmp(e[i].name, e[j].name) == 0)
                return trit_error(TRIT_ERR_INVALID, "safetensors '%s': two tensors are named '%s'", path, e[i].name);
    }
    return TRIT_OK;
}

static trit_status build_header(const char *path, const trit_safetensors_entry *e, int64_t n,
                                const trit_safetensors_kv *meta, int64_t n_meta, strbuf *b) {
    sb_put(b, "{", 1);
    if (n_meta > 0) {
        sb_put(b, "\"__metadata__\":{", 16);
        for (int64_t i = 0; i < n_meta; i++) {
            if (!meta[i].key || !meta[i].value)
                return trit_error(TRIT_ERR_INVALID, "safetensors '%s': metadata entry %lld has a NULL key or value", path,
                                  (long long)i);
            if (i) sb_put(b, ",", 1);
            bool ok = sb_json_string(b, meta[i].key);
            sb_put(b, ":", 1);
            if (!ok || !sb_json_string(b, meta[i].value))
                return trit_error(TRIT_ERR_INVALID, "safetensors '%s': metadata '%s' is not valid UTF-8", path, meta[i].key);
        }
        sb_put(b, "}", 1);
    }
    int64_t off = 0;
    for (int64_t i = 0; i < n; i++) {
        const trit_tensor *t = e[i].tensor;
        if (i || n_meta > 0) sb_put(b, ",", 1);
        if (!sb_json_string(b, e[i].name))
            return trit_error(TRIT_ERR_INVALID, "safetensors '%s': tensor name '%s' is not valid UTF-8", path, e[i].name);
        sb_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", trit_safetensors_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++) sb_printf(b, d ? ",%lld" : "%lld", (long long)t->shape[d]);
        int64_t bytes = (int64_t)trit_tensor_nbytes(t);
        sb_printf(b, "],\"data_offsets\":[%lld,%lld]}", (long long)off, (long long)(off + bytes));
        off += bytes;
    }
    sb_put(b, "}", 1);
    while (b->n % 8) sb_put(b, " ", 1);
    return b->oom ? trit_error(TRIT_ERR_NOMEM, "cannot allocate the safetensors header") : TRIT_OK;
}

static trit_status write_tensor(trit_atomic_file *f, const trit_tensor *t) {
    if (trit_tensor_numel(t) == 0) return TRIT_OK;
    if (trit_tensor_is_contiguous(t)) {
        const trit_status s = trit_atomic_write(f, trit_tensor_ptr(t), trit_tensor_nbytes(t));
        trit_tensor_drop_pages(t);  // a streamed weight is read one at a time here too
        return s;
    }
    trit_tensor *c = trit_tensor_contiguous(t);
    if (!c) return trit_error(TRIT_ERR_NOMEM, "cannot make a contiguous copy of a strided tensor to write it");
    trit_status s = trit_atomic_write(f, trit_tensor_ptr(c), trit_tensor_nbytes(c));
    trit_tensor_free(c);
    return s;
}

trit_status trit_safetensors_write(const char *path, const trit_safetensors_entry *entries, int64_t n,
                                   const trit_safetensors_kv *meta, int64_t n_meta) {
    if (!path || n < 0 || n_meta < 0 || (n > 0 && !entries) || (n_meta > 0 && !meta))
        return trit_error(TRIT_ERR_INVALID, "trit_safetensors_write: NULL path/entries or negative count");
    trit_status s = check_entries(path, entries, n);
    if (s != TRIT_OK) return s;
    strbuf hdr = {0};
    s = build_header(path, entries, n, meta, n_meta, &hdr);
    if (s != TRIT_OK) {
        free(hdr.p);
        return s;
    }
    uint8_t len8[8];
    trit_le64_store(len8, (uint64_t)hdr.n);
    trit_atomic_file f;
    s = trit_atomic_open(&f, path);
    if (s == TRIT_OK) {
        trit_atomic_write(&f, len8, 8);
        trit_atomic_write(&f, hdr.p, hdr.n);
        for (int64_t i = 0; i < n && f.status == TRIT_OK; i++) {
            trit_status ws = write_tensor(&f, entries[i].tensor);
            if (ws != TRIT_OK && f.status == TRIT_OK) f.status = ws; // commit then discards the file
        }
        s = trit_atomic_commit(&f);
    }
    free(hdr.p);
    return s;
}
