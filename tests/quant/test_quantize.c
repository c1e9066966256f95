// Quantization codecs: known codes and packing, round-trip error bounds per format, the all-zero
// group, NaN/Inf reported, stochastic rounding unbiased far below the resolution, NF4 beating
// int4 on Gaussian weights, double quantization, thread-count independence, tensors and views.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trit/quant.h"

static trit_quant_spec spec(trit_dtype dt, int64_t group, trit_quant_scheme scheme) {
    trit_quant_spec s = trit_quant_spec_default(dt);
    s.group_size = group;
    s.scheme = scheme;
    return s;
}

// Encodes x, decodes into y; returns the info (caller frees).
static trit_quant_info *round_trip(const trit_quant_spec *s, const float *x, float *y, int64_t n, int64_t row,
                                   uint8_t *codes) {
    trit_quant_info *q = NULL;
    assert_int_equal(trit_quant_encode(s, x, n, row, codes, &q), TRIT_OK);
    assert_int_equal(trit_quant_decode(s->dtype, codes, n, q, y), TRIT_OK);
    return q;
}

static void test_int_known_codes_and_packing(void **state) {
    (void)state;
    const float x[4] = {7, -7, 1, 0};
    uint8_t c[4] = {0};
    float y[4];
    trit_quant_spec s = spec(TRIT_QINT4, TRIT_QGROUP_TENSOR, TRIT_QSCHEME_SYMMETRIC);
    trit_quant_info *q = round_trip(&s, x, y, 4, 4, c);
    assert_true(q->scales[0] == 1.0f);
    assert_int_equal(c[0], 0x1f);  // 7+8 = 15 low, -7+8 = 1 high
    assert_int_equal(c[1], 0x89);  // 1+8 = 9, 0+8 = 8
    for (int i = 0; i < 4; i++) assert_true(y[i] == x[i]);
    trit_quant_info_free(q);

    s.dtype = TRIT_QINT2;  // x = {1, -1, 0.4, 0} with scale 1: codes 1, -1, 0, 0 stored +2
    const float x2[4] = {1, -1, 0.4f, 0};
    q = round_trip(&s, x2, y, 4, 4, c);
    assert_int_equal(c[0], 3 | 1 << 2 | 2 << 4 | 2 << 6);
    assert_true(y[0] == 1 && y[1] == -1 && y[2] == 0 && y[3] == 0);
    trit_quant_info_free(q);

    s.dtype = TRIT_QINT8;
    const float x3[4] = {-127, 63.4f, 63.6f, 127};
    q = round_trip(&s, x3, y, 4, 4, c);
    assert_int_equal((int8_t)c[0], -127);
    assert_int_equal((int8_t)c[1], 63);
    assert_int_equal((int8_t)c[2], 64);
    trit_quant_info_free(q);
    assert_int_equal(trit_dtype_nbytes(TRIT_QINT4, 256), 128);
    assert_int_equal(trit_dtype_nbytes(TRIT_QINT2, 256), 64);
    assert_int_equal(trit_dtype_nbytes(TRIT_NF4, 64), 32);
}

