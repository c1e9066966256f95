// FP8 (e4m3fn, e5m2) and NF4: known encodings, every code round-trips, saturation, NaN, ties
// to even against a brute-force nearest search over the 256 values, and stochastic rounding
// that is unbiased (also far below the smallest subnormal).
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "trit/base.h"

static void test_fp8_known_values(void **state) {
    (void)state;
    const trit_fp8_kind E4 = TRIT_FP8_E4M3, E5 = TRIT_FP8_E5M2;
    assert_int_equal(trit_f32_to_fp8(1.0f, E4), 0x38);
    assert_int_equal(trit_f32_to_fp8(-1.0f, E4), 0xb8);
    assert_int_equal(trit_f32_to_fp8(0.0625f, E4), 0x18);
    assert_int_equal(trit_f32_to_fp8(448.0f, E4), 0x7e);
    assert_int_equal(trit_f32_to_fp8(464.0f, E4), 0x7e);       // would round to 480 = the NaN pattern
    assert_int_equal(trit_f32_to_fp8(1e9f, E4), 0x7e);         // saturates
    assert_int_equal(trit_f32_to_fp8(-INFINITY, E4), 0xfe);
    assert_int_equal(trit_f32_to_fp8(NAN, E4) & 0x7f, 0x7f);
    assert_int_equal(trit_f32_to_fp8(ldexpf(1, -9), E4), 0x01);  // smallest subnormal
    assert_int_equal(trit_f32_to_fp8(ldexpf(1, -10), E4), 0x00); // tie to even (0)
    assert_int_equal(trit_f32_to_fp8(ldexpf(3, -10), E4), 0x02); // tie 1.5 -> 2
    assert_true(fabsf(trit_fp8_to_f32(0x7e, E4) - 448.0f) == 0);
    assert_true(isnan(trit_fp8_to_f32(0x7f, E4)) && isnan(trit_fp8_to_f32(0xff, E4)));
    assert_true(trit_fp8_max(E4) == 448.0f && trit_fp8_max(E5) == 57344.0f);

    assert_int_equal(trit_f32_to_fp8(1.0f, E5), 0x3c);
    assert_int_equal(trit_f32_to_fp8(57344.0f, E5), 0x7b);
    assert_int_equal(trit_f32_to_fp8(INFINITY, E5), 0x7b);     // saturating, not Inf
    assert_int_equal(trit_f32_to_fp8(ldexpf(1, -16), E5), 0x01);
    assert_true(isinf(trit_fp8_to_f32(0x7c, E5)) && isnan(trit_fp8_to_f32(0x7d, E5)));
    assert_true(trit_fp8_to_f32(0x80, E4) == 0 && signbit(trit_fp8_to_f32(0x80, E4)));
}

static bool is_special(uint8_t b, trit_fp8_kind k) { return !isfinite(trit_fp8_to_f32(b, k)); }

static void test_fp8_every_code_round_trips(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++)
        for (int b = 0; b < 256; b++) {
            if (is_special((uint8_t)b, (trit_fp8_kind)k)) continue;
            const float v = trit_fp8_to_f32((uint8_t)b, (trit_fp8_kind)k);
            assert_int_equal(trit_f32_to_fp8(v, (trit_fp8_kind)k), b);
            assert_int_equal(trit_f32_to_fp8_sr(v, (trit_fp8_kind)k, 0.999f), b);  // exact values never move
        }
}

// Nearest finite fp8 value by search; ties go to the even code.
static uint8_t brute_nearest(float x, trit_fp8_kind k) {
    int best = -1;
    double bd = INFINITY;
    for (int b = 0; b < 256; b++) {
        if (is_special((uint8_t)b, k)) continue;
        const double d = fabs((double)trit_fp8_to_f32((uint8_t)b, k) - x);
        if (d < bd || (d == bd && (b & 1) == 0 && (best & 1))) bd = d, best = b;
    }
    return (uint8_t)best;
}

static void test_fp8_matches_brute_force(void **state) {
    (void)state;
    srand(5);
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 20000; i++) {
            const float mag = ldexpf((float)rand() / (float)RAND_MAX, rand() % 40 - 24);
            const float x = rand() & 1 ? -mag : mag;
            if (fabsf(x) > trit_fp8_max((trit_fp8_kind)k)) continue;
            const uint8_t got = trit_f32_to_fp8(x, (trit_fp8_kind)k), want = brute_nearest(x, (trit_fp8_kind)k);
            // +-0 are both nearest to tiny values; compare values
            if (got != want)
                assert_true(trit_fp8_to_f32(got, (trit_fp8_kind)k) == trit_fp8_to_f32(want, (trit_fp8_kind)k));
        }
}

// Mean of n stochastic roundings of x, within 3 sigma of x (sigma of a two-point draw).
static void check_sr_mean(float x, trit_fp8_kind k, int n) {
    double sum = 0, lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        const float y = trit_fp8_to_f32(trit_f32_to_fp8_sr(x, k, trit_rng_uniform(11, 3, (uint64_t)i)), k);
        sum += y, lo = fmin(lo, y), hi = fmax(hi, y);
    }
    const double p = (x - lo) / (hi - lo > 0 ? hi - lo : 1), sigma = (hi - lo) * sqrt(p * (1 - p) / n);
    assert_true(fabs(sum / n - x) <= 3 * sigma + 1e-12);
    assert_true(hi > lo);  // both neighbours were drawn
}

static void test_fp8_stochastic_unbiased(void **state) {
    (void)state;
    check_sr_mean(1.1f, TRIT_FP8_E4M3, 100000);
    check_sr_mean(-3.3f, TRIT_FP8_E5M2, 100000);
    check_sr_mean(ldexpf(1, -12), TRIT_FP8_E4M3, 100000);  // 1/8 of the smallest subnormal
    check_sr_mean(ldexpf(1, -19), TRIT_FP8_E5M2, 100000);
}

static void test_nf4_codebook(void **state) {
    (void)state;
    for (int i = 0; i < 16; i++) assert_int_equal(trit_nf4_encode(trit_nf4_values[i], -1), i);
    assert_int_equal(trit_nf4_encode(0.0f, -1), 7);
    assert_int_equal(trit_nf4_encode(NAN, -1), 7);
    assert_int_equal(trit_nf4_encode(5.0f, -1), 15);
    assert_int_equal(trit_nf4_encode(-5.0f, -1), 0);
    assert_int_equal(trit_nf4_encode(0.86f, -1), 14);  // midpoint of 0.7230 and 1.0 is 0.8615
    assert_int_equal(trit_nf4_encode(0.87f, -1), 15);
    double sum = 0;
    const int n = 100000;
    for (int i = 0; i < n; i++) sum += trit_nf4_values[trit_nf4_encode(0.3f, trit_rng_uniform(2, 9, (uint64_t)i))];
    // neighbours 0.2461 and 0.3379: sigma of the mean about 1.4e-4
    assert_true(fabs(sum / n - 0.3) < 5e-4);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_known_values),
        cmocka_unit_test(test_fp8_every_code_round_trips),
        cmocka_unit_test(test_fp8_matches_brute_force),
        cmocka_unit_test(test_fp8_stochastic_unbiased),
        cmocka_unit_test(test_nf4_codebook),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
