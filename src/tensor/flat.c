// Flat storage: a set of tensors laid out in one block per dtype, in the order given, each
// tensor a view into its block (64-byte aligned), and their gradients in one block of the
// accumulate dtype in the same order. Gradient exchange, sharding, clipping and checkpoints can
// then walk one array, and tensors whose gradients are final together are neighbours when the
// order is the reverse of first use.
#include "trit/tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { FLAT_MAX_DTYPES = TRIT_DTYPE_COUNT };

struct trit_flat {
    int n;
    trit_tensor **t;       // (n) the tensors, in layout order (not owned)
    size_t *offset;        // (n) byte offset of each tensor in its dtype's block
    size_t *grad_offset;   // (n) element offset of each gradient, SIZE_MAX for none
    void *block[FLAT_MAX_DTYPES];
    size_t bytes[FLAT_MAX_DTYPES];
    void *grads;           // the gradient block, or NULL
    trit_dtype grad_dtype;
    int64_t grad_count;    // elements of the gradient block, padding included
};

static size_t align_up(size_t n) { return (n + TRIT_ALIGN - 1) / TRIT_ALIGN * TRIT_ALIGN; }

trit_flat *trit_flat_new(trit_tensor *const *tensors, int n) {
    trit_flat *f = calloc(1, sizeof *f);
    if (f) {
        f->t = calloc((size_t)n + 1, sizeof *f->t);
        f->offset = calloc((size_t)n + 1, sizeof *f->offset);
        f->grad_offset = calloc((size_t)n + 1, sizeof *f->grad_offset);
    }
    if (!f || !f->t || !f->offset || !f->grad_offset) {
        trit_flat_free(f);
        trit_error(TRIT_ERR_NOMEM, "flat storage: out of memory");
        return NULL;
    }
    f->n = n;
    for (int i = 0; i < n; i++) {
        trit_tensor *t = tensors[i];
        if (!t || (t->data && !trit_tensor_is_contiguous(t)) || (unsigned)t->dtype >= FLAT_MAX_DTYPES) {
            trit_error(TRIT_ERR_INVALID, "flat storage: tensor %d ('%s') must be contiguous", i, t ? t->name : "(null)");
            trit_flat_free(f);
            return NULL;
        }
        f->t[i] = t;
        f->offset[i] = f->bytes[t->dtype];
        f->bytes[t->dtype] += align_up(trit_tensor_nbytes(t));
    }
    for (int d = 0; d < FLAT_MAX_DTYPES; d++) {
        if (!f->bytes[d]) continue;
        if (!(f->block[d] = trit_aligned_alloc(f->bytes[d]))) {
            trit_error(TRIT_ERR_NOMEM, "flat storage: cannot allocate %zu bytes of %s", f->bytes[d],
                       trit_dtype_name((trit_dtype)d));
            trit_flat_free(f);
            return NULL;
        }
        memset(f->block[d], 0, f->bytes[d]);
    }
    // Everything allocated: move each tensor's values into its place and make it a view.
    for (int i = 0; i < n; i++) {
        trit_tensor *t = f->t[i];
        void *at = (char *)f->block[t->dtype] + f->offset[i];
        if (t->data) memcpy(at, trit_tensor_ptr(t), trit_tensor_nbytes(t));
        if (t->flags & TRIT_FLAG_OWNS_DATA) trit_aligned_free(t->data);
        t->data = at;
        t->offset = 0;
        t->flags &= ~(uint32_t)TRIT_FLAG_OWNS_DATA;
    }
    return f;
}

trit_status trit_flat_attach_grads(trit_flat *f, trit_dtype dt) {
    if (!f) return trit_error(TRIT_ERR_INVALID, "flat storage: NULL");
    if (f->grads) return TRIT_OK;
    if (dt != TRIT_F32 && dt != TRIT_F64) return trit_error(TRIT_ERR_DTYPE, "flat storage: gradients are f32 or f64");
    const int64_t per_line = TRIT_ALIGN / (int64_t)trit_dtype_size(dt);
    int64_t count = 0;
    for (int i = 0; i < f->n; i++) {
        const trit_tensor *t = f->t[i];
        f->grad_offset[i] = SIZE_MAX;
        if ((t->flags & TRIT_FLAG_FROZEN) || !(t->flags & TRIT_FLAG_PARAM)) continue;
        f->grad_offset[i] = (size_t)count;
        count += (trit_tensor_numel(t) + per_line - 1) / per_line * per_line;
    }
    if (count == 0) return TRIT_OK;
    const size_t bytes = (size_t)count * trit_dtype_size(dt);
    trit_tensor **views = calloc((size_t)f->n, sizeof *views);
    void *block = views ? trit_aligned_alloc(bytes) : NULL;
    for (int i = 0; block && i < f->n; i++) {
        if (f->grad_offset[i] == SIZE_MAX) continue;
        const trit_tensor *t = f->t[i];
        if (!(views[i] = trit_tensor_wrap(dt, t->ndim, t->shape, (char *)block + f->grad_offset[i] * trit_dtype_size(dt))))
            break;
        snprintf(views[i]->name, sizeof views[i]->name, "grad(%.80s)", t->name);
    }
    bool ok = block != NULL;
    for (int i = 0; ok && i < f->n; i++) ok = f->grad_offset[i] == SIZE_MAX || views[i];
    if (!ok) {
        for (int i = 0; views && i < f->n; i++) trit_tensor_free(views[i]);
        free(views);
        trit_aligned_free(block);
        return trit_error(TRIT_ERR_NOMEM, "flat storage: cannot allocate %zu bytes of gradients", bytes);
    }
    memset(block, 0, bytes);
    for (int i = 0; i < f->n; i++) {
        if (!views[i]) continue;
        trit_tensor_free(f->t[i]->grad);  // one made elsewhere before (compile makes one if needed)
        f->t[i]->grad = views[i];
    }
    free(views);
    f->grads = block;
    f->grad_dtype = dt;
    f->grad_count = count;
    return TRIT_OK;
}

void trit_flat_free(trit_flat *f) {
    if (!f) return;
    for (int d = 0; d < FLAT_MAX_DTYPES; d++) trit_aligned_free(f->block[d]);
    trit_aligned_free(f->grads);
    free(f->t);
    free(f->offset);
    free(f->grad_offset);
    free(f);
}

void *trit_flat_block(const trit_flat *f, trit_dtype dt, size_t *bytes) {
    const bool ok = f && (unsigned)dt < FLAT_MAX_DTYPES;
    if (bytes) *bytes = ok ? f->bytes[dt] : 0;
    return ok ? f->block[dt] : NULL;
}

void *trit_flat_grads(const trit_flat *f, int64_t *count) {
    if (count) *count = f ? f->grad_count : 0;
    return f ? f->grads : NULL;
}

int trit_flat_count(const trit_flat *f) { return f ? f->n : 0; }

trit_tensor *trit_flat_tensor(const trit_flat *f, int i) { return f && i >= 0 && i < f->n ? f->t[i] : NULL; }

int64_t trit_flat_grad_offset(const trit_flat *f, int i) {
    return f && i >= 0 && i < f->n && f->grads && f->grad_offset[i] != SIZE_MAX ? (int64_t)f->grad_offset[i] : -1;
}
