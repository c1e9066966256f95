// The training-state file: everything `trit train --resume` needs, in one atomically written
// file so a crash mid-write leaves the previous state whole.
//
//   offset 0   8 bytes  magic "TRITSTAT"
//          8   u32      version (4; versions 1 to 3 still load)
//         12   u32      0 (reserved)
//         16   u64      N, length of the JSON header
//         24   N bytes  JSON: {"config": {...}, "step", "data_batches", "rng": {...},
//                       "tokenizer": {"file", "crc32"}, "optimizer": {"kind", "step"},
//                       "skipped", "skip_streak", "loss_scaler": {"scale", "dynamic", "clean"}
//                       (when a scaler is active),
//                       "tensors": [{"name", "role": "weight"|"optim", "dtype", "shape", "offset",
//                       "count", and for a state quantized in blocks "scales_offset",
//                       "num_scales"}]}
//                       (integers as decimal strings so 64-bit values stay exact; the scale as
//                       "%.17g"; dtype any row of the dtype table, the buffer's own storage)
//   24 + N     data     little-endian values whatever the host (a blocked dtype's blocks as their
//                       format lays them out), f32 scales, at byte offsets relative to here
//   end - 4    u32      CRC-32 of every byte before it
// Version 1 had no dtype (every tensor f32), no scaler and no skip counts; version 2 no shape and
// no scales (every buffer shaped and counted like its parameter, of a dtype with whole elements);
// versions 1 to 3 held the frozen parameters' weights too (a resume now skips them there).
//
// The trained weights are in here too (not only in model.safetensors), so the pair (weights,
// moments) always comes from the same step, whichever write a crash interrupted. Frozen weights
// are the same at every step, so model.safetensors, written atomically, holds them alone.
#include "trit/io.h"
#include "trit/train.h"
#include "io/io_internal.h"
#include "train/train_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char STATE_MAGIC[8] = {'T', 'R', 'I', 'T', 'S', 'T', 'A', 'T'};
enum { STATE_VERSION = 4, STATE_PREFIX = 24 };

static cJSON *int_str(int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    return cJSON_CreateString(b);
}

static bool add_tensor(cJSON *list, const trit_state_entry *e, int64_t *offset) {
    cJSON *t = cJSON_CreateObject();
    if (!t) return false;
    cJSON_AddItemToArray(list, t);
    bool ok = cJSON_AddStringToObject(t, "name", e->name) && cJSON_AddStringToObject(t, "role", e->role) &&
              cJSON_AddStringToObject(t, "dtype", trit_dtype_name(e->dtype));
    cJSON *shape = cJSON_AddArrayToObject(t, "shape");
    for (int d = 0; ok && shape && d < e->ndim; d++) cJSON_AddItemToArray(shape, int_str(e->shape[d]));
    cJSON_AddItemToObject(t, "offset", int_str(*offset));
    cJSON_AddItemToObject(t, "count", int_str(e->count));
    *offset += (int64_t)trit_dtype_nbytes(e->dtype, e->count);
    if (e->num_scales > 0) {
        cJSON_AddItemToObject(t, "scales_offset", int_str(*offset));
        cJSON_AddItemToObject(t, "num_scales", int_str(e->num_scales));
        *offset += e->num_scales * (int64_t)sizeof(float);
    }
    return ok && shape;
}

// The scaler and the skip counts (resume continues them exactly).
static bool add_scaling(cJSON *h, const trit_train_state *st) {
    cJSON_AddItemToObject(h, "skipped", int_str(st->skipped));
    cJSON_AddItemToObject(h, "skip_streak", int_str(st->skip_streak));
    if (!st->has_scaler) return true;
    cJSON *ls = cJSON_AddObjectToObject(h, "loss_scaler");
    char b[40];
    snprintf(b, sizeof b, "%.17g", st->scaler.scale);
    return ls && cJSON_AddStringToObject(ls, "scale", b) && cJSON_AddBoolToObject(ls, "dynamic", st->scaler.dynamic) &&
           cJSON_AddItemToObject(ls, "clean", int_str(st->scaler.clean));
}

