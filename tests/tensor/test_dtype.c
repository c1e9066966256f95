// The dtype table: block geometry, row converters (nearest and stochastic), blocked storage
// sizes and views that must keep blocks whole, and quant info owned by its tensor.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>
#include <string.h>

static void test_table_rows(void **state) {
    (void)state;
    for (int d = 0; d < TRIT_DTYPE_COUNT; d++) {
        const trit_dtype_traits *tr = trit_dtype_traits_of((trit_dtype)d);
        assert_non_null(tr);
        assert_string_equal(tr->name, trit_dtype_name((trit_dtype)d));
        assert_true(tr->block_elems >= 1 && tr->block_bytes >= 1);
        assert_non_null(tr->to_f32);
        assert_non_null(tr->from_f32);
    }
    assert_null(trit_dtype_traits_of(TRIT_DTYPE_COUNT));
    assert_int_equal(trit_dtype_block(TRIT_Q8_0), 32);
    assert_int_equal(trit_dtype_size(TRIT_Q8_0), 0);  // not a per-element size
    assert_int_equal(trit_dtype_nbytes(TRIT_Q8_0, 96), 3 * 34);
    assert_int_equal(trit_dtype_nbytes(TRIT_BF16, 7), 14);
    assert_true(trit_dtype_is_quantized(TRIT_Q8_0));
    assert_false(trit_dtype_is_quantized(TRIT_BF16));
    assert_true(trit_dtype_is_float(TRIT_F16));
    assert_false(trit_dtype_is_float(TRIT_I8));
}

// Integer rows round to nearest even, saturate, and map NaN to 0 (a plain cast is undefined).
static void test_int_rows(void **state) {
    (void)state;
    const float in[8] = {2.5f, 3.5f, -2.5f, 300.0f, -300.0f, NAN, INFINITY, 1.4f};
    int8_t i8[8];
    trit_dtype_traits_of(TRIT_I8)->from_f32(i8, in, 8, NULL, 0);
    const int8_t want8[8] = {2, 4, -2, 127, -128, 0, 127, 1};
    assert_memory_equal(i8, want8, sizeof want8);
    uint8_t u8[8];
    trit_dtype_traits_of(TRIT_U8)->from_f32(u8, in, 8, NULL, 0);
    const uint8_t wantu[8] = {2, 4, 0, 255, 0, 0, 255, 1};
    assert_memory_equal(u8, wantu, sizeof wantu);
    int64_t i64[8];
    trit_dtype_traits_of(TRIT_I64)->from_f32(i64, in, 8, NULL, 0);
    assert_true(i64[6] == INT64_MAX - 1023);  // the largest double below 2^63
    float back[8];
    trit_dtype_traits_of(TRIT_I8)->to_f32(back, i8, 8, NULL, 0);
    assert_true(back[3] == 127.0f && back[4] == -128.0f);
}

// q8_0: 32 codes and an f16 scale per block; a round trip is within half a step of the scale.
static void test_q8_0_rows(void **state) {
    (void)state;
    float x[64], y[64];
    for (int i = 0; i < 64; i++) x[i] = sinf((float)i * 0.37f) * (i < 32 ? 1.0f : 0.01f);
    uint8_t q[2 * 34];
    const trit_dtype_traits *tr = trit_dtype_traits_of(TRIT_Q8_0);
    tr->from_f32(q, x, 64, NULL, 0);
    tr->to_f32(y, q, 64, NULL, 0);
    for (int b = 0; b < 2; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        const float d = trit_f16_to_f32(trit_f32_to_f16(amax / 127.0f));
        for (int i = 0; i < 32; i++) assert_true(fabsf(y[b * 32 + i] - x[b * 32 + i]) <= 0.5f * d * 1.001f);
    }
    // All-zero block: scale 0, zero codes, no division by zero.
    memset(x, 0, sizeof x);
    tr->from_f32(q, x, 32, NULL, 0);
    tr->to_f32(y, q, 32, NULL, 0);
    for (int i = 0; i < 32; i++) assert_true(y[i] == 0.0f);
    // Stochastic rounding is unbiased: a value a quarter of the way between two codes.
    double sum = 0;
    const int reps = 4000;
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < 32; i++) x[i] = i == 0 ? 127.0f : 10.25f;  // scale exactly 1
        tr->from_f32_sr(q, x, 32, NULL, (int64_t)r * 32, 7, 11);
        tr->to_f32(y, q, 32, NULL, 0);
        for (int i = 1; i < 32; i++) sum += y[i];
    }
    const double n = reps * 31.0, mean = sum / n, sigma = sqrt(0.25 * 0.75 / n);
    assert_true(fabs(mean - 10.25) < 3 * sigma);
}

