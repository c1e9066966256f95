// TernGrad (Wen et al., 2017): a gradient g becomes s * sign(g) * b with s = max |g| (after an
// optional clip at c * sigma, sigma the standard deviation of g) and b ~ Bernoulli(|g| / s), so
// E[g~] = g (for the clipped g when clipping). The wire form is the ternary dtype's storage
// (codes + 1 in 2 bits, four per byte) plus the scale: about 2 bits per value instead of 32.
// The Bernoulli draws come from Philox (seed, stream, element), so the result does not depend
// on threads and repeats exactly on resume.
#include "trit/quant.h"

#include <math.h>
#include <string.h>

enum { CHUNK = 16384 };  // elements per parallel chunk: a multiple of 4 (whole bytes)

size_t trit_terngrad_bytes(int64_t n) { return n > 0 ? (size_t)((n + 3) / 4) : 0; }

// The scale and (when clipping) the clip bound; a NaN or Inf is reported by its index.
static trit_status scale_of(const float *g, int64_t n, double clip_sigma, float *scale, float *bound) {
    double sum = 0, sq = 0;
    float amax = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(g[i]))
            return trit_error(TRIT_ERR_NUMERIC, "terngrad: gradient value %lld is %g; the step should be skipped",
                              (long long)i, (double)g[i]);
        sum += g[i], sq += (double)g[i] * g[i];
        amax = fmaxf(amax, fabsf(g[i]));
    }
    *bound = amax;
    if (clip_sigma > 0) {
        const double mean = sum / (double)n, var = sq / (double)n - mean * mean;
        const double b = clip_sigma * sqrt(var > 0 ? var : 0);
        if (b < amax) *bound = (float)b;
    }
    *scale = *bound;
    return TRIT_OK;
}

trit_status trit_terngrad_encode(const float *g, int64_t n, double clip_sigma, uint64_t seed, uint64_t stream,
                                 uint8_t *codes, float *scale) {
    if (!g || !codes || !scale || n <= 0 || !(clip_sigma >= 0))
        return trit_error(TRIT_ERR_INVALID, "terngrad: need a gradient, n > 0, a code buffer and clip_sigma >= 0");
    float s, bound;
    trit_status st = scale_of(g, n, clip_sigma, &s, &bound);
    if (st != TRIT_OK) return st;
    *scale = s;
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t i0 = c * CHUNK, i1 = i0 + CHUNK < n ? i0 + CHUNK : n;
        memset(codes + i0 / 4, 0x55, (size_t)((i1 - i0 + 3) / 4));  // every code 0 (stored 1)
        for (int64_t i = i0; i < i1 && s > 0; i++) {
            const float v = fminf(fmaxf(g[i], -bound), bound);
            const float u = trit_rng_uniform(seed, stream, (uint64_t)i);
            if (u * s < fabsf(v)) {  // b = 1 with probability |v| / s
                const unsigned stored = v > 0 ? 2u : 0u, sh = (unsigned)(i % 4) * 2;
                codes[i / 4] = (uint8_t)((codes[i / 4] & ~(3u << sh)) | stored << sh);
            }
        }
    }
    return TRIT_OK;
}

trit_status trit_terngrad_accumulate(const uint8_t *codes, float scale, int64_t n, float *out) {
    if (!codes || !out || n < 0 || !isfinite(scale))
        return trit_error(TRIT_ERR_INVALID, "terngrad: need codes, an output, n >= 0 and a finite scale");
#pragma omp parallel for schedule(static) if (n >= 4 * CHUNK)
    for (int64_t i = 0; i < n; i++) out[i] += scale * (float)((int)((codes[i / 4] >> ((i % 4) * 2)) & 3u) - 1);
    return TRIT_OK;
}
