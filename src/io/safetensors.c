// safetensors reading: 8-byte little-endian header length N, N bytes of JSON, then the data.
// Everything in the header is checked before any offset is used: the length against the file
// size, that the header is UTF-8 (strictly: no overlong forms, surrogates or code points past
// U+10FFFF), the JSON, each dtype, shape and offset pair (end - begin == numel * dtype size),
// and that the tensors tile the data section exactly (no overlap, no hole), as the format
// requires.
#define _POSIX_C_SOURCE 200809L
#include "trit/io.h"
#include "io/io_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors data is little-endian; this reader copies it as is"
#endif

// Headers larger than this are refused (the reference implementation's limit is 100 MB).
#define ST_MAX_HEADER ((uint64_t)100 << 20)

struct trit_safetensors {
    char *path;
    int fd;
    uint64_t data_start, data_size;
    int64_t n, n_meta;
    trit_safetensors_info *info;
    char **meta; // key, value, key, value, ...
};

// ---- dtypes ------------------------------------------------------------------------------

static const struct {
    const char *name;
    int size;
    trit_dtype dt; // TRIT_DTYPE_COUNT: valid safetensors dtype that trit does not have
} st_dtypes[] = {
    {"F32", 4, TRIT_F32},  {"F64", 8, TRIT_F64},  {"BF16", 2, TRIT_BF16}, {"F16", 2, TRIT_F16},
    {"I32", 4, TRIT_I32},  {"I64", 8, TRIT_I64},  {"I8", 1, TRIT_I8},     {"U8", 1, TRIT_U8},
    {"BOOL", 1, TRIT_DTYPE_COUNT}, {"I16", 2, TRIT_DTYPE_COUNT}, {"U16", 2, TRIT_DTYPE_COUNT},
    {"U32", 4, TRIT_DTYPE_COUNT},  {"U64", 8, TRIT_DTYPE_COUNT}, {"F8_E4M3", 1, TRIT_F8_E4M3},
    {"F8_E5M2", 1, TRIT_F8_E5M2},
};
#define N_ST_DTYPES (sizeof st_dtypes / sizeof st_dtypes[0])

const char *trit_safetensors_dtype_name(trit_dtype dt) {
    for (size_t i = 0; i < N_ST_DTYPES; i++)
        if (st_dtypes[i].dt == dt && dt != TRIT_DTYPE_COUNT) return st_dtypes[i].name;
    return NULL;
}

trit_dtype trit_safetensors_dtype_from_name(const char *name) {
    for (size_t i = 0; name && i < N_ST_DTYPES; i++)
        if (strcmp(st_dtypes[i].name, name) == 0) return st_dtypes[i].dt;
    return TRIT_DTYPE_COUNT;
}

static int st_dtype_index(const char *name) {
    for (size_t i = 0; i < N_ST_DTYPES; i++)
        if (strcmp(st_dtypes[i].name, name) == 0) return (int)i;
    return -1;
}

// ---- header parsing ----------------------------------------------------------------------

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

// A JSON number that is a non-negative integer exactly representable as a double.
static bool json_uint(const cJSON *j, int64_t *out) {
    if (!cJSON_IsNumber(j)) return false;
    double v = j->valuedouble;
    if (!isfinite(v) || v < 0 || v > 9007199254740992.0 || v != floor(v)) return false;
    *out = (int64_t)v;
    return true;
}

static trit_status parse_meta(trit_safetensors *f, const cJSON *obj) {
    if (!cJSON_IsObject(obj))
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': __metadata__ must be an object of strings", f->path);
    int64_t n = cJSON_GetArraySize(obj);
    f->meta = calloc((size_t)(2 * n + 1), sizeof *f->meta);
    if (!f->meta) return trit_error(TRIT_ERR_NOMEM, "cannot allocate safetensors metadata");
    for (const cJSON *kv = obj->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv))
            return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': metadata '%s' is not a string (the format allows only strings)",
                              f->path, kv->string);
        f->meta[2 * f->n_meta] = str_dup(kv->string);
        f->meta[2 * f->n_meta + 1] = str_dup(kv->valuestring);
        f->n_meta++;
        if (!f->meta[2 * f->n_meta - 2] || !f->meta[2 * f->n_meta - 1])
            return trit_error(TRIT_ERR_NOMEM, "cannot allocate safetensors metadata");
    }
    return TRIT_OK;
}

