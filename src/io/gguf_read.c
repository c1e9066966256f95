// GGUF reader (the format gguf_write.c writes; llama.cpp's files are the same layout): the
// header, the key-values and the tensor infos are walked once on open with every length and
// count checked against the bytes left, so a damaged file is refused there and the accessors
// need no checks of their own. String arrays get an offset table (the tokenizer's vocabulary
// is read item by item); tensor data stays in the file's buffer, which for a file opened by
// path is a read-only mapping, so a reader that takes its tensors one at a time can let each
// one's pages go after it (trit_gguf_release) and never hold the whole file.
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE
#include "trit/io.h"
#include "io/io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STRING, T_ARRAY, T_U64, T_I64, T_F64, T_COUNT };
static const uint8_t type_size[T_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct gguf_kv {
    const uint8_t *key;
    size_t key_len;
    uint32_t type, item_type;  // item_type: arrays only
    uint64_t n;                // arrays: items; strings: bytes
    const uint8_t *value;      // scalars and strings: the value's bytes; arrays: the first item
    uint64_t *offs;            // string arrays: (n) offset of each item's length from value
} gguf_kv;

struct trit_gguf_file {
    void *mapped;    // the file's bytes, when opened from a path (mapped_n bytes)
    size_t mapped_n;
    const uint8_t *p;
    size_t n;
    char name[256];
    gguf_kv *kv;
    uint64_t n_kv;
    trit_gguf_tensor *t;
    char *names;  // NUL-terminated tensor names back to back
    int64_t n_tensors;
};

typedef struct cursor {
    const uint8_t *p;
    size_t at, n;
    const char *file;
} cursor;

static trit_status truncated(const cursor *c, const char *what) {
    return trit_error(TRIT_ERR_FORMAT, "'%s': the GGUF file ends inside %s (at byte %zu of %zu): it is truncated or "
                      "not a GGUF file", c->file, what, c->at, c->n);
}

static trit_status take(cursor *c, size_t k, const uint8_t **out, const char *what) {
    if (c->n - c->at < k) return truncated(c, what);
    if (out) *out = c->p + c->at;
    c->at += k;
    return TRIT_OK;
}

static trit_status take_u32(cursor *c, uint32_t *v, const char *what) {
    const uint8_t *b = NULL;
    trit_status s = take(c, 4, &b, what);
    if (s == TRIT_OK) *v = trit_le32_load(b);
    return s;
}

static trit_status take_u64(cursor *c, uint64_t *v, const char *what) {
    const uint8_t *b = NULL;
    trit_status s = take(c, 8, &b, what);
    if (s == TRIT_OK) *v = trit_le64_load(b);
    return s;
}

static trit_status take_str(cursor *c, const uint8_t **s, uint64_t *len, const char *what) {
    trit_status st = take_u64(c, len, what);
    if (st == TRIT_OK && *len > c->n - c->at) return truncated(c, what);
    return st == TRIT_OK ? take(c, (size_t)*len, s, what) : st;
}

static trit_status read_value(cursor *c, gguf_kv *kv) {
    if (kv->type >= T_COUNT)
        return trit_error(TRIT_ERR_FORMAT, "'%s': key '%.*s' has value type %u; GGUF defines 0 to 12", c->file,
                          (int)kv->key_len, (const char *)kv->key, kv->type);
    if (kv->type == T_STRING) return take_str(c, &kv->value, &kv->n, "a string value");
    if (kv->type != T_ARRAY) return take(c, type_size[kv->type], &kv->value, "a value");
    trit_status s = take_u32(c, &kv->item_type, "an array's type");
    if (s == TRIT_OK) s = take_u64(c, &kv->n, "an array's length");
    if (s != TRIT_OK) return s;
    if (kv->item_type >= T_COUNT || kv->item_type == T_ARRAY)
        return trit_error(TRIT_ERR_FORMAT, "'%s': key '%.*s' is an array of type %u, which trit does not read (nested "
                          "arrays or an unknown type)", c->file, (int)kv->key_len, (const char *)kv->key, kv->item_type);
    kv->value = c->p + c->at;
    if (kv->item_type != T_STRING) {
        if (kv->n > (c->n - c->at) / type_size[kv->item_type]) return truncated(c, "an array");
        return take(c, (size_t)kv->n * type_size[kv->item_type], NULL, "an array");
    }
    if (kv->n > (c->n - c->at) / 8) return truncated(c, "an array of strings");
    if (!(kv->offs = malloc(sizeof(uint64_t) * (size_t)(kv->n ? kv->n : 1))))
        return trit_error(TRIT_ERR_NOMEM, "'%s': out of memory", c->file);
    for (uint64_t i = 0; i < kv->n; i++) {
        const uint8_t *b = NULL;
        uint64_t len = 0;
        kv->offs[i] = (uint64_t)(c->p + c->at - kv->value);
        if ((s = take_str(c, &b, &len, "an array of strings")) != TRIT_OK) return s;
    }
    return TRIT_OK;
}

static const gguf_kv *find_kv(const trit_gguf_file *f, const char *key) {
    const size_t n = strlen(key);
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (f->kv[i].key_len == n && memcmp(f->kv[i].key, key, n) == 0) return &f->kv[i];
    return NULL;
}

static const char *ggml_name(uint32_t t) {
    switch (t) {
    case TRIT_GGML_F32: return "f32";
    case TRIT_GGML_F16: return "f16";
    case TRIT_GGML_Q4_0: return "q4_0";
    case TRIT_GGML_Q8_0: return "q8_0";
    case TRIT_GGML_TQ1_0: return "tq1_0";
    case TRIT_GGML_TQ2_0: return "tq2_0";
    default: return NULL;
    }
}

static trit_status tensor_bytes(const trit_gguf_file *f, trit_gguf_tensor *t) {
    const trit_dtype dt = t->type == TRIT_GGML_F32   ? TRIT_F32
                          : t->type == TRIT_GGML_F16 ? TRIT_F16
                          : t->type == TRIT_GGML_Q4_0 ? TRIT_Q4_0
                          : t->type == TRIT_GGML_Q8_0 ? TRIT_Q8_0
                          : t->type == TRIT_GGML_TQ1_0 ? TRIT_TQ1_0
                                                        : TRIT_TQ2_0;
    if (!ggml_name(t->type))
        return trit_error(TRIT_ERR_UNSUPPORTED, "'%s': tensor '%s' has ggml type %u, which trit does not read (it reads "
                          "f32, f16, q4_0, q8_0, tq1_0 and tq2_0): requantize the model to one of those with "
                          "llama-quantize", f->name, t->name, t->type);
    const uint64_t blk = (uint64_t)trit_dtype_block(dt), bb = trit_dtype_traits_of(dt)->block_bytes;
    uint64_t elems = 1;
    for (int d = 0; d < t->ndim; d++) {
        if (t->ne[d] == 0 || t->ne[d] > ((uint64_t)1 << 40) / elems)
            return trit_error(TRIT_ERR_FORMAT, "'%s': tensor '%s' has dim %d of %llu elements (1 to 2^40 in all)",
                              f->name, t->name, d, (unsigned long long)t->ne[d]);
        elems *= t->ne[d];
    }
    if (t->ne[0] % blk)
        return trit_error(TRIT_ERR_FORMAT, "'%s': tensor '%s' is %s with rows of %llu elements, not a multiple of its "
                          "block of %llu", f->name, t->name, ggml_name(t->type), (unsigned long long)t->ne[0],
                          (unsigned long long)blk);
    t->nbytes = (size_t)(elems / blk * bb);
    return TRIT_OK;
}

static trit_status read_kvs(cursor *c, trit_gguf_file *f) {
    if (f->n_kv > (c->n - c->at) / 12) return truncated(c, "the key-values");
    if (!(f->kv = calloc((size_t)(f->n_kv ? f->n_kv : 1), sizeof *f->kv)))
        return trit_error(TRIT_ERR_NOMEM, "'%s': out of memory", f->name);
    trit_status s = TRIT_OK;
    for (uint64_t i = 0; i < f->n_kv && s == TRIT_OK; i++) {
        uint64_t len;
        s = take_str(c, &f->kv[i].key, &len, "a key");
        f->kv[i].key_len = (size_t)len;
        if (s == TRIT_OK) s = take_u32(c, &f->kv[i].type, "a value's type");
        if (s == TRIT_OK) s = read_value(c, &f->kv[i]);
    }
    return s;
}

static trit_status read_infos(cursor *c, trit_gguf_file *f, uint64_t *offs) {
    trit_status s = TRIT_OK;
    size_t names_at = 0;
    for (int64_t i = 0; i < f->n_tensors && s == TRIT_OK; i++) {
        trit_gguf_tensor *t = &f->t[i];
        const uint8_t *nm = NULL;
        uint64_t len;
        uint32_t nd = 0;
        s = take_str(c, &nm, &len, "a tensor's name");
        if (s == TRIT_OK) {
            memcpy(f->names + names_at, nm, (size_t)len);
            t->name = f->names + names_at;
            names_at += (size_t)len + 1;
            s = take_u32(c, &nd, "a tensor's dims");
        }
        if (s == TRIT_OK && (nd < 1 || nd > 4))
            s = trit_error(TRIT_ERR_FORMAT, "'%s': tensor '%s' has %u dims (1 to 4)", f->name, t->name, nd);
        t->ndim = (int)nd;
        for (int d = 0; d < t->ndim && s == TRIT_OK; d++) s = take_u64(c, &t->ne[d], "a tensor's shape");
        if (s == TRIT_OK) s = take_u32(c, &t->type, "a tensor's type");
        if (s == TRIT_OK) s = take_u64(c, &offs[i], "a tensor's offset");
        if (s == TRIT_OK) s = tensor_bytes(f, t);
    }
    return s;
}

static trit_status place_tensors(cursor *c, trit_gguf_file *f, const uint64_t *offs) {
    uint32_t align = 32;
    const gguf_kv *a = find_kv(f, "general.alignment");
    if (a && (a->type != T_U32 || (align = trit_le32_load(a->value)) == 0 || (align & (align - 1))))
        return trit_error(TRIT_ERR_FORMAT, "'%s': general.alignment must be a u32 power of two", f->name);
    const uint64_t start = ((uint64_t)c->at + align - 1) / align * align;
    for (int64_t i = 0; i < f->n_tensors; i++) {
        trit_gguf_tensor *t = &f->t[i];
        if (offs[i] % align || start > c->n || offs[i] > c->n - start || t->nbytes > c->n - start - offs[i])
            return trit_error(TRIT_ERR_FORMAT, "'%s': tensor '%s' (%zu bytes at offset %llu) is misaligned or runs past "
                              "the end of the file (%zu bytes): the file is truncated", f->name, t->name, t->nbytes,
                              (unsigned long long)offs[i], c->n);
        t->data = c->p + start + offs[i];
    }
    return TRIT_OK;
}

static trit_status parse(trit_gguf_file *f) {
    cursor c = {f->p, 0, f->n, f->name};
    const uint8_t *magic = NULL;
    uint32_t version = 0;
    uint64_t n_tensors = 0;
    trit_status s = take(&c, 4, &magic, "the header");
    if (s == TRIT_OK && memcmp(magic, "GGUF", 4) != 0)
        return trit_error(TRIT_ERR_FORMAT, "'%s' does not start with GGUF's magic \"GGUF\": it is not a GGUF file", f->name);
    if (s == TRIT_OK) s = take_u32(&c, &version, "the header");
    if (s == TRIT_OK && version != 2 && version != 3)
        return trit_error(TRIT_ERR_FORMAT, "'%s' is GGUF version %u; trit reads versions 2 and 3", f->name, version);
    if (s == TRIT_OK) s = take_u64(&c, &n_tensors, "the header");
    if (s == TRIT_OK) s = take_u64(&c, &f->n_kv, "the header");
    if (s == TRIT_OK) s = read_kvs(&c, f);
    if (s != TRIT_OK) return s;
    if (n_tensors > (c.n - c.at) / 24) return truncated(&c, "the tensor infos");
    f->n_tensors = (int64_t)n_tensors;
    uint64_t *offs = malloc(sizeof(uint64_t) * (size_t)(n_tensors ? n_tensors : 1));
    f->t = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *f->t);
    f->names = calloc(c.n - c.at + 1, 1);  // names are shorter than the bytes that hold them
    if (!offs || !f->t || !f->names) s = trit_error(TRIT_ERR_NOMEM, "'%s': out of memory", f->name);
    if (s == TRIT_OK) s = read_infos(&c, f, offs);
    if (s == TRIT_OK) s = place_tensors(&c, f, offs);
    free(offs);
    return s;
}

