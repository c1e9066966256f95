// The bf16 dot-product peak: vdpbf16ps on zmm (see peak.h).
#include "kernels/peak.h"

#include <immintrin.h>

#define CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

// Each vdpbf16ps adds 16 lanes of two bf16 products: 32 products, 64 operations. The products
// are 2^-12 each, so the sums stay exact far beyond any run's length.
int64_t trit_kernel_peak_bf16_avx512bf16(int64_t iters, float *sink) {
    const __m512bh a = _mm512_cvtne2ps_pbh(_mm512_set1_ps(0x1p-6f), _mm512_set1_ps(0x1p-6f));
    const __m512bh b = a;
#define INIT(i) __m512 a##i = _mm512_set1_ps((float)(i));
    CHAINS(INIT)
#undef INIT
    for (int64_t it = 0; it < iters; it++) {
#define STEP(i) a##i = _mm512_dpbf16_ps(a##i, a, b);
        CHAINS(STEP)
#undef STEP
    }
    __m512 s = _mm512_setzero_ps();
#define SUM(i) s = _mm512_add_ps(s, a##i);
    CHAINS(SUM)
#undef SUM
    *sink = _mm512_reduce_add_ps(s);
    return iters * 12 * 32 * 2;
}
