// The per-token activation quantizer of the integer kernels (trit_kernel_qact_fn, qgemm.h) written
// once against the vector vocabulary of x86/simd_avx512.h or x86/simd_avx2.h; x86/qact_avx512.c
// and x86/qact_avx2.c include this file after one of them.
//
// It gives the portable quantizer's bits: the absmax is exact in any order (NaN ignored, as the
// maximum keeps its second operand), each code is round-to-nearest-even of x * (1 / scale) with
// the same one multiply, clamped to [-127, 127] with NaN to 0, and a group's sum is of whole
// numbers below 2^24 in magnitude (G <= 131072), so float adds are exact in any order.
#include "kernels/qgemm.h"

#include <math.h>

#define QACT_CAT_(a, b) a##_##b
#define QACT_CAT(a, b) QACT_CAT_(a, b)

void QACT_CAT(trit_kernel_qact, SIMD_SUFFIX)(const float *x, int64_t K, int64_t G, int8_t *q, float *scale,
                                             int32_t *gsum) {
    vf m = vzero();
    for (int64_t k = 0; k < K; k += SIMD_VL) m = vmax(vabs(vload(vtail_of(K - k), x + k)), m);
    const float s = vreduce_max(m) / 127.0f, inv = s > 0 ? 1.0f / s : 0.0f;
    *scale = s;
    const vf vinv = vset1(inv), hi = vset1(127.0f), lo = vset1(-127.0f);
    for (int64_t g = 0; g < K; g += G) {
        vf sum = vzero();
        for (int64_t k = g; k < g + G; k += SIMD_VL) {
            const vtail t = vtail_of(g + G - k);
            vf v = vround(vmul(vload(t, x + k), vinv));
            v = vselect(vordered(v), vzero(), v);
            v = vmax(vmin(v, hi), lo);
            vstore_i8(q + k, t, v);
            sum = vadd(sum, v);  // lanes past the tail loaded as 0
        }
        gsum[g / G] = (int32_t)vd_reduce_add(vd_add(vd_lo(sum), vd_hi(sum)));
    }
}

// Fake quantization's rule (qgemm.h, trit_kernel_qact_div_ref): x / s instead of x * (1 / s), a
// NaN or Inf in the row makes the scale NaN.
void QACT_CAT(trit_kernel_qact_div, SIMD_SUFFIX)(const float *x, int64_t K, int64_t G, int8_t *q, float *scale,
                                                 int32_t *gsum) {
    vf m = vzero();
    for (int64_t k = 0; k < K; k += SIMD_VL) m = vmax(vabs(vload(vtail_of(K - k), x + k)), m);
    const float s = vreduce_max(m) / 127.0f;
    const vf vs = vset1(s), hi = vset1(127.0f), lo = vset1(-127.0f);
    vf nan_seen = vzero();
    for (int64_t g = 0; g < K; g += G) {
        vf sum = vzero();
        for (int64_t k = g; k < g + G; k += SIMD_VL) {
            const vtail t = vtail_of(g + G - k);
            const vf xv = vload(t, x + k);
            vf v = s != 0 ? vdiv(xv, vs) : vmul(xv, vzero());
            nan_seen = vadd(nan_seen, vselect(vordered(v), vset1(1.0f), vzero()));
            v = vround(v);
            v = vselect(vordered(v), vzero(), v);
            v = vmax(vmin(v, hi), lo);
            vstore_i8(q + k, t, v);
            sum = vadd(sum, v);
        }
        gsum[g / G] = (int32_t)vd_reduce_add(vd_add(vd_lo(sum), vd_hi(sum)));
    }
    *scale = vreduce_max(nan_seen) > 0 ? NAN : s;
}