static char *state_header(const trit_train_state *st, const trit_state_entry *entries, int n, const char *optim_kind,
                          int64_t optim_step) {
    cJSON *h = cJSON_CreateObject();
    char *cfg = trit_train_config_to_json(&st->config);
    cJSON *cfg_obj = cfg ? cJSON_Parse(cfg) : NULL;
    free(cfg);
    if (!h || !cfg_obj) {
        cJSON_Delete(h);
        cJSON_Delete(cfg_obj);
        return NULL;
    }
    cJSON_AddItemToObject(h, "config", cfg_obj);
    cJSON_AddItemToObject(h, "step", int_str(st->step));
    cJSON_AddItemToObject(h, "data_batches", int_str(st->data_batches));
    cJSON *rng = cJSON_AddObjectToObject(h, "rng");
    if (rng) {
        // Philox is counter based: the seed and the counters of each stream are the whole state.
        cJSON_AddStringToObject(rng, "generator", "philox4x32-10");
        cJSON_AddItemToObject(rng, "seed", int_str(st->config.seed));
        cJSON_AddItemToObject(rng, "data_counter", int_str(st->data_batches * st->config.batch));
        cJSON_AddItemToObject(rng, "dropout_counter", int_str(st->data_batches));
    }
    cJSON *tok = cJSON_AddObjectToObject(h, "tokenizer");
    if (tok) {
        cJSON_AddStringToObject(tok, "file", TRIT_CKPT_TOKENIZER);
        cJSON_AddItemToObject(tok, "crc32", int_str(st->tokenizer_crc));
    }
    cJSON *opt = cJSON_AddObjectToObject(h, "optimizer");
    if (opt) {
        cJSON_AddStringToObject(opt, "kind", optim_kind);
        cJSON_AddItemToObject(opt, "step", int_str(optim_step));
    }
    cJSON *list = cJSON_AddArrayToObject(h, "tensors");
    bool ok = rng && tok && opt && list && add_scaling(h, st);
    int64_t offset = 0;
    for (int i = 0; ok && i < n; i++) ok = add_tensor(list, &entries[i], &offset);
    char *s = ok ? cJSON_PrintUnformatted(h) : NULL;
    cJSON_Delete(h);
    return s;
}

// Write and fold into the running CRC.
static void put(trit_atomic_file *f, uint32_t *crc, const void *p, size_t n) {
    *crc = trit_crc32(*crc, p, n);
    trit_atomic_write(f, p, n);
}

// n values of `size` bytes (2 or 4) in little-endian order: as they are on a little-endian
// host, byte-swapped through a small buffer on a big-endian one.
static void put_values(trit_atomic_file *f, uint32_t *crc, const void *p, int64_t n, size_t size) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint8_t buf[4096];
    const uint8_t *src = p;
    for (int64_t i = 0; i < n;) {
        const int64_t m = n - i < (int64_t)(sizeof buf / size) ? n - i : (int64_t)(sizeof buf / size);
        for (int64_t j = 0; j < m; j++)
            for (size_t b = 0; b < size; b++) buf[j * size + b] = src[(i + j) * size + size - 1 - b];
        put(f, crc, buf, (size_t)m * size);
        i += m;
    }
#else
    put(f, crc, p, (size_t)n * size);
#endif
}

// dst (n values of `size` bytes) from little-endian bytes.
static void get_values(void *dst, const uint8_t *src, int64_t n, size_t size) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    uint8_t *d = dst;
    for (int64_t j = 0; j < n; j++)
        for (size_t b = 0; b < size; b++) d[j * size + b] = src[j * size + size - 1 - b];
#else
    memcpy(dst, src, (size_t)n * size);
#endif
}

// n values of dtype dt: element dtypes little-endian value by value, blocked ones as their bytes.
static void put_buffer(trit_atomic_file *f, uint32_t *crc, const void *p, trit_dtype dt, int64_t n) {
    const size_t size = trit_dtype_size(dt);
    if (trit_dtype_block(dt) == 1 && (size == 2 || size == 4 || size == 8)) put_values(f, crc, p, n, size);
    else put(f, crc, p, trit_dtype_nbytes(dt, n));
}

