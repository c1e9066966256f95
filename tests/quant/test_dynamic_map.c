// bitsandbytes' dynamic 8-bit maps: trit's maps equal the 256 values bitsandbytes builds
// (fixture dynamic_map.bin, tests/reference/make_dynamic_map_fixtures.py), bit for bit; the
// code chosen for a value is its nearest map value, exactly (checked against a search of all 256
// around every midpoint, ties to the lower code); block-wise round trips stay within half the local gap of the map times
// the block's absmax; zero, NaN and short blocks; codes independent of the thread count.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trit/quant.h"
#include "tritfix.h"

enum { M = TRIT_DYNAMIC_MAP_SIZE };

static void test_maps_match_bitsandbytes(void **state) {
    (void)state;
    tf_file *f = tf_open("dynamic_map.bin");
    for (int sgn = 0; sgn < 2; sgn++) {
        const tf_record *r = tf_get(f, sgn ? "dynamic_signed" : "dynamic_unsigned");
        assert_int_equal(r->n, M);
        float map[M];
        trit_quant_dynamic_map(sgn, map);
        for (int i = 0; i < M; i++)
            if (map[i] != (float)r->data[i] || (double)map[i] != r->data[i])
                fail_msg("%s map[%d] = %.9g (%a), bitsandbytes has %.9g", sgn ? "signed" : "unsigned", i,
                         (double)map[i], (double)map[i], r->data[i]);
    }
    tf_close(f);
}

static void test_map_shape(void **state) {
    (void)state;
    float s[M], u[M];
    trit_quant_dynamic_map(true, s);
    trit_quant_dynamic_map(false, u);
    for (int i = 1; i < M; i++) {
        assert_true(s[i] > s[i - 1]);
        assert_true(u[i] > u[i - 1]);
    }
    assert_true(s[127] == 0.0f && s[255] == 1.0f && u[0] == 0.0f && u[255] == 1.0f);
    for (int k = 1; k < 128; k++) assert_true(s[127 - k] == -s[127 + k]);  // symmetric but for 1
    // The smallest magnitudes: 10^-6 times the midpoint of linspace(0.1, 1, 2) (signed) or of its
    // first pair of three (unsigned).
    assert_float_equal(s[128], 0.55e-6, 1e-12);
    assert_float_equal(u[1], 0.325e-6, 1e-12);
    assert_float_equal(s[0], -(0.9859375f + 1.0f) / 2, 1e-7);  // the signed map stops short of -1
}

// The code a search of all 256 values gives: smallest distance (exact in double for the
// neighbours that compete), the lower code on a tie.
static int brute_nearest(const float *map, float v) {
    int best = 0;
    for (int c = 1; c < M; c++)
        if (fabs((double)map[c] - v) < fabs((double)map[best] - v)) best = c;
    return best;
}

static void test_nearest(void **state) {
    (void)state;
    for (int sgn = 0; sgn < 2; sgn++) {
        trit_dynamic_code code;
        trit_quant_dynamic_code_init(&code, sgn);
        assert_true(code.has_lut);  // every table bucket holds at most one threshold
        const float *map = code.values, lo = sgn ? -1.0f : 0.0f;
        for (int i = 0; i < 200000; i++) {
            // Uniform values, values spread over decades, and the floats around each midpoint.
            float v;
            const float r = trit_rng_uniform(11, (uint64_t)sgn, (uint64_t)i);
            const int k = i % (M - 1);
            if (i % 4 == 0) v = lo + (1.0f - lo) * r;
            else if (i % 4 == 1) v = (sgn && (i & 8) ? -1.0f : 1.0f) * powf(10.0f, -8.0f * r);
            else v = nextafterf(code.above[k], i % 4 == 2 ? -INFINITY : INFINITY);
            const int want = brute_nearest(map, v), got = trit_quant_dynamic_nearest(&code, v);
            if (got != want) fail_msg("%s map: v = %a gives code %d, nearest is %d", sgn ? "signed" : "unsigned",
                                      (double)v, got, want);
        }
        for (int k = 0; k < M - 1; k++) {
            // The threshold itself goes up, the float below it down; an exact midpoint stays down.
            assert_int_equal(trit_quant_dynamic_nearest(&code, code.above[k]), k + 1);
            assert_int_equal(trit_quant_dynamic_nearest(&code, nextafterf(code.above[k], -INFINITY)), k);
            const double mid = ((double)map[k] + map[k + 1]) / 2;
            if ((double)(float)mid == mid) assert_int_equal(trit_quant_dynamic_nearest(&code, (float)mid), k);
        }
        assert_int_equal(trit_quant_dynamic_nearest(&code, 1.0f), 255);
        assert_int_equal(trit_quant_dynamic_nearest(&code, 0.0f), sgn ? 127 : 0);
        assert_int_equal(trit_quant_dynamic_nearest(&code, -1.0f), 0);
        assert_int_equal(trit_quant_dynamic_nearest(&code, 2.0f), 255);  // out of range: the nearest end
    }
}

