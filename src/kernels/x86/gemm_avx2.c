// AVX2 + FMA (+ F16C) GEMM: C (M, N) (+)= op(A) @ op(B), f32 (contract in kernels/gemm.h) and
// mixed precision with f32 C (kernels/gemm_lowp.h; 16-bit operands widened while packing).
//
// The design of gemm_avx512.c with 256-bit vectors: per thread, op(B) is packed into 16-wide
// panels (KC x NC) and op(A) into 6-tall panels (MC x KC); a 6x16 register tile (12 ymm
// accumulators, A broadcast, two B vectors) runs over each pair of panels. The loop order keeps
// a B panel in L1 and the A block in L2, which suits the smaller L2 of AVX2-only CPUs. The
// transposes of the four cases happen in the packing. Blocking, threads and determinism:
// kernels/x86/gemm_driver.h.
#include "kernels/gemm.h"

#include <immintrin.h>

#define MR 6
#define NR 16
// Blocking for AVX2 machines with small caches (32 KB L1D, 256 KB+ L2): one packed B panel of
// KC x 16 (16 KB) stays in L1 while the packed A block of MC x KC (144 KB) is read from L2.
#ifndef GEMM256_KC
#define GEMM256_KC 256
#endif
#ifndef GEMM256_MC
#define GEMM256_MC (MR * 24)
#endif
#ifndef GEMM256_NC
#define GEMM256_NC (NR * 256)
#endif
// Up to this many multiply-adds B is read in place (when stored (K, N)) instead of packed.
#ifndef GEMM256_SMALL
#define GEMM256_SMALL ((int64_t)1 << 21)
#endif
// Below this many multiply-adds one thread is faster than waking others.
#ifndef GEMM256_PARALLEL
#define GEMM256_PARALLEL ((int64_t)1 << 19)
#endif
#define GEMM_KC GEMM256_KC
#define GEMM_MC GEMM256_MC
#define GEMM_NC GEMM256_NC
#define GEMM_SMALL GEMM256_SMALL
#define GEMM_PARALLEL GEMM256_PARALLEL
#define GEMM_FMA_PER_CYCLE 16
#define GEMM_BLOCKING trit_gemm_blocking_avx2
#define GEMM_FILE "x86/gemm_avx2.c"

#include "kernels/x86/gemm_driver.h"
// Lane mask for maskload/maskstore: the first n of 8 lanes set.
static inline __m256i lanes(int64_t n) {
    int32_t k = n < 0 ? 0 : n > 8 ? 8 : (int32_t)n;
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// ---- micro-kernel ------------------------------------------------------------------------

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)

// c (mr <= 6 rows, 16 columns under masks m0|m1) (+)= a_panel (kc, 6) @ b (kc, 16).
// b rows are b_ks floats apart: a zero-padded packed panel, or the caller's (K, N) matrix read
// in place, then with masked loads when the tile is at the right edge (`masked`). A tile of 16
// columns (`full`) reads and writes C with plain moves: vmaskmovps stores are slow on AMD cores.
static inline __attribute__((always_inline)) void
tile_6x16(int64_t kc, const float *restrict a, const float *restrict b, int64_t b_ks, bool masked,
          __m256i m0, __m256i m1, bool full, float *c, int64_t ldc, int64_t mr, bool add_c) {
#define DECL(i) __m256 c##i##_0 = _mm256_setzero_ps(), c##i##_1 = _mm256_setzero_ps();
    ROWS(DECL)
#undef DECL
    // Bring the C tile toward L1 now so its loads at the end do not stall on L3 or memory.
    for (int64_t i = 0; i < mr; i++) {
        _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
        _mm_prefetch((const char *)(c + i * ldc + NR - 1), _MM_HINT_T0);
    }
#pragma GCC unroll 4
    for (int64_t k = 0; k < kc; k++) {
        __m256 b0, b1;
        if (masked) {
            b0 = _mm256_maskload_ps(b, m0);
            b1 = _mm256_maskload_ps(b + 8, m1);
        } else {
            b0 = _mm256_loadu_ps(b);
            b1 = _mm256_loadu_ps(b + 8);
        }
#define FMA(i)                                                                                    \
    {                                                                                             \
        __m256 ai = _mm256_broadcast_ss(a + (i));                                                 \
        c##i##_0 = _mm256_fmadd_ps(ai, b0, c##i##_0);                                             \
        c##i##_1 = _mm256_fmadd_ps(ai, b1, c##i##_1);                                             \
    }
        ROWS(FMA)
#undef FMA
        a += MR;
        b += b_ks;
    }
#define STORE(i)                                                                                  \
    if (i < mr) {                                                                                 \
        float *ci = c + (i) * ldc;                                                                \
        __m256 x0 = c##i##_0, x1 = c##i##_1;                                                      \
        if (add_c) {                                                                              \
            x0 = _mm256_add_ps(full ? _mm256_loadu_ps(ci) : _mm256_maskload_ps(ci, m0), x0);      \
            x1 = _mm256_add_ps(full ? _mm256_loadu_ps(ci + 8) : _mm256_maskload_ps(ci + 8, m1), x1); \
        }                                                                                         \
        if (full) {                                                                               \
            _mm256_storeu_ps(ci, x0);                                                             \
            _mm256_storeu_ps(ci + 8, x1);                                                         \
        } else {                                                                                  \
            _mm256_maskstore_ps(ci, m0, x0);                                                      \
            _mm256_maskstore_ps(ci + 8, m1, x1);                                                  \
        }                                                                                         \
    }
    ROWS(STORE)
#undef STORE
}

