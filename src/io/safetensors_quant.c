// Quantized tensors in safetensors. A tensor of a dtype with side scales is stored as
//   <name>              its packed codes: I8 (qint8) or F8_E4M3/F8_E5M2 in the tensor's shape,
//                       U8 (rows, bytes per row) for the packed 4- and 2-bit codes and NF4
//   <name>.scales       F32 (groups), or when double-quantized
//   <name>.qscales      I8 (groups) and <name>.scales2 F32 (blocks)
//   <name>.zero_points  F32 (groups), affine codes only
// and described in the metadata entry "quantization", a JSON object with one member per tensor:
//   {"dtype": "qint4", "shape": [out, in], "group_size": 128, "scheme": "symmetric"|"affine",
//    "double_quant_block": 0|256, "scales_mean": 0.0}
// so other readers see ordinary tensors and trit gets the packed bytes back exactly.
#include "trit/io.h"
#include "trit/quant.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QMAP_KEY "quantization"

static bool side_scaled(const trit_tensor *t) { return t->quant && trit_dtype_is_quantized(t->dtype); }

// How the codes of t are shaped on disk.
static trit_dtype codes_layout(const trit_tensor *t, int *ndim, int64_t *shape) {
    *ndim = t->ndim;
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    if (t->dtype == TRIT_QINT8) return TRIT_I8;
    if (t->dtype == TRIT_F8_E4M3 || t->dtype == TRIT_F8_E5M2) return t->dtype;
    const int64_t row = t->shape[t->ndim - 1];
    *ndim = 2;
    shape[0] = trit_tensor_numel(t) / row;
    shape[1] = (int64_t)trit_dtype_nbytes(t->dtype, row);
    return TRIT_U8;
}

static trit_tensor side(trit_dtype dt, int ndim, const int64_t *shape, void *data) {
    trit_tensor v;
    memset(&v, 0, sizeof v);
    trit_tensor_init_layout(&v, dt, ndim, shape);
    v.data = data;
    return v;
}

typedef struct expansion {
    trit_safetensors_entry *e;
    trit_tensor *views;
    char (*names)[TRIT_NAME_MAX + 16];
    int64_t n;
} expansion;

static void add(expansion *x, const char *name, const char *suffix, trit_tensor v) {
    snprintf(x->names[x->n], sizeof x->names[x->n], "%s%s", name, suffix);
    x->views[x->n] = v;
    x->e[x->n].name = x->names[x->n];
    x->e[x->n].tensor = &x->views[x->n];
    x->n++;
}

