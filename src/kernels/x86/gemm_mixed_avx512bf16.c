// AVX512-BF16 GEMM: C (M, N) (+)= op(A) @ op(B) with bf16 x bf16 products on vdpbf16ps, which
// multiplies pairs of bf16 values along K and adds both exact products into fp32 lanes: twice
// the multiply-adds of an fp32 FMA per instruction. It serves the mixed GEMM (kernels/
// gemm_lowp.h) whenever every product is bf16 x bf16: bf16 operands, and f32 operands taken as
// their bf16 pieces (MEDIUM; the three passes of HIGH). f16 operands and fp32 values at the
// highest precision go to the fp32 kernel (x86/gemm_avx512.c).
//
// Packing: A into 14-row panels of K pairs (one 32-bit word per row and pair: element k in the
// low half, k + 1 in the high half), B into 32-column panels of K pairs (per pair, 32 words: the
// two rows interleaved column by column); an odd K is padded with a zero. Values become bf16 in
// the packing (vcvtne2ps2bf16 or vcvtneps2bf16 for the pieces of f32 values, which like
// vdpbf16ps treat subnormal inputs as zero): 32 bf16 values in memory order already are 16 pair
// words, so pairs lying along memory are only transposed 16 x 16 in registers, and pairs across
// two rows are zipped with one vpermw. The 14x32 register tile (28 zmm accumulators) broadcasts
// one A word per row and reads two B vectors per pair.
// Blocking, threads and determinism come from kernels/x86/gemm_driver.h: each C element is
// summed over K pairs in order inside fixed slices, on any thread count. vdpbf16ps flushes
// subnormal inputs and results to zero (it works in round-to-nearest-even with DAZ/FTZ), the
// one way its sums can differ from the fp32 path beyond summation order.
#include "kernels/gemm_lowp.h"

#include <immintrin.h>

#define MR 14
#define NR 32
#define GEMM_KC 512  // K values per slice (256 pairs): a packed B block of 512 x 768 bf16 is 768 KB
#define GEMM_MC (MR * 16)
#define GEMM_NC (NR * 24)
#define GEMM_SMALL 0
#define GEMM_PARALLEL ((int64_t)1 << 19)
#define GEMM_FMA_PER_CYCLE 64
#define GEMM_PACK_ALWAYS 1
#define GEMM_BLOCKING trit_gemm_blocking_avx512bf16
#define GEMM_FILE "x86/gemm_mixed_avx512bf16.c"

#include "kernels/x86/gemm_driver.h"
#include "kernels/x86/gemm_avx512_parts.h"

static inline __mmask16 lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

// ---- packing ---------------------------------------------------------------------------------

// The bf16 bits of n (<= 16) consecutive elements of s from i, as 16-bit lanes (zeros after n).
static inline __m256i bits16(gemm_src s, int64_t i, int64_t n) {
    const __mmask16 m = lanes(n);
    if (s.dt == TRIT_BF16) return _mm256_maskz_loadu_epi16(m, (const uint16_t *)s.p + i);
    const __m512 x = _mm512_maskz_loadu_ps(m, (const float *)s.p + i);
    const __m256i hi = (__m256i)_mm512_cvtneps_pbh(x);
    if (s.piece != TRIT_GEMM_BF16_LO) return hi;
    const __m512 h = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(hi), 16));
    return (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(x, h));
}

// 16 pair words from two runs of n elements: the run at i (k) in the low halves, the run at
// i + step (k + 1) in the high halves, or zeros there when there is no k + 1.
static inline __m512i pair_words(gemm_src s, int64_t i, int64_t step, int64_t n, bool has_second) {
    if (s.piece != TRIT_GEMM_BF16_LO && has_second) {
        // Both runs side by side as 32 bf16 lanes (run k in 0..15), then interleaved.
        __m512i both;
        if (s.dt == TRIT_BF16) {
            const uint16_t *p = (const uint16_t *)s.p + i;
            both = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_maskz_loadu_epi16(lanes(n), p)),
                                      _mm256_maskz_loadu_epi16(lanes(n), p + step), 1);
        } else {
            const float *p = (const float *)s.p + i;
            both = (__m512i)_mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(lanes(n), p + step),
                                                _mm512_maskz_loadu_ps(lanes(n), p));
        }
        const __m512i zip = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                             6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
        return _mm512_permutexvar_epi16(zip, both);
    }
    const __m512i lo = _mm512_cvtepu16_epi32(bits16(s, i, n));
    if (!has_second) return lo;
    return _mm512_or_si512(lo, _mm512_slli_epi32(_mm512_cvtepu16_epi32(bits16(s, i + step, n)), 16));
}