static trit_status parse_shape(trit_safetensors *f, const char *name, const cJSON *shape,
                               trit_safetensors_info *t, int64_t *numel) {
    if (!cJSON_IsArray(shape))
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' has no \"shape\" array", f->path, name);
    int nd = cJSON_GetArraySize(shape);
    if (nd > TRIT_MAX_DIMS)
        return trit_error(TRIT_ERR_UNSUPPORTED, "safetensors '%s': tensor '%s' has %d dims, trit supports up to %d",
                          f->path, name, nd, TRIT_MAX_DIMS);
    t->ndim = nd;
    *numel = 1;
    int d = 0;
    for (const cJSON *e = shape->child; e; e = e->next, d++) {
        int64_t v;
        if (!json_uint(e, &v))
            return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' dim %d is not a non-negative integer",
                              f->path, name, d);
        t->shape[d] = v;
        if (v != 0 && *numel > INT64_MAX / 8 / v)
            return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' is impossibly large", f->path, name);
        *numel *= v;
    }
    return TRIT_OK;
}

static trit_status parse_tensor(trit_safetensors *f, const cJSON *j, trit_safetensors_info *t) {
    const char *name = j->string;
    if (!cJSON_IsObject(j))
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': entry '%s' is not an object", f->path, name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(j, "data_offsets");
    if (!cJSON_IsString(dtype))
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' has no \"dtype\" string", f->path, name);
    int di = st_dtype_index(dtype->valuestring);
    if (di < 0)
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' has unknown dtype \"%s\"", f->path, name,
                          dtype->valuestring);
    int64_t numel = 0;
    trit_status s = parse_shape(f, name, cJSON_GetObjectItemCaseSensitive(j, "shape"), t, &numel);
    if (s != TRIT_OK) return s;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || !json_uint(offs->child, &t->begin) ||
        !json_uint(offs->child->next, &t->end))
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' needs \"data_offsets\": [begin, end] of non-negative integers",
                          f->path, name);
    if (t->begin > t->end || (uint64_t)t->end > f->data_size)
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' has data_offsets [%lld, %lld] outside the %llu-byte data section",
                          f->path, name, (long long)t->begin, (long long)t->end, (unsigned long long)f->data_size);
    if (t->end - t->begin != numel * st_dtypes[di].size)
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' spans %lld bytes, but %lld elements of %s need %lld",
                          f->path, name, (long long)(t->end - t->begin), (long long)numel, st_dtypes[di].name,
                          (long long)(numel * st_dtypes[di].size));
    t->dtype = st_dtypes[di].dt;
    t->dtype_name = st_dtypes[di].name;
    t->name = str_dup(name);
    return t->name ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "cannot allocate a tensor name");
}

static int cmp_by_offset(const void *x, const void *y) {
    const trit_safetensors_info *a = *(trit_safetensors_info *const *)x, *b = *(trit_safetensors_info *const *)y;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    return (a->end > b->end) - (a->end < b->end);
}