trit_status trit_state_write(const char *path, const trit_train_state *st, const trit_state_entry *entries, int n,
                             const char *optim_kind, int64_t optim_step) {
    char *header = state_header(st, entries, n, optim_kind, optim_step);
    if (!header) return trit_error(TRIT_ERR_NOMEM, "cannot build the training-state header");
    size_t hn = strlen(header);
    uint8_t prefix[STATE_PREFIX];
    memcpy(prefix, STATE_MAGIC, 8);
    trit_le32_store(prefix + 8, STATE_VERSION);
    trit_le32_store(prefix + 12, 0);
    trit_le64_store(prefix + 16, hn);
    trit_atomic_file f;
    trit_status s = trit_atomic_open(&f, path);
    if (s != TRIT_OK) {
        free(header);
        return s;
    }
    uint32_t crc = 0;
    put(&f, &crc, prefix, sizeof prefix);
    put(&f, &crc, header, hn);
    free(header);
    for (int i = 0; i < n; i++) {
        put_buffer(&f, &crc, entries[i].data, entries[i].dtype, entries[i].count);
        if (entries[i].num_scales > 0) put_values(&f, &crc, entries[i].scales, entries[i].num_scales, sizeof(float));
        // Offloaded state is read one buffer at a time, so saving never holds all of it in memory.
        if (entries[i].offloaded)
            trit_optim_offload_evict(entries[i].offloaded, entries[i].data,
                                     trit_dtype_nbytes(entries[i].dtype, entries[i].count) +
                                         sizeof(float) * (size_t)entries[i].num_scales);
        trit_tensor_drop_pages(entries[i].weight);
    }
    uint8_t tail[4];
    trit_le32_store(tail, crc);
    trit_atomic_write(&f, tail, 4);
    return trit_atomic_commit(&f);
}

bool trit_state_holds_weight(const trit_tensor *t) {
    // No values: a quantized base's frozen matrix (QLoRA), whose codes model.safetensors holds.
    return t && t->data && !(t->flags & TRIT_FLAG_FROZEN);
}

trit_state_entry trit_state_weight_entry(const trit_tensor *t) {
    trit_state_entry e = {.name = t->name, .role = "weight", .dtype = t->dtype, .ndim = t->ndim,
                          .count = trit_tensor_numel(t), .data = trit_tensor_ptr(t), .weight = t};
    memcpy(e.shape, t->shape, sizeof e.shape);
    return e;
}

static bool frozen_with_values(const trit_tensor *t) { return t->data && (t->flags & TRIT_FLAG_FROZEN); }

trit_status trit_state_frozen_find(trit_safetensors **f, const char *model_path, const char *name,
                                   const trit_safetensors_info **info) {
    if (!*f && !(*f = trit_safetensors_open(model_path)))
        return trit_error(TRIT_ERR_IO, "cannot resume: '%s' holds the frozen weights, which the training state "
                          "leaves out, and it cannot be read: %s", model_path, trit_last_error());
    if (!(*info = trit_safetensors_find(*f, name)))
        return trit_error(TRIT_ERR_FORMAT, "cannot resume: '%s' lacks the frozen weight '%s' (the training state "
                          "leaves frozen weights to it): restore the run's own model file", model_path, name);
    return TRIT_OK;
}

trit_status trit_state_load_frozen(const char *model_path, trit_gpt *m) {
    trit_safetensors *f = NULL;
    trit_status s = TRIT_OK;
    for (int i = 0; s == TRIT_OK && i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        const trit_safetensors_info *info;
        if (!frozen_with_values(t)) continue;
        s = trit_state_frozen_find(&f, model_path, t->name, &info);
        if (s == TRIT_OK) s = trit_safetensors_load(f, t->name, t);
    }
    trit_safetensors_close(f);
    return s;
}

// The model's weights and the optimizer's buffers, as the file lists them (NULL when out of memory).
static trit_state_entry *entries_of(const trit_gpt *m, const trit_optim *o, int *n) {
    const int nw = trit_gpt_num_tensors(m), no = trit_optim_num_state(o);
    trit_state_entry *e = calloc((size_t)(nw + no) + 1, sizeof *e);
    if (!e) return NULL;
    int k = 0;
    for (int i = 0; i < nw; i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        if (trit_state_holds_weight(t)) e[k++] = trit_state_weight_entry(t);
    }
    for (int i = 0; i < no; i++) {
        trit_optim_state_buf b;
        if (trit_optim_get_state(o, i, &b) != TRIT_OK) {
            free(e);
            return NULL;
        }
        e[k + i] = (trit_state_entry){.name = b.name, .role = "optim", .dtype = b.dtype, .ndim = b.ndim,
                                      .count = b.count, .data = b.data, .scales = b.scales, .num_scales = b.num_scales,
                                      .offloaded = trit_optim_offloaded(o) ? o : NULL};
        memcpy(e[k + i].shape, b.shape, sizeof e[k + i].shape);
    }
    *n = k + no;
    return e;
}

