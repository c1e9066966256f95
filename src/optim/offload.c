// Optimizer state in a memory-mapped file (trit_optim_offload): the state block is copied into
// a file mapped shared, and the step streams it: before a parameter's update the next one's
// state is read ahead, after it the pages are dropped from the process (the file keeps the
// values). The kernel writes them back on its own schedule: forcing write-back after each
// update made the next step wait for the disk (a page under write-back cannot be written). The
// arithmetic and the data are the in-memory step's, so results
// are the same bits; only where the bytes live changes.
#define _GNU_SOURCE
#include "optim/optim_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct optim_offload {
    int fd;
    size_t map_bytes;
    int64_t *lo, *hi;  // (n_params) each parameter's state range in the block, lo == hi for none
    int64_t largest;   // the most one parameter's state takes
} optim_offload;

static size_t page_size(void) {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static trit_status plan_ranges(trit_optim *o, optim_offload *f) {
    f->lo = calloc((size_t)o->n_params + 1, sizeof *f->lo);
    f->hi = calloc((size_t)o->n_params + 1, sizeof *f->hi);
    if (!f->lo || !f->hi) return trit_error(TRIT_ERR_NOMEM, "offload: out of memory");
    for (int k = 0; k < o->n_state; k++) {
        const optim_state_entry *e = &o->state[k];
        const int64_t at = (char *)e->data - (char *)o->block, end = at + trit_optim_entry_bytes(e);
        if (f->lo[e->param] == f->hi[e->param]) f->lo[e->param] = at;
        f->hi[e->param] = end;
    }
    for (int i = 0; i < o->n_params; i++)
        f->largest = f->hi[i] - f->lo[i] > f->largest ? f->hi[i] - f->lo[i] : f->largest;
    return TRIT_OK;
}

static void free_offload(optim_offload *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    free(f->lo);
    free(f->hi);
    free(f);
}

// The block into the mapping a chunk at a time, each chunk dropped from both sides once copied,
// so the copy never holds the state twice.
static void copy_out(char *map, char *block, size_t bytes) {
    enum { CHUNK = 1 << 22 };  // a multiple of any page size
    for (size_t at = 0; at < bytes; at += CHUNK) {
        const size_t len = bytes - at < CHUNK ? bytes - at : CHUNK;
        memcpy(map + at, block + at, len);
        madvise(map + at, len, MADV_DONTNEED);
        // Only the block's whole pages are released (it is freed after).
        const size_t page = page_size();
        const uintptr_t a = ((uintptr_t)(block + at) + page - 1) / page * page, b = (uintptr_t)(block + at + len) / page * page;
        if (b > a) madvise((void *)a, b - a, MADV_DONTNEED);
    }
}

trit_status trit_optim_offload(trit_optim *o, const char *path) {
    if (!o || !path || !path[0]) return trit_error(TRIT_ERR_INVALID, "offload: NULL optimizer or empty path");
    if (o->offload) return trit_error(TRIT_ERR_STATE, "offload: the optimizer's state is offloaded already");
    if (o->block_bytes == 0) return TRIT_OK;  // no state: nothing to move
    optim_offload *f = calloc(1, sizeof *f);
    if (!f) return trit_error(TRIT_ERR_NOMEM, "offload: out of memory");
    f->fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f->fd < 0) {
        const int err = errno;
        free_offload(f);
        return trit_error(TRIT_ERR_IO, "offload: cannot create '%s': %s (pass a directory with space for %lld bytes)",
                          path, strerror(err), (long long)o->block_bytes);
    }
    unlink(path);  // the open descriptor keeps the file; nothing is left behind when it closes
    const size_t page = page_size();
    f->map_bytes = ((size_t)o->block_bytes + page - 1) / page * page;
    trit_status s = TRIT_OK;
    int rc = posix_fallocate(f->fd, 0, (off_t)f->map_bytes);
    if (rc != 0)
        s = trit_error(TRIT_ERR_IO, "offload: cannot reserve %zu bytes in '%s': %s", f->map_bytes, path, strerror(rc));
    void *map = MAP_FAILED;
    if (s == TRIT_OK && (map = mmap(NULL, f->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, f->fd, 0)) == MAP_FAILED)
        s = trit_error(TRIT_ERR_IO, "offload: cannot map '%s': %s", path, strerror(errno));
    if (s == TRIT_OK) s = plan_ranges(o, f);
    if (s != TRIT_OK) {
        if (map != MAP_FAILED) munmap(map, f->map_bytes);
        free_offload(f);
        return s;
    }
    copy_out(map, o->block, (size_t)o->block_bytes);
    free(o->block_raw);
    o->block_raw = NULL;
    o->block = map;
    o->offload = f;
    trit_optim_bind_state(o);
    madvise(map, f->map_bytes, MADV_DONTNEED);
    return TRIT_OK;
}

// The whole pages of [lo, hi) of the block (the ends may share a page with a neighbour's state,
// which stays mapped).
static bool inner_pages(const trit_optim *o, int64_t lo, int64_t hi, char **at, size_t *len) {
    const size_t page = page_size();
    const uintptr_t base = (uintptr_t)o->block, a = (base + (uintptr_t)lo + page - 1) / page * page,
                    b = (base + (uintptr_t)hi) / page * page;
    if (b <= a) return false;
    *at = (char *)a, *len = b - a;
    return true;
}

void trit_optim_offload_release(trit_optim *o, int i) {
    optim_offload *f = o->offload;
    if (!f) return;
    char *at;
    size_t len;
    if (inner_pages(o, f->lo[i], f->hi[i], &at, &len)) madvise(at, len, MADV_DONTNEED);
    if (i + 1 < o->n_params && inner_pages(o, f->lo[i + 1], f->hi[i + 1], &at, &len)) madvise(at, len, MADV_WILLNEED);
}

void trit_optim_offload_close(trit_optim *o) {
    if (!o->offload) return;
    munmap(o->block, o->offload->map_bytes);
    o->block = NULL;
    free_offload(o->offload);
    o->offload = NULL;
}

void trit_optim_offload_bytes(const trit_optim *o, size_t *offloaded, size_t *resident) {
    const bool on = o && o->offload;
    if (offloaded) *offloaded = on ? (size_t)o->block_bytes : 0;
    if (resident) *resident = on ? (size_t)o->offload->largest : 0;
}

bool trit_optim_offloaded(const trit_optim *o) { return o && o->offload; }

void trit_optim_offload_evict(const trit_optim *o, const void *at, size_t bytes) {
    if (!o || !o->offload || !at) return;
    const char *base = o->block;
    if ((const char *)at < base || (const char *)at + bytes > base + o->block_bytes) return;
    char *from;
    size_t len;
    const int64_t lo = (const char *)at - base;
    if (inner_pages(o, lo, lo + (int64_t)bytes, &from, &len)) madvise(from, len, MADV_DONTNEED);
}