trit_gguf_file *trit_gguf_parse(const uint8_t *data, size_t n, const char *name) {
    trit_gguf_file *f = calloc(1, sizeof *f);
    if (!f) {
        trit_error(TRIT_ERR_NOMEM, "gguf: out of memory");
        return NULL;
    }
    f->p = data, f->n = n;
    snprintf(f->name, sizeof f->name, "%s", name ? name : "gguf");
    if (parse(f) != TRIT_OK) {
        trit_gguf_close(f);
        return NULL;
    }
    return f;
}

trit_gguf_file *trit_gguf_open(const char *path) {
    if (!path) {
        trit_error(TRIT_ERR_INVALID, "trit_gguf_open: NULL path");
        return NULL;
    }
    const int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        trit_error(TRIT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < 4) {
        close(fd);
        trit_error(TRIT_ERR_FORMAT, "'%s' is %s, not a GGUF file", path,
                   S_ISREG(st.st_mode) ? "shorter than GGUF's 4-byte magic" : "not a regular file");
        return NULL;
    }
    const size_t n = (size_t)st.st_size;
    void *d = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (d == MAP_FAILED) {
        trit_error(TRIT_ERR_IO, "cannot map '%s' (%zu bytes): %s", path, n, strerror(errno));
        return NULL;
    }
    trit_gguf_file *f = trit_gguf_parse(d, n, path);
    if (!f) munmap(d, n);
    else f->mapped = d, f->mapped_n = n;
    return f;
}