trit_status trit_state_save(const char *path, const trit_train_state *st, const trit_gpt *m,
                            const trit_optim *o) {
    int n = 0;
    trit_state_entry *e = entries_of(m, o, &n);
    if (!e) return trit_error(TRIT_ERR_NOMEM, "cannot list the training state");
    trit_status s = trit_state_write(path, st, e, n, trit_optim_kind_name(trit_optim_get_config(o)->kind),
                                     trit_optim_get_step(o));
    free(e);
    return s;
}

// ---- reading ------------------------------------------------------------------------------

typedef struct state_file {
    uint8_t *bytes;
    size_t len;
    cJSON *header;
    const uint8_t *data;  // start of the data section
    size_t data_len;
    uint32_t version;
} state_file;

static void state_close(state_file *sf) {
    free(sf->bytes);
    cJSON_Delete(sf->header);
    memset(sf, 0, sizeof *sf);
}

static trit_status json_i64(const cJSON *o, const char *key, int64_t *out, const char *path) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v) || trit_arg_int(key, v->valuestring, out) != TRIT_OK)
        return trit_error(TRIT_ERR_FORMAT, "'%s': training state field '%s' is missing or not an integer",
                          path, key);
    return TRIT_OK;
}

// The same within [lo, hi]: the counters feed products and comparisons in the trainer (a step of
// -2 or 2^62 must stop here, with a message, not overflow later).
static trit_status json_i64_in(const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *out,
                               const char *path) {
    trit_status s = json_i64(o, key, out, path);
    if (s == TRIT_OK && (*out < lo || *out > hi))
        s = trit_error(TRIT_ERR_FORMAT, "'%s': training state field '%s' is %lld, outside [%lld, %lld]: the file "
                       "is damaged", path, key, (long long)*out, (long long)lo, (long long)hi);
    return s;
}

static trit_status state_open(const char *path, state_file *sf) {
    memset(sf, 0, sizeof *sf);
    trit_status s = trit_file_read_all(path, &sf->bytes, &sf->len);
    if (s != TRIT_OK) return s;
    const uint8_t *b = sf->bytes;
    if (sf->len < STATE_PREFIX + 4 || memcmp(b, STATE_MAGIC, 8) != 0) {
        state_close(sf);
        return trit_error(TRIT_ERR_FORMAT, "'%s' is not a trit training-state file (bad magic or too short)", path);
    }
    sf->version = trit_le32_load(b + 8);
    if (sf->version < 1 || sf->version > STATE_VERSION) {
        uint32_t v = sf->version;
        state_close(sf);
        return trit_error(TRIT_ERR_FORMAT, "'%s' has training-state version %u, this trit reads versions 1 to %d",
                          path, v, STATE_VERSION);
    }
    uint64_t hn = trit_le64_load(b + 16);
    if (hn > sf->len - STATE_PREFIX - 4) {
        state_close(sf);
        return trit_error(TRIT_ERR_FORMAT, "'%s' is truncated: its header claims %llu bytes", path,
                          (unsigned long long)hn);
    }
    if (trit_crc32(0, b, sf->len - 4) != trit_le32_load(b + sf->len - 4)) {
        state_close(sf);
        return trit_error(TRIT_ERR_FORMAT, "'%s' fails its CRC-32 check: the file is corrupt", path);
    }
    sf->header = cJSON_ParseWithLength((const char *)b + STATE_PREFIX, (size_t)hn);
    if (!cJSON_IsObject(sf->header)) {
        state_close(sf);
        return trit_error(TRIT_ERR_FORMAT, "'%s': the training-state header is not JSON", path);
    }
    sf->data = b + STATE_PREFIX + hn;
    sf->data_len = sf->len - STATE_PREFIX - (size_t)hn - 4;
    return TRIT_OK;
}

