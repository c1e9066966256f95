// Optimizer state for checkpoints (copy out, copy into a fresh optimizer, identical next steps)
// and independence of the thread count (1 vs 2 threads give the same bits).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trit/optim.h"

// A named f32 parameter with a grad, values drawn from (seed, stream).
static trit_tensor *param(const char *name, int ndim, const int64_t *shape, uint64_t stream) {
    trit_tensor *t = trit_tensor_new(TRIT_F32, ndim, shape);
    assert_non_null(t);
    t->grad = trit_tensor_new(TRIT_F32, ndim, shape);
    assert_non_null(t->grad);
    t->flags |= TRIT_FLAG_PARAM;
    if (name) assert_int_equal(trit_tensor_set_name(t, name), TRIT_OK);
    assert_int_equal(trit_tensor_fill_normal(t, 0.0, 1.0, 7, stream), TRIT_OK);
    return t;
}

// Gradients of step s: a fresh draw per parameter and step.
static void set_grads(trit_tensor **ps, int n, int s) {
    for (int i = 0; i < n; i++)
        assert_int_equal(trit_tensor_fill_normal(ps[i]->grad, 0.0, 0.1, 99, (uint64_t)(s * 16 + i)),
                         TRIT_OK);
}

static void copy_params(trit_tensor **dst, trit_tensor **src, int n) {
    for (int i = 0; i < n; i++) memcpy(dst[i]->data, src[i]->data, trit_tensor_nbytes(src[i]));
}

static void expect_same_params(trit_tensor **a, trit_tensor **b, int n) {
    for (int i = 0; i < n; i++)
        assert_memory_equal(a[i]->data, b[i]->data, trit_tensor_nbytes(a[i]));
}

static void round_trip(trit_optim_config cfg, int bufs_per_param, const char *key0) {
    enum { N = 3 };
    trit_tensor *a[N] = {param("h.0.w", 2, (int64_t[]){40, 33}, 1),
                         param("h.0.b", 1, (int64_t[]){33}, 2), param(NULL, 1, (int64_t[]){5}, 3)};
    trit_tensor *b[N] = {param("h.0.w", 2, (int64_t[]){40, 33}, 4),
                         param("h.0.b", 1, (int64_t[]){33}, 5), param(NULL, 1, (int64_t[]){5}, 6)};
    trit_optim *oa = trit_optim_new_gpt2(&cfg, a, N, 0.1);
    assert_non_null(oa);
    for (int s = 0; s < 3; s++) {
        set_grads(a, N, s);
        assert_int_equal(trit_optim_step(oa, 1e-2), TRIT_OK);
    }
    // Save: every buffer and the step counter.
    int ns = trit_optim_num_state(oa);
    assert_int_equal(ns, N * bufs_per_param);
    float *saved[8];
    char names[8][160];
    for (int i = 0; i < ns; i++) {
        trit_optim_state_buf sb;
        assert_int_equal(trit_optim_get_state(oa, i, &sb), TRIT_OK);
        assert_int_equal(sb.count, trit_tensor_numel(sb.param));
        assert_int_equal(sb.dtype, TRIT_F32);  // typed: dtype, shape and (none yet) scales
        assert_int_equal(sb.ndim, sb.param->ndim);
        assert_memory_equal(sb.shape, sb.param->shape, sizeof sb.shape);
        assert_null(sb.scales);
        saved[i] = malloc((size_t)sb.count * sizeof(float));
        memcpy(saved[i], sb.data, (size_t)sb.count * sizeof(float));
        snprintf(names[i], sizeof names[i], "%s", sb.name);
    }
    char want[64];
    snprintf(want, sizeof want, "h.0.w.%s", key0);
    assert_string_equal(names[0], want);
    snprintf(want, sizeof want, "param2.%s", key0);  // unnamed: index in parameter order
    assert_string_equal(names[2 * bufs_per_param], want);
    int64_t step = trit_optim_get_step(oa);
    assert_int_equal(step, 3);

    // Restore into a fresh optimizer over other tensors holding the same values.
    copy_params(b, a, N);
    trit_optim *ob = trit_optim_new_gpt2(&cfg, b, N, 0.1);
    assert_non_null(ob);
    assert_int_equal(trit_optim_num_state(ob), ns);
    for (int i = 0; i < ns; i++) {
        trit_optim_state_buf sb;
        assert_int_equal(trit_optim_get_state(ob, i, &sb), TRIT_OK);
        assert_string_equal(sb.name, names[i]);
        memcpy(sb.data, saved[i], (size_t)sb.count * sizeof(float));
        free(saved[i]);
    }
    assert_int_equal(trit_optim_set_step(ob, step), TRIT_OK);
    for (int s = 3; s < 6; s++) {
        set_grads(a, N, s);
        set_grads(b, N, s);
        assert_int_equal(trit_optim_step(oa, 1e-2), TRIT_OK);
        assert_int_equal(trit_optim_step(ob, 1e-2), TRIT_OK);
        expect_same_params(a, b, N);
    }
    trit_optim_state_buf sb;
    assert_int_equal(trit_optim_get_state(ob, ns, &sb), TRIT_ERR_RANGE);
    assert_int_equal(trit_optim_set_step(ob, -1), TRIT_ERR_INVALID);
    trit_optim_free(oa);
    trit_optim_free(ob);
    for (int i = 0; i < N; i++) {
        trit_tensor_free(a[i]);
        trit_tensor_free(b[i]);
    }
}

