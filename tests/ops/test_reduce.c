// sum, mean, max: known answers and shapes, gradient checks over many axis sets (negative,
// all, keepdim) on contiguous and strided inputs, f32 vs f64, PyTorch parity, ties (the first
// maximum takes the gradient), NaN, empty dims, and bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef trit_tensor *(*red_fn)(trit_graph *, trit_tensor *, int, const int *, bool);

typedef struct red_case {
    red_fn fn;
    int naxes;
    int axes[3];
    bool keepdim;
    int layout;  // 0 plain, 1 permuted (p0: (4, 2, 3) -> (2, 3, 4)), 2 sliced (p0: (2, 3, 7) -> (2, 3, 4))
    bool twice;  // reduced twice from the same parameter: gradients must add up
} red_case;

static trit_tensor *build(trit_graph *g, trit_tensor **p, void *ctx) {
    const red_case *c = ctx;
    trit_tensor *x = p[0];
    if (c->layout == 1) x = trit_permute(g, x, (int[]){1, 2, 0});
    if (c->layout == 2) x = trit_slice(g, x, 2, 2, 6);
    trit_tensor *y = c->fn(g, x, c->naxes, c->axes, c->keepdim);
    return c->twice ? trit_add(g, y, c->fn(g, x, c->naxes, c->axes, c->keepdim)) : y;
}

// Values (2 / n) apart in a scrambled order: no ties, and a +-1e-5 nudge never changes the winner.
static void make_distinct(trit_tensor *p) {
    const int64_t n = trit_tensor_numel(p);
    double *d = p->data;
    for (int64_t i = 0; i < n; i++) d[i] = (double)((i * 7919) % n) * (2.0 / (double)n) - 1.0;
}

static void check_fn(const char *name, red_fn fn, bool distinct) {
    const struct {
        int naxes;
        int axes[3];
    } sets[] = {{0, {0}}, {1, {0}}, {1, {1}}, {1, {2}}, {1, {-1}}, {2, {0, 2}}, {2, {-1, -2}}, {3, {2, 0, 1}}};
    const int64_t shapes[3][3] = {{2, 3, 4}, {4, 2, 3}, {2, 3, 7}};
    for (int layout = 0; layout < 3; layout++) {
        for (size_t s = 0; s < sizeof sets / sizeof sets[0]; s++) {
            for (int keep = 0; keep < 2; keep++) {
                red_case c = {fn, sets[s].naxes, {0}, keep != 0, layout, false};
                memcpy(c.axes, sets[s].axes, sizeof c.axes);
                trit_tensor *p = tg_param(3, shapes[layout], -1, 1, 40 + s);
                if (distinct) make_distinct(p);
                char what[96];
                snprintf(what, sizeof what, "%s, layout %d, axes set %zu, keepdim %d", name, layout, s, keep);
                tg_assert_gradcheck_sampled(what, build, &c, 1, &p);
                tg_assert_f32_close(what, build, &c, 1, &p, 1e-5);
                tg_free_params(1, &p);
            }
        }
    }
    // Large enough for the threaded paths: columns, rows, everything.
    const int64_t big[2] = {64, 600};
    const red_case large[4] = {
        {fn, 1, {0}, false, 0, false}, {fn, 1, {1}, true, 0, false}, {fn, 0, {0}, false, 0, false}, {fn, 1, {1}, false, 0, true}};
    for (int i = 0; i < 4; i++) {
        trit_tensor *p = tg_param(2, big, -1, 1, 77);
        if (distinct) make_distinct(p);
        char what[96];
        snprintf(what, sizeof what, "%s, large %d", name, i);
        tg_assert_gradcheck_sampled(what, build, (void *)&large[i], 1, &p);
        tg_assert_f32_close(what, build, (void *)&large[i], 1, &p, 1e-5);
        tg_free_params(1, &p);
    }
}

static void test_sum_grad(void **state) { (void)state; check_fn("sum", trit_sum, false); }
static void test_mean_grad(void **state) { (void)state; check_fn("mean", trit_mean, false); }
static void test_max_grad(void **state) { (void)state; check_fn("max", trit_max, true); }

