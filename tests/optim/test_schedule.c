// Learning-rate schedules at known steps: warmup start and end, the cosine midpoint
// (peak + floor) / 2, the floor after total_steps, step decay, and bad schedules.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "trit/optim.h"

#define CLOSE(a, b) assert_true(fabs((a) - (b)) <= 1e-12 * fabs(b) + 1e-18)

static void test_warmup_cosine(void **state) {
    (void)state;
    const double peak = 6e-4, floor = 6e-5;
    trit_lr_schedule s = trit_lr_warmup_cosine(peak, floor, 10, 110);
    assert_int_equal(trit_lr_check(&s), TRIT_OK);
    CLOSE(trit_lr_at(&s, 0), peak / 10);        // warmup start: peak * 1 / W
    CLOSE(trit_lr_at(&s, 4), peak * 5 / 10);
    CLOSE(trit_lr_at(&s, 9), peak);             // warmup end
    CLOSE(trit_lr_at(&s, 10), peak);            // cosine start
    CLOSE(trit_lr_at(&s, 60), (peak + floor) / 2);  // cosine midpoint
    CLOSE(trit_lr_at(&s, 35), floor + 0.5 * (1 + sqrt(0.5)) * (peak - floor));  // quarter
    CLOSE(trit_lr_at(&s, 110), floor);
    CLOSE(trit_lr_at(&s, 100000), floor);
    for (int64_t k = 10; k < 110; k++) assert_true(trit_lr_at(&s, k + 1) < trit_lr_at(&s, k));
    // A pure function: asking again, or out of order, gives the same value.
    assert_true(trit_lr_at(&s, 60) == trit_lr_at(&s, 60));
    // No warmup: the cosine starts at peak on step 0.
    trit_lr_schedule n = trit_lr_warmup_cosine(1.0, 0.0, 0, 4);
    CLOSE(trit_lr_at(&n, 0), 1.0);
    CLOSE(trit_lr_at(&n, 2), 0.5);
    CLOSE(trit_lr_at(&n, 4), 0.0);
}

// BitNet's two stages: the cosine, scaled by stage2_scale from stage2_at on (a drop at mid-run).
static void test_two_stage(void **state) {
    (void)state;
    const double peak = 2e-3, floor = 2e-4;
    trit_lr_schedule s = trit_lr_two_stage(peak, floor, 10, 110, 60, 0.5);
    trit_lr_schedule c = trit_lr_warmup_cosine(peak, floor, 10, 110);
    assert_int_equal(trit_lr_check(&s), TRIT_OK);
    for (int64_t k = 0; k < 60; k++) CLOSE(trit_lr_at(&s, k), trit_lr_at(&c, k));
    for (int64_t k = 60; k < 200; k++) CLOSE(trit_lr_at(&s, k), 0.5 * trit_lr_at(&c, k));
    assert_true(trit_lr_at(&s, 60) < 0.6 * trit_lr_at(&s, 59));  // the drop
    trit_lr_schedule bad = trit_lr_two_stage(peak, floor, 10, 110, 60, 0.0);
    assert_int_equal(trit_lr_check(&bad), TRIT_ERR_INVALID);
    assert_true(isnan(trit_lr_at(&bad, 5)));
    bad = trit_lr_two_stage(peak, floor, 10, 110, -1, 0.5);
    assert_int_equal(trit_lr_check(&bad), TRIT_ERR_INVALID);
}

static void test_constant_and_step_decay(void **state) {
    (void)state;
    trit_lr_schedule c = trit_lr_constant(3e-4);
    CLOSE(trit_lr_at(&c, 0), 3e-4);
    CLOSE(trit_lr_at(&c, 123456), 3e-4);
    c.warmup_steps = 4;
    CLOSE(trit_lr_at(&c, 1), 3e-4 * 2 / 4);
    CLOSE(trit_lr_at(&c, 4), 3e-4);

    trit_lr_schedule d = trit_lr_step_decay(0.1, 0.5, 3);
    assert_int_equal(trit_lr_check(&d), TRIT_OK);
    CLOSE(trit_lr_at(&d, 0), 0.1);
    CLOSE(trit_lr_at(&d, 2), 0.1);
    CLOSE(trit_lr_at(&d, 3), 0.05);
    CLOSE(trit_lr_at(&d, 5), 0.05);
    CLOSE(trit_lr_at(&d, 6), 0.025);
    CLOSE(trit_lr_at(&d, 10), 0.0125);
}

static void test_bad_schedules(void **state) {
    (void)state;
    trit_lr_schedule s = trit_lr_warmup_cosine(1e-3, 1e-4, 100, 50);
    assert_int_equal(trit_lr_check(&s), TRIT_ERR_INVALID);
    assert_true(isnan(trit_lr_at(&s, 0)));
    s = trit_lr_warmup_cosine(-1e-3, 1e-4, 0, 50);
    assert_int_equal(trit_lr_check(&s), TRIT_ERR_INVALID);
    s = trit_lr_warmup_cosine(1e-3, NAN, 0, 50);
    assert_int_equal(trit_lr_check(&s), TRIT_ERR_INVALID);
    s = trit_lr_constant(1e-3);
    s.warmup_steps = -1;
    assert_int_equal(trit_lr_check(&s), TRIT_ERR_INVALID);
    s = trit_lr_step_decay(0.1, 0.0, 3);
    assert_int_equal(trit_lr_check(&s), TRIT_ERR_INVALID);
    s = trit_lr_step_decay(0.1, 0.5, 0);
    assert_int_equal(trit_lr_check(&s), TRIT_ERR_INVALID);
    assert_int_equal(trit_lr_check(NULL), TRIT_ERR_INVALID);
    s = trit_lr_constant(1e-3);
    assert_true(isnan(trit_lr_at(&s, -1)));
    // The optimizer refuses the NaN a bad schedule yields.
    trit_tensor *p = trit_tensor_new(TRIT_F32, 1, (int64_t[]){2});
    trit_optim_config cfg = trit_optim_sgd(0.0, false);
    trit_optim *o = trit_optim_new_single(&cfg, &p, 1, 0.0);
    assert_non_null(o);
    assert_int_equal(trit_optim_step(o, trit_lr_at(&s, -1)), TRIT_ERR_INVALID);
    trit_optim_free(o);
    trit_tensor_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warmup_cosine),
        cmocka_unit_test(test_two_stage),
        cmocka_unit_test(test_constant_and_step_decay),
        cmocka_unit_test(test_bad_schedules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
