// AVX-512 GEMM: C (M, N) (+)= op(A) @ op(B), f32 (contract in kernels/gemm.h) and mixed
// precision with f32 C (kernels/gemm_lowp.h; 16-bit operands widened while packing).
//
// Goto-style blocking. For each NC-wide column block and KC-deep slice of K, a thread packs
// op(B) into 32-wide panels (a KC x NC block that stays in L2), then for each MC-tall row block
// packs op(A) into 14-tall panels. A 14x32 register tile (28 zmm accumulators, A broadcast from
// memory, two B vectors per k) runs each A panel, held in L1, against every B panel of the
// block as they stream from L2. The transposes of all four cases happen in the packing, so one
// micro-kernel serves every case. Blocking, threads and determinism: kernels/x86/gemm_driver.h.
#include "kernels/gemm.h"

#include <immintrin.h>

#define MR 14
#define NR 32
// Blocking, chosen by measurement on Sapphire Rapids (48 KB L1D, 2 MB L2 per core): a packed
// B block of KC x NC (1.2 MB) stays in L2 and one packed A panel of KC x 14 (21 KB) in L1.
#ifndef GEMM512_KC
#define GEMM512_KC 384
#endif
#ifndef GEMM512_MC
#define GEMM512_MC (MR * 16)
#endif
#ifndef GEMM512_NC
#define GEMM512_NC (NR * 24)
#endif
// Prefetch distance for the packed B panel, in floats (8 steps of k).
#define PREFETCH_B (8 * NR)
// Up to this many multiply-adds B is read in place (when stored (K, N)) instead of packed.
#ifndef GEMM512_SMALL
#define GEMM512_SMALL ((int64_t)1 << 21)
#endif
// Below this many multiply-adds one thread is faster than waking others.
#ifndef GEMM512_PARALLEL
#define GEMM512_PARALLEL ((int64_t)1 << 19)
#endif
#define GEMM_KC GEMM512_KC
#define GEMM_MC GEMM512_MC
#define GEMM_NC GEMM512_NC
#define GEMM_SMALL GEMM512_SMALL
#define GEMM_PARALLEL GEMM512_PARALLEL
#define GEMM_FMA_PER_CYCLE 32
#define GEMM_BLOCKING trit_gemm_blocking_avx512
#define GEMM_FILE "x86/gemm_avx512.c"

#include "kernels/x86/gemm_driver.h"
#include "kernels/x86/gemm_avx512_parts.h"
static inline __mmask16 lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

// ---- micro-kernel ------------------------------------------------------------------------

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

// c (mr <= 14 rows, 32 columns under masks m0|m1) (+)= a_panel (kc, 14) @ b (kc, 32).
// b rows are b_ks floats apart: a zero-padded packed panel, or the caller's (K, N) matrix read
// in place, then with masked loads when the tile is at the right edge (`masked`).
static inline __attribute__((always_inline)) void
tile_14x32(int64_t kc, const float *restrict a, const float *restrict b, int64_t b_ks, bool masked,
           __mmask16 m0, __mmask16 m1, float *c, int64_t ldc, int64_t mr, bool add_c) {
#define DECL(i) __m512 c##i##_0 = _mm512_setzero_ps(), c##i##_1 = _mm512_setzero_ps();
    ROWS(DECL)
#undef DECL
    // Bring the C tile toward L1 now so its loads at the end do not stall on L3 or memory.
    for (int64_t i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0, b1;
        if (masked) {
            b0 = _mm512_maskz_loadu_ps(m0, b);
            b1 = _mm512_maskz_loadu_ps(m1, b + 16);
        } else {
            if (b_ks == NR) {  // a packed panel streams from L2: ask for it a little ahead
                _mm_prefetch((const char *)(b + PREFETCH_B), _MM_HINT_T0);
                _mm_prefetch((const char *)(b + PREFETCH_B + 16), _MM_HINT_T0);
            }
            b0 = _mm512_loadu_ps(b);
            b1 = _mm512_loadu_ps(b + 16);
        }
#define FMA(i)                                                                                    \
    {                                                                                             \
        __m512 ai = _mm512_set1_ps(a[i]);                                                         \
        c##i##_0 = _mm512_fmadd_ps(ai, b0, c##i##_0);                                             \
        c##i##_1 = _mm512_fmadd_ps(ai, b1, c##i##_1);                                             \
    }
        ROWS(FMA)
#undef FMA
        a += MR;
        b += b_ks;
    }
    ROWS(TRIT_TILE_STORE_2x16)
}

