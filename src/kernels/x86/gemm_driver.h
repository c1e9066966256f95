// Blocking and threading driver shared by the x86 fp32 GEMM kernels (gemm_avx2.c,
// gemm_avx512.c). It is included by each ISA file, so its static functions are compiled with
// that file's ISA flags and inline its micro-kernel and packing code.
//
// Before including, the ISA file defines:
//   MR, NR                 register tile: MR rows by NR columns of C
//   GEMM_KC, GEMM_MC, GEMM_NC  cache blocking (K slice, A block rows, B block columns)
//   GEMM_SMALL             up to this many multiply-adds B is read in place when stored (K, N)
//   GEMM_PARALLEL          below this many multiply-adds one thread runs the call
//   GEMM_FMA_PER_CYCLE     rough multiply-adds per cycle, for choosing how to split threads
// and, after including, defines the static functions declared below (packing, the macro-kernel
// over one packed block, and the tile that reads B in place).
//
// Determinism: every C element is summed k = 0..K-1 inside fixed KC slices (the slicing depends
// only on K) and the slices are added to C in order, so the thread count changes who computes a
// tile, never how. Threads own disjoint row (or column) ranges of C and pack privately, so they
// never wait on each other inside a call.
#ifndef TRIT_KERNELS_X86_GEMM_DRIVER_H
#define TRIT_KERNELS_X86_GEMM_DRIVER_H

#include "kernels/gemm.h"
#include "trit/base.h"

#include <omp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct gemm_args {
    bool trans_a, trans_b, accumulate;
    int64_t M, N, K;
    const float *A;
    int64_t lda;
    const float *B;
    int64_t ldb;
    float *C;
    int64_t ldc;
} gemm_args;

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- provided by the ISA file --------------------------------------------------------------

// A block rows [i0, i0+mc), k [p0, p0+kc) -> MR-row panels, each kc x MR, zero-padded rows.
static void pack_a(const gemm_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                   float *dst);
// B block k [p0, p0+kc), columns [j0, j0+nc) -> NR-column panels, each kc x NR, zero-padded.
static void pack_b(const gemm_args *g, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                   float *dst);
// c (mc, nc) (+)= packed A block ap (mc rows in MR panels of kc) @ packed B block bp (nc
// columns in NR panels of kc), tile by tile in the loop order that suits the ISA's caches.
static void gemm_macro(int64_t kc, int64_t mc, int64_t nc, const float *ap, const float *bp,
                       float *c, int64_t ldc, bool add_c);
// c (mr, min(nr, NR)) (+)= one packed A panel a (kc, MR) @ b, the caller's (K, N) matrix at the
// tile's first column with nr columns left in the row.
static void tile_direct(int64_t kc, const float *a, const float *b, int64_t ldb, int64_t nr,
                        float *c, int64_t ldc, int64_t mr, bool add_c);

// ---- blocking and threads ------------------------------------------------------------------

// Per-thread packing memory, grown on demand and kept for the life of the thread.
static _Thread_local float *pack_mem;
static _Thread_local size_t pack_floats;

static float *pack_buffer(size_t floats) {
    if (floats > pack_floats) {
        trit_aligned_free(pack_mem);
        pack_mem = trit_aligned_alloc(floats * sizeof(float));
        pack_floats = pack_mem ? floats : 0;
    }
    return pack_mem;
}

// The KC slicing of K: equal slices of at most GEMM_KC. Depends on K alone.
static int64_t k_slice(int64_t K) { return ceil_div(K, ceil_div(K, GEMM_KC)); }

// C[m0:m1, n0:n1] with everything packed.
static void gemm_block(const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    int64_t ks = k_slice(g->K);
    int64_t nc_max = min64(GEMM_NC, ceil_div(n1 - n0, NR) * NR);
    int64_t mc_max = min64(GEMM_MC, ceil_div(m1 - m0, MR) * MR);
    float *bp = pack_buffer((size_t)(ks * (nc_max + mc_max)));
    if (!bp) {  // out of memory: the portable path needs no buffers
        trit_kernel_gemm_ref_f32(g->trans_a, g->trans_b, m1 - m0, n1 - n0, g->K,
                                 g->trans_a ? g->A + m0 : g->A + m0 * g->lda, g->lda,
                                 g->trans_b ? g->B + n0 * g->ldb : g->B + n0, g->ldb,
                                 g->C + m0 * g->ldc + n0, g->ldc, g->accumulate);
        return;
    }
    float *ap = bp + ks * nc_max;
    for (int64_t jc = n0; jc < n1; jc += GEMM_NC) {
        int64_t nc = min64(GEMM_NC, n1 - jc);
        for (int64_t pc = 0; pc < g->K; pc += ks) {
            int64_t kc = min64(ks, g->K - pc);
            bool add_c = g->accumulate || pc > 0;
            pack_b(g, pc, kc, jc, nc, bp);
            for (int64_t ic = m0; ic < m1; ic += GEMM_MC) {
                int64_t mc = min64(GEMM_MC, m1 - ic);
                pack_a(g, ic, mc, pc, kc, ap);
                gemm_macro(kc, mc, nc, ap, bp, g->C + ic * g->ldc + jc, g->ldc, add_c);
            }
        }
    }
}