static trit_status parse_scaling(const cJSON *h, trit_train_state *st, const char *path) {
    trit_status s = json_i64_in(h, "skipped", 0, st->step, &st->skipped, path);
    if (s == TRIT_OK) s = json_i64_in(h, "skip_streak", 0, st->skipped, &st->skip_streak, path);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(h, "loss_scaler");
    if (s != TRIT_OK || !ls) return s;
    const cJSON *scale = cJSON_GetObjectItemCaseSensitive(ls, "scale");
    const cJSON *dyn = cJSON_GetObjectItemCaseSensitive(ls, "dynamic");
    double v = NAN;
    if (cJSON_IsString(scale)) trit_arg_double("scale", scale->valuestring, &v);
    if (!(v >= 1.0 && isfinite(v)) || !cJSON_IsBool(dyn))
        return trit_error(TRIT_ERR_FORMAT, "'%s': the loss scaler's state is malformed", path);
    s = trit_loss_scaler_init(&st->scaler, v, cJSON_IsTrue(dyn));
    if (s == TRIT_OK) s = json_i64_in(ls, "clean", 0, INT64_MAX, &st->scaler.clean, path);
    st->has_scaler = s == TRIT_OK;
    return s;
}

static trit_status parse_header(const state_file *sf, trit_train_state *st, const char *path) {
    memset(st, 0, sizeof *st);
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(sf->header, "config");
    char *cfg_s = cJSON_IsObject(cfg) ? cJSON_PrintUnformatted(cfg) : NULL;
    trit_status s = cfg_s ? trit_train_config_from_json(&st->config, cfg_s)
                          : trit_error(TRIT_ERR_FORMAT, "'%s' has no training config", path);
    free(cfg_s);
    int64_t crc = 0;
    // A run never goes past its --steps (a saved config is resolved, so that is set).
    if (s == TRIT_OK) s = json_i64_in(sf->header, "step", 0, st->config.steps > 0 ? st->config.steps : 0, &st->step, path);
    if (s == TRIT_OK) s = json_i64_in(sf->header, "data_batches", 0, INT64_MAX, &st->data_batches, path);
    const cJSON *tok = cJSON_GetObjectItemCaseSensitive(sf->header, "tokenizer");
    if (s == TRIT_OK) s = json_i64_in(tok, "crc32", 0, UINT32_MAX, &crc, path);
    st->tokenizer_crc = (uint32_t)crc;
    if (s == TRIT_OK && sf->version >= 2) s = parse_scaling(sf->header, st, path);
    return s;
}

// The prefix and the JSON header only (sf->data NULL), without the CRC over the whole file: the
// state of a large model is gigabytes, of which a base's reader wants a few hundred bytes.
static trit_status state_open_header(const char *path, state_file *sf) {
    memset(sf, 0, sizeof *sf);
    FILE *fp = fopen(path, "rb");
    if (!fp) return trit_error(TRIT_ERR_IO, "cannot open '%s'", path);
    uint8_t b[STATE_PREFIX];
    struct stat st;
    trit_status s = TRIT_OK;
    if (stat(path, &st) != 0 || st.st_size < STATE_PREFIX + 4 || fread(b, 1, sizeof b, fp) != sizeof b ||
        memcmp(b, STATE_MAGIC, 8) != 0)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' is not a trit training-state file (bad magic or too short)", path);
    const uint64_t hn = s == TRIT_OK ? trit_le64_load(b + 16) : 0;
    sf->version = s == TRIT_OK ? trit_le32_load(b + 8) : 0;
    if (s == TRIT_OK && (sf->version < 1 || sf->version > STATE_VERSION))
        s = trit_error(TRIT_ERR_FORMAT, "'%s' has training-state version %u, this trit reads versions 1 to %d", path,
                       sf->version, STATE_VERSION);
    if (s == TRIT_OK && hn > (uint64_t)st.st_size - STATE_PREFIX - 4)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' is truncated: its header claims %llu bytes", path, (unsigned long long)hn);
    if (s == TRIT_OK && !(sf->bytes = malloc(hn + 1))) s = trit_error(TRIT_ERR_NOMEM, "out of memory reading '%s'", path);
    if (s == TRIT_OK && fread(sf->bytes, 1, hn, fp) != hn) s = trit_error(TRIT_ERR_IO, "reading '%s' failed", path);
    fclose(fp);
    if (s == TRIT_OK && !cJSON_IsObject(sf->header = cJSON_ParseWithLength((const char *)sf->bytes, (size_t)hn)))
        s = trit_error(TRIT_ERR_FORMAT, "'%s': the training-state header is not JSON", path);
    if (s != TRIT_OK) state_close(sf);
    return s;
}

