// Checked conversions of doubles to integers (NaN, infinities, values past the target range,
// the edges of int64_t) and the overflow-checked product.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "trit/base.h"
#include "trit/tensor.h"

static void test_saturating(void **state) {
    (void)state;
    assert_int_equal(trit_f64_to_i64_sat(NAN, -10, 10), 0);
    assert_int_equal(trit_f64_to_i64_sat(-NAN, INT64_MIN, INT64_MAX), 0);
    assert_int_equal(trit_f64_to_i64_sat(NAN, 5, 10), 5);  // 0 outside the range: its low end
    assert_int_equal(trit_f64_to_i64_sat(INFINITY, -10, 10), 10);
    assert_int_equal(trit_f64_to_i64_sat(-INFINITY, -10, 10), -10);
    assert_int_equal(trit_f64_to_i64_sat(INFINITY, INT64_MIN, INT64_MAX), INT64_MAX);
    assert_int_equal(trit_f64_to_i64_sat(-INFINITY, INT64_MIN, INT64_MAX), INT64_MIN);
    assert_int_equal(trit_f64_to_i64_sat(0x1p63, INT64_MIN, INT64_MAX), INT64_MAX);  // 2^63 is not an int64_t
    assert_int_equal(trit_f64_to_i64_sat(-0x1p63, INT64_MIN, INT64_MAX), INT64_MIN);
    assert_int_equal(trit_f64_to_i64_sat(1e300, 0, 255), 255);
    assert_int_equal(trit_f64_to_i64_sat(-1e300, 0, 255), 0);
    assert_int_equal(trit_f64_to_i64_sat(0x1p62, INT64_MIN, INT64_MAX), INT64_C(1) << 62);
    assert_int_equal(trit_f64_to_i64_sat(9223372036854774784.0, INT64_MIN, INT64_MAX), INT64_C(9223372036854774784));
    // Truncation toward zero inside the range, as a cast would.
    assert_int_equal(trit_f64_to_i64_sat(2.9, -10, 10), 2);
    assert_int_equal(trit_f64_to_i64_sat(-2.9, -10, 10), -2);
    assert_int_equal(trit_f64_to_i64_sat(127.5, INT8_MIN, INT8_MAX), 127);
    assert_int_equal(trit_f64_to_i64_sat(128.0, INT8_MIN, INT8_MAX), 127);
    assert_int_equal(trit_f64_to_i64_sat(-129.0, INT8_MIN, INT8_MAX), -128);
    // A bound that is not a double: 2^53 + 1 rounds to 2^53 as a double.
    const int64_t odd = (INT64_C(1) << 53) + 1;
    assert_int_equal(trit_f64_to_i64_sat(0x1p60, 0, odd), odd);
    assert_int_equal(trit_f64_to_i64_sat(0x1p53, 0, odd), INT64_C(1) << 53);
}

static void test_exact(void **state) {
    (void)state;
    int64_t v = 99;
    assert_false(trit_f64_to_i64_exact(NAN, INT64_MIN, INT64_MAX, &v));
    assert_false(trit_f64_to_i64_exact(INFINITY, INT64_MIN, INT64_MAX, &v));
    assert_false(trit_f64_to_i64_exact(-INFINITY, INT64_MIN, INT64_MAX, &v));
    assert_false(trit_f64_to_i64_exact(0x1p63, INT64_MIN, INT64_MAX, &v));
    assert_false(trit_f64_to_i64_exact(1e300, INT64_MIN, INT64_MAX, &v));
    assert_false(trit_f64_to_i64_exact(2.5, INT64_MIN, INT64_MAX, &v));
    assert_false(trit_f64_to_i64_exact(-1.0, 0, INT64_MAX, &v));
    assert_false(trit_f64_to_i64_exact(11.0, 0, 10, &v));
    assert_int_equal(v, 99);  // untouched by every refusal
    assert_true(trit_f64_to_i64_exact(-0x1p63, INT64_MIN, INT64_MAX, &v));
    assert_int_equal(v, INT64_MIN);
    assert_true(trit_f64_to_i64_exact(9007199254740992.0, 0, INT64_MAX, &v));
    assert_int_equal(v, INT64_C(9007199254740992));
    assert_true(trit_f64_to_i64_exact(-0.0, 0, 10, &v));
    assert_int_equal(v, 0);
}

static void test_mul(void **state) {
    (void)state;
    int64_t r = 7;
    assert_true(trit_mul_i64(INT64_C(1) << 31, INT64_C(1) << 31, &r));
    assert_int_equal(r, INT64_C(1) << 62);
    assert_false(trit_mul_i64(INT64_C(1) << 32, INT64_C(1) << 31, &r));
    assert_false(trit_mul_i64(INT64_MAX, 2, &r));
    assert_false(trit_mul_i64(INT64_MIN, -1, &r));
    assert_int_equal(r, INT64_C(1) << 62);
    assert_true(trit_mul_i64(INT64_MIN, 1, &r));
    assert_int_equal(r, INT64_MIN);
}

// Integer tensors store doubles as the dtype table converts them: nearest even, saturated,
// NaN -> 0 (a plain cast would be undefined for all but the first two).
static void test_tensor_integer_store(void **state) {
    (void)state;
    const trit_dtype dts[] = {TRIT_I8, TRIT_U8, TRIT_I32, TRIT_I64};
    const double lo[] = {-128, 0, -2147483648.0, -0x1p63}, hi[] = {127, 255, 2147483647.0, 0x1p63};
    for (int k = 0; k < 4; k++) {
        trit_tensor *t = trit_tensor_new(dts[k], 1, (int64_t[]){7});
        assert_non_null(t);
        const double in[7] = {2.5, -3.5, NAN, INFINITY, -INFINITY, 1e300, -1e300};
        for (int i = 0; i < 7; i++) trit_tensor_set_flat(t, i, in[i]);
        assert_true(trit_tensor_get_flat(t, 0) == 2);
        assert_true(trit_tensor_get_flat(t, 1) == (dts[k] == TRIT_U8 ? 0 : -4));
        assert_true(trit_tensor_get_flat(t, 2) == 0);
        // I64's top is INT64_MAX, which reads back as the double 2^63.
        assert_true(trit_tensor_get_flat(t, 3) == hi[k] || (dts[k] == TRIT_I64 && trit_tensor_get_flat(t, 3) == 0x1p63));
        assert_true(trit_tensor_get_flat(t, 4) == lo[k]);
        assert_true(trit_tensor_get_flat(t, 5) == trit_tensor_get_flat(t, 3));
        assert_true(trit_tensor_get_flat(t, 6) == lo[k]);
        trit_tensor_free(t);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_saturating),
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_mul),
        cmocka_unit_test(test_tensor_integer_store),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
