// batchnorm: gradient checks in training and eval mode (with and without running statistics,
// affine or not, strided and 2-d input), f32 vs f64, PyTorch parity including the running
// statistics after a step, and bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"
#include "graph/graph_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bn_case {
    bool training, strided;
    int w, b;                 // index into p, or -1
    trit_tensor *rm, *rv;     // running statistics or NULL
    double momentum;
} bn_case;

static trit_tensor *build_bn(trit_graph *g, trit_tensor **p, void *ctx) {
    const bn_case *c = ctx;
    trit_graph_set_training(g, c->training);
    trit_tensor *x = c->strided ? trit_transpose(g, p[0], 0, 1) : p[0];
    return trit_batchnorm(g, x, c->w >= 0 ? p[c->w] : NULL, c->b >= 0 ? p[c->b] : NULL, c->rm, c->rv, c->momentum, 1e-5);
}

static trit_tensor *state_tensor(int64_t C, double lo, double hi, uint64_t seed) {
    trit_tensor *t = trit_tensor_new(TRIT_F64, 1, &C);
    trit_tensor_fill_uniform(t, lo, hi, seed, 1);
    t->flags |= TRIT_FLAG_STATE;
    return t;
}

static void test_gradcheck(void **state) {
    (void)state;
    int64_t sx[4] = {4, 3, 2, 3}, sc[1] = {3};
    trit_tensor *p[3] = {tg_param(4, sx, -2, 2, 51), tg_param(1, sc, 0.5, 1.5, 52), tg_param(1, sc, -1, 1, 53)};
    trit_tensor *rm = state_tensor(3, -0.5, 0.5, 54), *rv = state_tensor(3, 0.5, 1.5, 55);
    bn_case train = {true, false, 1, 2, rm, rv, 0.1}, eval = {false, false, 1, 2, rm, rv, 0.1};
    tg_check("batchnorm train 4-d", build_bn, &train, 3, p, 1e-5);
    tg_check("batchnorm eval 4-d", build_bn, &eval, 3, p, 1e-5);
    // No running statistics: batch statistics in both modes.
    bn_case untracked = {false, false, 1, 2, NULL, NULL, 0.1};
    tg_check("batchnorm untracked eval", build_bn, &untracked, 3, p, 1e-5);
    // (4, 3, 5) transposed to a strided (3, 4, 5): N = 3, C = 4, no affine.
    int64_t st[3] = {4, 3, 5};
    trit_tensor *q = tg_param(3, st, -2, 2, 56);
    trit_tensor *rm4 = state_tensor(4, -0.5, 0.5, 57), *rv4 = state_tensor(4, 0.5, 1.5, 58);
    bn_case plain = {true, true, -1, -1, rm4, rv4, 0.1}, plain_eval = {false, true, -1, -1, rm4, rv4, 0.1};
    tg_check("batchnorm train strided", build_bn, &plain, 1, &q, 1e-5);
    tg_check("batchnorm eval strided", build_bn, &plain_eval, 1, &q, 1e-5);
    // 2-d input (N, C) with a weight only.
    int64_t s2[2] = {6, 3};
    trit_tensor *r[2] = {tg_param(2, s2, -2, 2, 59), p[1]};
    bn_case two = {true, false, 1, -1, rm, rv, 0.2};
    tg_check("batchnorm train 2-d", build_bn, &two, 2, r, 1e-5);
    trit_tensor_free(r[0]);
    trit_tensor_free(q);
    trit_tensor_free(rm);
    trit_tensor_free(rv);
    trit_tensor_free(rm4);
    trit_tensor_free(rv4);
    tg_free_params(3, p);
}

static double bn_fixture(const tf_file *nf, const char *c, bool training, double momentum) {
    char n[64];
    const char *names[5] = {"x", "w", "b", "running_mean", "running_var"};
    trit_tensor *t[5];
    for (int i = 0; i < 5; i++) {
        snprintf(n, sizeof n, "%s.%s", c, names[i]);
        t[i] = tf_tensor(nf, n, TRIT_F64, i < 3 ? TRIT_FLAG_PARAM : TRIT_FLAG_STATE);
    }
    snprintf(n, sizeof n, "%s.r", c);
    trit_tensor *r = tf_tensor(nf, n, TRIT_F64, 0);
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_graph_set_training(g, training);
    trit_tensor *y = trit_batchnorm(g, t[0], t[1], t[2], t[3], t[4], momentum, 1e-5);
    trit_graph_keep(g, y);
    tg_run(g, tf_dot(g, y, r));  // one forward: one update of the running statistics
    snprintf(n, sizeof n, "%s.out", c);
    double worst = tf_compare(nf, n, y, n, 1e-10);
    for (int i = 0; i < 3; i++) {
        snprintf(n, sizeof n, "%s.d%s", c, names[i]);
        worst = fmax(worst, tf_compare(nf, n, t[i]->grad, n, 1e-10));
    }
    for (int i = 3; i < 5; i++) {
        snprintf(n, sizeof n, "%s.%s_after", c, names[i]);
        worst = fmax(worst, tf_compare(nf, n, t[i], n, 1e-10));
    }
    trit_graph_free(g);
    for (int i = 0; i < 5; i++) trit_tensor_free(t[i]);
    trit_tensor_free(r);
    return worst;
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *nf = tf_open("nn.bin");
    double worst = bn_fixture(nf, "bn_train", true, 0.1);
    worst = fmax(worst, bn_fixture(nf, "bn_eval", false, 0.1));
    worst = fmax(worst, bn_fixture(nf, "bn_train2d", true, 0.3));
    print_message("batchnorm vs PyTorch (incl. running stats): max abs error %.3g\n", worst);
    tf_close(nf);
}

