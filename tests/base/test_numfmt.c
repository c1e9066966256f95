// bf16 and fp16 conversions: every 16-bit pattern round-trips, ties go to even, the f16 edges
// (max finite, overflow, subnormals) are right, and a million random floats agree with an
// independent reference that rounds through double arithmetic instead of bit tricks.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trit/base.h"

static uint32_t bits(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float from_bits(uint32_t u) {
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }
static bool bf16_is_nan(uint16_t h) { return (h & 0x7f80) == 0x7f80 && (h & 0x7f); }

static void test_bf16_exhaustive_round_trip(void **state) {
    (void)state;
    for (uint32_t p = 0; p < 65536; p++) {
        uint16_t h = (uint16_t)p;
        float f = trit_bf16_to_f32(h);
        uint16_t back = trit_f32_to_bf16(f);
        if (bf16_is_nan(h)) {
            assert_true(isnan(f));
            assert_true(bf16_is_nan(back));
            assert_int_equal(back & 0x8000, h & 0x8000); // sign kept
            assert_true(back & 0x0040);                  // quiet
            assert_true(bits(f) & 0x00400000u);
        } else {
            assert_int_equal(back, h);
            assert_int_equal(bits(f), (uint32_t)h << 16); // exact widening
        }
    }
}

static void test_f16_exhaustive_round_trip(void **state) {
    (void)state;
    for (uint32_t p = 0; p < 65536; p++) {
        uint16_t h = (uint16_t)p;
        float f = trit_f16_to_f32(h);
        uint16_t back = trit_f32_to_f16(f);
        if (f16_is_nan(h)) {
            assert_true(isnan(f));
            assert_true(f16_is_nan(back));
            assert_int_equal(back & 0x8000, h & 0x8000);
            assert_true(back & 0x0200);
            assert_true(bits(f) & 0x00400000u);
            continue;
        }
        assert_int_equal(back, h);
        // The value itself, from the definition of the format.
        int e = (h >> 10) & 0x1f, m = h & 0x3ff;
        double want = e == 0x1f ? INFINITY : e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
        if (h & 0x8000) want = -want;
        assert_true((double)f == want);
        assert_int_equal(signbit(f) != 0, (h & 0x8000) != 0);
    }
    // The row converters (F16C where the CPU has it) give the scalar ones' bits, NaNs included,
    // over every pattern and over rows whose length is not a multiple of the vector width.
    static uint16_t all[65536], back[65536];
    static float wide[65536];
    for (uint32_t p = 0; p < 65536; p++) all[p] = (uint16_t)p;
    trit_f16_to_f32_n(wide, all, 65536);
    trit_f32_to_f16_n(back, wide, 65531);
    for (uint32_t p = 0; p < 65536; p++) {
        assert_int_equal(bits(wide[p]), bits(trit_f16_to_f32(all[p])));
        if (p < 65531) assert_int_equal(back[p], trit_f32_to_f16(wide[p]));
    }
}

// The bf16 row converters (AVX-512 or AVX2 where the CPU has it) give the scalar ones' bits: every bf16
// pattern widened, and f32 patterns narrowed: every exponent with the dropped half at each
// rounding case (below, at and above the tie, kept lsb 0 and 1), NaNs with payloads only in the
// dropped bits, and a million random patterns, in rows not a multiple of the vector width.
static void test_bf16_rows_match_scalar(void **state) {
    (void)state;
    static uint16_t all[65536];
    static float wide[65536];
    for (uint32_t p = 0; p < 65536; p++) all[p] = (uint16_t)p;
    trit_bf16_to_f32_n(wide, all, 65533);
    for (uint32_t p = 0; p < 65533; p++) assert_int_equal(bits(wide[p]), bits(trit_bf16_to_f32(all[p])));
    enum { N = 1 << 20 };
    float *x = malloc(sizeof(float) * N);
    uint16_t *got = malloc(sizeof(uint16_t) * N);
    assert_non_null(x), assert_non_null(got);
    const uint32_t low[6] = {0x0000, 0x7fff, 0x8000, 0x8001, 0xffff, 0x0001};
    int64_t n = 0;
    for (uint32_t hi = 0; hi < 65536; hi += 7)
        for (int j = 0; j < 6; j++) x[n++] = from_bits((hi << 16) | low[j]);
    while (n < N) x[n] = from_bits(trit_rng_u32(11, 0, (uint64_t)n)), n++;
    trit_f32_to_bf16_n(got, x, N - 3);
    for (int64_t i = 0; i < N - 3; i++)
        if (got[i] != trit_f32_to_bf16(x[i]))
            fail_msg("f32 %08x: row %04x, scalar %04x", bits(x[i]), got[i], trit_f32_to_bf16(x[i]));
    free(x), free(got);
}

static void test_bf16_ties_and_edges(void **state) {
    (void)state;
    // bf16 has 7 fraction bits: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
    assert_int_equal(trit_f32_to_bf16(1.0f + 0x1p-8f), 0x3f80);          // tie -> even (1)
    assert_int_equal(trit_f32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82);      // tie -> even (up)
    assert_int_equal(trit_f32_to_bf16(1.0f + 0x1p-8f + 0x1p-23f), 0x3f81); // above tie -> up
    assert_int_equal(trit_f32_to_bf16(-(1.0f + 3 * 0x1p-8f)), 0xbf82);
    assert_int_equal(trit_f32_to_bf16(INFINITY), 0x7f80);
    assert_int_equal(trit_f32_to_bf16(-INFINITY), 0xff80);
    assert_int_equal(trit_f32_to_bf16(-0.0f), 0x8000);
    assert_int_equal(trit_f32_to_bf16(FLT_MAX), 0x7f80); // rounds past max
    assert_int_equal(trit_f32_to_bf16(from_bits(0x7f7f7fffu)), 0x7f7f);   // max bf16 stays
    // Signalling NaN whose payload lives only in the dropped bits must not become Inf.
    assert_int_equal(trit_f32_to_bf16(from_bits(0x7f800001u)), 0x7fc0);
    assert_int_equal(trit_f32_to_bf16(from_bits(0xff800001u)), 0xffc0);
    assert_true(isnan(trit_bf16_to_f32(0x7f81)));
    // f32 subnormals round like everything else.
    assert_int_equal(trit_f32_to_bf16(from_bits(0x00008000u)), 0x0000);
    assert_int_equal(trit_f32_to_bf16(from_bits(0x00018000u)), 0x0002);
}

static void test_f16_ties_and_edges(void **state) {
    (void)state;
    // f16 has 10 fraction bits: 1 + 2^-11 is halfway.
    assert_int_equal(trit_f32_to_f16(1.0f + 0x1p-11f), 0x3c00);
    assert_int_equal(trit_f32_to_f16(1.0f + 3 * 0x1p-11f), 0x3c02);
    assert_int_equal(trit_f32_to_f16(65504.0f), 0x7bff);      // max finite
    assert_int_equal(trit_f32_to_f16(65519.996f), 0x7bff);    // just under the tie
    assert_int_equal(trit_f32_to_f16(65520.0f), 0x7c00);      // tie with 65536 -> Inf
    assert_int_equal(trit_f32_to_f16(-1e6f), 0xfc00);
    assert_int_equal(trit_f32_to_f16(INFINITY), 0x7c00);
    assert_true(trit_f16_to_f32(0x7bff) == 65504.0f);
    assert_true(isinf(trit_f16_to_f32(0xfc00)) && trit_f16_to_f32(0xfc00) < 0);
    // Subnormals: the smallest is 2^-24; 2^-25 is a tie with zero (-> 0); just above -> 2^-24.
    assert_true(trit_f16_to_f32(0x0001) == 0x1p-24f);
    assert_true(trit_f16_to_f32(0x03ff) == 1023 * 0x1p-24f);
    assert_int_equal(trit_f32_to_f16(0x1p-24f), 0x0001);
    assert_int_equal(trit_f32_to_f16(0x1p-25f), 0x0000);
    assert_int_equal(trit_f32_to_f16(0x1p-25f * 1.0000001f), 0x0001);
    assert_int_equal(trit_f32_to_f16(3 * 0x1p-25f), 0x0002); // 1.5 units: tie -> even (2)
    assert_int_equal(trit_f32_to_f16(5 * 0x1p-25f), 0x0002); // 2.5 units: tie -> even (2)
    assert_int_equal(trit_f32_to_f16(-0x1p-26f), 0x8000);
    assert_int_equal(trit_f32_to_f16(0x1p-14f * (1.0f - 0x1p-12f)), 0x0400); // rounds to normal
    assert_int_equal(trit_f32_to_f16(0x1p-14f), 0x0400);
    assert_int_equal(trit_f32_to_f16(from_bits(0x7f800001u)), 0x7e00);
    assert_int_equal(trit_f32_to_f16(from_bits(0xff802000u)), 0xfe01);
}

// ---- reference: round through double, by value rather than by bits -------------------------

// Rounds x (finite, |x| in the format's range) to a multiple of `ulp`, ties to even.
static double round_to_ulp(double x, double ulp) {
    double q = x / ulp; // exact: ulp is a power of two and the quotient has < 53 bits
    double r = floor(q);
    double d = q - r;
    if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0.0)) r += 1.0;
    return r * ulp;
}

