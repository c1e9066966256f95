// A per-thread float buffer, grown on demand and kept for the life of the thread, for kernels
// whose working memory would otherwise be allocated on every call (GEMM packing, row blocks).
// A thread's buffers are freed when it exits (or by trit_thread_buffers_release).
#ifndef TRIT_KERNELS_THREAD_BUFFER_H
#define TRIT_KERNELS_THREAD_BUFFER_H

#include "trit/base.h"

// Bytes all the calling thread's buffers hold now, so tests can hold memory reports to what the
// kernels allocate.
size_t trit_thread_buffer_bytes(void);
// Frees every buffer of the calling thread (the next use allocates again).
void trit_thread_buffers_release(void);
// Records that the buffer at *mem (*have floats) replaced one of `freed` floats (kernels/
// thread_buffer.c), so the thread's exit frees it.
void trit_thread_buffer_account(float **mem, size_t *have, size_t freed);

// At least `floats` floats at *mem (64-byte aligned), reallocating when *have is smaller;
// NULL when out of memory (the caller then takes a path that needs no buffer). mem and have are
// the caller's _Thread_local variables.
static inline float *trit_thread_buffer(float **mem, size_t *have, size_t floats) {
    if (floats > *have) {
        trit_aligned_free(*mem);
        const size_t freed = *have;
        *mem = trit_aligned_alloc(floats * sizeof(float));
        *have = *mem ? floats : 0;
        trit_thread_buffer_account(mem, have, freed);
    }
    return *mem;
}

#endif