// The tensors must tile [0, data_size) exactly.
static trit_status check_layout(trit_safetensors *f) {
    trit_safetensors_info **order = malloc((size_t)(f->n ? f->n : 1) * sizeof *order);
    if (!order) return trit_error(TRIT_ERR_NOMEM, "cannot allocate safetensors index");
    for (int64_t i = 0; i < f->n; i++) order[i] = &f->info[i];
    qsort(order, (size_t)f->n, sizeof *order, cmp_by_offset);
    trit_status s = TRIT_OK;
    int64_t pos = 0;
    const char *prev = NULL;
    for (int64_t i = 0; i < f->n && s == TRIT_OK; i++) {
        if (order[i]->begin < pos)
            s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensors '%s' and '%s' overlap (byte %lld is in both)",
                           f->path, prev, order[i]->name, (long long)order[i]->begin);
        else if (order[i]->begin > pos)
            s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': bytes [%lld, %lld) of the data belong to no tensor (a hole before '%s')",
                           f->path, (long long)pos, (long long)order[i]->begin, order[i]->name);
        pos = order[i]->end;
        prev = order[i]->name;
    }
    if (s == TRIT_OK && (uint64_t)pos != f->data_size)
        s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': the data section is %llu bytes but the tensors cover %lld: truncated header or trailing junk",
                       f->path, (unsigned long long)f->data_size, (long long)pos);
    free(order);
    return s;
}

static trit_status parse_header(trit_safetensors *f, const char *json, size_t n) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, n, &end, 0);
    if (!root)
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': header is not valid JSON (error near byte %lld of %zu)",
                          f->path, end ? (long long)(end - json) : -1LL, n);
    trit_status s = TRIT_OK;
    for (const char *p = end; p < json + n && s == TRIT_OK; p++) // the format pads with spaces
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r')
            s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': junk after the JSON header at byte %lld", f->path,
                           (long long)(p - json));
    if (s == TRIT_OK && !cJSON_IsObject(root))
        s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': header JSON is not an object", f->path);
    int64_t count = s == TRIT_OK ? cJSON_GetArraySize(root) : 0;
    if (s == TRIT_OK && !(f->info = calloc((size_t)(count ? count : 1), sizeof *f->info)))
        s = trit_error(TRIT_ERR_NOMEM, "cannot allocate safetensors index");
    bool seen_meta = false;
    for (const cJSON *j = s == TRIT_OK ? root->child : NULL; j && s == TRIT_OK; j = j->next) {
        if (!j->string || !*j->string) {
            s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': a tensor has an empty name", f->path);
        } else if (strcmp(j->string, "__metadata__") == 0) {
            s = seen_meta ? trit_error(TRIT_ERR_FORMAT, "safetensors '%s': __metadata__ appears twice", f->path)
                          : parse_meta(f, j);
            seen_meta = true;
        } else if (trit_safetensors_find(f, j->string)) {
            s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': tensor '%s' appears twice", f->path, j->string);
        } else {
            s = parse_tensor(f, j, &f->info[f->n]);
            if (s == TRIT_OK) f->n++;
        }
    }
    cJSON_Delete(root);
    return s == TRIT_OK ? check_layout(f) : s;
}

// ---- open / close ------------------------------------------------------------------------

static bool read_at(int fd, void *buf, size_t n, uint64_t off) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return true;
}

static trit_status read_header(trit_safetensors *f) {
    struct stat st;
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode))
        return trit_error(TRIT_ERR_IO, "safetensors '%s' is not a regular file", f->path);
    uint64_t size = (uint64_t)st.st_size;
    uint8_t len8[8];
    if (size < 8)
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s' is %llu bytes, too short for the 8-byte header length: truncated or not safetensors",
                          f->path, (unsigned long long)size);
    if (!read_at(f->fd, len8, 8, 0)) return trit_error(TRIT_ERR_IO, "cannot read '%s': %s", f->path, strerror(errno));
    uint64_t n = trit_le64_load(len8);
    if (n < 2 || n > size - 8 || n > ST_MAX_HEADER)
        return trit_error(TRIT_ERR_FORMAT, "safetensors '%s': header length %llu does not fit the %llu-byte file (or exceeds %llu): truncated or not safetensors",
                          f->path, (unsigned long long)n, (unsigned long long)size, (unsigned long long)ST_MAX_HEADER);
    char *json = malloc((size_t)n + 1);
    if (!json) return trit_error(TRIT_ERR_NOMEM, "cannot allocate a %llu-byte header", (unsigned long long)n);
    trit_status s = TRIT_OK;
    if (!read_at(f->fd, json, (size_t)n, 8)) s = trit_error(TRIT_ERR_IO, "cannot read the header of '%s'", f->path);
    json[n] = 0;
    f->data_start = 8 + n;
    f->data_size = size - 8 - n;
    size_t bad = 0;
    if (s == TRIT_OK && json[0] != '{')
        s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': header does not start with '{'", f->path);
    else if (s == TRIT_OK && !trit_utf8_valid((const uint8_t *)json, (size_t)n, &bad))
        s = trit_error(TRIT_ERR_FORMAT, "safetensors '%s': the header is not valid UTF-8 (byte 0x%02x at offset %zu "
                       "of the %llu-byte JSON); the format requires UTF-8 JSON, so the file is damaged or was not "
                       "written by a safetensors writer", f->path, (unsigned)(uint8_t)json[bad], bad,
                       (unsigned long long)n);
    if (s == TRIT_OK) s = parse_header(f, json, (size_t)n);
    free(json);
    return s;
}