trit_status trit_state_peek(const char *path, trit_train_state *st) {
    state_file sf;
    trit_status s = state_open(path, &sf);
    if (s == TRIT_OK) s = parse_header(&sf, st, path);
    state_close(&sf);
    return s;
}

static const cJSON *find_entry(const state_file *sf, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(sf->header, "tensors")) {
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(t, "name");
        if (cJSON_IsString(n) && strcmp(n->valuestring, name) == 0) return t;
    }
    return NULL;
}

// A version 3 entry's shape against the live buffer's (older files: shaped like the buffer).
static trit_status check_shape(const state_file *sf, const cJSON *t, const trit_state_entry *e, const char *path) {
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    if (sf->version < 3) return TRIT_OK;
    bool same = cJSON_IsArray(shape) && cJSON_GetArraySize(shape) == e->ndim;
    for (int d = 0; same && d < e->ndim; d++) {
        const cJSON *v = cJSON_GetArrayItem(shape, d);
        int64_t x = -1;
        same = cJSON_IsString(v) && trit_arg_int("shape", v->valuestring, &x) == TRIT_OK && x == e->shape[d];
    }
    if (!same)
        return trit_error(TRIT_ERR_SHAPE, "'%s': '%s' is saved with another shape than this run's: the checkpoint is "
                          "from another model or optimizer config", path, e->name);
    return TRIT_OK;
}

// [off, off + bytes) inside the data section.
static bool inside(const state_file *sf, int64_t off, uint64_t bytes) {
    return off >= 0 && (uint64_t)off <= sf->data_len && bytes <= sf->data_len - (uint64_t)off;
}

// Copy the saved values of entry e (and its scales) into its buffers. Version 1 files hold f32
// only; a saved dtype other than the live buffer's is refused (the config's --precision and
// --master-weights, which decide it, must match on resume anyway).
static trit_status fill(const state_file *sf, const char *path, const trit_state_entry *e) {
    const cJSON *t = find_entry(sf, e->name);
    if (!t)
        return trit_error(TRIT_ERR_FORMAT, "'%s' has no saved values for '%s': the checkpoint is from "
                          "another model config", path, e->name);
    int64_t off = 0, cnt = 0, soff = 0, nsc = 0;
    trit_status s = json_i64(t, "offset", &off, path);
    if (s == TRIT_OK) s = json_i64(t, "count", &cnt, path);
    if (s == TRIT_OK && cJSON_GetObjectItemCaseSensitive(t, "num_scales")) s = json_i64(t, "num_scales", &nsc, path);
    if (s == TRIT_OK && nsc) s = json_i64(t, "scales_offset", &soff, path);
    if (s != TRIT_OK) return s;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(t, "dtype");
    const char *saved = sf->version < 2 ? "f32" : cJSON_IsString(d) ? d->valuestring : "?";
    if (strcmp(saved, trit_dtype_name(e->dtype)) != 0)
        return trit_error(TRIT_ERR_DTYPE, "'%s': '%s' is saved as %s, this run keeps it in %s: resume with "
                          "the --precision and --master-weights of the saved run", path, e->name, saved,
                          trit_dtype_name(e->dtype));
    if (cnt != e->count || nsc != e->num_scales)
        return trit_error(TRIT_ERR_SHAPE, "'%s': '%s' has %lld values and %lld scales, this run needs %lld and %lld: "
                          "the checkpoint is from another model or optimizer config", path, e->name,
                          (long long)cnt, (long long)nsc, (long long)e->count, (long long)e->num_scales);
    if ((s = check_shape(sf, t, e, path)) != TRIT_OK) return s;
    const size_t bytes = trit_dtype_nbytes(e->dtype, cnt), size = trit_dtype_size(e->dtype);
    if (!inside(sf, off, bytes) || (nsc && !inside(sf, soff, (uint64_t)nsc * sizeof(float))))
        return trit_error(TRIT_ERR_FORMAT, "'%s': '%s' lies outside the file", path, e->name);
    if (trit_dtype_block(e->dtype) == 1 && (size == 2 || size == 4 || size == 8)) get_values(e->data, sf->data + off, cnt, size);
    else memcpy(e->data, sf->data + off, bytes);
    if (nsc) get_values(e->scales, sf->data + soff, nsc, sizeof(float));
    return TRIT_OK;
}

