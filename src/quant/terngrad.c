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

int64_t trit_terngrad_nscales(int64_t n, int64_t bucket) {
    return n <= 0 ? 0 : bucket > 0 ? (n + bucket - 1) / bucket : 1;
}

// The first non-finite value's index, reported (the sums below only say that there is one).
static trit_status report_nonfinite(const float *g, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(g[i]))
            return trit_error(TRIT_ERR_NUMERIC, "terngrad: gradient value %lld is %g; the step should be skipped",
                              (long long)i, (double)g[i]);
    return trit_error(TRIT_ERR_NUMERIC, "terngrad: the gradient's sum of squares overflows");
}

// The clip bound (max |g|, or c * sigma when smaller) and each bucket's scale, the bound or its
// bucket's max |g| when smaller; a NaN or Inf is reported by its index and nothing is written.
static trit_status scales_of(const float *g, int64_t n, int64_t bucket, double clip_sigma, float *scales,
                             float *bound) {
    double sum = 0, sq = 0;
    float amax = 0;
    for (int64_t i = 0; i < n; i++) {
        sum += g[i], sq += (double)g[i] * g[i];
        amax = fabsf(g[i]) > amax ? fabsf(g[i]) : amax;
    }
    if (!isfinite(sum) || !isfinite(sq) || !isfinite(amax)) return report_nonfinite(g, n);
    *bound = amax;
    if (clip_sigma > 0) {
        const double mean = sum / (double)n, var = sq / (double)n - mean * mean;
        const double c = clip_sigma * sqrt(var > 0 ? var : 0);
        if (c < amax) *bound = (float)c;
    }
    if (bucket == 0) {
        scales[0] = *bound;
        return TRIT_OK;
    }
    for (int64_t b = 0; b < trit_terngrad_nscales(n, bucket); b++) {
        float m = 0;
        for (int64_t i = b * bucket; i < n && i < (b + 1) * bucket; i++) m = fabsf(g[i]) > m ? fabsf(g[i]) : m;
        scales[b] = m < *bound ? m : *bound;
    }
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
        float v = g[j] > bound ? bound : g[j];  // no NaN here: scales_of refused them
        v = v < -bound ? -bound : v;
        const int keep = u[j] * s < fabsf(v);  // b = 1 with probability |v| / s
        c[j] = (uint8_t)(1 + keep * (v > 0 ? 1 : -1));
    }
    for (int64_t j = m; j < (m + 3) / 4 * 4; j++) c[j] = 1;
    for (int64_t k = 0; k < (m + 3) / 4; k++)
        out[k] = (uint8_t)(c[4 * k] | c[4 * k + 1] << 2 | c[4 * k + 2] << 4 | c[4 * k + 3] << 6);
}

static trit_status check_bucket(int64_t n, int64_t bucket) {
    if (n <= 0 || bucket < 0 || bucket % 4 != 0)
        return trit_error(TRIT_ERR_INVALID, "terngrad: need n > 0 and a bucket of 0 (one scale) or a positive "
                          "multiple of 4, got n %lld, bucket %lld", (long long)n, (long long)bucket);
    return TRIT_OK;
}

trit_status trit_terngrad_scales(const float *g, int64_t n, int64_t bucket, double clip_sigma, float *scales,
                                 float *bound) {
    if (!g || !scales || !bound || !(clip_sigma >= 0))
        return trit_error(TRIT_ERR_INVALID, "terngrad: need a gradient, scales, a bound and clip_sigma >= 0");
    trit_status st = check_bucket(n, bucket);
    return st == TRIT_OK ? scales_of(g, n, bucket, clip_sigma, scales, bound) : st;
}