// BitNet b1.58 ternary: scale = mean |x|, codes round(x / scale) clipped to [-1, 1]; 2-bit codes
// c + 1 four per byte, base-3 blocks of 64 in 13 bytes (digit i of byte j is element 5j + i).
static void test_ternary_codes_and_packing(void **state) {
    (void)state;
    float x[128], y[128];
    uint8_t c[128];
    for (int i = 0; i < 128; i++) x[i] = i % 3 == 0 ? 0.0f : i % 3 == 1 ? 0.3f : -0.3f;
    x[7] = 2.0f;   // clipped to +scale
    x[9] = -0.05f; // rounds to 0
    double sum = 0;
    for (int i = 0; i < 128; i++) sum += fabsf(x[i]);
    const float scale = (float)(sum / 128);
    trit_quant_spec s = trit_quant_spec_default(TRIT_TERNARY);
    assert_int_equal(s.group_size, TRIT_QGROUP_TENSOR);
    trit_quant_info *q = round_trip(&s, x, y, 128, 128, c);
    assert_true(q->scales[0] == scale);
    for (int i = 0; i < 128; i++) {
        const int want = x[i] / scale > 0.5f ? 1 : x[i] / scale < -0.5f ? -1 : 0;
        assert_true(y[i] == (float)want * scale);
        assert_int_equal((c[i / 4] >> (2 * (i % 4))) & 3, want + 1);
    }
    trit_quant_info_free(q);
    s.dtype = TRIT_TERNARY_B3;
    q = round_trip(&s, x, y, 128, 128, c);
    assert_int_equal(trit_dtype_nbytes(TRIT_TERNARY_B3, 128), 26);
    for (int i = 0; i < 128; i++) {
        const int want = x[i] / scale > 0.5f ? 1 : x[i] / scale < -0.5f ? -1 : 0;
        assert_true(y[i] == (float)want * scale);
        const int blk = i / 64, j = i % 64;
        static const int p3[5] = {1, 3, 9, 27, 81};
        assert_int_equal(c[blk * 13 + j / 5] / p3[j % 5] % 3, want + 1);
    }
    trit_quant_info_free(q);
    memset(x, 0, sizeof x);  // all zero: the scale clamps at 1e-5, every code 0
    q = round_trip(&s, x, y, 128, 128, c);
    assert_true(q->scales[0] == 1e-5f);
    for (int i = 0; i < 128; i++) assert_true(y[i] == 0.0f);
    trit_quant_info_free(q);
}

static void test_affine_keeps_zero_exact(void **state) {
    (void)state;
    float x[16], y[16];
    uint8_t c[16];
    for (int i = 0; i < 16; i++) x[i] = (float)i;  // [0, 15]: scale 1, zero point -8
    trit_quant_spec s = spec(TRIT_QINT4, TRIT_QGROUP_TENSOR, TRIT_QSCHEME_AFFINE);
    trit_quant_info *q = round_trip(&s, x, y, 16, 16, c);
    assert_true(q->scales[0] == 1.0f && q->zero_points[0] == -8.0f);
    for (int i = 0; i < 16; i++) assert_true(y[i] == x[i]);
    trit_quant_info_free(q);
    // Random positive-skewed data: zero decodes to exactly zero, error within half a step.
    float a[256], b[256];
    uint8_t ca[256];
    for (int i = 0; i < 256; i++) a[i] = i % 7 == 0 ? 0.0f : 0.3f + (float)rand() / (float)RAND_MAX;
    s.dtype = TRIT_QINT8;
    s.group_size = 64;
    q = round_trip(&s, a, b, 256, 256, ca);
    for (int i = 0; i < 256; i++) {
        if (a[i] == 0) assert_true(b[i] == 0.0f);
        assert_true(fabsf(a[i] - b[i]) <= 0.5f * q->scales[i / 64] * 1.0001f);
    }
    trit_quant_info_free(q);
}

// Max |x - y| / scale over per-channel rows, for each integer width and scheme.
static void test_int_error_bounds(void **state) {
    (void)state;
    enum { R = 6, K = 128, N = R * K };
    float x[N], y[N];
    uint8_t c[N];
    trit_rng_fill_normal(x, N, 3, 1, 0, 0.0f, 0.02f);
    const trit_dtype dts[3] = {TRIT_QINT8, TRIT_QINT4, TRIT_QINT2};
    const int64_t groups[3] = {TRIT_QGROUP_TENSOR, TRIT_QGROUP_CHANNEL, 32};
    for (int d = 0; d < 3; d++)
        for (int g = 0; g < 3; g++)
            for (int sc = 0; sc < 2; sc++) {
                trit_quant_spec s = spec(dts[d], groups[g], (trit_quant_scheme)sc);
                trit_quant_info *q = round_trip(&s, x, y, N, K, c);
                for (int64_t i = 0; i < N; i++)
                    assert_true(fabsf(x[i] - y[i]) <= 0.5f * q->scales[i / q->group_size] * 1.0001f + 1e-12f);
                trit_quant_info_free(q);
            }
}