static void test_state_round_trip_adamw(void **state) {
    (void)state;
    round_trip(trit_optim_adamw(0.9, 0.95, 1e-8), 2, "exp_avg");
}

static void test_state_round_trip_momentum(void **state) {
    (void)state;
    round_trip(trit_optim_sgd(0.9, true), 1, "momentum_buffer");
}

static void test_state_round_trip_rmsprop(void **state) {
    (void)state;
    round_trip(trit_optim_rmsprop(0.99, 1e-8, 0.5), 2, "square_avg");
}

// Without the saved step counter Adam's bias correction differs: the restore must set it.
static void test_step_counter_matters(void **state) {
    (void)state;
    trit_tensor *a = param("w", 1, (int64_t[]){16}, 1), *b = param("w", 1, (int64_t[]){16}, 1);
    trit_optim_config cfg = trit_optim_adam(0.9, 0.999, 1e-8);
    trit_optim *oa = trit_optim_new_single(&cfg, &a, 1, 0.0);
    trit_optim *ob = trit_optim_new_single(&cfg, &b, 1, 0.0);
    assert_non_null(oa);
    assert_non_null(ob);
    assert_int_equal(trit_optim_set_step(oa, 10), TRIT_OK);
    set_grads(&a, 1, 0);
    set_grads(&b, 1, 0);
    assert_int_equal(trit_optim_step(oa, 1e-2), TRIT_OK);
    assert_int_equal(trit_optim_step(ob, 1e-2), TRIT_OK);
    assert_memory_not_equal(a->data, b->data, trit_tensor_nbytes(a));
    trit_optim_free(oa);
    trit_optim_free(ob);
    trit_tensor_free(a);
    trit_tensor_free(b);
}

// AdamW over tensors large enough for several chunks on several threads, then the clip norm.
static void run_threads(int threads, trit_tensor **ps, int n, double *norm) {
    trit_threads_set(threads);
    assert_int_equal(trit_threads_get(), threads);
    trit_optim_config cfg = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *o = trit_optim_new_gpt2(&cfg, ps, n, 0.1);
    assert_non_null(o);
    for (int s = 0; s < 3; s++) {
        set_grads(ps, n, s);
        assert_int_equal(trit_optim_clip_grads(o, 1.0, &norm[s]), TRIT_OK);
        assert_int_equal(trit_optim_step(o, 1e-3), TRIT_OK);
    }
    trit_optim_free(o);
    trit_threads_set(0);
}

static void test_thread_count_independence(void **state) {
    (void)state;
    trit_tensor *one[2] = {param("w", 2, (int64_t[]){700, 1001}, 1), param("b", 1, (int64_t[]){1001}, 2)};
    trit_tensor *two[2] = {param("w", 2, (int64_t[]){700, 1001}, 1), param("b", 1, (int64_t[]){1001}, 2)};
    double n1[3], n2[3];
    run_threads(1, one, 2, n1);
    run_threads(2, two, 2, n2);
    assert_memory_equal(n1, n2, sizeof n1);
    expect_same_params(one, two, 2);
    for (int i = 0; i < 2; i++)
        assert_memory_equal(one[i]->grad->data, two[i]->grad->data, trit_tensor_nbytes(one[i]));
    assert_true(n1[0] > 1.0);  // the clip was active
    for (int i = 0; i < 2; i++) {
        trit_tensor_free(one[i]);
        trit_tensor_free(two[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_state_round_trip_adamw),
        cmocka_unit_test(test_state_round_trip_momentum),
        cmocka_unit_test(test_state_round_trip_rmsprop),
        cmocka_unit_test(test_step_counter_matters),
        cmocka_unit_test(test_thread_count_independence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