// Runs fn over x = data (shape), returns the output's values and d sum(out) / d x.
static trit_tensor *run(red_fn fn, trit_dtype dt, int ndim, const int64_t *shape, const double *data, int naxes,
                        const int *axes, bool keepdim, double *out, double *grad) {
    trit_tensor *x = trit_tensor_new(dt, ndim, shape);
    x->flags |= TRIT_FLAG_PARAM;
    for (int64_t i = 0; i < trit_tensor_numel(x); i++) trit_tensor_set_flat(x, i, data[i]);
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *y = fn(g, x, naxes, axes, keepdim);
    assert_non_null(y);
    trit_graph_keep(g, y);
    assert_int_equal(trit_graph_compile(g, trit_sum(g, y, 0, NULL, false)), TRIT_OK);
    trit_graph_zero_grad(g);
    trit_status s = trit_graph_forward(g);
    for (int64_t i = 0; i < trit_tensor_numel(y); i++) out[i] = trit_tensor_get_flat(y, i);
    if (s == TRIT_OK) {
        assert_int_equal(trit_graph_backward(g), TRIT_OK);
        for (int64_t i = 0; i < trit_tensor_numel(x); i++) grad[i] = trit_tensor_get_flat(x->grad, i);
    }
    static trit_tensor shape_only;  // the output's shape, for the caller to check
    shape_only = *y;
    trit_graph_free(g);
    trit_tensor_free(x);
    return &shape_only;
}

static void test_known_values(void **state) {
    (void)state;
    const double x[6] = {0, 1, 2, 3, 4, 5};  // (2, 3)
    const int64_t s23[2] = {2, 3};
    double y[6], gr[6];
    for (int dt = 0; dt < 2; dt++) {
        const trit_dtype d = dt ? TRIT_F64 : TRIT_F32;
        trit_tensor *o = run(trit_sum, d, 2, s23, x, 1, (int[]){0}, false, y, gr);
        assert_int_equal(o->ndim, 1);
        assert_int_equal(o->shape[0], 3);
        assert_float_equal(y[0], 3, 0);
        assert_float_equal(y[2], 7, 0);
        for (int i = 0; i < 6; i++) assert_float_equal(gr[i], 1, 0);
        o = run(trit_mean, d, 2, s23, x, 1, (int[]){-1}, true, y, gr);
        assert_int_equal(o->ndim, 2);
        assert_int_equal(o->shape[0], 2);
        assert_int_equal(o->shape[1], 1);
        assert_float_equal(y[0], 1, 1e-7);
        assert_float_equal(y[1], 4, 1e-7);
        for (int i = 0; i < 6; i++) assert_float_equal(gr[i], 1.0 / 3, 1e-7);
        o = run(trit_max, d, 2, s23, x, 0, NULL, true, y, gr);
        assert_int_equal(o->ndim, 2);
        assert_int_equal(o->shape[0] * o->shape[1], 1);
        assert_float_equal(y[0], 5, 0);
        o = run(trit_sum, d, 2, s23, x, 0, NULL, false, y, gr);
        assert_int_equal(o->ndim, 0);
        assert_float_equal(y[0], 15, 0);
    }
}

// Ties: the first maximum (in row-major order of the reduced dims) takes the whole gradient.
static void test_max_ties_and_nan(void **state) {
    (void)state;
    double y[4], gr[8];
    const double t[4] = {1, 3, 3, 2};
    run(trit_max, TRIT_F64, 1, (int64_t[]){4}, t, 0, NULL, false, y, gr);
    assert_float_equal(y[0], 3, 0);
    const double want[4] = {0, 1, 0, 0};
    for (int i = 0; i < 4; i++) assert_float_equal(gr[i], want[i], 0);
    // (2, 4) over axis 0: columns tie in column 1 and 3.
    const double m[8] = {5, 2, 0, 7, 1, 2, 4, 7};
    run(trit_max, TRIT_F32, 2, (int64_t[]){2, 4}, m, 1, (int[]){0}, false, y, gr);
    const double wy[4] = {5, 2, 4, 7}, wg[8] = {1, 1, 0, 1, 0, 0, 1, 0};
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], wy[i], 0);
    for (int i = 0; i < 8; i++) assert_float_equal(gr[i], wg[i], 0);
    // NaN wins, as in PyTorch (the forward then reports a NaN loss).
    const double n[3] = {1, NAN, 3};
    run(trit_max, TRIT_F64, 1, (int64_t[]){3}, n, 0, NULL, false, y, gr);
    assert_true(isnan(y[0]));
}

