// The loss scaler: a dynamic one halves on a non-finite gradient and resets its count, doubles
// after growth_interval clean steps, never goes below 1; a static one never changes; unscaling
// multiplies every gradient exactly (powers of two) and reports Inf/NaN without scaling.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>

static void test_dynamic_backoff_and_growth(void **state) {
    (void)state;
    trit_loss_scaler s;
    assert_int_equal(trit_loss_scaler_init(&s, 65536.0, true), TRIT_OK);
    assert_true(s.scale == 65536.0 && s.growth_interval == 2000);
    s.growth_interval = 4;  // short, for the test
    for (int i = 0; i < 3; i++) trit_loss_scaler_update(&s, true);
    assert_int_equal(s.clean, 3);
    trit_loss_scaler_update(&s, false);  // an injected Inf: halve and start counting again
    assert_true(s.scale == 32768.0);
    assert_int_equal(s.clean, 0);
    for (int i = 0; i < 3; i++) trit_loss_scaler_update(&s, true);
    assert_true(s.scale == 32768.0);
    trit_loss_scaler_update(&s, true);  // the 4th clean step in a row doubles
    assert_true(s.scale == 65536.0);
    assert_int_equal(s.clean, 0);
    for (int i = 0; i < 40; i++) trit_loss_scaler_update(&s, false);
    assert_true(s.scale == 1.0);  // the floor
    // The default interval: 2000 clean steps double, 1999 do not.
    assert_int_equal(trit_loss_scaler_init(&s, 1024.0, true), TRIT_OK);
    for (int i = 0; i < 1999; i++) trit_loss_scaler_update(&s, true);
    assert_true(s.scale == 1024.0);
    trit_loss_scaler_update(&s, true);
    assert_true(s.scale == 2048.0);
}

static void test_static_and_bad_scales(void **state) {
    (void)state;
    trit_loss_scaler s;
    assert_int_equal(trit_loss_scaler_init(&s, 128.0, false), TRIT_OK);
    trit_loss_scaler_update(&s, false);
    for (int i = 0; i < 5000; i++) trit_loss_scaler_update(&s, true);
    assert_true(s.scale == 128.0);
    assert_int_equal(trit_loss_scaler_init(&s, 0.5, true), TRIT_ERR_INVALID);
    assert_int_equal(trit_loss_scaler_init(&s, NAN, true), TRIT_ERR_INVALID);
    assert_int_equal(trit_loss_scaler_init(&s, INFINITY, false), TRIT_ERR_INVALID);
}

static void test_unscale(void **state) {
    (void)state;
    trit_tensor *p[2] = {trit_tensor_new_param(TRIT_F32, 1, (int64_t[]){50000}, "a"),
                         trit_tensor_new_param(TRIT_BF16, 2, (int64_t[]){3, 4}, "b")};
    for (int i = 0; i < 2; i++) {
        p[i]->grad = trit_tensor_new(TRIT_F32, p[i]->ndim, p[i]->shape);
        trit_tensor_fill_normal(p[i]->grad, 0, 1000, 3, (uint64_t)i);
    }
    const float before = ((float *)p[0]->grad->data)[12345], b2 = ((float *)p[1]->grad->data)[7];
    assert_true(trit_grads_unscale(p, 2, 1.0 / 65536.0));
    assert_true(((float *)p[0]->grad->data)[12345] == before / 65536.0f);  // exact: a power of two
    assert_true(((float *)p[1]->grad->data)[7] == b2 / 65536.0f);
    ((float *)p[0]->grad->data)[49999] = INFINITY;
    const float kept = ((float *)p[1]->grad->data)[7];
    assert_false(trit_grads_unscale(p, 2, 0.5));
    assert_true(((float *)p[1]->grad->data)[7] == kept);  // nothing scaled when one is not finite
    ((float *)p[0]->grad->data)[49999] = NAN;
    assert_false(trit_grads_unscale(p, 2, 1.0));
    for (int i = 0; i < 2; i++) trit_tensor_free(p[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dynamic_backoff_and_growth),
        cmocka_unit_test(test_static_and_bad_scales),
        cmocka_unit_test(test_unscale),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