// f32 running statistics in an f64 graph are read and written in their own dtype; eval mode
// leaves them untouched.
static void test_running_stats_dtype_and_eval(void **state) {
    (void)state;
    int64_t sx[2] = {4, 2}, sc[1] = {2};
    const double xv[8] = {1, 10, 2, 20, 3, 30, 6, 40};  // channel 0: mean 3, channel 1: mean 25
    trit_tensor *x = trit_tensor_new(TRIT_F64, 2, sx);
    for (int i = 0; i < 8; i++) trit_tensor_set_flat(x, i, xv[i]);
    trit_tensor *rm = trit_tensor_new(TRIT_F32, 1, sc), *rv = trit_tensor_new(TRIT_F32, 1, sc);
    rm->flags |= TRIT_FLAG_STATE;
    rv->flags |= TRIT_FLAG_STATE;
    trit_tensor_fill(rv, 1.0);
    for (int training = 1; training >= 0; training--) {
        trit_graph *g = trit_graph_new(TRIT_F64);
        trit_graph_set_training(g, training);
        trit_tensor *y = trit_batchnorm(g, x, NULL, NULL, rm, rv, 0.5, 0.0);
        trit_graph_keep(g, y);
        assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
        assert_int_equal(trit_graph_forward(g), TRIT_OK);
        // After the training step: mean 0.5 * 3, 0.5 * 25; unbiased variances 14/3 and 500/3.
        assert_float_equal(trit_tensor_get_flat(rm, 0), 1.5, 1e-6);
        assert_float_equal(trit_tensor_get_flat(rm, 1), 12.5, 1e-6);
        assert_float_equal(trit_tensor_get_flat(rv, 0), 0.5 + 0.5 * 14.0 / 3, 1e-5);
        assert_float_equal(trit_tensor_get_flat(rv, 1), 0.5 + 0.5 * 500.0 / 3, 1e-4);
        if (!training) {  // eval: (x - running mean) / sqrt(running var)
            const double want = (6 - 1.5) / sqrt((double)(float)(0.5 + 0.5 * 14.0 / 3));
            assert_float_equal(trit_tensor_get_flat(y, 6), want, 1e-12);
        }
        trit_graph_free(g);
    }
    trit_tensor_free(x);
    trit_tensor_free(rm);
    trit_tensor_free(rv);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t sx[3] = {2, 3, 4}, s3[1] = {3}, s4[1] = {4}, s1[2] = {1, 3};
    trit_tensor *rm = state_tensor(3, 0, 1, 1), *rv = state_tensor(3, 1, 2, 2), *rm4 = state_tensor(4, 0, 1, 3);
    trit_tensor *plain = trit_tensor_new(TRIT_F64, 1, s3);  // no TRIT_FLAG_STATE

    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *x = trit_graph_input(g, TRIT_F64, 3, sx, "x");
    assert_null(trit_batchnorm(g, x, NULL, NULL, plain, rv, 0.1, 1e-5));
    assert_non_null(strstr(trit_last_error(), "lacks TRIT_FLAG_STATE"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_F64, 3, sx, "x");
    assert_null(trit_batchnorm(g, x, NULL, NULL, rm, NULL, 0.1, 1e-5));
    assert_non_null(strstr(trit_last_error(), "both running_mean and running_var"));
    assert_null(trit_batchnorm(g, x, NULL, NULL, rm, rv, 1.5, 1e-5));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_F64, 3, sx, "x");
    assert_null(trit_batchnorm(g, x, NULL, NULL, rm4, rv, 0.1, 1e-5));
    assert_non_null(strstr(trit_last_error(), "of shape (3) for x (2, 3, 4), got (4,)"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_SHAPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_F64, 3, sx, "x");
    trit_tensor *gv = trit_graph_input(g, TRIT_F64, 1, s3, "gv");
    gv->flags |= TRIT_FLAG_STATE;
    assert_null(trit_batchnorm(g, x, NULL, NULL, gv, rv, 0.1, 1e-5));
    assert_non_null(strstr(trit_last_error(), "is a value of a graph"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    trit_tensor *x1 = trit_graph_input(g, TRIT_F64, 1, s4, "x1");
    assert_null(trit_batchnorm(g, x1, NULL, NULL, NULL, NULL, 0.1, 1e-5));
    assert_non_null(strstr(trit_last_error(), "expected x (N, C, ...) with at least 2 dims"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_SHAPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    assert_null(trit_batchnorm(g, NULL, NULL, NULL, rm, rv, 0.1, 1e-5));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);

    // One value per channel in training mode: an error at forward, as in PyTorch.
    g = trit_graph_new(TRIT_F64);
    trit_tensor *xs = trit_graph_input(g, TRIT_F64, 2, s1, "xs");
    trit_tensor *y = trit_batchnorm(g, xs, NULL, NULL, rm, rv, 0.1, 1e-5);
    assert_non_null(y);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    assert_int_equal(trit_graph_forward(g), TRIT_ERR_SHAPE);
    trit_graph_set_training(g, false);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);  // eval mode uses the running statistics
    trit_graph_free(g);

    trit_tensor_free(rm);
    trit_tensor_free(rv);
    trit_tensor_free(rm4);
    trit_tensor_free(plain);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_pytorch_parity),
        cmocka_unit_test(test_running_stats_dtype_and_eval),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
