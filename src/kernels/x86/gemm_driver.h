// Blocking and threading driver shared by the x86 GEMM kernels (gemm_avx2.c, gemm_avx512.c),
// for f32 operands and, through the same code, the mixed-precision GEMM (kernels/gemm_lowp.h):
// an operand may be stored in bf16 or f16, or enter as the bf16 hi or lo piece of an f32 value,
// and the packing widens every value to f32, so one f32 micro-kernel serves every case. It is
// included by each ISA file, so its static functions are compiled with that file's ISA flags
// and inline its micro-kernel and packing code.
//
// Before including, the ISA file defines (GEMM_PACK_ALWAYS: B is always packed, no tile_direct):
//   MR, NR                 register tile: MR rows by NR columns of C
//   GEMM_KC, GEMM_MC, GEMM_NC  cache blocking (K slice, A block rows, B block columns)
//   GEMM_BLOCKING, GEMM_FILE   the name under which the blocking is published
//                          (kernels/gemm_blocking.h) and the file's name, for reports
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
#include "kernels/gemm_blocking.h"
#include "kernels/gemm_lowp.h"
#include "kernels/thread_buffer.h"
#include "trit/base.h"

#include <omp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// One operand as packing reads it: storage, its dtype, and the piece of each value to take.
typedef struct gemm_src {
    const void *p;
    trit_dtype dt;          // TRIT_F32, TRIT_BF16 or TRIT_F16
    trit_gemm_piece piece;  // for f32 storage; 16-bit values enter as they are
} gemm_src;

typedef struct gemm_args {
    bool trans_a, trans_b, accumulate;
    int64_t M, N, K;
    gemm_src A;
    int64_t lda;
    gemm_src B;
    int64_t ldb;
    float *C;  // f32 C, or NULL when C16 is the output
    int64_t ldc;
    uint16_t *C16;       // 16-bit C (bf16 or f16: cdt), computed through f32 blocks
    trit_dtype cdt;      // TRIT_F32 (C) or the dtype of C16
    const float *bias;   // (N) or NULL: starts each 16-bit C row's sum (never with accumulate)
} gemm_args;