// The optimizer kind the file was saved by ("adamw" when it names none) against the live one.
static trit_status check_kind(const state_file *sf, const char *kind, const char *path) {
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(sf->header, "optimizer"), "kind");
    const char *saved = cJSON_IsString(k) ? k->valuestring : "adamw";
    if (!kind || strcmp(saved, kind) == 0) return TRIT_OK;
    return trit_error(TRIT_ERR_FORMAT, "'%s' holds the state of optimizer %s, this run uses %s: resume with "
                      "--optimizer %s, or start a new run (--init-from takes the weights only)", path, saved, kind,
                      saved);
}

static trit_status read_state(const char *path, trit_train_state *st, const trit_state_entry *entries, int n,
                              int64_t *optim_step, const char *optim_kind) {
    state_file sf;
    trit_status s = state_open(path, &sf);
    if (s == TRIT_OK) s = parse_header(&sf, st, path);
    if (s == TRIT_OK) s = check_kind(&sf, optim_kind, path);
    for (int i = 0; s == TRIT_OK && i < n; i++) s = fill(&sf, path, &entries[i]);
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(sf.header, "optimizer");
    if (s == TRIT_OK) s = json_i64(opt, "step", optim_step, path);
    state_close(&sf);
    return s;
}

trit_status trit_state_read(const char *path, trit_train_state *st, const trit_state_entry *entries, int n,
                            int64_t *optim_step) {
    return read_state(path, st, entries, n, optim_step, NULL);
}

trit_status trit_state_load(const char *path, trit_train_state *st, trit_gpt *m, trit_optim *o) {
    int n = 0;
    trit_state_entry *e = entries_of(m, o, &n);
    if (!e) return trit_error(TRIT_ERR_NOMEM, "cannot list the training state");
    int64_t ostep = 0;
    trit_status s = read_state(path, st, e, n, &ostep, trit_optim_kind_name(trit_optim_get_config(o)->kind));
    free(e);
    if (s == TRIT_OK) s = trit_optim_set_step(o, ostep);
    return s;
}

trit_status trit_file_crc32(const char *path, uint32_t *crc) {
    uint8_t *b = NULL;
    size_t n = 0;
    trit_status s = trit_file_read_all(path, &b, &n);
    if (s == TRIT_OK) *crc = trit_crc32(0, b, n);
    free(b);
    return s;
}

trit_status trit_train_run_info(const char *path_or_dir, trit_train_config *cfg, int64_t *step) {
    char path[TRIT_PATH_MAX + 32];
    struct stat sb;
    bool dir = stat(path_or_dir, &sb) == 0 && S_ISDIR(sb.st_mode);
    trit_status s = dir ? trit_path_join(path, sizeof path, path_or_dir, TRIT_CKPT_STATE)
                        : trit_path_join(path, sizeof path, ".", path_or_dir);
    if (!dir && s == TRIT_OK) snprintf(path, sizeof path, "%s", path_or_dir);
    trit_train_state st;
    if (s == TRIT_OK) s = trit_state_peek(path, &st);
    if (s != TRIT_OK) return s;
    if (cfg) *cfg = st.config;
    if (step) *step = st.step;
    return TRIT_OK;
}

trit_status trit_train_run_config(const char *dir, trit_train_config *cfg) {
    char path[TRIT_PATH_MAX + 32];
    state_file sf;
    trit_train_state st;
    trit_status s = trit_path_join(path, sizeof path, dir, TRIT_CKPT_STATE);
    if (s == TRIT_OK) s = state_open_header(path, &sf);
    if (s != TRIT_OK) return s;
    s = parse_header(&sf, &st, path);
    state_close(&sf);
    if (s == TRIT_OK) *cfg = st.config;
    return s;
}

// ---- listing (trit merge-shards) ------------------------------------------------------------

void trit_state_list_free(trit_state_list *l) {
    if (!l) return;
    for (int i = 0; i < l->n; i++) {
        free(l->entries[i].data);
        free(l->entries[i].scales);
        free((char *)l->entries[i].name);
        free((char *)l->entries[i].role);
    }
    free(l->entries);
    memset(l, 0, sizeof *l);
}

