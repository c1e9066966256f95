// One aligned block with bump allocation: the graph plans its whole step inside one arena.
#include "trit/base.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *trit_aligned_alloc(size_t bytes) {
    if (bytes > SIZE_MAX - TRIT_ALIGN) {
        trit_error(TRIT_ERR_NOMEM, "could not allocate %zu bytes", bytes);
        return NULL;
    }
    size_t n = (bytes + TRIT_ALIGN - 1) / TRIT_ALIGN * TRIT_ALIGN;
    if (n == 0) n = TRIT_ALIGN;
    void *p = aligned_alloc(TRIT_ALIGN, n);
    if (!p) {
        trit_error(TRIT_ERR_NOMEM, "could not allocate %zu bytes", bytes);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void trit_aligned_free(void *p) { free(p); }

trit_status trit_arena_init(trit_arena *a, size_t bytes) {
    if (!a) return trit_error(TRIT_ERR_INVALID, "trit_arena_init: arena is NULL");
    a->base = trit_aligned_alloc(bytes);
    if (!a->base) return TRIT_ERR_NOMEM;
    a->size = bytes;
    a->used = 0;
    a->peak = 0;
    return TRIT_OK;
}

void *trit_arena_alloc(trit_arena *a, size_t bytes) {
    if (!a || !a->base) {
        trit_error(TRIT_ERR_INVALID, "trit_arena_alloc: arena is NULL or not initialised");
        return NULL;
    }
    size_t start = (a->used + TRIT_ALIGN - 1) / TRIT_ALIGN * TRIT_ALIGN;
    if (start > a->size || bytes > a->size - start) {
        trit_error(TRIT_ERR_NOMEM, "arena full: %zu bytes requested, %zu of %zu used", bytes,
                   a->used, a->size);
        return NULL;
    }
    a->used = start + bytes;
    if (a->used > a->peak) a->peak = a->used;
    return a->base + start;
}

void trit_arena_reset(trit_arena *a) { a->used = 0; }

void trit_arena_free(trit_arena *a) {
    if (!a) return;
    trit_aligned_free(a->base);
    a->base = NULL;
    a->size = a->used = a->peak = 0;
}
