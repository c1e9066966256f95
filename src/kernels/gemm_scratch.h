// The packing scratch the GEMM kernels keep per thread, for a run's products on the kernels the
// table picks now: what a memory report (train/memory.c) adds per thread. Figures come from the
// kernel files' own blocking (kernels/gemm_blocking.h), the same functions they size their
// buffers with. Each kernel file keeps one buffer per thread, grown to its largest request.
#ifndef TRIT_KERNELS_GEMM_SCRATCH_H
#define TRIT_KERNELS_GEMM_SCRATCH_H

#include "kernels/gemm_blocking.h"
#include "trit/graph.h"

// The products a run computes, as far as their scratch depends on them. Every product is taken
// to have at least MC rows (training's B x T rows do), K and N as given.
typedef struct trit_gemm_workload {
    trit_dtype activation;         // TRIT_F32, or TRIT_BF16 / TRIT_F16: matmul inputs (and a
                                   // linear's output, a 16-bit C) in 16 bits
    trit_matmul_precision matmul;  // how f32 operands are multiplied
    const int64_t *c16_shapes;     // (n_c16, 2): (N, K) of each product with a 16-bit C
    int n_c16;
    bool c16_from_f32;             // a 16-bit C from an f32 operand under TRIT_MATMUL_HIGH
                                   // (summed in gemm_mixed.c's row blocks); a linear casts
                                   // both operands, so graphs never ask for it
} trit_gemm_workload;

enum { TRIT_GEMM_SCRATCH_MAX = 4 };

typedef struct trit_gemm_scratch {
    int n;
    struct {
        const char *file;                    // the kernel file whose buffer this is
        const trit_gemm_blocking *blocking;  // its blocking; NULL for gemm_mixed.c's row blocks
        size_t bytes;                        // the largest request the workload makes of it
    } buf[TRIT_GEMM_SCRATCH_MAX];
    size_t bytes;  // per thread, all of them
} trit_gemm_scratch;

// The buffers one thread keeps after running w's products. The portable kernels pack nothing.
trit_status trit_gemm_scratch_plan(const trit_gemm_workload *w, trit_gemm_scratch *out);

// The largest request a kernel file makes with an f32 C (K >= KC, N >= NC, M >= MC): bytes.
size_t trit_gemm_pack_bytes_max(const trit_gemm_blocking *b);

#endif