// q4_0 (ggml's layout): the largest-magnitude value is code 0 (d = it / -8), element j in the low
// nibble of byte j and element j + 16 in the high one; round trip within half a step.
static void test_q4_0_rows(void **state) {
    (void)state;
    const trit_dtype_traits *tr = trit_dtype_traits_of(TRIT_Q4_0);
    assert_int_equal(trit_dtype_nbytes(TRIT_Q4_0, 64), 2 * 18);
    float x[32], y[32];
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 16) - 8.0f;  // -8..7: d = -8 / -8 = 1
    x[5] = -8.0f;
    uint8_t q[18];
    tr->from_f32(q, x, 32, NULL, 0);
    uint16_t h;
    memcpy(&h, q, 2);
    assert_true(trit_f16_to_f32(h) == 1.0f);
    assert_int_equal(q[2 + 1], (uint8_t)(((-7 + 8) | ((-7 + 8) << 4))));  // elements 1 and 17
    tr->to_f32(y, q, 32, NULL, 0);
    for (int i = 0; i < 32; i++) assert_true(y[i] == x[i]);
    for (int i = 0; i < 32; i++) x[i] = cosf((float)i);
    tr->from_f32(q, x, 32, NULL, 0);
    tr->to_f32(y, q, 32, NULL, 0);
    memcpy(&h, q, 2);
    const float d = fabsf(trit_f16_to_f32(h));
    // Codes span -8..7 steps from the largest value's side, so the other end may lose up to a step.
    for (int i = 0; i < 32; i++) {
        assert_true(fabsf(y[i] - x[i]) <= d * 1.001f);
        if (fabsf(x[i]) <= 7.5f * d) assert_true(fabsf(y[i] - x[i]) <= 0.5f * d * 1.001f);
    }
    memset(x, 0, sizeof x);
    tr->from_f32(q, x, 32, NULL, 0);
    tr->to_f32(y, q, 32, NULL, 0);
    for (int i = 0; i < 32; i++) assert_true(y[i] == 0.0f);
}

// tq2_0 (ggml's ternary layout): byte m of each 32 holds elements m, m + 32, m + 64, m + 96 in
// bit pairs 0..3 as c + 1; a ternary block {-s, 0, s} is stored exactly with d = s.
static void test_tq2_0_rows(void **state) {
    (void)state;
    const trit_dtype_traits *tr = trit_dtype_traits_of(TRIT_TQ2_0);
    assert_int_equal(trit_dtype_nbytes(TRIT_TQ2_0, 512), 2 * 66);
    float x[256], y[256];
    for (int i = 0; i < 256; i++) x[i] = (float)((i * 7) % 3 - 1) * 0.375f;
    uint8_t q[66];
    tr->from_f32(q, x, 256, NULL, 0);
    tr->to_f32(y, q, 256, NULL, 0);
    for (int i = 0; i < 256; i++) assert_true(y[i] == x[i]);
    for (int n = 0; n < 4; n++) assert_int_equal((q[5] >> (2 * n)) & 3, (int)(x[5 + 32 * n] / 0.375f) + 1);
    assert_int_equal((q[32 + 1] >> 2) & 3, (int)(x[128 + 1 + 32] / 0.375f) + 1);
    memset(x, 0, sizeof x);
    tr->from_f32(q, x, 256, NULL, 0);
    tr->to_f32(y, q, 256, NULL, 0);
    for (int i = 0; i < 256; i++) assert_true(y[i] == 0.0f);
}