static __attribute__((noinline)) void tile_packed(int64_t kc, const float *a, const float *b,
                                                  __mmask16 m0, __mmask16 m1, float *c,
                                                  int64_t ldc, int64_t mr, bool add_c) {
    tile_14x32(kc, a, b, NR, false, m0, m1, c, ldc, mr, add_c);
}

// b: the caller's (K, N) matrix at the tile's first column, nr columns left in the row.
static __attribute__((noinline)) void tile_direct(int64_t kc, const float *a, const float *b,
                                                  int64_t ldb, int64_t nr, float *c, int64_t ldc,
                                                  int64_t mr, bool add_c) {
    if (nr >= NR)
        tile_14x32(kc, a, b, ldb, false, lanes(NR), lanes(NR), c, ldc, mr, add_c);
    else
        tile_14x32(kc, a, b, ldb, true, lanes(nr), lanes(nr - 16), c, ldc, mr, add_c);
}

// ---- packing -------------------------------------------------------------------------------

// f32 values rounded to bf16 (nearest even) and widened back; NaN stays a quiet NaN, as
// trit_f32_to_bf16 does.
static inline __m512 round_bf16(__m512 x) {
    const __m512i u = _mm512_castps_si512(x), top = _mm512_set1_epi32((int)0xffff0000u);
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_and_si512(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), top);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_and_si512(_mm512_or_si512(u, _mm512_set1_epi32(0x00400000)), top));
    return _mm512_castsi512_ps(r);
}

// The 16 values (lanes under m, zeros elsewhere) of operand s from element i on, as f32: 16-bit
// storage widened exactly, f32 storage in the operand's piece (itself, its bf16 hi or lo part).
static inline __m512 load_src(gemm_src s, int64_t i, __mmask16 m) {
    if (s.dt == TRIT_BF16) {
        const __m256i h = _mm256_maskz_loadu_epi16(m, (const uint16_t *)s.p + i);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    if (s.dt == TRIT_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)s.p + i));
    const __m512 x = _mm512_maskz_loadu_ps(m, (const float *)s.p + i);
    if (s.piece == TRIT_GEMM_VALUE) return x;
    const __m512 hi = round_bf16(x);
    return s.piece == TRIT_GEMM_BF16_HI ? hi : round_bf16(_mm512_sub_ps(x, hi));
}

// Reads `rows` (<= 16) rows of `kk` (<= 16) values of s from element i0, rows ld apart, and
// writes the transpose: for q < kk, dst[q * dst_ld + i] = s[i0 + i * ld + q] for the `width`
// lanes i (rows >= `rows` are written as zero).
static inline void transpose_block(gemm_src s, int64_t i0, int64_t ld, int64_t rows, int64_t kk, float *dst,
                                   int64_t dst_ld, int width) {
    __m512 r[16];
    __mmask16 km = lanes(kk);
    for (int i = 0; i < 16; i++) r[i] = i < rows ? load_src(s, i0 + i * ld, km) : _mm512_setzero_ps();
    trit_transpose16(r);
    __mmask16 wm = lanes(width);
    for (int q = 0; q < kk; q++) _mm512_mask_storeu_ps(dst + q * dst_ld, wm, r[q]);
}