// The 16 pair words of the kk (<= 32) consecutive elements of s at i, zeros after kk. In memory
// order, 32 bf16 values already are 16 pair words (element 2q in the low half of word q), and one
// vcvtne2ps2bf16 turns 32 f32 values into them (its low 16 lanes come from its second operand),
// rounding like vcvtneps2bf16. Not for the lo piece.
static inline __m512i run_pairs(gemm_src s, int64_t i, int64_t kk) {
    if (s.dt == TRIT_BF16) {
        const __mmask32 m = kk >= 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << kk) - 1u);
        return _mm512_maskz_loadu_epi16(m, (const uint16_t *)s.p + i);
    }
    const float *p = (const float *)s.p + i;
    const __m512 x0 = _mm512_maskz_loadu_ps(lanes(kk), p), x1 = _mm512_maskz_loadu_ps(lanes(kk - 16), p + 16);
    return (__m512i)_mm512_cvtne2ps_pbh(x1, x0);
}

// 16 pair words (32 consecutive elements along K) of `rows` (<= 16) runs of s, runs ld apart,
// written transposed: dst[q * dst_ld + r] = pair q of run r, for q < pairs (<= 16) and the
// `width` lanes r (runs >= rows are zero). The pairs of a run are neighbours in memory.
static inline void pairs_transposed(gemm_src s, int64_t i0, int64_t ld, int64_t rows, int64_t kk, uint32_t *dst,
                                    int64_t dst_ld, int width) {
    __m512 r[16];
    for (int i = 0; i < 16; i++) {
        if (i >= rows) {
            r[i] = _mm512_setzero_ps();
            continue;
        }
        if (s.piece != TRIT_GEMM_BF16_LO) {
            r[i] = _mm512_castsi512_ps(run_pairs(s, i0 + i * ld, kk));
            continue;
        }
        const __m512i lo = _mm512_cvtepu16_epi32(bits16(s, i0 + i * ld, kk));
        const __m512i hi = _mm512_cvtepu16_epi32(bits16(s, i0 + i * ld + 16, kk - 16));
        // Lanes of lo/hi hold elements 0..15 and 16..31; a pair word joins elements 2q, 2q+1.
        const __m512i even = _mm512_permutex2var_epi32(lo, _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                                                            22, 24, 26, 28, 30), hi);
        const __m512i odd = _mm512_permutex2var_epi32(lo, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21,
                                                                           23, 25, 27, 29, 31), hi);
        r[i] = _mm512_castsi512_ps(_mm512_or_si512(even, _mm512_slli_epi32(odd, 16)));
    }
    trit_transpose16(r);
    const int64_t pairs = (kk + 1) / 2;
    for (int64_t q = 0; q < pairs && q < 16; q++)
        _mm512_mask_storeu_epi32(dst + q * dst_ld, lanes(width), _mm512_castps_si512(r[q]));
}

// Asks for the n elements from at of the rows PACK_PREFETCH_ROWS and one more after row k (rows
// ld apart), where they exist: the rows a sweep two rows at a time reads that far ahead.
static inline void prefetch_pair_ahead(gemm_src s, int64_t at, int64_t ld, int64_t n, int64_t k, int64_t K) {
    if (k + PACK_PREFETCH_ROWS + 1 >= K) return;
    prefetch_src(s, at + PACK_PREFETCH_ROWS * ld, n);
    prefetch_src(s, at + (PACK_PREFETCH_ROWS + 1) * ld, n);
}

// A block rows [i0, i0+mc), k [p0, p0+kc) -> MR-row panels of ceil(kc/2) pair words each.
static void pack_a(const gemm_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float *dst) {
    uint32_t *d = (uint32_t *)dst;
    const int64_t kp = (kc + 1) / 2;
    if (g->trans_a) {  // stored (K, M): rows k and k + 1 give every panel's MR pair words
        // Two rows at a time across all panels, as x86/gemm_avx512.c's pack_a sweeps rows: the
        // reads run along memory instead of down columns of 56-byte pieces a row apart.
        for (int64_t q = 0; q < kp; q++) {
            const int64_t at = (p0 + 2 * q) * g->lda + i0;
            const bool second = 2 * q + 1 < kc;
            prefetch_pair_ahead(g->A, at, g->lda, mc, p0 + 2 * q, g->K);
            for (int64_t ir = 0; ir < mc; ir += MR)
                _mm512_mask_storeu_epi32(d + ir * kp + q * MR, lanes(MR),
                                         pair_words(g->A, at + ir, g->lda, min64(MR, mc - ir), second));
        }
        return;
    }
    for (int64_t ir = 0; ir < mc; ir += MR, d += kp * MR) {
        const int64_t mr = min64(MR, mc - ir);
        // Stored (M, K): 32 elements of each row make 16 pair words, transposed into the panel.
        for (int64_t k = 0; k < kc; k += 32)
            pairs_transposed(g->A, (i0 + ir) * g->lda + p0 + k, g->lda, mr, min64(32, kc - k), d + k / 2 * MR, MR, MR);
    }
}