// Per element: |decoded - x| at most half the gap between the map values around x / absmax,
// times absmax (plus the rounding of the division and of the decode). Over a block: at most
// 0.00704 absmax signed (the widest gap, 0.9 / 64, and the short end at -0.99297) and 0.00352
// unsigned (0.9 / 128 between 0.9 and 1).
static void check_round_trip(bool sgn, const float *x, int64_t n, int64_t block) {
    trit_dynamic_code code;
    trit_quant_dynamic_code_init(&code, sgn);
    const float *map = code.values;
    const int64_t nb = (n + block - 1) / block;
    uint8_t *codes = malloc((size_t)n);
    float *absmax = malloc(sizeof(float) * (size_t)nb), *y = malloc(sizeof(float) * (size_t)n);
    assert_non_null(codes);
    assert_non_null(absmax);
    assert_non_null(y);
    assert_int_equal(trit_quant_dynamic_encode(&code, x, n, block, codes, absmax), TRIT_OK);
    assert_int_equal(trit_quant_dynamic_decode(&code, codes, absmax, n, block, y), TRIT_OK);
    const double worst = sgn ? 0.00704 : 0.00352;
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = b * block, len = n - lo < block ? n - lo : block;
        float mx = 0;
        for (int64_t i = lo; i < lo + len; i++) mx = fmaxf(mx, fabsf(x[i]));
        assert_true(absmax[b] == mx);
        for (int64_t i = lo; i < lo + len; i++) {
            const double v = (double)x[i] / mx, err = fabs((double)y[i] - x[i]);
            int c = 0;
            while (c < M - 1 && map[c + 1] <= v) c++;
            const double gap = c < M - 1 && v >= map[0] ? map[c + 1] - map[c] : fabs(v - map[0]) * 2;
            if (err > (gap / 2) * mx * (1 + 1e-6) + 1e-7 * fabs(x[i]) + 1e-30)
                fail_msg("block %lld element %lld: x = %.9g decodes to %.9g (error %.3g, half gap %.3g x absmax %.3g)",
                         (long long)b, (long long)i, (double)x[i], (double)y[i], err, gap / 2, (double)mx);
            assert_true(err <= worst * mx);
            if (fabsf(x[i]) == mx && x[i] > 0) assert_true(y[i] == x[i]);  // the max is stored exactly
            if (x[i] == 0) assert_true(y[i] == 0);
            if (!sgn) assert_true(y[i] >= 0);
        }
    }
    free(codes);
    free(absmax);
    free(y);
}

static void test_round_trip_bounds(void **state) {
    (void)state;
    enum { N = 256 * 9 + 37 };  // a short last block
    float *x = malloc(sizeof(float) * N);
    assert_non_null(x);
    for (int sgn = 0; sgn < 2; sgn++) {
        for (int kind = 0; kind < 3; kind++) {
            for (int64_t i = 0; i < N; i++) {
                const float r = trit_rng_uniform(3, (uint64_t)(sgn * 3 + kind), (uint64_t)i);
                const float mag = kind == 0 ? r : kind == 1 ? powf(10.0f, -7.0f * r) : 1e-3f * r * r;
                const float sign = sgn && (trit_rng_u32(4, (uint64_t)kind, (uint64_t)i) & 1) ? -1.0f : 1.0f;
                x[i] = (i % 97 == 5 ? 0.0f : sign * mag * (kind == 2 ? 1e-20f : 1.0f));
            }
            check_round_trip(sgn, x, N, 256);
        }
        check_round_trip(sgn, x, N, 64);  // other block sizes work the same
    }
    free(x);
}