trit_safetensors *trit_safetensors_open(const char *path) {
    if (!path) {
        trit_error(TRIT_ERR_INVALID, "trit_safetensors_open: NULL path");
        return NULL;
    }
    trit_safetensors *f = calloc(1, sizeof *f);
    if (!f || !(f->path = str_dup(path))) {
        free(f);
        trit_error(TRIT_ERR_NOMEM, "cannot allocate a safetensors reader");
        return NULL;
    }
    f->fd = open(path, O_RDONLY);
    if (f->fd < 0) {
        trit_error(TRIT_ERR_IO, "cannot open safetensors '%s': %s", path, strerror(errno));
        trit_safetensors_close(f);
        return NULL;
    }
    if (read_header(f) != TRIT_OK) {
        trit_safetensors_close(f);
        return NULL;
    }
    return f;
}

void trit_safetensors_close(trit_safetensors *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    for (int64_t i = 0; i < f->n; i++) free((char *)f->info[i].name);
    for (int64_t i = 0; f->meta && i < 2 * f->n_meta; i++) free(f->meta[i]);
    free(f->info);
    free(f->meta);
    free(f->path);
    free(f);
}

// ---- queries -----------------------------------------------------------------------------

int64_t trit_safetensors_count(const trit_safetensors *f) { return f ? f->n : 0; }

const trit_safetensors_info *trit_safetensors_at(const trit_safetensors *f, int64_t i) {
    if (!f || i < 0 || i >= f->n) {
        trit_error(TRIT_ERR_RANGE, "safetensors tensor index %lld outside [0, %lld)", (long long)i,
                   (long long)(f ? f->n : 0));
        return NULL;
    }
    return &f->info[i];
}

const trit_safetensors_info *trit_safetensors_find(const trit_safetensors *f, const char *name) {
    for (int64_t i = 0; f && name && i < f->n; i++)
        if (strcmp(f->info[i].name, name) == 0) return &f->info[i];
    return NULL;
}