// A reduction over an empty dim: sum 0, mean NaN (as PyTorch); max has no answer and says so.
static void test_empty(void **state) {
    (void)state;
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *x = trit_graph_input(g, TRIT_F64, 2, (int64_t[]){3, 0}, "x");
    trit_tensor *s = trit_sum(g, x, 1, (int[]){1}, false), *m = trit_mean(g, x, 1, (int[]){1}, false);
    trit_graph_keep(g, s);
    trit_graph_keep(g, m);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    for (int i = 0; i < 3; i++) {
        assert_float_equal(trit_tensor_get_flat(s, i), 0, 0);
        assert_true(isnan(trit_tensor_get_flat(m, i)));
    }
    assert_null(trit_max(g, x, 1, (int[]){1}, false));
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_F64, 2, (int64_t[]){3, 0}, "x");
    assert_null(trit_max(g, x, 1, (int[]){-1}, false));
    assert_non_null(strstr(trit_last_error(), "empty"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_SHAPE);
    trit_graph_free(g);
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *f = tf_open("math.bin");
    const char *const x[1] = {"x"};
    const struct {
        const char *fcase;
        red_case c;
    } cases[] = {
        {"sum_02", {trit_sum, 2, {0, 2}, false, 0, false}},   {"sum_all", {trit_sum, 0, {0}, false, 0, false}},
        {"sum_1_keep", {trit_sum, 1, {1}, true, 0, false}},   {"mean_last_keep", {trit_mean, 1, {-1}, true, 0, false}},
        {"mean_01", {trit_mean, 2, {0, 1}, false, 0, false}}, {"max_1", {trit_max, 1, {1}, false, 0, false}},
        {"max_all", {trit_max, 0, {0}, false, 0, false}},     {"max_02_keep", {trit_max, 2, {0, 2}, true, 0, false}},
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        worst = fmax(worst, tf_check_case(f, cases[i].fcase, build, (void *)&cases[i].c, 1, x, 1e-10));
    print_message("reductions vs PyTorch (f64): max relative error %.3g\n", worst);
    tf_close(f);
}

static void test_bad_input(void **state) {
    (void)state;
    const struct {
        int naxes;
        int axes[2];
        const char *msg;
    } bad[] = {{1, {2}, "out of range"}, {1, {-3}, "out of range"}, {2, {1, -1}, "repeated"}, {-1, {0}, "axes"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        trit_graph *g = trit_graph_new(TRIT_F32);
        trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){2, 3}, "x");
        assert_null(trit_mean(g, x, bad[i].naxes, bad[i].axes, false));
        assert_non_null(strstr(trit_last_error(), bad[i].msg));
        assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
        trit_graph_free(g);
    }
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *i = trit_graph_input(g, TRIT_I64, 1, (int64_t[]){3}, "i");
    assert_null(trit_sum(g, i, 0, NULL, false));
    assert_non_null(strstr(trit_last_error(), "sum: expected a f32 input"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_DTYPE);
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F32);
    assert_null(trit_max(g, NULL, 0, NULL, false));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values),   cmocka_unit_test(test_max_ties_and_nan), cmocka_unit_test(test_empty),
        cmocka_unit_test(test_sum_grad),       cmocka_unit_test(test_mean_grad),        cmocka_unit_test(test_max_grad),
        cmocka_unit_test(test_pytorch_parity), cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
