// One aligned block with bump allocation: the graph plans its whole step inside one arena.
#define _DEFAULT_SOURCE  // madvise
#include "trit/base.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

// trit_pages_alloc's blocks start on a 2 MB boundary and ask for transparent huge pages (which
// the kernel gives only on request under Debian's default, "madvise"). Weights and the KV cache
// are streamed in long runs: with 4 KB pages a run changes page, and TLB entry, every 4 KB.
#define HUGE_PAGE ((size_t)2 << 20)

// Asks for huge pages over the whole 2 MB pages inside [p, p + n): the tail stays in small pages,
// so no block grows by the request.
static void advise_huge(void *p, size_t n) {
#ifdef MADV_HUGEPAGE
    const size_t whole = n / HUGE_PAGE * HUGE_PAGE;
    if (whole) (void)madvise(p, whole, MADV_HUGEPAGE);  // only advice: its failure changes nothing
#else
    (void)p, (void)n;
#endif
}

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

void *trit_pages_alloc(size_t bytes) {
    if (bytes == 0 || bytes > SIZE_MAX - 2 * HUGE_PAGE) {
        trit_error(TRIT_ERR_NOMEM, "could not map %zu bytes", bytes);
        return NULL;
    }
    // Over-map by a huge page, then give back the head before the first 2 MB boundary and the tail.
    const size_t n = (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE, span = n + HUGE_PAGE;
    char *map = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        trit_error(TRIT_ERR_NOMEM, "could not map %zu bytes", bytes);
        return NULL;
    }
    char *p = (char *)(((uintptr_t)map + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
    if (p > map) munmap(map, (size_t)(p - map));
    if (map + span > p + n) munmap(p + n, (size_t)(map + span - (p + n)));
    advise_huge(p, n);
    return p;
}

void trit_heap_trim(void) {
#ifdef __GLIBC__
    (void)malloc_trim(0);
#endif
}

void trit_pages_free(void *p, size_t bytes) {
    if (p) munmap(p, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
}

// A graph's arena holds every activation, gradient and scratch buffer of a step, which kernels
// read with strides (a head's columns, a GEMM operand's rows a slice apart): in huge pages such a
// walk misses the TLB far less (small's bf16 step about 3% faster on AMD EPYC Zen 4). Under
// AddressSanitizer it stays on the heap, where accesses past a block are caught.
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ON_HEAP 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ON_HEAP 1
#endif
#endif

trit_status trit_arena_init(trit_arena *a, size_t bytes) {
    if (!a) return trit_error(TRIT_ERR_INVALID, "trit_arena_init: arena is NULL");
#ifdef ARENA_ON_HEAP
    a->base = trit_aligned_alloc(bytes);
#else
    a->base = trit_pages_alloc(bytes ? bytes : 1);
#endif
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
#ifdef ARENA_ON_HEAP
    trit_aligned_free(a->base);
#else
    trit_pages_free(a->base, a->size ? a->size : 1);
#endif
    a->base = NULL;
    a->size = a->used = a->peak = 0;
}
