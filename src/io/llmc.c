// llm.c's model and tokenizer files (layouts in include/trit/interop.h). The model header is
// checked field by field and the file's length must be exactly what it implies before any
// parameter is read; the tokenizer is read token by token against the file's end.
#define _POSIX_C_SOURCE 200809L
#include "trit/interop.h"
#include "io/io_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "llm.c files are little-endian; this reader copies them as is"
#endif

// Past this a header is damaged, not a model (GPT-2 XL: L 48, C 1600, V 50257, T 1024).
#define LLMC_MAX_DIM (1 << 24)
#define LLMC_MAX_PARAMS 0x1p38

struct trit_llmc_file {
    FILE *fp;
    char *path;
    trit_llmc_header h;
    int64_t n_params;
};

void trit_llmc_kind_sizes(const trit_llmc_header *h, int64_t s[TRIT_LLMC_NUM_KINDS]) {
    const int64_t L = h->L, C = h->C;
    const int64_t v[TRIT_LLMC_NUM_KINDS] = {
        (int64_t)h->Vp * C, (int64_t)h->max_T * C, L * C, L * C, L * 3 * C * C, L * 3 * C, L * C * C, L * C,
        L * C,              L * C,                 L * 4 * C * C, L * 4 * C, L * 4 * C * C, L * C, C, C};
    memcpy(s, v, sizeof v);
}

int64_t trit_llmc_num_params(const trit_llmc_header *h) {
    int64_t s[TRIT_LLMC_NUM_KINDS], n = 0;
    trit_llmc_kind_sizes(h, s);
    for (int k = 0; k < TRIT_LLMC_NUM_KINDS; k++) n += s[k];
    return n;
}

trit_status trit_llmc_header_check(const trit_llmc_header *h, const char *where) {
    if (h->version != 3 && h->version != 5)
        return trit_error(TRIT_ERR_UNSUPPORTED, "%s: llm.c model version %d; trit reads version 3 (fp32) and 5 (bf16), "
                          "those of llm.c's padded-vocabulary files (re-export with llm.c's train_gpt2.py)", where,
                          (int)h->version);
    const struct { const char *name; int32_t v; } f[] = {{"max_seq_len", h->max_T}, {"vocab_size", h->V},
                                                         {"num_layers", h->L},      {"num_heads", h->H},
                                                         {"channels", h->C},        {"padded_vocab_size", h->Vp}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < 1 || f[i].v > LLMC_MAX_DIM)
            return trit_error(TRIT_ERR_FORMAT, "%s: header field %s is %d, expected 1..%d: the file is damaged or "
                              "not an llm.c model", where, f[i].name, (int)f[i].v, LLMC_MAX_DIM);
    if (h->C % h->H)
        return trit_error(TRIT_ERR_FORMAT, "%s: channels %d is not a multiple of num_heads %d", where, (int)h->C, (int)h->H);
    if (h->Vp < h->V)
        return trit_error(TRIT_ERR_FORMAT, "%s: padded_vocab_size %d is below vocab_size %d", where, (int)h->Vp, (int)h->V);
    // Counted in double first: L * 4C^2 of damaged fields would overflow int64.
    const double C = h->C, n = ((double)h->Vp + h->max_T) * C + (double)h->L * (12 * C * C + 13 * C) + 2 * C;
    if (n > LLMC_MAX_PARAMS)
        return trit_error(TRIT_ERR_FORMAT, "%s: the header describes %.3g parameters, more than trit loads (%.3g): the "
                          "file is damaged", where, n, LLMC_MAX_PARAMS);
    return TRIT_OK;
}

void trit_llmc_header_encode(const trit_llmc_header *h, uint8_t out[TRIT_LLMC_HEADER_BYTES]) {
    memset(out, 0, TRIT_LLMC_HEADER_BYTES);
    const int32_t w[8] = {TRIT_LLMC_MODEL_MAGIC, h->version, h->max_T, h->V, h->L, h->H, h->C, h->Vp};
    for (int i = 0; i < 8; i++) trit_le32_store(out + 4 * i, (uint32_t)w[i]);
}