// Small problems: A packed one panel at a time, B read in place when it is (K, N).
static void gemm_small(const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    int64_t ks = k_slice(g->K);
    float *ap = g->trans_b ? NULL : pack_buffer((size_t)(ks * MR));
    if (!ap) {  // (N, K) storage needs packing; so does the portable fallback on no memory
        gemm_block(g, m0, m1, n0, n1);
        return;
    }
    for (int64_t pc = 0; pc < g->K; pc += ks) {
        int64_t kc = min64(ks, g->K - pc);
        bool add_c = g->accumulate || pc > 0;
        for (int64_t ir = m0; ir < m1; ir += MR) {
            int64_t mr = min64(MR, m1 - ir);
            pack_a(g, ir, mr, pc, kc, ap);
            for (int64_t jr = n0; jr < n1; jr += NR)
                tile_direct(kc, ap, g->B + pc * g->ldb + jr, g->ldb, n1 - jr,
                            g->C + ir * g->ldc + jr, g->ldc, mr, add_c);
        }
    }
}

// Which share of C thread t of nt owns: contiguous MR-row or NR-column units, along the
// dimension that keeps both threads busy with the least duplicated packing.
static void thread_share(const gemm_args *g, int t, int nt, int64_t r[4]) {
    int64_t um = ceil_div(g->M, MR), un = ceil_div(g->N, NR);
    int64_t rows = ceil_div(um, nt) * MR, cols = ceil_div(un, nt) * NR;
    // Rough cycles: GEMM_FMA_PER_CYCLE multiply-adds per cycle, 4 packed floats per cycle.
    double cost_m = (double)rows * g->N * g->K / GEMM_FMA_PER_CYCLE +
                    ((double)rows * g->K * ceil_div(g->N, GEMM_NC) + (double)g->K * g->N) / 4;
    double cost_n = (double)g->M * cols * g->K / GEMM_FMA_PER_CYCLE +
                    ((double)g->M * g->K * ceil_div(cols, GEMM_NC) + (double)g->K * cols) / 4;
    bool split_m = cost_m <= cost_n;
    int64_t units = split_m ? um : un, size = split_m ? MR : NR;
    int64_t lo = units * t / nt * size, hi = units * (t + 1) / nt * size;
    int64_t dim = split_m ? g->M : g->N;
    lo = min64(lo, dim);
    hi = min64(hi, dim);
    r[0] = split_m ? lo : 0;
    r[1] = split_m ? hi : g->M;
    r[2] = split_m ? 0 : lo;
    r[3] = split_m ? g->N : hi;
}

// C[m0:m1, n0:n1]: the small-problem path or the fully packed one.
static void gemm_range(const gemm_args *g, bool small, int64_t m0, int64_t m1, int64_t n0,
                       int64_t n1) {
    if (small)
        gemm_small(g, m0, m1, n0, n1);
    else
        gemm_block(g, m0, m1, n0, n1);
}

// The whole call, contract in kernels/gemm.h: A (M, K) or stored (K, M) when trans_a;
// B (K, N) or stored (N, K) when trans_b; C (M, N).
static void gemm_run(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                     const float *A, int64_t lda, const float *B, int64_t ldb, float *C,
                     int64_t ldc, bool accumulate) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) C[i * ldc + j] = 0.0f;
        return;
    }
    gemm_args g = {trans_a, trans_b, accumulate, M, N, K, A, lda, B, ldb, C, ldc};
    int64_t work = M * N * K;
    bool small = work <= GEMM_SMALL;
    int nt = work < GEMM_PARALLEL || omp_in_parallel() ? 1 : omp_get_max_threads();
    if (nt == 1) {
        gemm_range(&g, small, 0, M, 0, N);
        return;
    }
#pragma omp parallel num_threads(nt)
    {
        int64_t r[4];
        thread_share(&g, omp_get_thread_num(), omp_get_num_threads(), r);
        if (r[0] < r[1] && r[2] < r[3]) gemm_range(&g, small, r[0], r[1], r[2], r[3]);
    }
}

#endif