// Plain f32 storage read as it is: the only case the in-place B path and the f32 fallback take.
static inline bool src_is_f32(gemm_src s) { return s.dt == TRIT_F32 && s.piece == TRIT_GEMM_VALUE; }
// The operand advanced by i elements.
static inline gemm_src src_at(gemm_src s, int64_t i) {
    s.p = (const char *)s.p + i * (s.dt == TRIT_F32 ? 4 : 2);
    return s;
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Rows this many ahead of the one being packed are asked for: an operand read along rows of a
// large K comes from memory, whose latency the packing otherwise waits out a row at a time.
enum { PACK_PREFETCH_ROWS = 16 };

// Asks for the cache lines of elements [i, i + n) of s.
static inline void prefetch_src(gemm_src s, int64_t i, int64_t n) {
    const int64_t size = s.dt == TRIT_F32 ? 4 : 2;
    const char *p = (const char *)s.p + i * size, *end = p + n * size;
    for (; p < end; p += 64) __builtin_prefetch(p, 0, 3);
    __builtin_prefetch(end - 1, 0, 3);
}
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
#ifndef GEMM_PACK_ALWAYS
// c (mr, min(nr, NR)) (+)= one packed A panel a (kc, MR) @ b, the caller's (K, N) matrix at the
// tile's first column with nr columns left in the row.
static void tile_direct(int64_t kc, const float *a, const float *b, int64_t ldb, int64_t nr,
                        float *c, int64_t ldc, int64_t mr, bool add_c);
#endif

// ---- blocking and threads ------------------------------------------------------------------

// C[m0:m1, n0:n1] by the portable kernels, which need no packing memory.
static void gemm_fallback(const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const gemm_src a = src_at(g->A, g->trans_a ? m0 : m0 * g->lda), b = src_at(g->B, g->trans_b ? n0 * g->ldb : n0);
    float *c = g->C + m0 * g->ldc + n0;
    if (src_is_f32(a) && src_is_f32(b)) {
        trit_kernel_gemm_ref_f32(g->trans_a, g->trans_b, m1 - m0, n1 - n0, g->K, a.p, g->lda, b.p, g->ldb, c, g->ldc,
                                 g->accumulate);
        return;
    }
    // One piece per operand: the reference at MEDIUM precision takes bf16 hi pieces of f32
    // values, which is what a HI pass packs; a LO pass has no such shortcut, so it goes
    // element by element.
    for (int64_t i = 0; i < m1 - m0; i++)
        for (int64_t j = 0; j < n1 - n0; j++) {
            float sum = 0;
            for (int64_t k = 0; k < g->K; k++)
                sum += trit_gemm_piece_value(a.p, a.dt, g->trans_a ? k * g->lda + i : i * g->lda + k, a.piece) *
                       trit_gemm_piece_value(b.p, b.dt, g->trans_b ? j * g->ldb + k : k * g->ldb + j, b.piece);
            c[i * g->ldc + j] = g->accumulate ? c[i * g->ldc + j] + sum : sum;
        }
}

// A bf16 or f16 C is summed in fp32 in a per-thread block of MC x nc, then rounded once. So
// that B is packed once per column block, not once per row block, its packed slices for the
// whole of K are kept; the column block is narrowed to keep them within C16_B_FLOATS.
enum { C16_B_FLOATS = 1 << 19 };  // 2 MB of packed B per thread

// This file's blocking; the buffer sizes below come from it through kernels/gemm_blocking.h, the
// functions memory reports use.
const trit_gemm_blocking GEMM_BLOCKING = {GEMM_FILE, MR, NR, GEMM_KC, GEMM_MC, GEMM_NC, C16_B_FLOATS};

// Per-thread packing memory, grown on demand and kept for the life of the thread.
static _Thread_local float *pack_mem;
static _Thread_local size_t pack_floats;

static float *pack_buffer(size_t floats) { return trit_thread_buffer(&pack_mem, &pack_floats, floats); }

// The KC slicing of K: equal slices of at most GEMM_KC. Depends on K alone.
static int64_t k_slice(int64_t K) { return trit_gemm_k_slice(&GEMM_BLOCKING, K); }

// C[m0:m1, n0:n1] with everything packed.
static void gemm_block(const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    int64_t ks = k_slice(g->K);
    int64_t nc_max = trit_gemm_nc_max(&GEMM_BLOCKING, n1 - n0);
    float *bp = pack_buffer((size_t)trit_gemm_pack_floats(&GEMM_BLOCKING, m1 - m0, n1 - n0, g->K));
    if (!bp) {  // out of memory: the portable path needs no buffers
        gemm_fallback(g, m0, m1, n0, n1);
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

// ---- 16-bit C (blocking: C16_B_FLOATS above) ---------------------------------------------

// c (mc, nc) at ldcb <- C16 rows [i0, i0+mc), columns [j0, j0+nc) widened, or the bias.
static void c16_start(const gemm_args *g, int64_t i0, int64_t mc, int64_t j0, int64_t nc, float *c, int64_t ldcb) {
    for (int64_t i = 0; i < mc; i++) {
        if (g->accumulate)
            trit_gemm_c16_widen(g->cdt, c + i * ldcb, g->C16 + (i0 + i) * g->ldc + j0, nc);
        else if (g->bias)
            memcpy(c + i * ldcb, g->bias + j0, sizeof(float) * (size_t)nc);
    }
}

// C16 rows [i0, i0+mc), columns [j0, j0+nc) <- c (mc, nc) at ldcb, rounded to nearest even.
static void c16_store(const gemm_args *g, int64_t i0, int64_t mc, int64_t j0, int64_t nc, const float *c,
                      int64_t ldcb) {
    for (int64_t i = 0; i < mc; i++) trit_gemm_c16_round(g->cdt, g->C16 + (i0 + i) * g->ldc + j0, c + i * ldcb, nc);
}

// C16[m0:m1, n0:n1] element by element, needing no memory.
static void gemm_fallback_c16(const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    for (int64_t i = m0; i < m1; i++)
        for (int64_t j = n0; j < n1; j++) {
            float s = 0;
            c16_start(g, i, 1, j, 1, &s, 1);
            for (int64_t k = 0; k < g->K; k++)
                s += trit_gemm_piece_value(g->A.p, g->A.dt, g->trans_a ? k * g->lda + i : i * g->lda + k, g->A.piece) *
                     trit_gemm_piece_value(g->B.p, g->B.dt, g->trans_b ? j * g->ldb + k : k * g->ldb + j, g->B.piece);
            c16_store(g, i, 1, j, 1, &s, 1);
        }
}

// C16[m0:m1, n0:n1]: per column block, B packed for all of K, then per row block the fp32 sum
// in slices of K (the order of gemm_block), rounded once.
static void gemm_block_c16(const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const int64_t ks = k_slice(g->K), slices = ceil_div(g->K, ks);
    const int64_t nc_max = trit_gemm_c16_nc_max(&GEMM_BLOCKING, n1 - n0, g->K);
    const int64_t mc_max = trit_gemm_mc_max(&GEMM_BLOCKING, m1 - m0);
    float *bp = pack_buffer((size_t)trit_gemm_pack_c16_floats(&GEMM_BLOCKING, m1 - m0, n1 - n0, g->K));
    if (!bp) {
        gemm_fallback_c16(g, m0, m1, n0, n1);
        return;
    }
    float *ap = bp + slices * ks * nc_max, *cb = ap + ks * mc_max;
    const bool started = g->accumulate || g->bias;
    for (int64_t jc = n0; jc < n1; jc += nc_max) {
        const int64_t nc = min64(nc_max, n1 - jc);
        for (int64_t s = 0; s < slices; s++)
            pack_b(g, s * ks, min64(ks, g->K - s * ks), jc, nc, bp + s * ks * nc_max);
        for (int64_t ic = m0; ic < m1; ic += GEMM_MC) {
            const int64_t mc = min64(GEMM_MC, m1 - ic);
            c16_start(g, ic, mc, jc, nc, cb, nc_max);
            for (int64_t s = 0; s < slices; s++) {
                const int64_t kc = min64(ks, g->K - s * ks);
                pack_a(g, ic, mc, s * ks, kc, ap);
                gemm_macro(kc, mc, nc, ap, bp + s * ks * nc_max, cb, nc_max, started || s > 0);
            }
            c16_store(g, ic, mc, jc, nc, cb, nc_max);
        }
    }
}

#ifndef GEMM_PACK_ALWAYS
// Small problems: A packed one panel at a time, B read in place when it is (K, N).
static void gemm_small(const gemm_args *g, int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    int64_t ks = k_slice(g->K);
    float *ap = g->trans_b || !src_is_f32(g->B) ? NULL : pack_buffer((size_t)(ks * MR));
    if (!ap) {  // (N, K) or converted storage needs packing; so does the fallback on no memory
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
                tile_direct(kc, ap, (const float *)g->B.p + pc * g->ldb + jr, g->ldb, n1 - jr,
                            g->C + ir * g->ldc + jr, g->ldc, mr, add_c);
        }
    }
}

#endif

// A few rows of A (decoding one token, say) against f32 B: packing B would cost more than the
// product, so each output is a dot product (B stored (N, K)) or each row an axpy over B's rows
// (B stored (K, N)), vectorised by the compiler for this file's ISA; outputs are split among
// threads in fixed column blocks, each summed in one fixed order (not the GEMM's order, so
// the two differ by rounding: training never calls this).
enum { GEMV_COLS = 64 };

static void gemv_cols(const gemm_args *g, int64_t n0, int64_t n1) {
    const float *A = g->A.p, *B = g->B.p;
    for (int64_t m = 0; m < g->M; m++) {
        float *c = g->C + m * g->ldc;
        if (g->trans_b) {
            for (int64_t n = n0; n < n1; n++) {
                const float *b = B + n * g->ldb;
                float acc = 0.0f;
                if (g->trans_a) {
                    for (int64_t k = 0; k < g->K; k++) acc += A[k * g->lda + m] * b[k];
                } else {
                    const float *a = A + m * g->lda;
#pragma omp simd reduction(+ : acc)
                    for (int64_t k = 0; k < g->K; k++) acc += a[k] * b[k];
                }
                c[n] = g->accumulate ? c[n] + acc : acc;
            }
        } else {
            float acc[GEMV_COLS];
            for (int64_t n = n0; n < n1; n++) acc[n - n0] = 0.0f;
            for (int64_t k = 0; k < g->K; k++) {
                const float a = g->trans_a ? A[k * g->lda + m] : A[m * g->lda + k];
                const float *b = B + k * g->ldb;
#pragma omp simd
                for (int64_t n = n0; n < n1; n++) acc[n - n0] += a * b[n];
            }
            for (int64_t n = n0; n < n1; n++) c[n] = g->accumulate ? c[n] + acc[n - n0] : acc[n - n0];
        }
    }
}

static void gemv(const gemm_args *g) {
    const int64_t blocks = (g->N + GEMV_COLS - 1) / GEMV_COLS;
    const bool par = g->M * g->N * g->K >= GEMM_PARALLEL && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (par)
    for (int64_t b = 0; b < blocks; b++)
        gemv_cols(g, b * GEMV_COLS, b * GEMV_COLS + GEMV_COLS < g->N ? b * GEMV_COLS + GEMV_COLS : g->N);
}

static inline void gemv_run_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                                int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    const gemm_args g = {trans_a, trans_b, accumulate, M, N, K, {A, TRIT_F32, TRIT_GEMM_VALUE}, lda,
                         {B, TRIT_F32, TRIT_GEMM_VALUE}, ldb, C, ldc, NULL, TRIT_F32, NULL};
    if (M > 0 && N > 0) gemv(&g);
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
    if (g->C16) {
        gemm_block_c16(g, m0, m1, n0, n1);
        return;
    }
#ifdef GEMM_PACK_ALWAYS  // kernels whose packed format B cannot be read in place
    (void)small;
    gemm_block(g, m0, m1, n0, n1);
#else
    if (small)
        gemm_small(g, m0, m1, n0, n1);
    else
        gemm_block(g, m0, m1, n0, n1);
#endif
}

// The whole call: C (M, N) (+)= op(A) @ op(B) with the operands of g (contract in
// kernels/gemm.h, operand forms in kernels/gemm_lowp.h).
static void gemm_run(gemm_args g) {
    const int64_t M = g.M, N = g.N, K = g.K;
    if (M <= 0 || N <= 0) return;
    if (K <= 0 && g.C16) {  // the bias or zeros, rounded
        if (!g.accumulate) gemm_fallback_c16(&g, 0, M, 0, N);
        return;
    }
    if (K <= 0) {
        if (!g.accumulate)
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) g.C[i * g.ldc + j] = 0.0f;
        return;
    }
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

// The f32 GEMM of kernels/gemm.h.
static inline void gemm_run_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    const gemm_args g = {trans_a, trans_b, accumulate, M, N, K, {A, TRIT_F32, TRIT_GEMM_VALUE}, lda,
                         {B, TRIT_F32, TRIT_GEMM_VALUE}, ldb, C, ldc, NULL, TRIT_F32, NULL};
    gemm_run(g);
}

