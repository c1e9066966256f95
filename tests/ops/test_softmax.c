// softmax and log_softmax: gradient checks (contiguous and transposed inputs), f32 vs f64,
// PyTorch parity, large logits, and bad input.
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

typedef trit_tensor *(*row_op)(trit_graph *, trit_tensor *);

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) {
    return (*(row_op *)ctx)(g, p[0]);  // p0: (3, 5, 7)
}

static trit_tensor *build_strided(trit_graph *g, trit_tensor **p, void *ctx) {
    return (*(row_op *)ctx)(g, trit_transpose(g, p[0], 0, 1));  // p0: (6, 4) -> a strided (4, 6)
}

static void check_op(const char *name, row_op op) {
    int64_t s0[3] = {3, 5, 7}, s1[2] = {6, 4};
    trit_tensor *p = tg_param(3, s0, -3, 3, 11), *q = tg_param(2, s1, -3, 3, 12);
    char what[64];
    snprintf(what, sizeof what, "%s", name);
    tg_check(what, build_plain, &op, 1, &p, 1e-5);
    snprintf(what, sizeof what, "%s (strided)", name);
    tg_check(what, build_strided, &op, 1, &q, 1e-5);
    trit_tensor_free(p);
    trit_tensor_free(q);
}

static void test_softmax_gradcheck(void **state) {
    (void)state;
    check_op("softmax", trit_softmax);
}

static void test_log_softmax_gradcheck(void **state) {
    (void)state;
    check_op("log_softmax", trit_log_softmax);
}

static void check_fixture(const tf_file *nf, const char *c, row_op op, double *worst) {
    char n[64];
    trit_graph *g = trit_graph_new(TRIT_F64);
    snprintf(n, sizeof n, "%s.x", c);
    trit_tensor *x = tf_tensor(nf, n, TRIT_F64, TRIT_FLAG_PARAM);
    snprintf(n, sizeof n, "%s.r", c);
    trit_tensor *r = tf_tensor(nf, n, TRIT_F64, 0);
    trit_tensor *y = op(g, x);
    trit_graph_keep(g, y);
    tg_run(g, tf_dot(g, y, r));
    snprintf(n, sizeof n, "%s.out", c);
    *worst = fmax(*worst, tf_compare(nf, n, y, n, 1e-10));
    snprintf(n, sizeof n, "%s.dx", c);
    *worst = fmax(*worst, tf_compare(nf, n, x->grad, n, 1e-10));
    trit_graph_free(g);
    trit_tensor_free(x);
    trit_tensor_free(r);
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *nf = tf_open("nn.bin");
    double worst = 0;
    check_fixture(nf, "softmax1", trit_softmax, &worst);
    check_fixture(nf, "softmax2", trit_softmax, &worst);
    check_fixture(nf, "logsoftmax1", trit_log_softmax, &worst);
    check_fixture(nf, "logsoftmax2", trit_log_softmax, &worst);
    print_message("softmax/log_softmax vs PyTorch: max abs error %.3g\n", worst);
    tf_close(nf);
}

// Logits of magnitude 1e4 in f32: softmax rows sum to 1, log_softmax is finite and exact
// where the answer is known (a row [1e4, -1e4, 1e4] gives log(1/2), -2e4 - log 2, log(1/2)).
static void test_large_logits(void **state) {
    (void)state;
    int64_t s[2] = {2, 3};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, s, "x");
    trit_tensor *y = trit_softmax(g, x), *ly = trit_log_softmax(g, x);
    trit_graph_keep(g, y);
    trit_graph_keep(g, ly);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    float *xd = x->data;
    const float v[6] = {1e4f, -1e4f, 1e4f, -3e4f, -3e4f + 1, -3e4f + 2};
    memcpy(xd, v, sizeof v);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const float *yd = y->data, *lyd = ly->data;
    for (int r = 0; r < 2; r++) {
        double sum = 0;
        for (int j = 0; j < 3; j++) {
            assert_true(isfinite(yd[3 * r + j]) && isfinite(lyd[3 * r + j]));
            sum += yd[3 * r + j];
        }
        assert_float_equal(sum, 1.0, 1e-6);
    }
    assert_float_equal(lyd[0], -log(2.0), 1e-6);
    assert_float_equal(lyd[1], -2e4 - log(2.0), 1e-2);
    const double lse = log(1 + exp(1.0) + exp(2.0));  // row 2, shifted by its max
    assert_float_equal(lyd[5], 2 - lse, 1e-6);
    trit_graph_free(g);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t s[2] = {2, 3};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *xi = trit_graph_input(g, TRIT_I32, 2, s, "xi");
    assert_null(trit_softmax(g, xi));
    assert_non_null(strstr(trit_last_error(), "softmax: expected a f32 input"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_DTYPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    trit_tensor *x0 = trit_graph_input(g, TRIT_F64, 0, NULL, "scalar");
    assert_null(trit_log_softmax(g, x0));
    assert_non_null(strstr(trit_last_error(), "log_softmax: expected at least 1 dim"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_SHAPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    assert_null(trit_softmax(g, NULL));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_gradcheck),
        cmocka_unit_test(test_log_softmax_gradcheck),
        cmocka_unit_test(test_pytorch_parity),
        cmocka_unit_test(test_large_logits),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