// nr: the columns of C the tile covers (at most NR).
static __attribute__((noinline)) void tile_packed(int64_t kc, const float *a, const float *b, int64_t nr,
                                                  float *c, int64_t ldc, int64_t mr, bool add_c) {
    if (nr >= NR)
        tile_6x16(kc, a, b, NR, false, lanes(8), lanes(8), true, c, ldc, mr, add_c);
    else
        tile_6x16(kc, a, b, NR, false, lanes(nr), lanes(nr - 8), false, c, ldc, mr, add_c);
}

// b: the caller's (K, N) matrix at the tile's first column, nr columns left in the row.
static __attribute__((noinline)) void tile_direct(int64_t kc, const float *a, const float *b,
                                                  int64_t ldb, int64_t nr, float *c, int64_t ldc,
                                                  int64_t mr, bool add_c) {
    if (nr >= NR)
        tile_6x16(kc, a, b, ldb, false, lanes(8), lanes(8), true, c, ldc, mr, add_c);
    else
        tile_6x16(kc, a, b, ldb, true, lanes(nr), lanes(nr - 8), false, c, ldc, mr, add_c);
}

// ---- packing -------------------------------------------------------------------------------

// In-register transpose: afterwards r[j] lane i holds what r[i] lane j held.
static inline void transpose8(__m256 r[8]) {
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    // u[4g + c] now holds, in 128-bit lane L, column 4L + c of rows 4g .. 4g+3.
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2f128_ps(u[c], u[4 + c], 0x31);
    }
}

// f32 values rounded to bf16 (nearest even) and widened back; NaN stays a quiet NaN, as
// trit_f32_to_bf16 does.
static inline __m256 round_bf16(__m256 x) {
    const __m256i u = _mm256_castps_si256(x), top = _mm256_set1_epi32((int)0xffff0000u);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    const __m256i r = _mm256_and_si256(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), top);
    const __m256i q = _mm256_and_si256(_mm256_or_si256(u, _mm256_set1_epi32(0x00400000)), top);
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    return _mm256_blendv_ps(_mm256_castsi256_ps(r), _mm256_castsi256_ps(q), nan);
}

// The first n (<= 8) 16-bit values at p, zeros after them.
static inline __m128i load_u16(const uint16_t *p, int64_t n) {
    if (n >= 8) return _mm_loadu_si128((const __m128i *)p);
    uint16_t t[8] = {0};
    for (int64_t i = 0; i < n; i++) t[i] = p[i];
    return _mm_loadu_si128((const __m128i *)t);
}

// The first n (<= 8) values of operand s from element i on (zeros after them), as f32: 16-bit
// storage widened exactly (F16C for f16), f32 storage in the operand's piece.
static inline __m256 load_src(gemm_src s, int64_t i, int64_t n) {
    n = n < 0 ? 0 : n > 8 ? 8 : n;
    if (s.dt == TRIT_BF16) {
        const __m256i w = _mm256_cvtepu16_epi32(load_u16((const uint16_t *)s.p + i, n));
        return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
    }
    if (s.dt == TRIT_F16) return _mm256_cvtph_ps(load_u16((const uint16_t *)s.p + i, n));
    const float *f = (const float *)s.p + i;
    const __m256 x = n == 8 ? _mm256_loadu_ps(f) : _mm256_maskload_ps(f, lanes(n));
    if (s.piece == TRIT_GEMM_VALUE) return x;
    const __m256 hi = round_bf16(x);
    return s.piece == TRIT_GEMM_BF16_HI ? hi : round_bf16(_mm256_sub_ps(x, hi));
}

// The first `width` lanes of v to dst; 8 and MR (6) take plain stores (vmaskmovps stores are slow
// on AMD cores).
static inline void store_lanes(float *dst, __m256 v, int width) {
    if (width == 8) {
        _mm256_storeu_ps(dst, v);
    } else if (width == 6) {
        _mm_storeu_ps(dst, _mm256_castps256_ps128(v));
        _mm_storel_pi((__m64 *)(dst + 4), _mm256_extractf128_ps(v, 1));
    } else {
        _mm256_maskstore_ps(dst, lanes(width), v);
    }
}

