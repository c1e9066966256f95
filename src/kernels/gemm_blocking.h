// The blocking of the packed x86 GEMM kernels and the packing scratch they keep: each kernel file
// (x86/gemm_avx2.c, x86/gemm_avx512.c, x86/gemm_mixed_avx512bf16.c) publishes its blocking, and
// its driver (x86/gemm_driver.h) sizes its per-thread buffer with the functions below, so a
// report of that memory (kernels/gemm_scratch.h) computes what the kernels allocate instead of
// copying their constants.
#ifndef TRIT_KERNELS_GEMM_BLOCKING_H
#define TRIT_KERNELS_GEMM_BLOCKING_H

#include <stdint.h>

typedef struct trit_gemm_blocking {
    const char *file;      // the kernel file, e.g. "x86/gemm_avx2.c"
    int64_t mr, nr;        // register tile: MR rows by NR columns of C
    int64_t kc, mc, nc;    // cache blocking: K slice, A block rows, B block columns
    int64_t c16_b_floats;  // 16-bit C: B packed for all of K is kept under this many floats
} trit_gemm_blocking;

extern const trit_gemm_blocking trit_gemm_blocking_avx2, trit_gemm_blocking_avx512, trit_gemm_blocking_avx512bf16;

static inline int64_t trit_gemm_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t trit_gemm_min(int64_t a, int64_t b) { return a < b ? a : b; }

// The KC slicing of K: equal slices of at most KC. Depends on K alone.
static inline int64_t trit_gemm_k_slice(const trit_gemm_blocking *b, int64_t K) {
    return trit_gemm_ceil_div(K, trit_gemm_ceil_div(K, b->kc));
}
// Columns of B and rows of A packed at once for a thread's share of n columns and m rows.
static inline int64_t trit_gemm_nc_max(const trit_gemm_blocking *b, int64_t n) {
    return trit_gemm_min(b->nc, trit_gemm_ceil_div(n, b->nr) * b->nr);
}
static inline int64_t trit_gemm_mc_max(const trit_gemm_blocking *b, int64_t m) {
    return trit_gemm_min(b->mc, trit_gemm_ceil_div(m, b->mr) * b->mr);
}
// With a 16-bit C, B is packed for all of K: the column block is narrowed so that it stays
// within c16_b_floats (but is at least NR wide).
static inline int64_t trit_gemm_c16_nc_max(const trit_gemm_blocking *b, int64_t n, int64_t K) {
    const int64_t ks = trit_gemm_k_slice(b, K), slices = trit_gemm_ceil_div(K, ks);
    const int64_t fit = b->c16_b_floats / (slices * ks) / b->nr;
    return trit_gemm_min(trit_gemm_nc_max(b, n), (fit > 0 ? fit : 1) * b->nr);
}

// Floats of packing one thread asks for to compute an (m, n) share of C over K >= 1: with an f32
// C, a KC slice of B (nc_max columns) and of A (mc_max rows); with a 16-bit C, B's slices for
// all of K, one slice of A and the fp32 block of C the sums are kept in.
static inline int64_t trit_gemm_pack_floats(const trit_gemm_blocking *b, int64_t m, int64_t n, int64_t K) {
    return trit_gemm_k_slice(b, K) * (trit_gemm_nc_max(b, n) + trit_gemm_mc_max(b, m));
}
static inline int64_t trit_gemm_pack_c16_floats(const trit_gemm_blocking *b, int64_t m, int64_t n, int64_t K) {
    const int64_t ks = trit_gemm_k_slice(b, K), slices = trit_gemm_ceil_div(K, ks);
    const int64_t nc = trit_gemm_c16_nc_max(b, n, K), mc = trit_gemm_mc_max(b, m);
    return slices * ks * nc + ks * mc + mc * nc;
}

#endif