// B block k [p0, p0+kc), columns [j0, j0+nc) -> NR-column panels of ceil(kc/2) x NR words.
static void pack_b(const gemm_args *g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *dst) {
    uint32_t *d = (uint32_t *)dst;
    const int64_t kp = (kc + 1) / 2;
    if (!g->trans_b) {  // stored (K, N): rows k and k + 1 give every panel's 32 columns
        for (int64_t q = 0; q < kp; q++) {  // two rows at a time across the panels, as pack_a
            const int64_t at = (p0 + 2 * q) * g->ldb + j0;
            const bool second = 2 * q + 1 < kc;
            prefetch_pair_ahead(g->B, at, g->ldb, nc, p0 + 2 * q, g->K);
            for (int64_t jr = 0; jr < nc; jr += NR) {
                uint32_t *p = d + jr * kp + q * NR;
                _mm512_storeu_si512(p, pair_words(g->B, at + jr, g->ldb, nc - jr, second));
                _mm512_storeu_si512(p + 16, pair_words(g->B, at + jr + 16, g->ldb, nc - jr - 16, second));
            }
        }
        return;
    }
    for (int64_t jr = 0; jr < nc; jr += NR, d += kp * NR) {
        const int64_t nr = min64(NR, nc - jr);
        // Stored (N, K): 32 elements of each column's row make 16 pair words, transposed in two
        // halves of 16 columns.
        const int64_t at = (j0 + jr) * g->ldb + p0, hi = nr > 16 ? at + 16 * g->ldb : at;
        for (int64_t k = 0; k < kc; k += 32) {
            const int64_t kk = min64(32, kc - k);
            pairs_transposed(g->B, at + k, g->ldb, min64(16, nr), kk, d + k / 2 * NR, NR, 16);
            pairs_transposed(g->B, hi + k, g->ldb, nr - 16, kk, d + k / 2 * NR + 16, NR, 16);
        }
    }
}

// ---- micro-kernel and macro-kernel ---------------------------------------------------------

#define ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13)

// c (mr <= 14 rows, 32 columns under masks m0|m1) (+)= a panel (kp pairs x 14 words) @ b
// panel (kp pairs x 32 words).
static __attribute__((noinline)) void tile_packed(int64_t kp, const uint32_t *restrict a, const uint32_t *restrict b,
                                                  __mmask16 m0, __mmask16 m1, float *c, int64_t ldc, int64_t mr,
                                                  bool add_c) {
#define DECL(i) __m512 c##i##_0 = _mm512_setzero_ps(), c##i##_1 = _mm512_setzero_ps();
    ROWS(DECL)
#undef DECL
    for (int64_t i = 0; i < mr; i++) _mm_prefetch((const char *)(c + i * ldc), _MM_HINT_T0);
#pragma GCC unroll 2
    for (int64_t q = 0; q < kp; q++) {
        _mm_prefetch((const char *)(b + 8 * NR), _MM_HINT_T0);
        const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#define DOT(i)                                                                                    \
    {                                                                                             \
        const __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);                              \
        c##i##_0 = _mm512_dpbf16_ps(c##i##_0, ai, b0);                                            \
        c##i##_1 = _mm512_dpbf16_ps(c##i##_1, ai, b1);                                            \
    }
        ROWS(DOT)
#undef DOT
        a += MR;
        b += NR;
    }
    ROWS(TRIT_TILE_STORE_2x16)
}

static void gemm_macro(int64_t kc, int64_t mc, int64_t nc, const float *ap, const float *bp, float *c, int64_t ldc,
                       bool add_c) {
    const int64_t kp = (kc + 1) / 2;
    const uint32_t *a = (const uint32_t *)ap, *b = (const uint32_t *)bp;
    for (int64_t ir = 0; ir < mc; ir += MR) {
        const int64_t mr = min64(MR, mc - ir);
        for (int64_t jr = 0; jr < nc; jr += NR)
            tile_packed(kp, a + ir * kp, b + jr * kp, lanes(nc - jr), lanes(nc - jr - 16), c + ir * ldc + jr, ldc, mr,
                        add_c);
    }
}

// Every product bf16 x bf16: on vdpbf16ps; otherwise the fp32 kernel.
void trit_kernel_gemm_mixed_avx512bf16_core(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                             const trit_gemm_operand *B, void *C, trit_dtype cdt, int64_t ldc,
                                             bool accumulate, trit_matmul_precision prec, const float *bias) {
    const bool exact = A->dt != TRIT_F16 && B->dt != TRIT_F16 &&
                       (prec != TRIT_MATMUL_HIGHEST || (A->dt == TRIT_BF16 && B->dt == TRIT_BF16));
    if (!exact) {
        trit_kernel_gemm_mixed_avx512_core(M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
        return;
    }
    gemm_run_mixed(M, N, K, A, B, C, cdt, ldc, accumulate, prec, bias);
}