// The mixed GEMM of kernels/gemm_lowp.h: one pass per product of pieces (one, or three for
// TRIT_MATMUL_HIGH with an f32 operand, each adding onto C in turn; a 16-bit C only in one pass,
// see trit_gemm_mixed_one_pass). An f32 C with a bias starts as the bias, rows of C then
// accumulating: the order the 16-bit path sums in.
static void gemm_run_mixed(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A, const trit_gemm_operand *B,
                           void *C, trit_dtype cdt, int64_t ldc, bool accumulate, trit_matmul_precision prec,
                           const float *bias) {
    const bool split = prec == TRIT_MATMUL_HIGH;
    const trit_gemm_piece first = prec == TRIT_MATMUL_HIGHEST ? TRIT_GEMM_VALUE : TRIT_GEMM_BF16_HI;
    static const trit_gemm_piece pa[3] = {0, TRIT_GEMM_BF16_HI, TRIT_GEMM_BF16_LO};
    static const trit_gemm_piece pb[3] = {0, TRIT_GEMM_BF16_LO, TRIT_GEMM_BF16_HI};
    const bool c16 = cdt != TRIT_F32;
    if (bias && !c16 && !accumulate) {
        for (int64_t i = 0; i < M; i++) memcpy((float *)C + i * ldc, bias, sizeof(float) * (size_t)(N > 0 ? N : 0));
        accumulate = true;
    }
    for (int pass = 0; pass < (split ? 3 : 1); pass++) {
        // A lo pass of a 16-bit operand is all zeros: skip it rather than add zeros.
        if (pass > 0 && ((pa[pass] == TRIT_GEMM_BF16_LO && A->dt != TRIT_F32) ||
                         (pb[pass] == TRIT_GEMM_BF16_LO && B->dt != TRIT_F32)))
            continue;
        const gemm_args g = {A->trans, B->trans, accumulate || pass > 0, M, N, K,
                             {A->p, A->dt, pass ? pa[pass] : first}, A->ld, {B->p, B->dt, pass ? pb[pass] : first},
                             B->ld, c16 ? NULL : C, ldc, c16 ? C : NULL, cdt, c16 ? bias : NULL};
        gemm_run(g);
    }
}

#endif
