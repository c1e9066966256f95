// Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy
// as 1, 2, 3", SC11). A number is a pure function of (seed, stream, index), so a fill may be split
// across any number of threads and still give the same bits.
#include "trit/base.h"

#include <math.h>

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u // golden ratio
#define PHILOX_W1 0xBB67AE85u // sqrt(3) - 1
#define PHILOX_ROUNDS 10

// Elements per parallel work item of a fill; a multiple of 4 so chunks start on block boundaries
// when the offset does (they need not: each element is computed from its own index).
#define FILL_CHUNK 4096

static inline void philox_round(uint32_t c[4], const uint32_t k[2]) {
    uint64_t p0 = (uint64_t)PHILOX_M0 * c[0];
    uint64_t p1 = (uint64_t)PHILOX_M1 * c[2];
    uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
    uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
    uint32_t n0 = hi1 ^ c[1] ^ k[0];
    uint32_t n2 = hi0 ^ c[3] ^ k[1];
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
}

void trit_philox4x32(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]};
    uint32_t k[2] = {key[0], key[1]};
    for (int r = 0; r < PHILOX_ROUNDS; r++) {
        if (r > 0) { // the key schedule advances between rounds
            k[0] += PHILOX_W0;
            k[1] += PHILOX_W1;
        }
        philox_round(c, k);
    }
    for (int i = 0; i < 4; i++) out[i] = c[i];
}

void trit_rng_block(uint64_t seed, uint64_t stream, uint64_t counter, uint32_t out[4]) {
    const uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), (uint32_t)stream,
                             (uint32_t)(stream >> 32)};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    trit_philox4x32(ctr, key, out);
}

uint32_t trit_rng_u32(uint64_t seed, uint64_t stream, uint64_t i) {
    uint32_t b[4];
    trit_rng_block(seed, stream, i / 4, b);
    return b[i % 4];
}

// Top 24 bits, so every value is exact in a float and 1.0 is never reached.
static inline float u32_to_unit(uint32_t w) { return (float)(w >> 8) * 0x1p-24f; }

float trit_rng_uniform(uint64_t seed, uint64_t stream, uint64_t i) {
    return u32_to_unit(trit_rng_u32(seed, stream, i));
}

// ---- uniform fill ------------------------------------------------------------------------

// Blocks c0 .. c0 + LANES - 1 of (seed, stream), words of block j at out[4 j ..]: the same
// Philox rounds as trit_philox4x32, with the blocks side by side in each step so the compiler
// runs them as vectors (a 32 x 32 -> 64-bit multiply per lane).
enum { LANES = 16 };

static void philox_lanes(uint64_t seed, uint64_t stream, uint64_t c0, uint32_t out[4 * LANES]) {
    uint32_t a[LANES], b[LANES], c[LANES], d[LANES];
    for (int j = 0; j < LANES; j++) {
        const uint64_t ctr = c0 + (uint64_t)j;
        a[j] = (uint32_t)ctr, b[j] = (uint32_t)(ctr >> 32), c[j] = (uint32_t)stream, d[j] = (uint32_t)(stream >> 32);
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < PHILOX_ROUNDS; r++) {
        if (r > 0) k0 += PHILOX_W0, k1 += PHILOX_W1;
        for (int j = 0; j < LANES; j++) {
            const uint64_t p0 = (uint64_t)PHILOX_M0 * a[j], p1 = (uint64_t)PHILOX_M1 * c[j];
            const uint32_t n0 = (uint32_t)(p1 >> 32) ^ b[j] ^ k0, n2 = (uint32_t)(p0 >> 32) ^ d[j] ^ k1;
            a[j] = n0, b[j] = (uint32_t)p1, c[j] = n2, d[j] = (uint32_t)p0;
        }
    }
    for (int j = 0; j < LANES; j++) out[4 * j] = a[j], out[4 * j + 1] = b[j], out[4 * j + 2] = c[j], out[4 * j + 3] = d[j];
}

static inline float uniform_in(uint32_t w, float lo, float span, float hi) {
    float v = lo + span * u32_to_unit(w);
    // lo + span*u can round up to hi; keep the interval half-open.
    if (v >= hi && hi > lo) v = nextafterf(hi, lo);
    return v;
}

// out: (n) elements first .. first+n-1 of the sequence; one Philox call per 4 elements, LANES
// blocks at a time where whole runs of them fit.
static void fill_uniform_span(float *out, int64_t n, uint64_t seed, uint64_t stream,
                              uint64_t first, float lo, float hi) {
    const float span = hi - lo;
    uint32_t b[4];
    uint64_t have = UINT64_MAX; // block currently in b
    int64_t i = 0;
    while (i < n) {
        const uint64_t j = first + (uint64_t)i;
        if (j % 4 == 0 && n - i >= 4 * LANES) {
            uint32_t w[4 * LANES];
            philox_lanes(seed, stream, j / 4, w);
            for (int k = 0; k < 4 * LANES; k++) out[i + k] = uniform_in(w[k], lo, span, hi);
            i += 4 * LANES;
            continue;
        }
        if (j / 4 != have) {
            have = j / 4;
            trit_rng_block(seed, stream, have, b);
        }
        out[i++] = uniform_in(b[j % 4], lo, span, hi);
    }
}

