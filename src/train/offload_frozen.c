// --offload optimizer+frozen: the frozen weights (a fine-tune's base, quantized or not) move into
// a file mapping (writable: a resume restores them into it), and the graph drops their pages after every step that read one
// (trit_graph_set_streamed), so a step holds one frozen weight in memory at a time and the next
// read takes it from the page cache or the disk. The values are the same bytes, so the results
// are the same bits. The file is unlinked as soon as it is open: nothing is left behind.
#define _GNU_SOURCE
#include "train/trainer.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define FROZEN_FILE "frozen.offload"

static size_t page_size(void) {
    const long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

static size_t page_up(size_t n) { return (n + page_size() - 1) / page_size() * page_size(); }

static bool offloaded(const trit_tensor *p) { return (p->flags & TRIT_FLAG_FROZEN) && p->data && trit_tensor_nbytes(p); }

// Gives the whole pages of a weight's old storage back to the system (the flat block's ends may
// share a page with a neighbour, which stays); storage of its own is freed.
static void release_old(trit_tensor *p, void *old) {
    if (p->flags & TRIT_FLAG_OWNS_DATA) {
        trit_aligned_free(old);
        p->flags &= ~TRIT_FLAG_OWNS_DATA;
        return;
    }
    const uintptr_t pg = page_size(), lo = ((uintptr_t)old + pg - 1) / pg * pg,
                    hi = ((uintptr_t)old + trit_tensor_nbytes(p)) / pg * pg;
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static trit_status write_all(int fd, const void *data, size_t n, off_t at, const char *path) {
    for (size_t done = 0; done < n;) {
        const ssize_t w = pwrite(fd, (const char *)data + done, n - done, at + (off_t)done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0)
            return trit_error(TRIT_ERR_IO, "offload: cannot write the frozen weights to '%s': %s", path,
                              w < 0 ? strerror(errno) : "no space");
        done += (size_t)w;
    }
    return TRIT_OK;
}

// Writes every frozen weight to the file, page-aligned each, and returns their offsets.
static trit_status write_frozen(trainer *t, int fd, const char *path, size_t *at, size_t *total) {
    const int n = trit_gpt_num_tensors(t->model);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        const trit_tensor *p = trit_gpt_tensor(t->model, i);
        at[i] = SIZE_MAX;
        if (!offloaded(p)) continue;
        at[i] = off;
        trit_status s = write_all(fd, trit_tensor_ptr(p), trit_tensor_nbytes(p), (off_t)off, path);
        if (s != TRIT_OK) return s;
        off += page_up(trit_tensor_nbytes(p));
    }
    *total = off;
    return TRIT_OK;
}

trit_status trit_train_offload_frozen(trainer *t) {
    if (!t->cfg.out[0]) return trit_error(TRIT_ERR_INVALID, "--offload optimizer+frozen needs a run directory (--out)");
    char name[64], path[TRIT_PATH_MAX + 64];
    if (t->rank == 0) snprintf(name, sizeof name, "%s", FROZEN_FILE);
    else snprintf(name, sizeof name, "%s.rank%d", FROZEN_FILE, t->rank);  // ranks share the run directory
    trit_status s = trit_trainer_path(t, name, path, sizeof path);
    if (s != TRIT_OK) return s;
    const int n = trit_gpt_num_tensors(t->model);
    size_t *at = malloc(sizeof *at * (size_t)(n > 0 ? n : 1)), total = 0;
    if (!at) return trit_error(TRIT_ERR_NOMEM, "offload: out of memory");
    const int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        free(at);
        return trit_error(TRIT_ERR_IO, "offload: cannot create '%s': %s", path, strerror(errno));
    }
    unlink(path);  // the descriptor keeps the file while the run lasts
    s = write_frozen(t, fd, path, at, &total);
    void *map = MAP_FAILED;
    if (s == TRIT_OK && total && (map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        s = trit_error(TRIT_ERR_IO, "offload: cannot map '%s': %s", path, strerror(errno));
    close(fd);  // the mapping keeps the file
    if (s == TRIT_OK && total) {
        for (int i = 0; i < n; i++) {
            trit_tensor *p = trit_gpt_tensor(t->model, i);
            if (at[i] == SIZE_MAX) continue;
            void *old = p->data;
            p->data = (char *)map + at[i];
            p->offset = 0;
            p->flags |= TRIT_FLAG_MAPPED;
            release_old(p, old);
        }
        t->frozen_map = map;
        t->frozen_bytes = total;
        madvise(map, total, MADV_DONTNEED);
    }
    free(at);
    return s;
}

void trit_train_offload_frozen_drop(void *trainer_ptr) {
    trainer *t = trainer_ptr;
    if (t->frozen_map) madvise(t->frozen_map, t->frozen_bytes, MADV_DONTNEED);
}

trit_status trit_train_offload_frozen_attach(trainer *t) {
    if (!t->frozen_map) return TRIT_OK;
    return trit_graph_set_streamed(t->gg.graph, t->frozen_map, t->frozen_bytes, trit_train_offload_frozen_drop, t);
}

void trit_train_offload_frozen_close(trainer *t) {
    if (t->frozen_map) munmap(t->frozen_map, t->frozen_bytes);
    t->frozen_map = NULL;
    t->frozen_bytes = 0;
}
