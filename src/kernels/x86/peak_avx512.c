// The fp32 FMA peak at 512 bits and the streaming read on AVX-512 (see peak.h).
#include "kernels/peak.h"

#include <immintrin.h>

// Twelve accumulators a0..a11: the body of one pass is twelve independent FMAs.
#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

int64_t trit_kernel_peak_fma_avx512(int64_t iters, float *sink) {
    // a = a x + y converges to y / (1 - x) = 2: no overflow and no subnormals however long it runs.
    const __m512 x = _mm512_set1_ps(0.5f), y = _mm512_set1_ps(1.0f);
#define INIT(i) __m512 a##i = _mm512_set1_ps((float)(i));
    CHAINS(INIT)
#undef INIT
    for (int64_t it = 0; it < iters; it++) {
#define STEP(i) a##i = _mm512_fmadd_ps(a##i, x, y);
        CHAINS(STEP)
#undef STEP
    }
    __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, a##i);
    CHAINS(SUM)
#undef SUM
    *sink = _mm512_reduce_add_ps(s);
    return iters * 12 * 16 * 2;
}

float trit_kernel_read_avx512(const float *x, int64_t n) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        s0 = _mm512_add_ps(s0, _mm512_load_ps(x + i));
        s1 = _mm512_add_ps(s1, _mm512_load_ps(x + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_load_ps(x + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_load_ps(x + i + 48));
        s4 = _mm512_add_ps(s4, _mm512_load_ps(x + i + 64));
        s5 = _mm512_add_ps(s5, _mm512_load_ps(x + i + 80));
        s6 = _mm512_add_ps(s6, _mm512_load_ps(x + i + 96));
        s7 = _mm512_add_ps(s7, _mm512_load_ps(x + i + 112));
    }
    float t = 0;
    for (; i < n; i++) t += x[i];
    const __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)),
                                   _mm512_add_ps(_mm512_add_ps(s4, s5), _mm512_add_ps(s6, s7)));
    return _mm512_reduce_add_ps(s) + t;
}
