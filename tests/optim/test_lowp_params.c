// Optimizers over bf16/f16 parameters (no fp32 master copy): the update is the f32 formula on
// the widened value, rounded to nearest or stochastically; stochastic rounding is reproducible,
// independent of the thread count, and keeps updates that nearest rounding loses (the stall).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

enum { N = 100003 };  // more than one parallel chunk, and not a multiple of one

static trit_tensor *param(trit_dtype dt, uint64_t seed) {
    trit_tensor *p = trit_tensor_new_param(dt, 1, (int64_t[]){N}, "w");
    trit_tensor_fill_normal(p, 0, 1, seed, 1);
    p->grad = trit_tensor_new(TRIT_F32, 1, (int64_t[]){N});
    trit_tensor_fill_normal(p->grad, 0, 0.1, seed, 2);
    return p;
}

// One AdamW step with nearest rounding equals the f32 optimizer's step on the widened values,
// rounded to nearest even.
static void test_nearest_is_rounded_f32_update(void **state) {
    (void)state;
    const trit_dtype dts[2] = {TRIT_BF16, TRIT_F16};
    for (int d = 0; d < 2; d++) {
        trit_tensor *lp = param(dts[d], 3), *fp = trit_tensor_new_param(TRIT_F32, 1, (int64_t[]){N}, "w");
        assert_int_equal(trit_tensor_copy(fp, lp), TRIT_OK);
        fp->grad = trit_tensor_contiguous(lp->grad);
        const trit_optim_config c = trit_optim_adamw(0.9, 0.95, 1e-8);
        trit_optim *a = trit_optim_new_single(&c, &lp, 1, 0.1), *b = trit_optim_new_single(&c, &fp, 1, 0.1);
        assert_non_null(a);
        assert_non_null(b);
        for (int s = 0; s < 3; s++) {
            assert_int_equal(trit_optim_step(a, 1e-2), TRIT_OK);
            assert_int_equal(trit_optim_step(b, 1e-2), TRIT_OK);
            // b's f32 weights round to what a holds; then b continues from the rounded values, as a does.
            trit_tensor *r = trit_tensor_new(dts[d], 1, (int64_t[]){N});
            assert_int_equal(trit_tensor_copy(r, fp), TRIT_OK);
            assert_memory_equal(r->data, lp->data, trit_tensor_nbytes(r));
            assert_int_equal(trit_tensor_copy(fp, r), TRIT_OK);
            trit_tensor_free(r);
        }
        trit_optim_free(a);
        trit_optim_free(b);
        trit_tensor_free(lp);
        trit_tensor_free(fp);
    }
}

// The weights after 4 SR steps, with `threads` threads and a seed.
static void sr_run(int threads, uint64_t seed, uint16_t *out) {
    omp_set_num_threads(threads);
    trit_tensor *p = param(TRIT_BF16, 5);
    const trit_optim_config c = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *o = trit_optim_new_single(&c, &p, 1, 0.1);
    trit_optim_set_rounding(o, true, seed);
    for (int s = 0; s < 4; s++) assert_int_equal(trit_optim_step(o, 1e-3), TRIT_OK);
    memcpy(out, p->data, sizeof(uint16_t) * N);
    trit_optim_free(o);
    trit_tensor_free(p);
}

static void test_sr_reproducible_and_thread_independent(void **state) {
    (void)state;
    static uint16_t one[N], two[N], again[N], other[N];
    const int saved = omp_get_max_threads();
    sr_run(1, 42, one);
    sr_run(2, 42, two);
    sr_run(2, 42, again);
    sr_run(2, 43, other);
    omp_set_num_threads(saved);
    assert_memory_equal(one, two, sizeof one);
    assert_memory_equal(two, again, sizeof two);
    assert_memory_not_equal(two, other, sizeof two);
}

// A bf16 weight at 1.0 given SGD updates of 1e-3 * 2^-8 per step: far below half a bf16 step at
// 1.0 (2^-8), so nearest rounding never moves it; stochastic rounding follows the exact sum in
// expectation (mean over the N weights within 3 sigma after 100 steps).
static void test_stall_that_sr_fixes(void **state) {
    (void)state;
    const int steps = 100;
    const double lr = 1e-3, grad = 0x1p-8, want = 1.0 - steps * lr * grad;
    for (int sr = 0; sr < 2; sr++) {
        trit_tensor *p = trit_tensor_new_param(TRIT_BF16, 1, (int64_t[]){N}, "w");
        trit_tensor_fill(p, 1.0);
        p->grad = trit_tensor_new(TRIT_F32, 1, (int64_t[]){N});
        trit_tensor_fill(p->grad, grad);
        const trit_optim_config c = trit_optim_sgd(0, false);
        trit_optim *o = trit_optim_new_single(&c, &p, 1, 0);
        trit_optim_set_rounding(o, sr, 7);
        for (int s = 0; s < steps; s++) assert_int_equal(trit_optim_step(o, lr), TRIT_OK);
        double mean = 0;
        for (int64_t i = 0; i < N; i++) mean += trit_tensor_get_flat(p, i);
        mean /= N;
        // Below 1.0 the bf16 gap is 2^-8 (above, 2^-7); per step a weight moves by a gap with
        // probability update / gap, so the spread of the sum is at most gap * sqrt(steps p).
        const double gap = 0x1p-8, pstep = lr * grad / gap, sigma = gap * sqrt(steps * pstep) / sqrt((double)N);
        printf("  %s: mean weight %.9f after %d steps (exact %.9f, sigma %.2g)\n", sr ? "stochastic" : "nearest", mean,
               steps, want, sigma);
        if (sr)
            assert_true(fabs(mean - want) <= 3 * sigma + 1e-9);
        else
            assert_true(mean == 1.0);
        trit_optim_free(o);
        trit_tensor_free(p);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nearest_is_rounded_f32_update),
        cmocka_unit_test(test_sr_reproducible_and_thread_independent),
        cmocka_unit_test(test_stall_that_sr_fixes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