// tq1_0 (ggml's base-3 layout): the byte of codes c_0..c_4 (c_0 most significant) is
// ceil((sum c_k 3^(4-k)) * 256 / 243); byte m < 32 holds elements m + 32 k, bytes 32..47 elements
// 160 + (m - 32) + 16 k, bytes 48..51 elements 240 + (m - 48) + 4 k with a fifth digit 0.
static int tq1_byte(const float *x, float s, int e0, int step, int codes) {
    int num = 0;
    for (int k = 0; k < 5; k++) num = 3 * num + (k < codes ? (int)(x[e0 + step * k] / s) + 1 : 0);
    return (num * 256 + 242) / 243;
}

static void test_tq1_0_rows(void **state) {
    (void)state;
    const trit_dtype_traits *tr = trit_dtype_traits_of(TRIT_TQ1_0);
    assert_int_equal(trit_dtype_nbytes(TRIT_TQ1_0, 512), 2 * 54);  // 1.6875 bits per code
    float x[256], y[256];
    uint8_t q[54];
    // Every one of the 243 five-code digits appears (element i's code follows i's base-3 digits).
    for (int i = 0; i < 256; i++) x[i] = (float)((i / 3 + i * 5 / 7) % 3 - 1) * 0.625f;
    tr->from_f32(q, x, 256, NULL, 0);
    tr->to_f32(y, q, 256, NULL, 0);
    for (int i = 0; i < 256; i++) assert_true(y[i] == x[i]);
    assert_int_equal(q[5], tq1_byte(x, 0.625f, 5, 32, 5));
    assert_int_equal(q[32 + 3], tq1_byte(x, 0.625f, 163, 16, 5));
    assert_int_equal(q[48 + 2], tq1_byte(x, 0.625f, 242, 4, 4));
    uint16_t d;
    memcpy(&d, q + 52, 2);
    assert_true(trit_f16_to_f32(d) == 0.625f);
    // Known value: codes (2, 0, 1, 1, 0) are 174 in base 3, stored as ceil(174 * 256 / 243) = 184.
    for (int k = 0; k < 5; k++) x[7 + 32 * k] = (float)((int[]){1, -1, 0, 0, -1}[k]) * 0.625f;
    tr->from_f32(q, x, 256, NULL, 0);
    assert_int_equal(q[7], 184);
    // All 243 digits decode back, whatever the rest of the block holds.
    for (int v = 0; v < 243; v++) {
        for (int k = 0, r = v; k < 5; k++, r /= 3) x[9 + 32 * (4 - k)] = (float)(r % 3 - 1) * 0.625f;
        tr->from_f32(q, x, 256, NULL, 0);
        tr->to_f32(y, q, 256, NULL, 0);
        for (int k = 0; k < 5; k++) assert_true(y[9 + 32 * k] == x[9 + 32 * k]);
    }
    memset(x, 0, sizeof x);
    tr->from_f32(q, x, 256, NULL, 0);
    tr->to_f32(y, q, 256, NULL, 0);
    for (int i = 0; i < 256; i++) assert_true(y[i] == 0.0f);
}

