// A per-thread float buffer, grown on demand and kept for the life of the thread, for kernels
// whose working memory would otherwise be allocated on every call (GEMM packing, row blocks).
#ifndef TRIT_KERNELS_THREAD_BUFFER_H
#define TRIT_KERNELS_THREAD_BUFFER_H

#include "trit/base.h"

// At least `floats` floats at *mem (64-byte aligned), reallocating when *have is smaller;
// NULL when out of memory (the caller then takes a path that needs no buffer).
static inline float *trit_thread_buffer(float **mem, size_t *have, size_t floats) {
    if (floats > *have) {
        trit_aligned_free(*mem);
        *mem = trit_aligned_alloc(floats * sizeof(float));
        *have = *mem ? floats : 0;
    }
    return *mem;
}

#endif
