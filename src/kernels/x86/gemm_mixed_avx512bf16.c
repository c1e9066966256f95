// AVX512-BF16 GEMM: C (M, N) (+)= op(A) @ op(B) with bf16 x bf16 products on vdpbf16ps, which
// multiplies pairs of bf16 values along K and adds both exact products into fp32 lanes: twice
// the multiply-adds of an fp32 FMA per instruction. It serves the mixed GEMM (kernels/
// gemm_lowp.h) whenever every product is bf16 x bf16: bf16 operands, and f32 operands taken as
// their bf16 pieces (MEDIUM; the three passes of HIGH). f16 operands and fp32 values at the
// highest precision go to the fp32 kernel (x86/gemm_avx512.c).
//
// Packing: A into 14-row panels of K pairs (one 32-bit word per row and pair: element k in the
// low half, k + 1 in the high half), B into 32-column panels of K pairs (per pair, 32 words: the
// two rows interleaved column by column); an odd K is padded with a zero. The 14x32 register
// tile (28 zmm accumulators) broadcasts one A word per row and reads two B vectors per pair.
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

#include "kernels/x86/gemm_driver.h"

static inline __mmask16 lanes(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

// ---- packing ---------------------------------------------------------------------------------

// The bf16 bits of element i of s as the products see it (s is bf16, or f32 in a bf16 piece).
static inline uint32_t bits_at(gemm_src s, int64_t i) {
    if (s.dt == TRIT_BF16) return ((const uint16_t *)s.p)[i];
    const float x = ((const float *)s.p)[i];
    const uint16_t hi = trit_f32_to_bf16(x);
    return s.piece == TRIT_GEMM_BF16_LO ? trit_f32_to_bf16(x - trit_bf16_to_f32(hi)) : hi;
}

// The word of K pair (k, k + 1) at elements i (k) and i + step (k + 1); k + 1 past K is zero.
static inline uint32_t pair_at(gemm_src s, int64_t i, int64_t step, bool has_second) {
    return bits_at(s, i) | (has_second ? bits_at(s, i + step) << 16 : 0u);
}

// A block rows [i0, i0+mc), k [p0, p0+kc) -> MR-row panels of ceil(kc/2) pair words each.
static void pack_a(const gemm_args *g, int64_t i0, int64_t mc, int64_t p0, int64_t kc, float *dst) {
    uint32_t *d = (uint32_t *)dst;
    const int64_t kp = (kc + 1) / 2;
    // Element (i, k) of op(A) is at i * rs + k * ks in storage.
    const int64_t rs = g->trans_a ? 1 : g->lda, ks = g->trans_a ? g->lda : 1;
    for (int64_t ir = 0; ir < mc; ir += MR, d += kp * MR) {
        const int64_t mr = min64(MR, mc - ir);
        for (int64_t q = 0; q < kp; q++)
            for (int64_t i = 0; i < MR; i++)
                d[q * MR + i] = i < mr ? pair_at(g->A, (i0 + ir + i) * rs + (p0 + 2 * q) * ks, ks, 2 * q + 1 < kc) : 0u;
    }
}

// B block k [p0, p0+kc), columns [j0, j0+nc) -> NR-column panels of ceil(kc/2) x NR words.
static void pack_b(const gemm_args *g, int64_t p0, int64_t kc, int64_t j0, int64_t nc, float *dst) {
    uint32_t *d = (uint32_t *)dst;
    const int64_t kp = (kc + 1) / 2;
    // Element (k, j) of op(B) is at k * ks + j * cs in storage.
    const int64_t ks = g->trans_b ? 1 : g->ldb, cs = g->trans_b ? g->ldb : 1;
    for (int64_t jr = 0; jr < nc; jr += NR, d += kp * NR) {
        const int64_t nr = min64(NR, nc - jr);
        for (int64_t q = 0; q < kp; q++)
            for (int64_t j = 0; j < NR; j++)
                d[q * NR + j] = j < nr ? pair_at(g->B, (p0 + 2 * q) * ks + (j0 + jr + j) * cs, ks, 2 * q + 1 < kc) : 0u;
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
#define STORE(i)                                                                                  \
    if (i < mr) {                                                                                 \
        float *ci = c + (i) * ldc;                                                                \
        __m512 x0 = c##i##_0, x1 = c##i##_1;                                                      \
        if (add_c) {                                                                              \
            x0 = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, ci), x0);                                \
            x1 = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, ci + 16), x1);                           \
        }                                                                                         \
        _mm512_mask_storeu_ps(ci, m0, x0);                                                        \
        _mm512_mask_storeu_ps(ci + 16, m1, x1);                                                   \
    }
    ROWS(STORE)
#undef STORE
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
void trit_kernel_gemm_mixed_avx512bf16_f32c(int64_t M, int64_t N, int64_t K, const trit_gemm_operand *A,
                                            const trit_gemm_operand *B, float *C, int64_t ldc, bool accumulate,
                                            trit_matmul_precision prec) {
    const bool exact = A->dt != TRIT_F16 && B->dt != TRIT_F16 &&
                       (prec != TRIT_MATMUL_HIGHEST || (A->dt == TRIT_BF16 && B->dt == TRIT_BF16));
    if (!exact) {
        trit_kernel_gemm_mixed_avx512_f32c(M, N, K, A, B, C, ldc, accumulate, prec);
        return;
    }
    gemm_run_mixed(M, N, K, A, B, C, ldc, accumulate, prec);
}