// frac_bits fraction bits, min_exp the smallest normal exponent, max the largest finite value.
static double ref_round(float xf, int frac_bits, int min_exp, double max) {
    double x = xf, a = fabs(x);
    if (isnan(x) || isinf(x) || a == 0.0) return x;
    int e;
    frexp(a, &e); // a = f * 2^e, f in [0.5, 1)
    e -= 1;
    if (e < min_exp) e = min_exp;
    double r = round_to_ulp(a, ldexp(1.0, e - frac_bits));
    if (r > max) r = INFINITY;
    return copysign(r, x);
}

static uint64_t lcg = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg >> 32);
}

static void test_random_against_reference(void **state) {
    (void)state;
    enum { N = 1000000 };
    const double bf16_max = ldexp(255.0 / 128.0, 127), f16_max = 65504.0;
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint16_t *h = malloc(N * sizeof *h);
    assert_true(x && y && h);
    for (int i = 0; i < N; i++) {
        uint32_t u = next_u32();
        // Half arbitrary bit patterns, half values in f16's range (exponent -30..16).
        if (i & 1) u = (u & 0x807fffffu) | ((uint32_t)(97 + next_u32() % 47) << 23);
        x[i] = from_bits(u);
    }
    trit_f32_to_bf16_n(h, x, N);
    trit_bf16_to_f32_n(y, h, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(h[i], trit_f32_to_bf16(x[i]));
        if (isnan(x[i])) {
            assert_true(isnan(y[i]));
            continue;
        }
        double want = ref_round(x[i], 7, -126, bf16_max);
        if ((double)y[i] != want) fail_msg("bf16(%a) = %a, want %a", x[i], y[i], want);
    }
    trit_f32_to_f16_n(h, x, N);
    trit_f16_to_f32_n(y, h, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(h[i], trit_f32_to_f16(x[i]));
        if (isnan(x[i])) {
            assert_true(isnan(y[i]));
            continue;
        }
        double want = ref_round(x[i], 10, -14, f16_max);
        if ((double)y[i] != want) fail_msg("f16(%a) = %a, want %a", x[i], y[i], want);
        assert_int_equal(signbit(y[i]) != 0, signbit(x[i]) != 0);
    }
    free(x);
    free(y);
    free(h);
}

