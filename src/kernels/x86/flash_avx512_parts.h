// Pieces shared by the AVX-512 flash-attention tile kernels (x86/flash_avx512.c on f32 values,
// x86/flash_avx512bf16.c on bf16 pairs): both run register tiles of up to 6 rows x 4 zmm
// accumulators a<i>_<v>, and differ only in how a step feeds them (an FMA or a vdpbf16ps). The
// macros name the tile's variables as those files do. Include only from AVX-512 files.
#ifndef TRIT_KERNELS_X86_FLASH_AVX512_PARTS_H
#define TRIT_KERNELS_X86_FLASH_AVX512_PARTS_H

#include "kernels/flash.h"

#include <immintrin.h>
#include <stdint.h>

static inline __mmask16 trit_flash_lanes16(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
}

// Row i's four accumulators, zero.
#define TRIT_FLASH_TILE_DECL(i) \
    __m512 a##i##_0 = _mm512_setzero_ps(), a##i##_1 = a##i##_0, a##i##_2 = a##i##_0, a##i##_3 = a##i##_0;

// scores: row i (< mr) of the tile into st's row i (TRIT_FLASH_W = 64 lanes: four vectors).
#define TRIT_FLASH_SCORES_STORE(i)          \
    if (i < mr) {                           \
        float *s_ = st + (i) * TRIT_FLASH_W; \
        _mm512_storeu_ps(s_, a##i##_0);     \
        _mm512_storeu_ps(s_ + 16, a##i##_1); \
        _mm512_storeu_ps(s_ + 32, a##i##_2); \
        _mm512_storeu_ps(s_ + 48, a##i##_3); \
    }

// accum: row i (< mr) of the tile, nv vectors under masks m0..m3, into acc's row i: stored, or
// added to what is there (scaled by rowscale[i] when rowscale is given) when accumulate.
#define TRIT_FLASH_ACCUM_STORE_V(i, v, mv)                                                              \
    if (nv > v) {                                                                                       \
        float *o_ = acc + (i) * ldacc + 16 * (v);                                                       \
        __m512 s_ = a##i##_##v;                                                                         \
        if (accumulate) {                                                                               \
            const __m512 old_ = _mm512_maskz_loadu_ps(mv, o_);                                          \
            s_ = rowscale ? _mm512_fmadd_ps(old_, _mm512_set1_ps(rowscale[i]), s_) : _mm512_add_ps(old_, s_); \
        }                                                                                               \
        _mm512_mask_storeu_ps(o_, mv, s_);                                                              \
    }
#define TRIT_FLASH_ACCUM_STORE(i)          \
    if (i < mr) {                          \
        TRIT_FLASH_ACCUM_STORE_V(i, 0, m0) \
        TRIT_FLASH_ACCUM_STORE_V(i, 1, m1) \
        TRIT_FLASH_ACCUM_STORE_V(i, 2, m2) \
        TRIT_FLASH_ACCUM_STORE_V(i, 3, m3) \
    }

// The head's hs columns in 64-column chunks: CHUNK(nv, last, c0) for each, with nv (1 to 4
// vectors) a constant so the chunk function is specialised, and `last` the mask of its last.
#define TRIT_FLASH_CHUNKS64(hs, CHUNK)                                                   \
    for (int64_t c0 = 0; c0 < (hs); c0 += 64) {                                          \
        const int64_t w_ = (hs) - c0 < 64 ? (hs) - c0 : 64;                              \
        const __mmask16 last_ = trit_flash_lanes16(w_ - 16 * ((w_ + 15) / 16 - 1));      \
        switch ((w_ + 15) / 16) {                                                        \
        case 1: CHUNK(1, last_, c0); break;                                              \
        case 2: CHUNK(2, last_, c0); break;                                              \
        case 3: CHUNK(3, last_, c0); break;                                              \
        default: CHUNK(4, last_, c0); break;                                             \
        }                                                                                \
    }

#endif
