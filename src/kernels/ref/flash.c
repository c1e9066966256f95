// Portable flash-attention tile kernels (contracts in kernels/flash.h), compiled for float and
// double. Loops run across the W lanes of a tile, so the compiler vectorizes them for any ISA.
#include "base/real.h"
#include "kernels/flash.h"

#include <string.h>

#define W TRIT_FLASH_W

// exp(x) for x <= 0. In f32 a polynomial the compiler vectorizes: x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2 / 2, a degree-6 polynomial for e^r (within 1e-7 relative of
// expf) and 2^n through the exponent bits. Arguments below EXP_MIN give about 1e-38 (f32)
// instead of 0; callers clamp first, in a separate loop (a compare in this loop stops GCC).
// In f64 the C library's exp.
#ifdef TRIT_REAL_F64
#define EXP_MIN (-708.0)
static inline double exp_le0(double x) { return exp(x); }
#else
#define EXP_MIN (-87.0f)
static inline float exp_le0(float x) {
    const float shift = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds to an integer
    float n = (x * 1.44269504088896341f + shift) - shift;
    float r = x - n * 0.693359375f;  // ln 2 in two parts so that n * hi is exact
    r = r + n * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    union {
        int32_t i;
        float f;
    } two_n = {.i = ((int32_t)n + 127) << 23};
    return p * two_n.f;
}
#endif

// First lane that key row r is visible to, clamped to [0, nq].
static int64_t first_lane(int64_t r, int64_t kofs, int64_t nq) {
    int64_t i = r + kofs;
    return i < 0 ? 0 : i > nq ? nq : i;
}

// v[i] = exp(v[i]) for i < W, with v[i] clamped to [EXP_MIN, 0] (values above 0 only reach
// padding lanes, whose results are never used).
static void exp_lanes(real *v) {
    for (int64_t i = 0; i < W; i++) v[i] = v[i] < EXP_MIN ? EXP_MIN : v[i] > 0 ? 0 : v[i];
    for (int64_t i = 0; i < W; i++) v[i] = exp_le0(v[i]);
}

void R(trit_kernel_flash_scores_ref)(TRIT_FLASH_SCORES_ARGS(real)) {
    for (int64_t r = 0; r < nr; r++) {
        real acc[W] = {0};
        const real *xr = x + r * ldx;
        for (int64_t c = 0; c < hs; c++) {
            const real a = xr[c], *y = yt + c * W;
            for (int64_t i = 0; i < W; i++) acc[i] += a * y[i];
        }
        memcpy(st + r * W, acc, sizeof acc);
    }
}

void R(trit_kernel_flash_accum_ref)(TRIT_FLASH_ACCUM_ARGS(real)) {
    for (int64_t r = 0; r < nr; r++) {
        real *a = acc + r * ldacc;
        if (!accumulate) {
            memset(a, 0, sizeof(real) * (size_t)hs);
        } else if (rowscale) {
            const real s = rowscale[r];
            for (int64_t c = 0; c < hs; c++) a[c] *= s;
        }
        for (int64_t k = 0; k < nk; k++) {
            const real w = coef[r * rs + k * ks], *yk = y + k * ldy;
            for (int64_t c = 0; c < hs; c++) a[c] += w * yk[c];
        }
    }
}

void R(trit_kernel_flash_softmax_ref)(TRIT_FLASH_SOFTMAX_ARGS(real)) {
    real mx[W], sub[W], v[W], sum[W] = {0};
    for (int64_t i = 0; i < W; i++) mx[i] = RMAX_NEG;
    for (int64_t r = 0; r < nr; r++) {
        const real *s = st + r * W;
        for (int64_t i = first_lane(r, kofs, nq); i < nq; i++) mx[i] = s[i] > mx[i] ? s[i] : mx[i];
    }
    // Rounding is monotonic and scale > 0, so the max of the scaled scores is the scaled max.
    // Lanes that have seen no key keep m = -inf; they subtract 0 instead (and stay unused).
    for (int64_t i = 0; i < W; i++) {
        mx[i] = mx[i] == RMAX_NEG ? m[i] : mx[i] * scale > m[i] ? mx[i] * scale : m[i];
        sub[i] = mx[i] == RMAX_NEG ? 0 : mx[i];
        v[i] = m[i] == RMAX_NEG ? 0 : m[i] - mx[i];
    }
    exp_lanes(v);
    for (int64_t i = 0; i < W; i++) alpha[i] = m[i] == RMAX_NEG ? 0 : v[i];
    for (int64_t r = 0; r < nr; r++) {
        real *s = st + r * W;
        const int64_t f = first_lane(r, kofs, nq);
        for (int64_t i = 0; i < W; i++) s[i] = s[i] * scale - sub[i];
        exp_lanes(s);
        for (int64_t i = 0; i < f; i++) s[i] = 0;
        for (int64_t i = nq; i < W; i++) s[i] = 0;
        for (int64_t i = 0; i < W; i++) sum[i] += s[i];
    }
    for (int64_t i = 0; i < W; i++) {
        l[i] = l[i] * (double)alpha[i] + (double)sum[i];
        m[i] = mx[i];
    }
}

void R(trit_kernel_flash_probs_ref)(TRIT_FLASH_PROBS_ARGS(real)) {
    for (int64_t r = 0; r < nr; r++) {
        real *s = st + r * W;
        const int64_t f = first_lane(r, kofs, nq);
        for (int64_t i = 0; i < W; i++) s[i] = s[i] * scale - lse[i];
        exp_lanes(s);
        for (int64_t i = 0; i < f; i++) s[i] = 0;
        for (int64_t i = nq; i < W; i++) s[i] = 0;
    }
}

void R(trit_kernel_flash_dscores_ref)(TRIT_FLASH_DSCORES_ARGS(real)) {
    for (int64_t r = 0; r < nr; r++) {
        real *g = dp + r * W;
        const real *pr = p + r * W;
        for (int64_t i = 0; i < W; i++) g[i] = pr[i] * (g[i] - d[i]) * scale;
    }
}