const char *trit_safetensors_meta(const trit_safetensors *f, const char *key) {
    for (int64_t i = 0; f && key && i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

int64_t trit_safetensors_meta_count(const trit_safetensors *f) { return f ? f->n_meta : 0; }

trit_status trit_safetensors_meta_at(const trit_safetensors *f, int64_t i, const char **key, const char **value) {
    if (!f || !key || !value) return trit_error(TRIT_ERR_INVALID, "trit_safetensors_meta_at: NULL argument");
    if (i < 0 || i >= f->n_meta)
        return trit_error(TRIT_ERR_RANGE, "safetensors metadata index %lld outside [0, %lld)", (long long)i,
                          (long long)f->n_meta);
    *key = f->meta[2 * i];
    *value = f->meta[2 * i + 1];
    return TRIT_OK;
}

static const char *info_shape_str(const trit_safetensors_info *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "(");
    for (int d = 0; d < t->ndim && k < n; d++)
        k += (size_t)snprintf(buf + k, n - k, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (k < n) snprintf(buf + k, n - k, ")");
    return buf;
}

static trit_status check_match(const trit_safetensors *f, const trit_safetensors_info *t, const trit_tensor *dst) {
    if (t->dtype == TRIT_DTYPE_COUNT)
        return trit_error(TRIT_ERR_UNSUPPORTED, "safetensors '%s': tensor '%s' has dtype %s, which trit cannot load",
                          f->path, t->name, t->dtype_name);
    // Float dtypes convert on load (bf16/f16 -> f32 exactly, f32 -> bf16/f16 to nearest even).
    const bool dtype_ok = dst->dtype == t->dtype || (trit_dtype_is_float(dst->dtype) && trit_dtype_is_float(t->dtype) &&
                                                     !trit_dtype_is_quantized(dst->dtype));
    bool same = dst->ndim == t->ndim && dtype_ok;
    for (int d = 0; same && d < t->ndim; d++) same = dst->shape[d] == t->shape[d];
    if (same) return TRIT_OK;
    char want[160], got[160];
    const char *dn = trit_safetensors_dtype_name(dst->dtype);
    return trit_error(!dtype_ok ? TRIT_ERR_DTYPE : TRIT_ERR_SHAPE,
                      "safetensors '%s': tensor '%s' is %s %s in the file, the destination expects %s %s: "
                      "the file was made for a different model configuration (compare the model "
                      "settings with the file's __metadata__) or needs a dtype conversion",
                      f->path, t->name, t->dtype_name, info_shape_str(t, got, sizeof got), dn ? dn : "?",
                      trit_tensor_shape_str(dst, want, sizeof want));
}

trit_status trit_safetensors_load(const trit_safetensors *f, const char *name, trit_tensor *dst) {
    if (!f || !name || !dst) return trit_error(TRIT_ERR_INVALID, "trit_safetensors_load: NULL argument");
    const trit_safetensors_info *t = trit_safetensors_find(f, name);
    if (!t)
        return trit_error(TRIT_ERR_INVALID, "safetensors '%s' has no tensor '%s' (it has %lld tensors; list them with trit_safetensors_at)",
                          f->path, name, (long long)f->n);
    trit_status s = check_match(f, t, dst);
    if (s != TRIT_OK) return s;
    if (dst->quant) return trit_error(TRIT_ERR_DTYPE, "trit_safetensors_load: '%s' cannot be loaded into quantized storage", name);
    size_t nbytes = (size_t)(t->end - t->begin);
    if (nbytes == 0) return TRIT_OK;
    if (!dst->data) return trit_error(TRIT_ERR_STATE, "trit_safetensors_load: destination for '%s' has no storage", name);
    uint64_t off = f->data_start + (uint64_t)t->begin;
    if (trit_tensor_is_contiguous(dst) && dst->dtype == t->dtype) {
        if (!read_at(f->fd, trit_tensor_ptr(dst), nbytes, off))
            return trit_error(TRIT_ERR_IO, "safetensors '%s': reading tensor '%s' failed (file truncated since it was opened?)",
                              f->path, name);
        return TRIT_OK;
    }
    // Strided or converting destination: read contiguously, then copy element by element.
    trit_tensor src;
    memset(&src, 0, sizeof src);
    s = trit_tensor_init_layout(&src, t->dtype, t->ndim, t->shape);
    if (s != TRIT_OK) return s;
    src.data = malloc(nbytes);
    if (!src.data) return trit_error(TRIT_ERR_NOMEM, "cannot allocate %zu bytes to load '%s'", nbytes, name);
    if (!read_at(f->fd, src.data, nbytes, off))
        s = trit_error(TRIT_ERR_IO, "safetensors '%s': reading tensor '%s' failed", f->path, name);
    else
        s = trit_tensor_copy(dst, &src);
    free(src.data);
    return s;
}