// The seed notes' point: 1 + 0.00097656 (2^-10) is exactly 1 in bf16 (8 significant bits),
// while an fp32 accumulator keeps it; summing 1024 such addends in bf16 goes nowhere.
static void test_small_addend_vanishes_in_bf16(void **state) {
    (void)state;
    const float tiny = 0.00097656f;
    assert_int_equal(trit_f32_to_bf16(1.0f + tiny), trit_f32_to_bf16(1.0f));
    assert_true(1.0f + tiny != 1.0f);
    uint16_t acc16 = trit_f32_to_bf16(1.0f);
    float acc32 = 1.0f;
    for (int i = 0; i < 1024; i++) {
        acc16 = trit_f32_to_bf16(trit_bf16_to_f32(acc16) + tiny);
        acc32 += tiny;
    }
    assert_true(trit_bf16_to_f32(acc16) == 1.0f);
    assert_true(fabsf(acc32 - 2.0f) < 1e-3f);
}

// Stochastic rounding is unbiased: the mean of 1e6 roundings of a value between two
// neighbours is within 3 sigma of it (sigma = gap * sqrt(p (1 - p) / n)); NaN and Inf are kept.
static double sr_mean(bool f16, float x, int n, uint64_t seed) {
    uint16_t *out = malloc(sizeof(uint16_t) * (size_t)n);
    float *in = malloc(sizeof(float) * (size_t)n);
    for (int i = 0; i < n; i++) in[i] = x;
    if (f16) trit_f32_to_f16_sr_n(out, in, n, seed, 3, 0);
    else trit_f32_to_bf16_sr_n(out, in, n, seed, 3, 0);
    double sum = 0;
    for (int i = 0; i < n; i++) sum += f16 ? trit_f16_to_f32(out[i]) : trit_bf16_to_f32(out[i]);
    free(out);
    free(in);
    return sum / n;
}