void trit_gguf_release(const trit_gguf_file *f, const trit_gguf_tensor *t) {
    if (!f || !f->mapped || !t || !t->nbytes) return;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = (uintptr_t)t->data, hi = lo + t->nbytes;
    const uintptr_t a = (lo + page - 1) / page * page, b = hi / page * page;  // whole pages of t's bytes only
    if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);  // read-only and private: refaulted from the file if read again
}

void trit_gguf_close(trit_gguf_file *f) {
    if (!f) return;
    for (uint64_t i = 0; f->kv && i < f->n_kv; i++) free(f->kv[i].offs);
    free(f->kv), free(f->t), free(f->names);
    if (f->mapped) munmap(f->mapped, f->mapped_n);
    free(f);
}

static trit_status missing(const trit_gguf_file *f, const char *key, const char *want) {
    return trit_error(TRIT_ERR_FORMAT, "'%s': GGUF key '%s' is %s; expected %s", f->name, key,
                      find_kv(f, key) ? "of another type" : "missing", want);
}

bool trit_gguf_has(const trit_gguf_file *f, const char *key) { return find_kv(f, key) != NULL; }

trit_status trit_gguf_get_str(const trit_gguf_file *f, const char *key, const char **s, size_t *n) {
    const gguf_kv *kv = find_kv(f, key);
    if (!kv || kv->type != T_STRING) return missing(f, key, "a string");
    *s = (const char *)kv->value, *n = (size_t)kv->n;
    return TRIT_OK;
}

