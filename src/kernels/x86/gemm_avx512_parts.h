// Pieces shared by the AVX-512 GEMM kernels (x86/gemm_avx512.c, x86/gemm_mixed_avx512bf16.c): a
// 16 x 16 transpose of 32-bit lanes for packing, and the store of a register tile row. Include
// only from AVX-512 files.
#ifndef TRIT_KERNELS_X86_GEMM_AVX512_PARTS_H
#define TRIT_KERNELS_X86_GEMM_AVX512_PARTS_H

#include <immintrin.h>

// In-register transpose: afterwards r[j] lane i holds what r[i] lane j held.
static inline void trit_transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        __m512d t0 = _mm512_castps_pd(t[i]), t1 = _mm512_castps_pd(t[i + 1]);
        __m512d t2 = _mm512_castps_pd(t[i + 2]), t3 = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
    }
    // r[4g + c] now holds, in 128-bit lane L, column 4L + c of rows 4g .. 4g+3.
    for (int c = 0; c < 4; c++) {
        __m512 u0 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
        __m512 u1 = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
        __m512 v0 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
        __m512 v1 = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        t[c] = _mm512_shuffle_f32x4(u0, v0, 0x88);
        t[8 + c] = _mm512_shuffle_f32x4(u0, v0, 0xdd);
        t[4 + c] = _mm512_shuffle_f32x4(u1, v1, 0x88);
        t[12 + c] = _mm512_shuffle_f32x4(u1, v1, 0xdd);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

// Row i of a register tile: accumulators c<i>_0, c<i>_1 (32 columns under masks m0, m1) stored
// into c + i * ldc, added to what is there when add_c; rows >= mr are not stored.
#define TRIT_TILE_STORE_2x16(i)                                                                   \
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

#endif