static cJSON *describe(const trit_tensor *t) {
    const trit_quant_info *q = t->quant;
    cJSON *o = cJSON_CreateObject(), *shape = cJSON_AddArrayToObject(o, "shape");
    cJSON_AddStringToObject(o, "dtype", trit_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
    cJSON_AddNumberToObject(o, "group_size", (double)q->group_size);
    cJSON_AddStringToObject(o, "scheme", q->zero_points ? "affine" : "symmetric");
    cJSON_AddNumberToObject(o, "double_quant_block", (double)q->dq_block);
    cJSON_AddNumberToObject(o, "scales_mean", (double)q->scales_mean);
    return o;
}

static trit_status expand(const trit_safetensors_entry *in, int64_t n, expansion *x, cJSON *map) {
    for (int64_t i = 0; i < n; i++) {
        const trit_tensor *t = in[i].tensor;
        if (!t || !side_scaled(t)) {
            x->e[x->n++] = in[i];
            continue;
        }
        if (!trit_tensor_is_contiguous(t) || !in[i].name || strlen(in[i].name) >= TRIT_NAME_MAX)
            return trit_error(TRIT_ERR_INVALID, "safetensors: quantized tensor '%s' must be contiguous and have a name "
                              "shorter than %d bytes", in[i].name ? in[i].name : "(null)", TRIT_NAME_MAX);
        const trit_quant_info *q = t->quant;
        int nd;
        int64_t shape[TRIT_MAX_DIMS], G = q->num_groups, nb = q->dq_block ? (G + q->dq_block - 1) / q->dq_block : 0;
        const trit_dtype cdt = codes_layout(t, &nd, shape);
        add(x, in[i].name, "", side(cdt, nd, shape, trit_tensor_ptr(t)));
        if (q->qscales) {
            add(x, in[i].name, ".qscales", side(TRIT_I8, 1, &G, q->qscales));
            add(x, in[i].name, ".scales2", side(TRIT_F32, 1, &nb, q->scales2));
        } else {
            add(x, in[i].name, ".scales", side(TRIT_F32, 1, &G, q->scales));
        }
        if (q->zero_points) add(x, in[i].name, ".zero_points", side(TRIT_F32, 1, &G, q->zero_points));
        cJSON_AddItemToObject(map, in[i].name, describe(t));
    }
    return TRIT_OK;
}

trit_status trit_safetensors_write_quantized(const char *path, const trit_safetensors_entry *entries, int64_t n,
                                             const trit_safetensors_kv *meta, int64_t n_meta) {
    if (!path || n < 0 || n_meta < 0 || (n > 0 && !entries) || (n_meta > 0 && !meta))
        return trit_error(TRIT_ERR_INVALID, "trit_safetensors_write_quantized: NULL path/entries or negative count");
    expansion x = {calloc((size_t)(4 * n + 1), sizeof *x.e), calloc((size_t)(4 * n + 1), sizeof *x.views),
                   calloc((size_t)(4 * n + 1), sizeof *x.names), 0};
    trit_safetensors_kv *kv = calloc((size_t)n_meta + 1, sizeof *kv);
    cJSON *map = cJSON_CreateObject();
    char *map_s = NULL;
    trit_status s = x.e && x.views && x.names && kv && map ? expand(entries, n, &x, map)
                                                           : trit_error(TRIT_ERR_NOMEM, "cannot allocate a quantized header");
    if (s == TRIT_OK && !(map_s = cJSON_PrintUnformatted(map))) s = trit_error(TRIT_ERR_NOMEM, "cannot print the quantization map");
    if (s == TRIT_OK) {
        for (int64_t i = 0; i < n_meta; i++) kv[i] = meta[i];
        kv[n_meta] = (trit_safetensors_kv){QMAP_KEY, map_s};
        s = trit_safetensors_write(path, x.e, x.n, kv, n_meta + 1);
    }
    free(map_s);
    cJSON_Delete(map);
    free(kv), free(x.e), free(x.views), free(x.names);
    return s;
}

// ---- reading ---------------------------------------------------------------------------------

static trit_dtype dtype_by_name(const char *name) {
    for (int d = 0; name && d < TRIT_DTYPE_COUNT; d++)
        if (strcmp(trit_dtype_name((trit_dtype)d), name) == 0) return (trit_dtype)d;
    return TRIT_DTYPE_COUNT;
}

// The map entry of name (a detached copy the caller deletes), NULL when the file lists none;
// *s says whether the map itself was readable.
static cJSON *map_entry(const trit_safetensors *f, const char *name, trit_status *s) {
    *s = TRIT_OK;
    const char *json = trit_safetensors_meta(f, QMAP_KEY);
    if (!json) return NULL;
    cJSON *map = cJSON_Parse(json);
    if (!cJSON_IsObject(map)) {
        cJSON_Delete(map);
        *s = trit_error(TRIT_ERR_FORMAT, "safetensors: the \"%s\" metadata is not a JSON object", QMAP_KEY);
        return NULL;
    }
    cJSON *e = cJSON_DetachItemFromObjectCaseSensitive(map, name);
    cJSON_Delete(map);
    return e;
}

bool trit_safetensors_is_quantized(const trit_safetensors *f, const char *name) {
    trit_status s;
    cJSON *e = f && name ? map_entry(f, name, &s) : NULL;
    cJSON_Delete(e);
    return e != NULL;
}

static bool json_count(const cJSON *j, int64_t lo, int64_t hi, int64_t *out) {
    if (!cJSON_IsNumber(j) || !(j->valuedouble >= (double)lo && j->valuedouble <= (double)hi) ||
        j->valuedouble != floor(j->valuedouble))
        return false;
    *out = (int64_t)j->valuedouble;
    return true;
}

typedef struct qdesc {
    trit_dtype dt;
    int ndim;
    int64_t shape[TRIT_MAX_DIMS], numel, group, dq_block;
    bool affine;
    float mean;
} qdesc;

static trit_status parse_desc(const cJSON *e, const char *name, qdesc *d) {
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *scheme = cJSON_GetObjectItemCaseSensitive(e, "scheme");
    const cJSON *mean = cJSON_GetObjectItemCaseSensitive(e, "scales_mean");
    d->dt = dtype_by_name(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "dtype")));
    d->ndim = cJSON_GetArraySize(shape);
    bool ok = cJSON_IsArray(shape) && d->ndim >= 1 && d->ndim <= TRIT_MAX_DIMS && d->dt != TRIT_DTYPE_COUNT &&
              trit_dtype_is_quantized(d->dt) && d->dt != TRIT_Q8_0 && d->dt != TRIT_Q4_0 && d->dt != TRIT_TQ2_0 && cJSON_IsString(scheme) && cJSON_IsNumber(mean) &&
              isfinite(mean->valuedouble);
    d->numel = 1;
    for (int i = 0; ok && i < d->ndim; i++) {
        ok = json_count(cJSON_GetArrayItem(shape, i), 1, (int64_t)1 << 40, &d->shape[i]) &&
             d->numel <= ((int64_t)1 << 40) / d->shape[i];
        if (ok) d->numel *= d->shape[i];
    }
    ok = ok && json_count(cJSON_GetObjectItemCaseSensitive(e, "group_size"), 1, d->numel, &d->group) &&
         d->numel % d->group == 0 && d->shape[d->ndim - 1] % trit_dtype_block(d->dt) == 0 &&
         json_count(cJSON_GetObjectItemCaseSensitive(e, "double_quant_block"), 0, 1 << 20, &d->dq_block);
    if (ok) {
        d->affine = strcmp(scheme->valuestring, "affine") == 0;
        ok = d->affine || strcmp(scheme->valuestring, "symmetric") == 0;
        d->mean = (float)mean->valuedouble;
    }
    return ok ? TRIT_OK
              : trit_error(TRIT_ERR_FORMAT, "safetensors: the quantization map entry of '%s' is malformed (needs a "
                           "quantized dtype, a shape, a group size dividing it, a scheme, a double_quant_block and a "
                           "finite scales_mean)", name);
}