static void test_fp8_and_nf4_error_bounds(void **state) {
    (void)state;
    enum { R = 4, K = 64, N = R * K };
    float x[N], y[N];
    uint8_t c[N];
    trit_rng_fill_normal(x, N, 8, 2, 0, 0.0f, 1.0f);
    for (int k = 0; k < 2; k++) {
        trit_quant_spec s = spec(k ? TRIT_F8_E5M2 : TRIT_F8_E4M3, TRIT_QGROUP_CHANNEL, TRIT_QSCHEME_SYMMETRIC);
        trit_quant_info *q = round_trip(&s, x, y, N, K, c);
        const float rel = k ? 0.125f : 0.0625f;  // half a step of 2 and 3 mantissa bits
        for (int i = 0; i < N; i++)
            assert_true(fabsf(x[i] - y[i]) <= rel * fabsf(x[i]) * 1.0001f || fabsf(x[i]) < 1e-3f * q->scales[i / K]);
        trit_quant_info_free(q);
    }
    trit_quant_spec s = trit_quant_spec_default(TRIT_NF4);
    trit_quant_info *q = round_trip(&s, x, y, N, K, c);
    assert_int_equal(q->group_size, 64);
    for (int i = 0; i < N; i++) assert_true(fabsf(x[i] - y[i]) <= 0.5f * 0.2771f * q->scales[i / 64] * 1.001f);
    trit_quant_info_free(q);
}

static void test_zero_group_and_nonfinite(void **state) {
    (void)state;
    float x[128] = {0}, y[128];
    uint8_t c[128];
    for (int i = 64; i < 128; i++) x[i] = (float)(i - 96);
    const trit_dtype dts[6] = {TRIT_QINT8, TRIT_QINT4, TRIT_QINT2, TRIT_NF4, TRIT_F8_E4M3, TRIT_F8_E5M2};
    for (int d = 0; d < 6; d++)
        for (int sc = 0; sc < (d < 3 ? 2 : 1); sc++) {
            trit_quant_spec s = spec(dts[d], 64, (trit_quant_scheme)sc);
            trit_quant_info *q = round_trip(&s, x, y, 128, 128, c);
            assert_true(trit_quant_info_scale(q, 0) == 0.0f);
            for (int i = 0; i < 64; i++) assert_true(y[i] == 0.0f);
            trit_quant_info_free(q);
        }
    x[37] = NAN;
    trit_quant_info *q = NULL;
    trit_quant_spec s = spec(TRIT_QINT8, TRIT_QGROUP_TENSOR, TRIT_QSCHEME_SYMMETRIC);
    assert_int_equal(trit_quant_encode(&s, x, 128, 128, c, &q), TRIT_ERR_NUMERIC);
    assert_null(q);
    assert_non_null(strstr(trit_last_error(), "value 37"));
    x[37] = 0, x[100] = -INFINITY;
    assert_int_equal(trit_quant_encode(&s, x, 128, 128, c, &q), TRIT_ERR_NUMERIC);
    assert_non_null(strstr(trit_last_error(), "value 100"));
}

// A group with one large value and many tiny ones: nearest rounds the tiny ones to 0; stochastic
// rounding keeps their mean.
static void test_stochastic_unbiased_below_resolution(void **state) {
    (void)state;
    enum { N = 256, DRAWS = 2000 };
    float x[N], y[N];
    uint8_t c[N];
    for (int i = 0; i < N; i++) x[i] = 0.003f;
    x[0] = 7.0f;  // int4 scale 1: 0.003 is 1/333 of a step
    const trit_dtype dts[3] = {TRIT_QINT4, TRIT_QINT8, TRIT_NF4};
    for (int d = 0; d < 3; d++) {
        trit_quant_spec s = spec(dts[d], TRIT_QGROUP_TENSOR, TRIT_QSCHEME_SYMMETRIC);
        if (dts[d] == TRIT_QINT8) x[0] = 127.0f;
        s.stochastic = true;
        double sum = 0, step = 1.0;
        for (int r = 0; r < DRAWS; r++) {
            s.seed = 1, s.stream = (uint64_t)r;
            trit_quant_info *q = round_trip(&s, x, y, N, N, c);
            if (dts[d] == TRIT_NF4) step = 0.07958 * q->scales[0];
            for (int i = 1; i < N; i++) sum += y[i];
            trit_quant_info_free(q);
        }
        const double n = (double)DRAWS * (N - 1), p = 0.003 / step;
        const double sigma = step * sqrt(p * (1 - p) / n);
        assert_true(fabs(sum / n - 0.003) <= 3 * sigma);
    }
}