static void check_unbiased(bool f16, float x, float lo, float hi) {
    const int n = 1000000;
    const double p = ((double)x - lo) / ((double)hi - lo), sigma = ((double)hi - lo) * sqrt(p * (1 - p) / n);
    const double mean = sr_mean(f16, x, n, 11);
    printf("  %s SR of %.9g: mean %.9g, |error| %.2f sigma\n", f16 ? "f16" : "bf16", x, mean, fabs(mean - x) / sigma);
    assert_true(fabs(mean - x) <= 3 * sigma);
}

static void test_stochastic_rounding(void **state) {
    (void)state;
    check_unbiased(false, 1.0f + 0.3f * 0x1p-7f, 1.0f, 1.0f + 0x1p-7f);
    check_unbiased(false, -3.0f - 0.71f * 0x1p-6f, -3.0f - 0x1p-6f, -3.0f);
    check_unbiased(true, 1.0f + 0.25f * 0x1p-10f, 1.0f, 1.0f + 0x1p-10f);
    check_unbiased(true, 3.3f * 0x1p-24f, 3.0f * 0x1p-24f, 4.0f * 0x1p-24f);  // f16 subnormals
    assert_true(isnan(trit_bf16_to_f32(trit_f32_to_bf16_sr(NAN, 0xffffffffu))));
    assert_true(isinf(trit_bf16_to_f32(trit_f32_to_bf16_sr(INFINITY, 0xffffffffu))));
    assert_true(isnan(trit_f16_to_f32(trit_f32_to_f16_sr(NAN, 0x12345678u))));
    assert_true(trit_f16_to_f32(trit_f32_to_f16_sr(-INFINITY, 5)) == -INFINITY);
    assert_true(trit_f16_to_f32(trit_f32_to_f16_sr(65510.0f, 0xffffffffu)) == 65504.0f);  // never into Inf
    // Exact values never move, whatever the bits.
    assert_int_equal(trit_f32_to_bf16_sr(1.5f, 0xffffffffu), trit_f32_to_bf16(1.5f));
    assert_int_equal(trit_f32_to_f16_sr(0.75f, 0xffffffffu), trit_f32_to_f16(0.75f));
    // A row's bits depend on (seed, stream, index) only: converting in two pieces gives the same.
    float in[37];
    uint16_t a[37], b[37];
    for (int i = 0; i < 37; i++) in[i] = 1.0f + (float)i * 0.001f;
    trit_f32_to_bf16_sr_n(a, in, 37, 5, 9, 100);
    trit_f32_to_bf16_sr_n(b, in, 13, 5, 9, 100);
    trit_f32_to_bf16_sr_n(b + 13, in + 13, 24, 5, 9, 113);
    assert_memory_equal(a, b, sizeof a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_exhaustive_round_trip),
        cmocka_unit_test(test_f16_exhaustive_round_trip),
        cmocka_unit_test(test_bf16_ties_and_edges),
        cmocka_unit_test(test_bf16_rows_match_scalar),
        cmocka_unit_test(test_f16_ties_and_edges),
        cmocka_unit_test(test_random_against_reference),
        cmocka_unit_test(test_small_addend_vanishes_in_bf16),
        cmocka_unit_test(test_stochastic_rounding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
