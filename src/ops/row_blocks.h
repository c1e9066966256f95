// Ops that read or write 16-bit activations through fp32 rows in scratch (the norms, bias_gelu):
// their blocks of rows run in parallel, each thread on its own scratch slot, so the conversions
// are spread over the threads as the arithmetic is. A block is computed by one thread whole
// (the row kernels called inside a parallel region run on that thread), so results do not
// depend on the thread count. The slot count depends only on the rows and the process's fixed
// slot count (trit_thread_slots), so compile time (scratch_bytes) and run time agree on it.
#ifndef TRIT_OPS_ROW_BLOCKS_H
#define TRIT_OPS_ROW_BLOCKS_H

#include "ops/op_def.h"

#include <omp.h>

// Below this many values a block loop runs on the calling thread.
enum { TRIT_ROW_BLOCKS_PAR_MIN = 1 << 15 };

typedef void trit_row_block_fn(const trit_op_call *c, int64_t r0, int64_t n, int64_t block, void *slot);

static inline int64_t trit_row_blocks_count(int64_t rows, int64_t block) { return rows > 0 ? (rows + block - 1) / block : 0; }

static inline int64_t trit_row_blocks_slots(int64_t rows, int64_t block) {
    const int64_t nb = trit_row_blocks_count(rows, block), procs = trit_thread_slots();
    return nb < procs ? (nb > 0 ? nb : 1) : procs;
}

// Scratch for the slots, slot_bytes each (rounded up to 64 bytes).
static inline size_t trit_row_blocks_scratch(int64_t rows, int64_t block, size_t slot_bytes) {
    return (size_t)trit_row_blocks_slots(rows, block) * ((slot_bytes + 63) / 64 * 64);
}

// fn(c, r0, n, b, slot) for every block b of rows [r0, r0 + n), n <= block, with the scratch of
// the thread running it (slots from the start of c->scratch); `cols` values per row decide whether threads are worth waking.
static inline void trit_row_blocks_run(const trit_op_call *c, int64_t rows, int64_t cols, int64_t block, size_t slot_bytes,
                                       trit_row_block_fn *fn) {
    const int64_t nb = trit_row_blocks_count(rows, block), slots = trit_row_blocks_slots(rows, block);
    const size_t stride = (slot_bytes + 63) / 64 * 64;
    int threads = (int)(slots < omp_get_max_threads() ? slots : omp_get_max_threads());
    if (rows * cols < TRIT_ROW_BLOCKS_PAR_MIN || omp_in_parallel()) threads = 1;
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
    for (int64_t b = 0; b < nb; b++) {
        const int64_t r0 = b * block, n = rows - r0 < block ? rows - r0 : block;
        fn(c, r0, n, b, (char *)c->scratch + (size_t)omp_get_thread_num() * stride);
    }
}

#endif