trit_status trit_gguf_get_u32(const trit_gguf_file *f, const char *key, uint32_t *v) {
    const gguf_kv *kv = find_kv(f, key);
    uint64_t x = 0;
    bool ok = kv != NULL;
    if (ok && (kv->type == T_U32 || kv->type == T_I32)) x = trit_le32_load(kv->value);
    else if (ok && (kv->type == T_U64 || kv->type == T_I64)) x = trit_le64_load(kv->value);
    else ok = false;
    ok = ok && x <= UINT32_MAX && !(kv->type == T_I32 && (x >> 31));
    if (!ok) return missing(f, key, "an integer from 0 to 2^32 - 1");
    *v = (uint32_t)x;
    return TRIT_OK;
}

trit_status trit_gguf_get_f32(const trit_gguf_file *f, const char *key, float *v) {
    const gguf_kv *kv = find_kv(f, key);
    if (!kv || kv->type != T_F32) return missing(f, key, "an f32");
    const uint32_t u = trit_le32_load(kv->value);
    memcpy(v, &u, 4);
    return TRIT_OK;
}

trit_status trit_gguf_get_arr(const trit_gguf_file *f, const char *key, uint32_t item_type, uint64_t *n) {
    const gguf_kv *kv = find_kv(f, key);
    if (!kv || kv->type != T_ARRAY || kv->item_type != item_type)
        return missing(f, key, item_type == T_STRING ? "an array of strings" : "an array of i32");
    *n = kv->n;
    return TRIT_OK;
}

void trit_gguf_arr_str(const trit_gguf_file *f, const char *key, uint64_t i, const char **s, size_t *n) {
    const gguf_kv *kv = find_kv(f, key);
    const uint8_t *at = kv->value + kv->offs[i];
    *n = (size_t)trit_le64_load(at);
    *s = (const char *)at + 8;
}

int32_t trit_gguf_arr_i32(const trit_gguf_file *f, const char *key, uint64_t i) {
    return (int32_t)trit_le32_load(find_kv(f, key)->value + 4 * i);
}

int64_t trit_gguf_num_tensors(const trit_gguf_file *f) { return f ? f->n_tensors : 0; }

const trit_gguf_tensor *trit_gguf_tensor_at(const trit_gguf_file *f, int64_t i) {
    return f && i >= 0 && i < f->n_tensors ? &f->t[i] : NULL;
}

const trit_gguf_tensor *trit_gguf_find_tensor(const trit_gguf_file *f, const char *name) {
    for (int64_t i = 0; f && i < f->n_tensors; i++)
        if (strcmp(f->t[i].name, name) == 0) return &f->t[i];
    return NULL;
}
