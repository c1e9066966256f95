// Gradient clipping by global L2 norm: the norm of known grads, the torch.nn.utils rule for the
// scale factor, skipped parameters, NaN/Inf reporting and thread-count independence.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "trit/optim.h"

static trit_tensor *with_grad(int ndim, const int64_t *shape, const float *g) {
    trit_tensor *t = trit_tensor_new(TRIT_F32, ndim, shape);
    assert_non_null(t);
    t->grad = trit_tensor_new(TRIT_F32, ndim, shape);
    assert_non_null(t->grad);
    if (g) memcpy(t->grad->data, g, trit_tensor_nbytes(t));
    return t;
}

static float grad_at(const trit_tensor *t, int64_t i) { return ((const float *)t->grad->data)[i]; }

static void test_norm_and_clip_known_values(void **state) {
    (void)state;
    // |(3, 4)|^2 + |12|^2 = 169: the global norm is 13.
    trit_tensor *a = with_grad(1, (int64_t[]){2}, (float[]){3, 4});
    trit_tensor *b = with_grad(2, (int64_t[]){1, 1}, (float[]){12});
    trit_tensor *ps[2] = {a, b};
    double norm = 0.0;
    assert_int_equal(trit_optim_grad_norm(ps, 2, &norm), TRIT_OK);
    assert_true(norm == 13.0);
    // Below the threshold nothing changes.
    assert_int_equal(trit_optim_clip_grad_norm(ps, 2, 20.0, &norm), TRIT_OK);
    assert_true(norm == 13.0);
    assert_true(grad_at(a, 0) == 3.0f && grad_at(b, 0) == 12.0f);
    // Above it every grad is scaled by max / (norm + 1e-6).
    assert_int_equal(trit_optim_clip_grad_norm(ps, 2, 1.0, &norm), TRIT_OK);
    assert_true(norm == 13.0);
    double k = 1.0 / (13.0 + 1e-6);
    assert_float_equal(grad_at(a, 0), 3.0 * k, 1e-7);
    assert_float_equal(grad_at(a, 1), 4.0 * k, 1e-7);
    assert_float_equal(grad_at(b, 0), 12.0 * k, 1e-7);
    assert_int_equal(trit_optim_grad_norm(ps, 2, &norm), TRIT_OK);
    assert_float_equal(norm, 1.0, 1e-6);
    trit_tensor_free(a);
    trit_tensor_free(b);
}

static void test_skipped_params_do_not_count(void **state) {
    (void)state;
    trit_tensor *a = with_grad(1, (int64_t[]){2}, (float[]){3, 4});
    trit_tensor *frozen = with_grad(1, (int64_t[]){1}, (float[]){100});
    frozen->flags |= TRIT_FLAG_FROZEN;
    trit_tensor *nograd = trit_tensor_new(TRIT_F32, 1, (int64_t[]){3});
    trit_tensor *ps[3] = {a, frozen, nograd};
    double norm = 0.0;
    assert_int_equal(trit_optim_clip_grad_norm(ps, 3, 1.0, &norm), TRIT_OK);
    assert_true(norm == 5.0);
    assert_true(grad_at(frozen, 0) == 100.0f);
    assert_float_equal(grad_at(a, 0), 0.6, 1e-6);
    assert_int_equal(trit_optim_grad_norm(ps, 0, &norm), TRIT_OK);
    assert_true(norm == 0.0);
    trit_tensor_free(a);
    trit_tensor_free(frozen);
    trit_tensor_free(nograd);
}

static void test_nonfinite_norm_is_an_error(void **state) {
    (void)state;
    const float bad[2] = {NAN, INFINITY};
    for (int k = 0; k < 2; k++) {
        trit_tensor *a = with_grad(1, (int64_t[]){3}, (float[]){1, bad[k], 2});
        double norm = 0.0;
        assert_int_equal(trit_optim_clip_grad_norm(&a, 1, 1.0, &norm), TRIT_ERR_NUMERIC);
        assert_false(isfinite(norm));
        assert_non_null(strstr(trit_last_error(), "NaN or Inf"));
        assert_true(grad_at(a, 0) == 1.0f && grad_at(a, 2) == 2.0f);
        trit_tensor_free(a);
    }
    // A finite grad whose square overflows fp32 still has a finite norm in double.
    trit_tensor *big = with_grad(1, (int64_t[]){2}, (float[]){3e30f, 4e30f});
    double norm = 0.0;
    assert_int_equal(trit_optim_grad_norm(&big, 1, &norm), TRIT_OK);
    assert_true(fabs(norm - 5e30) <= 1e-6 * 5e30);
    trit_tensor_free(big);
}

static void test_bad_arguments(void **state) {
    (void)state;
    trit_tensor *a = with_grad(1, (int64_t[]){2}, (float[]){3, 4});
    double norm;
    assert_int_equal(trit_optim_clip_grad_norm(&a, 1, 0.0, &norm), TRIT_ERR_INVALID);
    assert_int_equal(trit_optim_clip_grad_norm(&a, 1, -1.0, &norm), TRIT_ERR_INVALID);
    assert_int_equal(trit_optim_clip_grad_norm(&a, 1, NAN, &norm), TRIT_ERR_INVALID);
    assert_int_equal(trit_optim_clip_grad_norm(NULL, 1, 1.0, &norm), TRIT_ERR_INVALID);
    assert_int_equal(trit_optim_clip_grad_norm(&a, 1, 1.0, NULL), TRIT_ERR_INVALID);
    trit_tensor *n = NULL;
    assert_int_equal(trit_optim_grad_norm(&n, 1, &norm), TRIT_ERR_INVALID);
    trit_tensor *wrong = with_grad(1, (int64_t[]){2}, NULL);
    trit_tensor_free(wrong->grad);
    wrong->grad = trit_tensor_new(TRIT_F32, 1, (int64_t[]){3});
    assert_int_equal(trit_optim_grad_norm(&wrong, 1, &norm), TRIT_ERR_SHAPE);
    assert_true(grad_at(a, 0) == 3.0f);
    trit_tensor_free(wrong);
    trit_tensor_free(a);
}

// 1.5M elements: more than the 256 blocks of 4096 a tensor may be split into.
static void test_thread_count_independence(void **state) {
    (void)state;
    trit_tensor *t[2];
    double norms[2];
    for (int k = 0; k < 2; k++) {
        t[k] = with_grad(2, (int64_t[]){1500, 1001}, NULL);
        assert_int_equal(trit_tensor_fill_normal(t[k]->grad, 0.0, 1.0, 3, 4), TRIT_OK);
        trit_threads_set(k + 1);
        assert_int_equal(trit_threads_get(), k + 1);
        assert_int_equal(trit_optim_clip_grad_norm(&t[k], 1, 1.0, &norms[k]), TRIT_OK);
    }
    trit_threads_set(0);
    assert_memory_equal(&norms[0], &norms[1], sizeof(double));
    assert_memory_equal(t[0]->grad->data, t[1]->grad->data, trit_tensor_nbytes(t[0]));
    // sqrt(n) for unit normals, within sampling error.
    assert_true(fabs(norms[0] / sqrt(1500.0 * 1001.0) - 1.0) < 0.01);
    trit_tensor_free(t[0]);
    trit_tensor_free(t[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm_and_clip_known_values),
        cmocka_unit_test(test_skipped_params_do_not_count),
        cmocka_unit_test(test_nonfinite_norm_is_an_error),
        cmocka_unit_test(test_bad_arguments),
        cmocka_unit_test(test_thread_count_independence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