static double rmse(const float *a, const float *b, int64_t n) {
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return sqrt(s / (double)n);
}

// QLoRA's ordering on normally distributed weights: NF4 < int4 absmax at the same block size.
static void test_nf4_beats_int4_on_gaussian(void **state) {
    (void)state;
    enum { N = 64 * 1024 };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    uint8_t *c = malloc(N);
    trit_rng_fill_normal(x, N, 42, 7, 0, 0.0f, 0.02f);
    trit_quant_spec nf = trit_quant_spec_default(TRIT_NF4), i4 = spec(TRIT_QINT4, 64, TRIT_QSCHEME_SYMMETRIC);
    trit_quant_info_free(round_trip(&nf, x, y, N, 1024, c));
    const double e_nf4 = rmse(x, y, N);
    trit_quant_info_free(round_trip(&i4, x, y, N, 1024, c));
    const double e_int4 = rmse(x, y, N);
    print_message("N(0, 0.02), blocks of 64: RMSE nf4 %.3e, int4 absmax %.3e\n", e_nf4, e_int4);
    assert_true(e_nf4 < 0.9 * e_int4);
    // Double quantization: scales in 8 bits cost little accuracy.
    nf.double_quant_block = 256;
    trit_quant_info *q = round_trip(&nf, x, y, N, 1024, c);
    assert_null(q->scales);
    assert_non_null(q->qscales);
    assert_int_equal(q->dq_block, 256);
    print_message("nf4 with double quantization: RMSE %.3e\n", rmse(x, y, N));
    assert_true(rmse(x, y, N) < 1.02 * e_nf4);
    trit_quant_info_free(q);
    free(x), free(y), free(c);
}

static void test_double_quant_scales(void **state) {
    (void)state;
    trit_quant_info *q = trit_quant_info_new(600 * 4, 4, false, 0);
    float orig[600];
    for (int g = 0; g < 600; g++) orig[g] = q->scales[g] = 0.01f + 0.001f * (float)(g % 37);
    assert_int_equal(trit_quant_info_bytes(q), 600 * 4);
    assert_int_equal(trit_quant_double(q, 256), TRIT_OK);
    assert_int_equal(trit_quant_double(q, 256), TRIT_ERR_STATE);
    assert_int_equal(trit_quant_info_bytes(q), 600 + 3 * 4);  // int8 codes + one f32 per block of 256
    for (int g = 0; g < 600; g++)
        assert_true(fabsf(trit_quant_info_scale(q, g) - orig[g]) <= 0.5f * q->scales2[g / 256] * 1.001f);
    trit_quant_info_free(q);
}

static void test_thread_count_independent(void **state) {
    (void)state;
    enum { N = 3 * 16384 + 96 };
    float *x = malloc(sizeof(float) * N);
    uint8_t *c1 = malloc(N), *c2 = malloc(N);
    trit_rng_fill_normal(x, N, 4, 4, 0, 0.0f, 1.0f);
    trit_quant_spec s = spec(TRIT_QINT4, 32, TRIT_QSCHEME_AFFINE);
    s.stochastic = true, s.seed = 9;
    trit_quant_info *q1, *q2;
    trit_threads_set(1);
    assert_int_equal(trit_quant_encode(&s, x, N, 96, c1, &q1), TRIT_OK);
    trit_threads_set(2);
    assert_int_equal(trit_quant_encode(&s, x, N, 96, c2, &q2), TRIT_OK);
    trit_threads_set(0);
    assert_memory_equal(c1, c2, trit_dtype_nbytes(TRIT_QINT4, N));
    assert_memory_equal(q1->scales, q2->scales, sizeof(float) * (size_t)q1->num_groups);
    trit_quant_info_free(q1), trit_quant_info_free(q2);
    free(x), free(c1), free(c2);
}

