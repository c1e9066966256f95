// GGUF v3 writer (the llama.cpp / ggml file format): "GGUF", version 3, tensor and key-value
// counts, the key-values (typed; strings are a u64 length and bytes; arrays a type, a count and
// the items), the tensor infos (name, dims innermost first, ggml type, offset into the data),
// padding to the alignment (32), then each tensor's bytes at its aligned offset. Everything
// little-endian. The file is written atomically.
#include "trit/io.h"
#include "io/io_internal.h"

#include <stdlib.h>
#include <string.h>

enum { GGUF_ALIGN = 32, GGUF_U32 = 4, GGUF_I32 = 5, GGUF_F32 = 6, GGUF_STRING = 8, GGUF_ARRAY = 9 };

typedef struct bytes {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bytes;

static void put(bytes *b, const void *p, size_t n) {
    if (b->oom) return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 4096;
        while (cap < b->n + n) cap *= 2;
        uint8_t *q = realloc(b->p, cap);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q, b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_u32(bytes *b, uint32_t v) {
    uint8_t le[4];
    trit_le32_store(le, v);
    put(b, le, 4);
}

static void put_u64(bytes *b, uint64_t v) {
    uint8_t le[8];
    trit_le64_store(le, v);
    put(b, le, 8);
}

static void put_str(bytes *b, const char *s, size_t n) {
    put_u64(b, n);
    put(b, s, n);
}

typedef struct gguf_tensor {
    const void *data;
    size_t bytes;
    uint64_t offset;
} gguf_tensor;

struct trit_gguf {
    bytes kv, info;
    uint64_t n_kv, n_tensors, data_end;
    gguf_tensor *tensors;
    size_t cap;
};

trit_gguf *trit_gguf_new(void) {
    trit_gguf *g = calloc(1, sizeof *g);
    if (!g) trit_error(TRIT_ERR_NOMEM, "gguf: out of memory");
    return g;
}

void trit_gguf_free(trit_gguf *g) {
    if (!g) return;
    free(g->kv.p), free(g->info.p), free(g->tensors);
    free(g);
}

static void key(trit_gguf *g, const char *k, uint32_t type) {
    put_str(&g->kv, k, strlen(k));
    put_u32(&g->kv, type);
    g->n_kv++;
}

void trit_gguf_kv_u32(trit_gguf *g, const char *k, uint32_t v) {
    key(g, k, GGUF_U32);
    put_u32(&g->kv, v);
}

void trit_gguf_kv_f32(trit_gguf *g, const char *k, float v) {
    key(g, k, GGUF_F32);
    uint32_t u;
    memcpy(&u, &v, 4);
    put_u32(&g->kv, u);
}

void trit_gguf_kv_str(trit_gguf *g, const char *k, const char *v) {
    key(g, k, GGUF_STRING);
    put_str(&g->kv, v, strlen(v));
}

void trit_gguf_kv_strs(trit_gguf *g, const char *k, const char *const *v, const size_t *len, uint64_t n) {
    key(g, k, GGUF_ARRAY);
    put_u32(&g->kv, GGUF_STRING);
    put_u64(&g->kv, n);
    for (uint64_t i = 0; i < n; i++) put_str(&g->kv, v[i], len[i]);
}

void trit_gguf_kv_i32s(trit_gguf *g, const char *k, const int32_t *v, uint64_t n) {
    key(g, k, GGUF_ARRAY);
    put_u32(&g->kv, GGUF_I32);
    put_u64(&g->kv, n);
    for (uint64_t i = 0; i < n; i++) put_u32(&g->kv, (uint32_t)v[i]);
}

trit_status trit_gguf_add_tensor(trit_gguf *g, const char *name, uint32_t ggml_type, int ndim, const uint64_t *ne,
                                 const void *data, size_t nbytes) {
    if (!name || ndim < 1 || ndim > 4 || (!data && nbytes))
        return trit_error(TRIT_ERR_INVALID, "gguf: tensor '%s' needs 1 to 4 dims and its data", name ? name : "");
    if (g->n_tensors == g->cap) {
        const size_t cap = g->cap ? 2 * g->cap : 64;
        gguf_tensor *t = realloc(g->tensors, cap * sizeof *t);
        if (!t) return trit_error(TRIT_ERR_NOMEM, "gguf: out of memory");
        g->tensors = t, g->cap = cap;
    }
    put_str(&g->info, name, strlen(name));
    put_u32(&g->info, (uint32_t)ndim);
    for (int d = 0; d < ndim; d++) put_u64(&g->info, ne[d]);
    put_u32(&g->info, ggml_type);
    put_u64(&g->info, g->data_end);
    g->tensors[g->n_tensors++] = (gguf_tensor){data, nbytes, g->data_end};
    g->data_end += (nbytes + GGUF_ALIGN - 1) / GGUF_ALIGN * GGUF_ALIGN;
    return TRIT_OK;
}

static void pad(trit_atomic_file *f, uint64_t n) {
    static const uint8_t zeros[GGUF_ALIGN] = {0};
    if (n % GGUF_ALIGN) trit_atomic_write(f, zeros, GGUF_ALIGN - n % GGUF_ALIGN);
}

trit_status trit_gguf_write(const trit_gguf *g, const char *path) {
    if (g->kv.oom || g->info.oom) return trit_error(TRIT_ERR_NOMEM, "gguf: out of memory building the header");
    bytes head = {0};
    put(&head, "GGUF", 4);
    put_u32(&head, 3);
    put_u64(&head, g->n_tensors);
    put_u64(&head, g->n_kv);
    if (head.oom) return trit_error(TRIT_ERR_NOMEM, "gguf: out of memory");
    trit_atomic_file f;
    trit_status s = trit_atomic_open(&f, path);
    if (s == TRIT_OK) {
        trit_atomic_write(&f, head.p, head.n);
        trit_atomic_write(&f, g->kv.p, g->kv.n);
        trit_atomic_write(&f, g->info.p, g->info.n);
        pad(&f, head.n + g->kv.n + g->info.n);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            trit_atomic_write(&f, g->tensors[i].data, g->tensors[i].bytes);
            pad(&f, g->tensors[i].bytes);
        }
        s = trit_atomic_commit(&f);
    }
    free(head.p);
    return s;
}