// Element pieces of at most SUB that never cross a bucket boundary, so each has one scale; the
// draws are keyed by element index, so the pieces do not change the codes.
trit_status trit_terngrad_encode_scaled(const float *g, int64_t n, int64_t bucket, const float *scales, float bound,
                                        uint64_t seed, uint64_t stream, uint8_t *codes) {
    if (!g || !codes || !scales || !(bound >= 0))
        return trit_error(TRIT_ERR_INVALID, "terngrad: need a gradient, a code buffer, scales and a bound >= 0");
    trit_status st = check_bucket(n, bucket);
    if (st != TRIT_OK) return st;
    for (int64_t b = 0; b < trit_terngrad_nscales(n, bucket); b++)
        if (!(scales[b] >= 0) || isinf(scales[b]))
            return trit_error(TRIT_ERR_INVALID, "terngrad: scale %lld is %g, not a finite value >= 0", (long long)b,
                              (double)scales[b]);
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        const int64_t i1 = (c + 1) * CHUNK < n ? (c + 1) * CHUNK : n;
        for (int64_t b = c * CHUNK, e; b < i1; b = e) {
            const int64_t q = bucket > 0 ? b / bucket : 0;
            e = b + SUB < i1 ? b + SUB : i1;
            if (bucket > 0 && e > (q + 1) * bucket) e = (q + 1) * bucket;
            encode_span(g + b, e - b, scales[q], bound, seed, stream, b, codes + b / 4);
        }
    }
    return TRIT_OK;
}

trit_status trit_terngrad_encode(const float *g, int64_t n, int64_t bucket, double clip_sigma, uint64_t seed,
                                 uint64_t stream, uint8_t *codes, float *scales) {
    if (!codes) return trit_error(TRIT_ERR_INVALID, "terngrad: need a gradient, a code buffer, scales and clip_sigma >= 0");
    float bound = 0;
    trit_status st = trit_terngrad_scales(g, n, bucket, clip_sigma, scales, &bound);
    return st == TRIT_OK ? trit_terngrad_encode_scaled(g, n, bucket, scales, bound, seed, stream, codes) : st;
}

// out[i0, i1) += s * codes, i0 a multiple of 4 (a whole byte); unit[b] holds the four codes of
// byte b as floats, which keeps the loop free of shifts.
static void accumulate_span(const uint8_t *codes, const float (*unit)[4], float s, int64_t i0, int64_t i1,
                            float *out) {
    const int64_t whole = i0 + (i1 - i0) / 4 * 4;
    for (int64_t k = i0 / 4; k < whole / 4; k++)
        for (int j = 0; j < 4; j++) out[4 * k + j] += s * unit[codes[k]][j];
    for (int64_t i = whole; i < i1; i++) out[i] += s * unit[codes[i / 4]][i % 4];
}

trit_status trit_terngrad_accumulate(const uint8_t *codes, const float *scales, int64_t n, int64_t bucket,
                                     float *out) {
    if (!codes || !scales || !out) return trit_error(TRIT_ERR_INVALID, "terngrad: need codes, scales and an output");
    trit_status st = check_bucket(n, bucket);
    if (st != TRIT_OK) return st;
    const int64_t nb = trit_terngrad_nscales(n, bucket);
    for (int64_t b = 0; b < nb; b++)
        if (!isfinite(scales[b])) return trit_error(TRIT_ERR_INVALID, "terngrad: scale %lld is not finite", (long long)b);
    float unit[256][4];
    for (int b = 0; b < 256; b++)
        for (int k = 0; k < 4; k++) unit[b][k] = (float)((int)((b >> (2 * k)) & 3) - 1);
    const int64_t piece = bucket > 0 ? bucket : CHUNK, pieces = (n + piece - 1) / piece;
#pragma omp parallel for schedule(static) if (n >= 4 * CHUNK)
    for (int64_t p = 0; p < pieces; p++)
        accumulate_span(codes, (const float(*)[4])unit, scales[bucket > 0 ? p : 0], p * piece,
                        (p + 1) * piece < n ? (p + 1) * piece : n, out);
    return TRIT_OK;
}