static void test_spec_errors(void **state) {
    (void)state;
    float x[12] = {0};
    uint8_t c[12];
    trit_quant_info *q = NULL;
    trit_quant_spec s = spec(TRIT_QINT4, TRIT_QGROUP_CHANNEL, TRIT_QSCHEME_SYMMETRIC);
    assert_int_equal(trit_quant_encode(&s, x, 12, 3, c, &q), TRIT_ERR_SHAPE);  // odd rows of nibbles
    s.group_size = 5;
    assert_int_equal(trit_quant_encode(&s, x, 12, 12, c, &q), TRIT_ERR_SHAPE);
    s = spec(TRIT_NF4, 4, TRIT_QSCHEME_AFFINE);
    assert_int_equal(trit_quant_encode(&s, x, 12, 12, c, &q), TRIT_ERR_INVALID);
    s = spec(TRIT_F32, 4, TRIT_QSCHEME_SYMMETRIC);
    assert_int_equal(trit_quant_encode(&s, x, 12, 12, c, &q), TRIT_ERR_DTYPE);
    assert_null(q);
    assert_int_equal(trit_quant_decode(TRIT_QINT8, c, 12, NULL, x), TRIT_ERR_INVALID);
}

static void test_tensor_quantize_and_views(void **state) {
    (void)state;
    const int64_t shape[2] = {6, 128};
    trit_tensor *w = trit_tensor_new(TRIT_F32, 2, shape);
    trit_tensor_fill_normal(w, 0.0, 0.02, 5, 5);
    trit_tensor_set_name(w, "h.0.mlp.c_fc.weight");
    trit_quant_spec s = spec(TRIT_QINT4, 64, TRIT_QSCHEME_SYMMETRIC);
    trit_tensor *q = trit_quantize(w, &s);
    assert_non_null(q);
    assert_int_equal(q->dtype, TRIT_QINT4);
    assert_int_equal(trit_tensor_nbytes(q), 6 * 64);
    assert_string_equal(q->name, "h.0.mlp.c_fc.weight");
    assert_int_equal(q->quant->num_groups, 12);
    trit_tensor *d = trit_dequantize(q);
    const float *wf = trit_tensor_ptr(w), *df = trit_tensor_ptr(d);
    for (int64_t i = 0; i < 6 * 128; i++) {
        assert_true(fabsf(wf[i] - df[i]) <= 0.5f * q->quant->scales[i / 64] * 1.0001f);
        assert_true((float)trit_tensor_get_flat(q, i) == df[i]);
    }
    // Rows 2..4 as a view decode to the same values (blocks and groups kept whole).
    trit_tensor v;
    assert_int_equal(trit_tensor_view_slice(q, 0, 2, 4, 1, &v), TRIT_OK);
    trit_tensor *dv = trit_dequantize(&v);
    assert_memory_equal(trit_tensor_ptr(dv), df + 2 * 128, sizeof(float) * 2 * 128);
    trit_tensor_free(dv), trit_tensor_free(d), trit_tensor_free(q), trit_tensor_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int_known_codes_and_packing),
        cmocka_unit_test(test_ternary_codes_and_packing),
        cmocka_unit_test(test_affine_keeps_zero_exact),
        cmocka_unit_test(test_int_error_bounds),
        cmocka_unit_test(test_fp8_and_nf4_error_bounds),
        cmocka_unit_test(test_zero_group_and_nonfinite),
        cmocka_unit_test(test_stochastic_unbiased_below_resolution),
        cmocka_unit_test(test_nf4_beats_int4_on_gaussian),
        cmocka_unit_test(test_double_quant_scales),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_spec_errors),
        cmocka_unit_test(test_tensor_quantize_and_views),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
