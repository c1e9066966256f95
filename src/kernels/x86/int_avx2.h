// Integer helpers shared by the AVX2 integer kernels.
#ifndef TRIT_KERNELS_X86_INT_AVX2_H
#define TRIT_KERNELS_X86_INT_AVX2_H

#include <immintrin.h>

// a + p computed into a's register: written as an intrinsic, gcc 12 adds into a new register
// and copies every accumulator back on each pass (one move per multiply in a tile's loop).
static inline __m256i trit_avx2_add_epi32_in_place(__m256i a, __m256i p) {
    __asm__("vpaddd %1, %0, %0" : "+x"(a) : "x"(p));
    return a;
}

#endif