trit_llmc_file *trit_llmc_open(const char *path, trit_llmc_header *h) {
    if (!path || !h) {
        trit_error(TRIT_ERR_INVALID, "trit_llmc_open: NULL argument");
        return NULL;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        trit_error(TRIT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        return NULL;
    }
    uint8_t raw[TRIT_LLMC_HEADER_BYTES];
    struct stat st;
    trit_status s = TRIT_OK;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode))
        s = trit_error(TRIT_ERR_IO, "'%s' is not a regular file", path);
    else if (fread(raw, 1, sizeof raw, fp) != sizeof raw)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' is %lld bytes, shorter than llm.c's 1024-byte header: truncated or not "
                       "an llm.c model", path, (long long)st.st_size);
    else if (trit_le32_load(raw) != TRIT_LLMC_MODEL_MAGIC)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' starts with %u, not llm.c's model magic %d: not an llm.c model file "
                       "(a tokenizer file starts with %d, a token shard with 20240520)", path, trit_le32_load(raw),
                       TRIT_LLMC_MODEL_MAGIC, TRIT_LLMC_TOKENIZER_MAGIC);
    trit_llmc_header hd;
    int32_t *fields[7] = {&hd.version, &hd.max_T, &hd.V, &hd.L, &hd.H, &hd.C, &hd.Vp};
    for (int i = 0; s == TRIT_OK && i < 7; i++) *fields[i] = (int32_t)trit_le32_load(raw + 4 * (i + 1));
    char where[1100];
    snprintf(where, sizeof where, "'%s'", path);
    if (s == TRIT_OK) s = trit_llmc_header_check(&hd, where);
    const int64_t n = s == TRIT_OK ? trit_llmc_num_params(&hd) : 0;
    const int64_t want = TRIT_LLMC_HEADER_BYTES + n * (hd.version == 5 ? 2 : 4);
    if (s == TRIT_OK && (int64_t)st.st_size != want)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' is %lld bytes, its header (L %d, C %d, V %d padded to %d, T %d, %s) implies "
                       "%lld: the file is %s", path, (long long)st.st_size, (int)hd.L, (int)hd.C, (int)hd.V, (int)hd.Vp,
                       (int)hd.max_T, hd.version == 5 ? "bf16" : "fp32", (long long)want,
                       (int64_t)st.st_size < want ? "truncated" : "longer than a model (damaged header?)");
    trit_llmc_file *f = s == TRIT_OK ? calloc(1, sizeof *f) : NULL;
    if (s == TRIT_OK && (!f || !(f->path = malloc(strlen(path) + 1)))) s = trit_error(TRIT_ERR_NOMEM, "llm.c: out of memory");
    if (s != TRIT_OK) {
        if (f) free(f);
        fclose(fp);
        return NULL;
    }
    strcpy(f->path, path);
    f->fp = fp, f->h = hd, f->n_params = n;
    *h = hd;
    return f;
}

void trit_llmc_close(trit_llmc_file *f) {
    if (!f) return;
    fclose(f->fp);
    free(f->path);
    free(f);
}

trit_status trit_llmc_read(const trit_llmc_file *f, int64_t first, int64_t n, float *out) {
    if (!f || !out || first < 0 || n < 0 || first > f->n_params - n)
        return trit_error(TRIT_ERR_RANGE, "trit_llmc_read: elements [%lld, +%lld) outside the file's parameters",
                          (long long)first, (long long)n);
    const int es = f->h.version == 5 ? 2 : 4;
    if (fseeko(f->fp, (off_t)(TRIT_LLMC_HEADER_BYTES + first * es), SEEK_SET) != 0)
        return trit_error(TRIT_ERR_IO, "'%s': seek failed: %s", f->path, strerror(errno));
    if (es == 4) {
        if (fread(out, 4, (size_t)n, f->fp) != (size_t)n)
            return trit_error(TRIT_ERR_IO, "'%s': read failed (file truncated since it was opened?)", f->path);
        return TRIT_OK;
    }
    uint16_t buf[4096];
    for (int64_t i = 0; i < n;) {
        size_t k = (size_t)(n - i < 4096 ? n - i : 4096);
        if (fread(buf, 2, k, f->fp) != k)
            return trit_error(TRIT_ERR_IO, "'%s': read failed (file truncated since it was opened?)", f->path);
        for (size_t j = 0; j < k; j++) out[i + (int64_t)j] = trit_bf16_to_f32(buf[j]);
        i += (int64_t)k;
    }
    return TRIT_OK;
}

// ---- tokenizer -------------------------------------------------------------------------------

void trit_llmc_vocab_free(trit_llmc_vocab *v) {
    if (!v) return;
    for (int32_t i = 0; v->bytes && i < v->n; i++) free(v->bytes[i]);
    free(v->bytes), free(v->len);
    memset(v, 0, sizeof *v);
}