// The side tensors a map entry calls for: suffix, dtype and length of each.
typedef struct side_spec {
    const char *suffix;
    trit_dtype dt;
    int64_t n;
} side_spec;

static const char *const side_suffixes[] = {".scales", ".qscales", ".scales2", ".zero_points"};

static int side_specs(const qdesc *d, side_spec out[3]) {
    const int64_t G = d->numel / d->group;
    int k = 0;
    if (d->dq_block) {
        out[k++] = (side_spec){".qscales", TRIT_I8, G};
        out[k++] = (side_spec){".scales2", TRIT_F32, (G + d->dq_block - 1) / d->dq_block};
    } else {
        out[k++] = (side_spec){".scales", TRIT_F32, G};
    }
    if (d->affine) out[k++] = (side_spec){".zero_points", TRIT_F32, G};
    return k;
}

static void shape_str(int ndim, const int64_t *shape, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++) k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

// "qint4 [8, 256], groups of 128, symmetric": a map entry as messages name it.
static const char *desc_str(const qdesc *d, char *buf, size_t n) {
    char shape[160];
    shape_str(d->ndim, d->shape, shape, sizeof shape);
    snprintf(buf, n, "%s %s, groups of %lld, %s%s", trit_dtype_name(d->dt), shape, (long long)d->group,
             d->affine ? "affine" : "symmetric", d->dq_block ? ", double-quantized" : "");
    return buf;
}

// The file's <name><suffix> must be a vector of exactly the length and dtype the entry implies.
static trit_status check_side(const trit_safetensors *f, const char *name, const qdesc *d, const side_spec *s) {
    char full[TRIT_NAME_MAX + 16], what[256];
    snprintf(full, sizeof full, "%s%s", name, s->suffix);
    const trit_safetensors_info *i = trit_safetensors_find(f, full);
    if (!i)
        return trit_error(TRIT_ERR_FORMAT, "safetensors: quantized '%s' lacks its '%s' tensor (its quantization map "
                          "entry, %s, calls for %s (%lld))", name, full, desc_str(d, what, sizeof what),
                          trit_safetensors_dtype_name(s->dt), (long long)s->n);
    if (i->dtype == s->dt && i->ndim == 1 && i->shape[0] == s->n) return TRIT_OK;
    char got[160];
    shape_str(i->ndim, i->shape, got, sizeof got);
    return trit_error(TRIT_ERR_FORMAT, "safetensors: the quantization map entry of '%s' (%s) calls for '%s' as %s [%lld], "
                      "but the file's is %s %s: the map and the tensors disagree (damaged or hand-edited file)",
                      name, desc_str(d, what, sizeof what), full, trit_safetensors_dtype_name(s->dt), (long long)s->n,
                      i->dtype_name, got);
}