static char *dup_str(const char *s) {
    const size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static trit_status dtype_named(const char *name, trit_dtype *dt) {
    for (int d = 0; d < TRIT_DTYPE_COUNT; d++)
        if (strcmp(trit_dtype_name((trit_dtype)d), name) == 0) {
            *dt = (trit_dtype)d;
            return TRIT_OK;
        }
    return TRIT_ERR_FORMAT;
}

// One entry of the header list, its values copied out of the file.
static trit_status list_entry(const state_file *sf, const cJSON *t, const char *path, trit_state_entry *e) {
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name"), *role = cJSON_GetObjectItemCaseSensitive(t, "role");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(t, "dtype"), *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
    int64_t off = 0, soff = 0, nsc = 0;
    trit_status s = cJSON_IsString(name) && cJSON_IsString(role) && cJSON_IsString(dt) && cJSON_IsArray(shape) &&
                            cJSON_GetArraySize(shape) <= TRIT_MAX_DIMS
                        ? TRIT_OK
                        : trit_error(TRIT_ERR_FORMAT, "'%s': a tensor entry lacks its name, role, dtype or shape", path);
    if (s == TRIT_OK) s = json_i64(t, "offset", &off, path);
    if (s == TRIT_OK) s = json_i64(t, "count", &e->count, path);
    if (s == TRIT_OK && cJSON_GetObjectItemCaseSensitive(t, "num_scales")) s = json_i64(t, "num_scales", &nsc, path);
    if (s == TRIT_OK && nsc) s = json_i64(t, "scales_offset", &soff, path);
    if (s == TRIT_OK && dtype_named(dt->valuestring, &e->dtype) != TRIT_OK)
        s = trit_error(TRIT_ERR_FORMAT, "'%s': tensor '%s' has an unknown dtype '%s'", path, name->valuestring,
                       dt->valuestring);
    if (s != TRIT_OK) return s;
    e->ndim = cJSON_GetArraySize(shape);
    for (int d = 0; d < e->ndim; d++) {
        const cJSON *v = cJSON_GetArrayItem(shape, d);
        if (!cJSON_IsString(v) || trit_arg_int("shape", v->valuestring, &e->shape[d]) != TRIT_OK)
            return trit_error(TRIT_ERR_FORMAT, "'%s': tensor '%s' has a malformed shape", path, name->valuestring);
    }
    const size_t bytes = trit_dtype_nbytes(e->dtype, e->count), size = trit_dtype_size(e->dtype);
    if (e->count < 0 || nsc < 0 || !inside(sf, off, bytes) || (nsc && !inside(sf, soff, (uint64_t)nsc * sizeof(float))))
        return trit_error(TRIT_ERR_FORMAT, "'%s': '%s' lies outside the file", path, name->valuestring);
    e->name = dup_str(name->valuestring);
    e->role = dup_str(role->valuestring);
    e->data = malloc(bytes + 1);
    e->scales = nsc ? malloc(sizeof(float) * (size_t)nsc) : NULL;
    e->num_scales = nsc;
    if (!e->name || !e->role || !e->data || (nsc && !e->scales)) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    if (trit_dtype_block(e->dtype) == 1 && (size == 2 || size == 4 || size == 8)) get_values(e->data, sf->data + off, e->count, size);
    else memcpy(e->data, sf->data + off, bytes);
    if (nsc) get_values(e->scales, sf->data + soff, nsc, sizeof(float));
    return TRIT_OK;
}

trit_status trit_state_list_read(const char *path, trit_state_list *l) {
    memset(l, 0, sizeof *l);
    state_file sf;
    trit_status s = state_open(path, &sf);
    if (s == TRIT_OK) s = parse_header(&sf, &l->state, path);
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(sf.header, "optimizer");
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(opt, "kind");
    if (s == TRIT_OK) s = json_i64(opt, "step", &l->optim_step, path);
    snprintf(l->optim_kind, sizeof l->optim_kind, "%s", cJSON_IsString(kind) ? kind->valuestring : "adamw");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(sf.header, "tensors");
    const int n = cJSON_IsArray(list) ? cJSON_GetArraySize(list) : 0;
    if (s == TRIT_OK && !(l->entries = calloc((size_t)n + 1, sizeof *l->entries)))
        s = trit_error(TRIT_ERR_NOMEM, "out of memory");
    const cJSON *t;
    cJSON_ArrayForEach(t, list) {
        if (s != TRIT_OK) break;
        s = list_entry(&sf, t, path, &l->entries[l->n++]);
    }
    state_close(&sf);
    if (s != TRIT_OK) trit_state_list_free(l);
    return s;
}