// Reads `rows` (<= 8) rows of `kk` (<= 8) values of s from element i0, rows ld apart, and
// writes the transpose: for q < kk, dst[q * dst_ld + i] = s[i0 + i * ld + q] for the `width`
// lanes i (rows >= `rows` are written as zero).
static inline void transpose_block(gemm_src s, int64_t i0, int64_t ld, int64_t rows, int64_t kk, float *dst,
                                   int64_t dst_ld, int width) {
    __m256 r[8];
    for (int i = 0; i < 8; i++) r[i] = i < rows ? load_src(s, i0 + i * ld, kk) : _mm256_setzero_ps();
    transpose8(r);
    for (int q = 0; q < kk; q++) store_lanes(dst + q * dst_ld, r[q], width);
}

// A block rows [i0, i0+mc), k [p0, p0+kc) -> MR-row panels, each kc x MR, zero-padded rows.
static void pack_a(const gemm_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc,
                   float *dst) {
    for (int64_t ir = 0; ir < mc; ir += MR, dst += kc * MR) {
        int64_t mr = min64(MR, mc - ir);
        if (g->trans_a) {  // stored (K, M): each k gives MR contiguous values
            const int64_t src = p0 * g->lda + i0 + ir;
            for (int64_t k = 0; k < kc; k++) {
                if (p0 + k + PACK_PREFETCH_ROWS < g->K) prefetch_src(g->A, src + (k + PACK_PREFETCH_ROWS) * g->lda, mr);
                store_lanes(dst + k * MR, load_src(g->A, src + k * g->lda, mr), MR);
            }
        } else {  // stored (M, K): transpose 8-k blocks of the MR rows
            const int64_t src = (i0 + ir) * g->lda + p0;
            for (int64_t k = 0; k < kc; k += 8)
                transpose_block(g->A, src + k, g->lda, mr, min64(8, kc - k), dst + k * MR, MR, MR);
        }
    }
}

// B block k [p0, p0+kc), columns [j0, j0+nc) -> NR-column panels, each kc x NR, zero-padded.
static void pack_b(const gemm_args *g, int64_t p0, int64_t kc, int64_t j0, int64_t nc,
                   float *dst) {
    for (int64_t jr = 0; jr < nc; jr += NR, dst += kc * NR) {
        int64_t nr = min64(NR, nc - jr);
        if (!g->trans_b) {  // stored (K, N): rows are contiguous along N
            const int64_t src = p0 * g->ldb + j0 + jr;
            for (int64_t k = 0; k < kc; k++) {
                if (p0 + k + PACK_PREFETCH_ROWS < g->K) prefetch_src(g->B, src + (k + PACK_PREFETCH_ROWS) * g->ldb, nr);
                _mm256_store_ps(dst + k * NR, load_src(g->B, src + k * g->ldb, nr));
                _mm256_store_ps(dst + k * NR + 8, load_src(g->B, src + k * g->ldb + 8, nr - 8));
            }
        } else {  // stored (N, K): transpose 8 x 8 blocks, two per panel
            const int64_t src = (j0 + jr) * g->ldb + p0;
            const int64_t hi = nr > 8 ? src + 8 * g->ldb : src;  // rows 8.. if any
            for (int64_t k = 0; k < kc; k += 8) {
                int64_t kk = min64(8, kc - k);
                transpose_block(g->B, src + k, g->ldb, min64(8, nr), kk, dst + k * NR, NR, 8);
                transpose_block(g->B, hi + k, g->ldb, nr - 8, kk, dst + k * NR + 8, NR, 8);
            }
        }
    }
}

// ---- macro-kernel --------------------------------------------------------------------------

// Each B panel stays in L1 while the A block streams past it from L2.
static void gemm_macro(int64_t kc, int64_t mc, int64_t nc, const float *ap, const float *bp,
                       float *c, int64_t ldc, bool add_c) {
    for (int64_t jr = 0; jr < nc; jr += NR)
        for (int64_t ir = 0; ir < mc; ir += MR)
            tile_packed(kc, ap + ir * kc, bp + jr * kc, nc - jr, c + ir * ldc + jr, ldc, min64(MR, mc - ir), add_c);
}

void trit_kernel_gemv_avx2_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                               int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, bool accumulate) {
    gemv_run_f32(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

void trit_kernel_gemm_avx2_f32(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                               const float *A, int64_t lda, const float *B, int64_t ldb,
                               float *C, int64_t ldc, bool accumulate) {
    gemm_run_f32(trans_a, trans_b, M, N, K, A, lda, B, ldb, C, ldc, accumulate);
}

// 16-bit operands (bf16 widened by a shift, f16 through F16C) and lower precisions through the
// same packing and FMA micro-kernel; a 16-bit C through fp32 blocks (x86/gemm_driver.h).
void trit_kernel_gemm_mixed_avx2_core(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                       const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc,
                                       bool accumulate, trit_matmul_precision prec, const float *bias) {
    gemm_run_mixed(M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
}