// Reads the side tensor <name><suffix> of exactly n values of dt into dst (check_side passed).
static trit_status read_side(const trit_safetensors *f, const char *name, const char *suffix, trit_dtype dt,
                             int64_t n, void *dst) {
    char full[TRIT_NAME_MAX + 16];
    snprintf(full, sizeof full, "%s%s", name, suffix);
    trit_tensor v = side(dt, 1, &n, dst);
    return trit_safetensors_load(f, full, &v);
}

static trit_status read_codes(const trit_safetensors *f, const char *name, trit_tensor *t) {
    const trit_safetensors_info *i = trit_safetensors_find(f, name);
    int nd;
    int64_t shape[TRIT_MAX_DIMS];
    const trit_dtype cdt = codes_layout(t, &nd, shape);
    if (!i) return trit_error(TRIT_ERR_FORMAT, "safetensors: the quantization map lists '%s' but the file lacks it", name);
    trit_tensor v = side(cdt, nd, shape, trit_tensor_ptr(t));
    return trit_safetensors_load(f, name, &v);  // checks dtype and shape, so the byte count too
}

// The file's codes tensor must have the dtype and shape the map entry implies before anything
// is allocated: the entry alone may claim 2^40 elements in a file of a few hundred bytes.
static trit_status check_codes(const trit_safetensors *f, const char *name, const qdesc *d) {
    trit_tensor layout = side(d->dt, d->ndim, d->shape, NULL);
    int nd;
    int64_t shape[TRIT_MAX_DIMS];
    const trit_dtype cdt = codes_layout(&layout, &nd, shape);
    const trit_safetensors_info *i = trit_safetensors_find(f, name);
    if (!i) return trit_error(TRIT_ERR_FORMAT, "safetensors: the quantization map lists '%s' but the file lacks it", name);
    bool same = i->dtype == cdt && i->ndim == nd;
    for (int k = 0; same && k < nd; k++) same = i->shape[k] == shape[k];
    if (same) return TRIT_OK;
    char want[160], got[160];
    shape_str(nd, shape, want, sizeof want);
    shape_str(i->ndim, i->shape, got, sizeof got);
    return trit_error(TRIT_ERR_FORMAT, "safetensors: the quantization map describes '%s' as %s, whose codes are %s %s, "
                      "but the file's tensor is %s %s: the map and the tensors disagree (damaged or hand-edited file)",
                      name, trit_dtype_name(d->dt), trit_safetensors_dtype_name(cdt), want, i->dtype_name, got);
}

// An entry against the file: its codes and each side tensor it calls for, before any allocation.
static trit_status check_entry(const trit_safetensors *f, const char *name, const cJSON *e, qdesc *d) {
    trit_status s = parse_desc(e, name, d);
    if (s == TRIT_OK) s = check_codes(f, name, d);
    side_spec sides[3];
    const int n = s == TRIT_OK ? side_specs(d, sides) : 0;
    for (int k = 0; k < n && s == TRIT_OK; k++) s = check_side(f, name, d, &sides[k]);
    return s;
}

static trit_tensor *read_quantized(const trit_safetensors *f, const char *name, const cJSON *e) {
    qdesc d;
    if (check_entry(f, name, e, &d) != TRIT_OK) return NULL;
    trit_tensor *t = trit_tensor_new(d.dt, d.ndim, d.shape);
    trit_quant_info *q = t ? trit_quant_info_new(d.numel, d.group, d.affine, d.dq_block) : NULL;
    trit_status s = q ? read_codes(f, name, t) : TRIT_ERR_NOMEM;
    if (s == TRIT_OK && d.dq_block) {
        const int64_t nb = (q->num_groups + d.dq_block - 1) / d.dq_block;
        q->scales_mean = d.mean;
        s = read_side(f, name, ".qscales", TRIT_I8, q->num_groups, q->qscales);
        if (s == TRIT_OK) s = read_side(f, name, ".scales2", TRIT_F32, nb, q->scales2);
    } else if (s == TRIT_OK) {
        s = read_side(f, name, ".scales", TRIT_F32, q->num_groups, q->scales);
    }
    if (s == TRIT_OK && d.affine) s = read_side(f, name, ".zero_points", TRIT_F32, q->num_groups, q->zero_points);
    if (s == TRIT_OK) {
        s = trit_tensor_set_quant(t, q);
        q = NULL;
    }
    if (s == TRIT_OK) s = trit_tensor_set_name(t, name);
    trit_quant_info_free(q);
    if (s != TRIT_OK) {
        trit_tensor_free(t);
        return NULL;
    }
    return t;
}