// A block rows [i0, i0+mc), k [p0, p0+kc) -> MR-row panels, each kc x MR, zero-padded rows.
static void pack_a(const gemm_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                   float *dst) {
    if (g->trans_a) {  // stored (K, M): row k gives every panel's MR values, read in one sweep
        // Row by row rather than panel by panel: each row's mc values are contiguous, so the
        // reads run along memory (where the hardware prefetcher follows them) instead of down
        // columns of 56-byte pieces a row apart.
        for (int64_t k = 0; k < kc; k++) {
            const int64_t src = (p0 + k) * g->lda + i0;
            if (p0 + k + PACK_PREFETCH_ROWS < g->K) prefetch_src(g->A, src + PACK_PREFETCH_ROWS * g->lda, mc);
            float *d = dst + k * MR;
            for (int64_t ir = 0; ir < mc; ir += MR, d += kc * MR)
                _mm512_mask_storeu_ps(d, lanes(MR), load_src(g->A, src + ir, lanes(min64(MR, mc - ir))));
        }
        return;
    }
    for (int64_t ir = 0; ir < mc; ir += MR, dst += kc * MR) {  // stored (M, K): transpose 16-k blocks
        const int64_t mr = min64(MR, mc - ir), src = (i0 + ir) * g->lda + p0;
        for (int64_t k = 0; k < kc; k += 16)
            transpose_block(g->A, src + k, g->lda, mr, min64(16, kc - k), dst + k * MR, MR, MR);
    }
}

// B block k [p0, p0+kc), columns [j0, j0+nc) -> NR-column panels, each kc x NR, zero-padded.
static void pack_b(const gemm_args *g, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                   float *dst) {
    for (int64_t jr = 0; jr < nc; jr += NR, dst += kc * NR) {
        int64_t nr = min64(NR, nc - jr);
        if (!g->trans_b) {  // stored (K, N): rows are contiguous along N
            const int64_t src = p0 * g->ldb + j0 + jr;
            __mmask16 m0 = lanes(nr), m1 = lanes(nr - 16);
            for (int64_t k = 0; k < kc; k++) {
                if (p0 + k + PACK_PREFETCH_ROWS < g->K) prefetch_src(g->B, src + (k + PACK_PREFETCH_ROWS) * g->ldb, nr);
                _mm512_store_ps(dst + k * NR, load_src(g->B, src + k * g->ldb, m0));
                _mm512_store_ps(dst + k * NR + 16, load_src(g->B, src + k * g->ldb + 16, m1));
            }
        } else {  // stored (N, K): transpose 16 x 16 blocks, two per panel
            const int64_t src = (j0 + jr) * g->ldb + p0;
            const int64_t hi = nr > 16 ? src + 16 * g->ldb : src;  // rows 16.. if any
            for (int64_t k = 0; k < kc; k += 16) {
                int64_t kk = min64(16, kc - k);
                transpose_block(g->B, src + k, g->ldb, min64(16, nr), kk, dst + k * NR, NR, 16);
                transpose_block(g->B, hi + k, g->ldb, nr - 16, kk, dst + k * NR + 16, NR, 16);
            }
        }
    }
}

// ---- macro-kernel --------------------------------------------------------------------------

// Each A panel stays in L1 while the B panels of the block stream past it from L2.
static void gemm_macro(int64_t kc, int64_t mc, int64_t nc, const float *ap, const float *bp,
                       float *c, int64_t ldc, bool add_c) {
    for (int64_t ir = 0; ir < mc; ir += MR) {
        int64_t mr = min64(MR, mc - ir);
        for (int64_t jr = 0; jr < nc; jr += NR)
            tile_packed(kc, ap + ir * kc, bp + jr * kc, lanes(nc - jr), lanes(nc - jr - 16),
                        c + ir * ldc + jr, ldc, mr, add_c);
    }
}

void trit_kernel_gemv_avx512_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                               int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    gemv_run_f32(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

void trit_kernel_gemm_avx512_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                                 const float *A, int64_t lda, const float *B, int64_t ldb,
                                 float *C, int64_t ldc, bool accumulate) {
    gemm_run_f32(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

// 16-bit operands and lower precisions through the same packing and micro-kernel (widened to
// f32 while packing); a bf16 C goes through kernels/gemm_mixed.c.
void trit_kernel_gemm_mixed_avx512_core(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                       const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc,
                                       bool accumulate, trit_matmul_precision prec, const float *bias) {
    gemm_run_mixed(M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
}
