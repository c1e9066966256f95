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
enum { SUB = 1024 };     // elements whose uniforms are drawn at once (one Philox block per 4)

size_t trit_terngrad_bytes(int64_t n) { return n > 0 ? (size_t)((n + 3) / 4) : 0; }

// The scale and (when clipping) the clip bound; a NaN or Inf is reported by its index.
static trit_status scale_of(const float *g, int64_t n, double clip_sigma, float *scale, float *bound) {
    double sum = 0, sq = 0;
    float amax = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += g[i], sq += (double)g[i] * g[i];
        amax = fabsf(g[i]) > amax ? fabsf(g[i]) : amax;
    }
    if (!isfinite(sum) || !isfinite(sq) || !isfinite(amax))  // a NaN or Inf anywhere reaches the sums
        for (int64_t i = 0; i < n; i++)
            if (!isfinite(g[i]))
                return trit_error(TRIT_ERR_NUMERIC, "terngrad: gradient value %lld is %g; the step should be skipped",
                                  (long long)i, (double)g[i]);
    *bound = amax;
    if (clip_sigma > 0) {
        const double mean = sum / (double)n, var = sq / (double)n - mean * mean;
        const double b = clip_sigma * sqrt(var > 0 ? var : 0);
        if (b < amax) *bound = (float)b;
    }
    *scale = *bound;
    return TRIT_OK;
}

// Codes of m <= SUB gradient values starting at element `first` (a multiple of 4) into
// (m + 3) / 4 bytes. The uniforms come four to a Philox block, and the per-element work is
// branch-free so it vectorises; a partial last byte is padded with code 0 (stored 1).
static void encode_span(const float *g, int64_t m, float s, float bound, uint64_t seed, uint64_t stream,
                        int64_t first, uint8_t *out) {
    float u[SUB];
    uint8_t c[SUB + 3];
    trit_rng_fill_uniform(u, m, seed, stream, (uint64_t)first, 0.0f, 1.0f);
    for (int64_t j = 0; j < m; j++) {
        float v = g[j] > bound ? bound : g[j];  // no NaN here: scale_of refused them
        v = v < -bound ? -bound : v;
        const int keep = u[j] * s < fabsf(v);  // b = 1 with probability |v| / s
        c[j] = (uint8_t)(1 + keep * (v > 0 ? 1 : -1));
    }
    for (int64_t j = m; j < (m + 3) / 4 * 4; j++) c[j] = 1;
    for (int64_t k = 0; k < (m + 3) / 4; k++)
        out[k] = (uint8_t)(c[4 * k] | c[4 * k + 1] << 2 | c[4 * k + 2] << 4 | c[4 * k + 3] << 6);
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
        for (int64_t b = i0; b < i1; b += SUB) encode_span(g + b, b + SUB < i1 ? SUB : i1 - b, s, bound, seed, stream, b,
                                                            codes + b / 4);
    }
    return TRIT_OK;
}

trit_status trit_terngrad_accumulate(const uint8_t *codes, float scale, int64_t n, float *out) {
    if (!codes || !out || n < 0 || !isfinite(scale))
        return trit_error(TRIT_ERR_INVALID, "terngrad: need codes, an output, n >= 0 and a finite scale");
    // A table of the four values a byte decodes to keeps the loop free of shifts and divisions.
    float lut[256][4];
    for (int b = 0; b < 256; b++)
        for (int k = 0; k < 4; k++) lut[b][k] = scale * (float)((int)((b >> (2 * k)) & 3) - 1);
#pragma omp parallel for schedule(static) if (n >= 4 * CHUNK)
    for (int64_t k = 0; k < n / 4; k++)
        for (int j = 0; j < 4; j++) out[4 * k + j] += lut[codes[k]][j];
    for (int64_t i = n / 4 * 4; i < n; i++) out[i] += lut[codes[i / 4]][i % 4];
    return TRIT_OK;
}