trit_tensor *trit_safetensors_read_tensor(const trit_safetensors *f, const char *name) {
    if (!f || !name) {
        trit_error(TRIT_ERR_INVALID, "trit_safetensors_read_tensor: NULL argument");
        return NULL;
    }
    trit_status s;
    cJSON *e = map_entry(f, name, &s);
    if (s != TRIT_OK) return NULL;
    if (e) {
        trit_tensor *t = read_quantized(f, name, e);
        cJSON_Delete(e);
        return t;
    }
    const trit_safetensors_info *i = trit_safetensors_find(f, name);
    if (!i) {
        trit_error(TRIT_ERR_INVALID, "safetensors has no tensor '%s'", name);
        return NULL;
    }
    trit_tensor *t = trit_tensor_new(i->dtype, i->ndim, i->shape);
    if (t && (trit_safetensors_load(f, name, t) != TRIT_OK || trit_tensor_set_name(t, name) != TRIT_OK)) {
        trit_tensor_free(t);
        t = NULL;
    }
    return t;
}

// ---- the map against the file, both ways ---------------------------------------------------

// The map entry `stem` calls for the side tensor `suffix`.
static bool calls_for(const cJSON *entry, const char *stem, const char *suffix) {
    qdesc d;
    side_spec sides[3];
    if (parse_desc(entry, stem, &d) != TRIT_OK) return false;
    const int n = side_specs(&d, sides);
    for (int k = 0; k < n; k++)
        if (strcmp(sides[k].suffix, suffix) == 0) return true;
    return false;
}

// A file tensor named like a side tensor (<stem>.scales, ...) of a listed tensor must be one
// that tensor's entry calls for.
static trit_status check_stray_side(const cJSON *map, const char *name) {
    const size_t len = strlen(name);
    if (cJSON_GetObjectItemCaseSensitive(map, name)) return TRIT_OK;  // a listed tensor's codes
    for (size_t k = 0; k < sizeof side_suffixes / sizeof side_suffixes[0]; k++) {
        const size_t sl = strlen(side_suffixes[k]);
        if (len <= sl || strcmp(name + len - sl, side_suffixes[k]) != 0) continue;
        char stem[TRIT_NAME_MAX + 16];
        if (len - sl >= sizeof stem) continue;  // longer than any name trit writes: not a side tensor of one
        memcpy(stem, name, len - sl);
        stem[len - sl] = 0;
        const cJSON *entry = cJSON_GetObjectItemCaseSensitive(map, stem);
        if (!entry || calls_for(entry, stem, side_suffixes[k])) continue;
        qdesc d;
        char what[256];
        return trit_error(TRIT_ERR_FORMAT, "safetensors: tensor '%s' is beside quantized '%s', whose map entry (%s) "
                          "calls for no %s tensor: the map and the tensors disagree (damaged or hand-edited file)",
                          name, stem,
                          parse_desc(entry, stem, &d) == TRIT_OK ? desc_str(&d, what, sizeof what) : "malformed",
                          side_suffixes[k]);
    }
    return TRIT_OK;
}

trit_status trit_safetensors_check_quantized(const trit_safetensors *f) {
    if (!f) return trit_error(TRIT_ERR_INVALID, "trit_safetensors_check_quantized: NULL file");
    const char *json = trit_safetensors_meta(f, QMAP_KEY);
    if (!json) return TRIT_OK;
    cJSON *map = cJSON_Parse(json);
    trit_status s = cJSON_IsObject(map) ? TRIT_OK
                                        : trit_error(TRIT_ERR_FORMAT, "safetensors: the \"%s\" metadata is not a JSON object",
                                                     QMAP_KEY);
    qdesc d;
    for (const cJSON *e = s == TRIT_OK ? map->child : NULL; e && s == TRIT_OK; e = e->next) s = check_entry(f, e->string, e, &d);
    for (int64_t i = 0; s == TRIT_OK && i < trit_safetensors_count(f); i++)
        s = check_stray_side(map, trit_safetensors_at(f, i)->name);
    cJSON_Delete(map);
    return s;
}
