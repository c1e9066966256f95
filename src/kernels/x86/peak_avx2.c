// The fp32 FMA and int8 dot-product peaks at 256 bits and the streaming read on AVX2 (see peak.h).
#include "kernels/peak.h"

#include <immintrin.h>

#define CHAINS12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CHAINS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

int64_t trit_kernel_peak_fma_avx2(int64_t iters, float *sink) {
    // a = a x + y converges to 2: no overflow and no subnormals however long it runs.
    const __m256 x = _mm256_set1_ps(0.5f), y = _mm256_set1_ps(1.0f);
#define INIT(i) __m256 a##i = _mm256_set1_ps((float)(i));
    CHAINS12(INIT)
#undef INIT
    for (int64_t it = 0; it < iters; it++) {
#define STEP(i) a##i = _mm256_fmadd_ps(a##i, x, y);
        CHAINS12(STEP)
#undef STEP
    }
    __m256 s = _mm256_setzero_ps();
#define SUM(i) s = _mm256_add_ps(s, a##i);
    CHAINS12(SUM)
#undef SUM
    const __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    float l[4];
    _mm_storeu_ps(l, h);
    *sink = l[0] + l[1] + l[2] + l[3];
    return iters * 12 * 8 * 2;
}

// The integer kernels' mix (x86/qgemm_avx2.c): vpmaddubsw (32 u8 x s8 products, pairs summed to
// int16), vpmaddwd by ones (pairs again, to int32), vpaddd into the accumulator. The empty asm
// after each chain tells the compiler b has changed, so the products are neither hoisted out of
// the loop nor shared between chains; it emits no instruction.
int64_t trit_kernel_peak_int8_avx2(int64_t iters, float *sink) {
    const __m256i a = _mm256_set1_epi8(1), ones = _mm256_set1_epi16(1);
    __m256i b = _mm256_set1_epi8(1);
#define INIT(i) __m256i a##i = _mm256_setzero_si256();
    CHAINS8(INIT)
#undef INIT
    for (int64_t it = 0; it < iters; it++) {
#define STEP(i)                                                                                     \
    a##i = _mm256_add_epi32(a##i, _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones));             \
    __asm__("" : "+x"(b));
        CHAINS8(STEP)
#undef STEP
    }
    __m256i s = _mm256_setzero_si256();
#define SUM(i) s = _mm256_add_epi32(s, a##i);
    CHAINS8(SUM)
#undef SUM
    int32_t l[8];
    _mm256_storeu_si256((__m256i *)l, s);
    *sink = (float)l[0];
    return iters * 8 * 32 * 2;
}

float trit_kernel_read_avx2(const float *x, int64_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        s0 = _mm256_add_ps(s0, _mm256_load_ps(x + i));
        s1 = _mm256_add_ps(s1, _mm256_load_ps(x + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_load_ps(x + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_load_ps(x + i + 24));
        s4 = _mm256_add_ps(s4, _mm256_load_ps(x + i + 32));
        s5 = _mm256_add_ps(s5, _mm256_load_ps(x + i + 40));
        s6 = _mm256_add_ps(s6, _mm256_load_ps(x + i + 48));
        s7 = _mm256_add_ps(s7, _mm256_load_ps(x + i + 56));
    }
    float t = 0;
    for (; i < n; i++) t += x[i];
    const __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)),
                                   _mm256_add_ps(_mm256_add_ps(s4, s5), _mm256_add_ps(s6, s7)));
    float l[8];
    _mm256_storeu_ps(l, s);
    return ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7])) + t;
}
