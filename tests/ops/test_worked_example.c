// The seed's worked example through the graph: y = w x + b with x = 2, w = 0.5, b = 0.1, target
// t = 3, L = (y - t)^2 from mul, add, sub and pow. Forward: y = 1.1, L = 3.61. Backward:
// dL/dy = 2 (y - t) = -3.8, dL/dw = x dL/dy = -7.6, dL/db = -3.8. One plain SGD step at lr 0.01:
// w = 0.5 + 0.076 = 0.576, b = 0.1 + 0.038 = 0.138. In f32 to 1e-6 and in f64 to 1e-12, with
// w, b as 0-d tensors and again as shape (1).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>

static trit_tensor *scalar(trit_dtype dt, int ndim, double v, bool param) {
    const int64_t one[1] = {1};
    trit_tensor *t = trit_tensor_new(dt, ndim, ndim ? one : NULL);
    assert_non_null(t);
    trit_tensor_set_flat(t, 0, v);
    if (param) t->flags |= TRIT_FLAG_PARAM;
    return t;
}

static double value(const trit_tensor *t) {
    assert_int_equal(trit_tensor_numel(t), 1);
    return trit_tensor_get_flat(t, 0);
}

// dL/dy from a graph of its own: y is the parameter there, L = (y - t)^2.
static double dl_dy_alone(trit_dtype dt, int ndim, double y_value) {
    trit_tensor *y = scalar(dt, ndim, y_value, true), *t = scalar(dt, ndim, 3.0, false);
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *loss = trit_pow(g, trit_sub(g, y, t), 2.0);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    const double d = value(y->grad);
    trit_graph_free(g);
    trit_tensor_free(y);
    trit_tensor_free(t);
    return d;
}

static void run_example(trit_dtype dt, int ndim, double tol) {
    trit_tensor *w = scalar(dt, ndim, 0.5, true), *b = scalar(dt, ndim, 0.1, true);
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *x = trit_graph_input(g, dt, ndim, (int64_t[]){1}, "x");
    trit_tensor *t = trit_graph_input(g, dt, ndim, (int64_t[]){1}, "t");
    trit_tensor *y = trit_add(g, trit_mul(g, w, x), b);
    trit_tensor *loss = trit_pow(g, trit_sub(g, y, t), 2.0);
    assert_non_null(loss);
    assert_int_equal(trit_graph_keep(g, y), TRIT_OK);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    trit_tensor_set_flat(x, 0, 2.0);
    trit_tensor_set_flat(t, 0, 3.0);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);

    assert_float_equal(value(y), 1.1, tol);
    assert_float_equal(value(loss), 3.61, tol);
    const double dw = value(w->grad), db = value(b->grad);
    assert_float_equal(dw, -7.6, tol);
    assert_float_equal(db, -3.8, tol);
    // dL/dy three ways: kept in the graph, by the chain rule dL/dw = x dL/dy, and alone.
    assert_float_equal(value(trit_graph_grad(g, y)), -3.8, tol);
    assert_float_equal(dw / 2.0, -3.8, tol);
    assert_float_equal(dl_dy_alone(dt, ndim, value(y)), -3.8, tol);

    // One plain SGD step, by hand: p -= lr * grad.
    const double lr = 0.01;
    trit_tensor_set_flat(w, 0, value(w) - lr * dw);
    trit_tensor_set_flat(b, 0, value(b) - lr * db);
    assert_float_equal(value(w), 0.576, tol);
    assert_float_equal(value(b), 0.138, tol);

    // The stepped model is closer: y = 0.576 * 2 + 0.138 = 1.29, L = 1.71^2 = 2.9241.
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_float_equal(value(y), 1.29, tol);
    assert_float_equal(value(loss), 2.9241, tol);
    trit_graph_free(g);
    trit_tensor_free(w);
    trit_tensor_free(b);
}

static void test_f32_scalars(void **state) { (void)state; run_example(TRIT_F32, 0, 1e-6); }
static void test_f32_shape1(void **state) { (void)state; run_example(TRIT_F32, 1, 1e-6); }
static void test_f64_scalars(void **state) { (void)state; run_example(TRIT_F64, 0, 1e-12); }
static void test_f64_shape1(void **state) { (void)state; run_example(TRIT_F64, 1, 1e-12); }

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_scalars),
        cmocka_unit_test(test_f32_shape1),
        cmocka_unit_test(test_f64_scalars),
        cmocka_unit_test(test_f64_shape1),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