static void test_blocked_tensor(void **state) {
    (void)state;
    int64_t s[2] = {3, 64};
    trit_tensor *t = trit_tensor_new(TRIT_Q8_0, 2, s);
    assert_non_null(t);
    assert_int_equal(trit_tensor_nbytes(t), 6 * 34);
    for (int64_t i = 0; i < 192; i++) trit_tensor_set_flat(t, i, (double)(i % 64) - 32.0);
    // Each set re-encodes its block, so values are within a few steps of the scale (32 / 127).
    assert_true(fabs(trit_tensor_get_flat(t, 70) - (-26.0)) < 0.3);
    trit_tensor v;
    assert_int_equal(trit_tensor_view_slice(t, 0, 1, 3, 1, &v), TRIT_OK);  // whole rows
    assert_true(fabs(trit_tensor_get_flat(&v, 6) - trit_tensor_get_flat(t, 70)) < 1e-6);
    assert_int_equal(trit_tensor_view_slice(t, 1, 32, 64, 1, &v), TRIT_OK);  // whole blocks
    assert_int_equal(trit_tensor_view_slice(t, 1, 1, 33, 1, &v), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "blocks of 32"));
    assert_int_equal(trit_tensor_view_transpose(t, 0, 1, &v), TRIT_ERR_SHAPE);
    assert_int_equal(trit_tensor_view_reshape(t, 2, (int64_t[]){6, 32}, &v), TRIT_OK);
    assert_int_equal(trit_tensor_view_reshape(t, 2, (int64_t[]){12, 16}, &v), TRIT_ERR_SHAPE);
    assert_null(trit_tensor_new(TRIT_Q8_0, 2, (int64_t[]){2, 48}));  // 48 is not whole blocks
    assert_non_null(strstr(trit_last_error(), "multiple of 32"));
    // A blocked tensor copies to f32 and back.
    trit_tensor *f = trit_tensor_new(TRIT_F32, 2, s);
    assert_int_equal(trit_tensor_copy(f, t), TRIT_OK);
    assert_true(((float *)f->data)[70] == (float)trit_tensor_get_flat(t, 70));
    trit_tensor_free(f);
    trit_tensor_free(t);
}

static void test_quant_info(void **state) {
    (void)state;
    int64_t s[2] = {4, 64};
    trit_tensor *t = trit_tensor_new(TRIT_I8, 2, s);
    trit_quant_info *q = trit_quant_info_new(256, 64, true, 0);
    assert_non_null(q);
    assert_int_equal(q->num_groups, 4);
    assert_non_null(q->zero_points);
    q->scales[2] = 0.5f;
    assert_true(trit_quant_info_scale(q, 2) == 0.5f);
    assert_int_equal(trit_tensor_set_quant(t, q), TRIT_OK);
    assert_true(t->flags & TRIT_FLAG_OWNS_QUANT);
    trit_tensor v;
    assert_int_equal(trit_tensor_view_slice(t, 0, 1, 2, 1, &v), TRIT_OK);
    assert_ptr_equal(v.quant, q);  // views share it and do not own it
    assert_false(v.flags & TRIT_FLAG_OWNS_QUANT);
    // Double-quantized scales decode through the second level.
    trit_quant_info *dq = trit_quant_info_new(256, 64, false, 2);
    assert_null(dq->scales);
    dq->qscales[3] = -4;
    dq->scales2[1] = 0.25f;
    dq->scales_mean = 2.0f;
    assert_true(trit_quant_info_scale(dq, 3) == 1.0f);
    assert_int_equal(trit_tensor_set_quant(t, dq), TRIT_OK);  // replaces (and frees) q
    assert_int_equal(trit_tensor_set_quant(t, trit_quant_info_new(128, 64, false, 0)), TRIT_ERR_SHAPE);
    assert_null(trit_quant_info_new(100, 64, false, 0));
    trit_tensor_free(t);  // frees dq (ASan would report a leak or a double free)
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_rows),   cmocka_unit_test(test_int_rows),   cmocka_unit_test(test_q8_0_rows),
        cmocka_unit_test(test_q4_0_rows),
        cmocka_unit_test(test_tq2_0_rows),
        cmocka_unit_test(test_tq1_0_rows),
        cmocka_unit_test(test_blocked_tensor), cmocka_unit_test(test_quant_info),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