static void test_edges(void **state) {
    (void)state;
    trit_dynamic_code sc, uc, *s = &sc, *u = &uc;
    float zeros[300] = {0}, y[300];
    uint8_t codes[300];
    float absmax[2];
    trit_quant_dynamic_code_init(s, true);
    trit_quant_dynamic_code_init(u, false);
    // All zeros: absmax 0, the code of 0, decodes to +0.
    assert_int_equal(trit_quant_dynamic_encode(s, zeros, 300, 256, codes, absmax), TRIT_OK);
    assert_true(absmax[0] == 0.0f && absmax[1] == 0.0f);
    for (int i = 0; i < 300; i++) assert_int_equal(codes[i], 127);
    assert_int_equal(trit_quant_dynamic_decode(s, codes, absmax, 300, 256, y), TRIT_OK);
    for (int i = 0; i < 300; i++) assert_true(y[i] == 0.0f && !signbit(y[i]));
    // A NaN makes its block NaN, the other block is untouched.
    float x[300];
    for (int i = 0; i < 300; i++) x[i] = (float)(i + 1) / 300;
    x[7] = NAN;
    assert_int_equal(trit_quant_dynamic_encode(u, x, 300, 256, codes, absmax), TRIT_OK);
    assert_true(isnan(absmax[0]));
    assert_true(absmax[1] == 1.0f);
    assert_int_equal(trit_quant_dynamic_decode(u, codes, absmax, 300, 256, y), TRIT_OK);
    assert_true(isnan(y[0]) && isnan(y[255]));
    assert_true(y[299] == 1.0f);
    // An Inf too.
    x[7] = INFINITY;
    assert_int_equal(trit_quant_dynamic_encode(u, x, 300, 256, codes, absmax), TRIT_OK);
    assert_int_equal(trit_quant_dynamic_decode(u, codes, absmax, 300, 256, y), TRIT_OK);
    assert_true(!isfinite(y[3]));
    // Bad arguments.
    assert_int_equal(trit_quant_dynamic_encode(u, x, 300, 0, codes, absmax), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "block"));
    assert_int_equal(trit_quant_dynamic_decode(u, codes, NULL, 300, 256, y), TRIT_ERR_INVALID);
    assert_int_equal(trit_quant_dynamic_encode(u, NULL, 0, 256, NULL, NULL), TRIT_OK);  // nothing to do
}

static void test_thread_count_independent(void **state) {
    (void)state;
    enum { N = 256 * 300 + 11 };
    trit_dynamic_code map;
    float *x = malloc(sizeof(float) * N), a1[N / 256 + 1], a2[N / 256 + 1];
    uint8_t *c1 = malloc(N), *c2 = malloc(N);
    assert_non_null(x);
    assert_non_null(c1);
    assert_non_null(c2);
    trit_quant_dynamic_code_init(&map, true);
    trit_rng_fill_normal(x, N, 9, 0, 0, 0.0f, 1.0f);
    trit_threads_set(1);
    assert_int_equal(trit_quant_dynamic_encode(&map, x, N, 256, c1, a1), TRIT_OK);
    trit_threads_set(2);
    assert_int_equal(trit_quant_dynamic_encode(&map, x, N, 256, c2, a2), TRIT_OK);
    assert_memory_equal(c1, c2, N);
    assert_memory_equal(a1, a2, sizeof a1);
    free(x);
    free(c1);
    free(c2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_match_bitsandbytes),
        cmocka_unit_test(test_map_shape),
        cmocka_unit_test(test_nearest),
        cmocka_unit_test(test_round_trip_bounds),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_thread_count_independent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
