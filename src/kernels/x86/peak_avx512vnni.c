// The int8 dot-product peak: vpdpbusd on zmm (see peak.h).
#include "kernels/peak.h"

#include <immintrin.h>

#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

// Each vpdpbusd adds 16 lanes of four u8 x s8 products: 64 products, 128 operations. The int32
// lanes wrap after about 2^29 passes, which changes nothing the loop is run for.
int64_t trit_kernel_peak_int8_avx512vnni(int64_t iters, float *sink) {
    const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(1);
#define INIT(i) __m512i a##i = _mm512_set1_epi32(i);
    CHAINS(INIT)
#undef INIT
    for (int64_t it = 0; it < iters; it++) {
#define STEP(i) a##i = _mm512_dpbusd_epi32(a##i, a, b);
        CHAINS(STEP)
#undef STEP
    }
    __m512i s = _mm512_setzero_si512();
#define SUM(i) s = _mm512_add_epi32(s, a##i);
    CHAINS(SUM)
#undef SUM
    *sink = (float)_mm512_reduce_add_epi32(s);
    return iters * 12 * 64 * 2;
}
