// The bookkeeping of the per-thread kernel buffers (kernels/thread_buffer.h): each thread lists
// the buffers it has allocated, so their bytes can be counted and a thread that exits frees
// them (a pthread key's destructor), instead of leaking them with its thread-local pointers.
#include "kernels/thread_buffer.h"

#include <pthread.h>

// Buffer sites a thread can use: the three GEMM files, gemm_mixed.c's rows and the integer
// kernels' unpacking buffers, with room to spare.
enum { MAX_SITES = 32 };

typedef struct site {
    float **mem;
    size_t *have;
} site;

static _Thread_local site sites[MAX_SITES];
static _Thread_local int n_sites;
static _Thread_local size_t held;

static pthread_key_t exit_key;
static bool have_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void on_exit_release(void *unused) {
    (void)unused;
    trit_thread_buffers_release();
}

static void make_key(void) { have_key = pthread_key_create(&exit_key, on_exit_release) == 0; }

size_t trit_thread_buffer_bytes(void) { return held; }

void trit_thread_buffers_release(void) {
    for (int i = 0; i < n_sites; i++) {
        trit_aligned_free(*sites[i].mem);
        *sites[i].mem = NULL;
        *sites[i].have = 0;
    }
    n_sites = 0;
    held = 0;
}

void trit_thread_buffer_account(float **mem, size_t *have, size_t freed) {
    held = held - freed * sizeof(float) + *have * sizeof(float);
    for (int i = 0; i < n_sites; i++)
        if (sites[i].mem == mem) return;
    if (n_sites == MAX_SITES) return;  // not freed at exit: more sites than any kernel set has
    sites[n_sites++] = (site){mem, have};
    pthread_once(&exit_once, make_key);
    if (have_key) pthread_setspecific(exit_key, sites);  // any non-NULL value: the destructor runs at exit
}