static trit_status parse_vocab(const uint8_t *d, size_t len, const char *path, trit_llmc_vocab *v) {
    if (len < TRIT_LLMC_HEADER_BYTES)
        return trit_error(TRIT_ERR_FORMAT, "'%s' is %zu bytes, shorter than llm.c's 1024-byte tokenizer header", path, len);
    if (trit_le32_load(d) != TRIT_LLMC_TOKENIZER_MAGIC)
        return trit_error(TRIT_ERR_FORMAT, "'%s' starts with %u, not llm.c's tokenizer magic %d", path, trit_le32_load(d),
                          TRIT_LLMC_TOKENIZER_MAGIC);
    const uint32_t version = trit_le32_load(d + 4), n = trit_le32_load(d + 8), eot = trit_le32_load(d + 12);
    if (version != 1 && version != 2)
        return trit_error(TRIT_ERR_UNSUPPORTED, "'%s': llm.c tokenizer version %u, trit reads 1 and 2", path, version);
    if (n < 1 || n > (len - TRIT_LLMC_HEADER_BYTES) / 2)
        return trit_error(TRIT_ERR_FORMAT, "'%s' claims %u tokens, which its %zu bytes cannot hold (each takes 2 or "
                          "more): truncated or damaged", path, n, len);
    if (version == 2 && eot >= n)
        return trit_error(TRIT_ERR_FORMAT, "'%s': end-of-text id %u is not below the token count %u", path, eot, n);
    v->n = (int32_t)n;
    v->eot = version == 2 ? (int32_t)eot : -1;
    v->bytes = calloc(n, sizeof *v->bytes);
    v->len = calloc(n, 1);
    if (!v->bytes || !v->len) return trit_error(TRIT_ERR_NOMEM, "llm.c tokenizer: out of memory");
    size_t at = TRIT_LLMC_HEADER_BYTES;
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t k = at < len ? d[at] : 0;
        if (at >= len || k == 0 || len - at - 1 < k)
            return trit_error(TRIT_ERR_FORMAT, "'%s': token %u %s at byte %zu: the file is truncated or damaged", path, i,
                              at >= len ? "is missing" : k == 0 ? "has length 0" : "runs past the end", at);
        if (!(v->bytes[i] = malloc(k))) return trit_error(TRIT_ERR_NOMEM, "llm.c tokenizer: out of memory");
        memcpy(v->bytes[i], d + at + 1, k);
        v->len[i] = k;
        at += 1 + (size_t)k;
    }
    if (at != len)
        return trit_error(TRIT_ERR_FORMAT, "'%s' has %zu bytes after its %u tokens: damaged, or the count is wrong", path,
                          len - at, n);
    return TRIT_OK;
}

trit_status trit_llmc_vocab_read(const char *path, trit_llmc_vocab *out) {
    if (!path || !out) return trit_error(TRIT_ERR_INVALID, "trit_llmc_vocab_read: NULL argument");
    memset(out, 0, sizeof *out);
    uint8_t *d = NULL;
    size_t len = 0;
    trit_status s = trit_file_read_all(path, &d, &len);
    if (s == TRIT_OK) s = parse_vocab(d, len, path, out);
    free(d);
    if (s != TRIT_OK) trit_llmc_vocab_free(out);
    return s;
}

trit_status trit_llmc_vocab_write(const trit_tokenizer *tok, int32_t eot, const char *path) {
    if (!tok || !path) return trit_error(TRIT_ERR_INVALID, "trit_llmc_vocab_write: NULL argument");
    const int32_t n = trit_tokenizer_vocab_size(tok);
    if (eot < 0 || eot >= n)
        return trit_error(TRIT_ERR_RANGE, "llm.c tokenizer: end-of-text id %d is not a token (0..%d)", (int)eot, (int)n - 1);
    uint8_t head[TRIT_LLMC_HEADER_BYTES] = {0};
    trit_le32_store(head, TRIT_LLMC_TOKENIZER_MAGIC);
    trit_le32_store(head + 4, 2);
    trit_le32_store(head + 8, (uint32_t)n);
    trit_le32_store(head + 12, (uint32_t)eot);
    trit_atomic_file f;
    trit_status s = trit_atomic_open(&f, path);
    if (s != TRIT_OK) return s;
    trit_atomic_write(&f, head, sizeof head);
    for (int32_t i = 0; i < n && f.status == TRIT_OK; i++) {
        const uint8_t *b;
        size_t k;
        if ((s = trit_tokenizer_token_bytes(tok, i, &b, &k)) != TRIT_OK) break;
        if (k == 0 || k > 255) {
            s = trit_error(TRIT_ERR_UNSUPPORTED, "llm.c tokenizer: token %d is %zu bytes; the format holds 1 to 255",
                           (int)i, k);
            break;
        }
        const uint8_t len = (uint8_t)k;
        trit_atomic_write(&f, &len, 1);
        trit_atomic_write(&f, b, k);
    }
    if (s != TRIT_OK) {
        trit_atomic_abort(&f);
        return s;
    }
    return trit_atomic_commit(&f);
}