void trit_rng_fill_uniform(float *out, int64_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                           float lo, float hi) {
    if (!out || n <= 0) return;
    int64_t chunks = (n + FILL_CHUNK - 1) / FILL_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t start = c * FILL_CHUNK;
        int64_t len = n - start < FILL_CHUNK ? n - start : FILL_CHUNK;
        fill_uniform_span(out + start, len, seed, stream, offset + (uint64_t)start, lo, hi);
    }
}

// ---- normal fill (Box-Muller) --------------------------------------------------------------
// Element j of the normal sequence comes from block j/2: its two uniforms give one Box-Muller
// pair (r cos t, r sin t); even j takes the cosine, odd j the sine. The f32 path uses the top
// 24 bits of words 0 and 2, the f64 path 53 bits from words (0,1) and (2,3), so the two agree to
// about float precision for the same (seed, stream, index).

static inline void normal_pair_f32(const uint32_t b[4], float *z0, float *z1) {
    float u1 = (float)((b[0] >> 8) + 1) * 0x1p-24f; // (0, 1]: log is finite
    float u2 = (float)(b[2] >> 8) * 0x1p-24f;       // [0, 1)
    float r = sqrtf(-2.0f * logf(u1));
    float t = 6.28318530717958647692f * u2;
    *z0 = r * cosf(t);
    *z1 = r * sinf(t);
}

static inline void normal_pair_f64(const uint32_t b[4], double *z0, double *z1) {
    uint64_t a = ((uint64_t)b[0] << 21) | (b[1] >> 11);
    uint64_t c = ((uint64_t)b[2] << 21) | (b[3] >> 11);
    double u1 = (double)(a + 1) * 0x1p-53;
    double u2 = (double)c * 0x1p-53;
    double r = sqrt(-2.0 * log(u1));
    double t = 6.28318530717958647692 * u2;
    *z0 = r * cos(t);
    *z1 = r * sin(t);
}

// out: (n) normal elements first .. first+n-1.
static void fill_normal_span(float *out, int64_t n, uint64_t seed, uint64_t stream,
                             uint64_t first, float mean, float std) {
    uint32_t b[4];
    float z[2] = {0.0f, 0.0f};
    uint64_t have = UINT64_MAX; // pair currently in z
    for (int64_t i = 0; i < n; i++) {
        uint64_t j = first + (uint64_t)i;
        if (j / 2 != have) {
            have = j / 2;
            trit_rng_block(seed, stream, have, b);
            normal_pair_f32(b, &z[0], &z[1]);
        }
        out[i] = mean + std * z[j % 2];
    }
}

static void fill_normal_span_f64(double *out, int64_t n, uint64_t seed, uint64_t stream,
                                 uint64_t first, double mean, double std) {
    uint32_t b[4];
    double z[2] = {0.0, 0.0};
    uint64_t have = UINT64_MAX;
    for (int64_t i = 0; i < n; i++) {
        uint64_t j = first + (uint64_t)i;
        if (j / 2 != have) {
            have = j / 2;
            trit_rng_block(seed, stream, have, b);
            normal_pair_f64(b, &z[0], &z[1]);
        }
        out[i] = mean + std * z[j % 2];
    }
}

void trit_rng_fill_normal(float *out, int64_t n, uint64_t seed, uint64_t stream, uint64_t offset,
                          float mean, float std) {
    if (!out || n <= 0) return;
    int64_t chunks = (n + FILL_CHUNK - 1) / FILL_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t start = c * FILL_CHUNK;
        int64_t len = n - start < FILL_CHUNK ? n - start : FILL_CHUNK;
        fill_normal_span(out + start, len, seed, stream, offset + (uint64_t)start, mean, std);
    }
}

void trit_rng_fill_normal_f64(double *out, int64_t n, uint64_t seed, uint64_t stream,
                              uint64_t offset, double mean, double std) {
    if (!out || n <= 0) return;
    int64_t chunks = (n + FILL_CHUNK - 1) / FILL_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; c++) {
        int64_t start = c * FILL_CHUNK;
        int64_t len = n - start < FILL_CHUNK ? n - start : FILL_CHUNK;
        fill_normal_span_f64(out + start, len, seed, stream, offset + (uint64_t)start, mean, std);
    }
}
