// concat: PyTorch parity (middle and last axis), finite-difference gradients with strided views
// and with one tensor given twice, f32 against f64, the 16-input limit, bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <string.h>

// ---- concat ------------------------------------------------------------------------

typedef struct cat_case {
    int n, axis;
} cat_case;

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) {
    const cat_case *cc = ctx;
    return trit_concat(g, cc->n, p, cc->axis);
}

static void test_matches_pytorch(void **state) {
    (void)state;
    tf_file *fx = tf_open("spatial.bin");
    const char *names[3] = {"a", "b", "c"};
    cat_case c1 = {3, 1}, c2 = {2, -1};
    double e1 = tf_check_case(fx, "cat1", build_plain, &c1, 3, names, 1e-10);
    double e2 = tf_check_case(fx, "cat2", build_plain, &c2, 2, names, 1e-10);
    print_message("concat vs PyTorch: max rel error %.3g (axis 1), %.3g (axis -1)\n", e1, e2);
    tf_close(fx);
}

// A transposed (4, 3, 2) -> (2, 3, 4), a slice of a (2, 5, 4) and p0 again, along axis 1;
// then the result with itself along axis 0.
static trit_tensor *build_views(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    trit_tensor *xs[3] = {trit_transpose(g, p[0], 0, 2), trit_slice(g, p[1], 1, 1, 4), NULL};
    xs[2] = xs[0];
    trit_tensor *y = trit_concat(g, 3, xs, 1);  // (2, 9, 4)
    trit_tensor *twice[2] = {y, y};
    return trit_concat(g, 2, twice, 0);  // (4, 9, 4)
}

static void test_gradients(void **state) {
    (void)state;
    int64_t s0[3] = {4, 3, 2}, s1[3] = {2, 5, 4};
    trit_tensor *p[2] = {tg_param(3, s0, -1, 1, 61), tg_param(3, s1, -1, 1, 62)};
    tg_check("concat of views", build_views, NULL, 2, p, 1e-6);
    tg_free_params(2, p);

    int64_t sa[2] = {3, 2}, sb[2] = {3, 5};
    trit_tensor *q[2] = {tg_param(2, sa, -1, 1, 63), tg_param(2, sb, -1, 1, 64)};
    cat_case last = {2, -1};
    tg_check("concat last axis", build_plain, &last, 2, q, 1e-6);
    tg_free_params(2, q);
}

static void test_sixteen_inputs(void **state) {
    (void)state;
    // Sixteen (1, 2) rows stack into (16, 2) in order; a seventeenth input is refused.
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *xs[17];
    int64_t s[2] = {1, 2};
    for (int i = 0; i < 17; i++) xs[i] = trit_graph_input(g, TRIT_F64, 2, s, "x");
    trit_tensor *out = trit_concat(g, 16, xs, 0);
    assert_non_null(out);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    for (int i = 0; i < 16; i++) {
        ((double *)xs[i]->data)[0] = i;
        ((double *)xs[i]->data)[1] = -i;
    }
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(out->shape[0], 16);
    for (int i = 0; i < 16; i++) {
        assert_true(((double *)out->data)[2 * i] == i);
        assert_true(((double *)out->data)[2 * i + 1] == -i);
    }
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    for (int i = 0; i < 17; i++) xs[i] = trit_graph_input(g, TRIT_F64, 2, s, "x");
    tg_expect_graph_error(g, trit_concat(g, 17, xs, 0), TRIT_ERR_INVALID, "1 to 16");
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t s[3] = {2, 3, 4}, s2[3] = {2, 3, 5}, s2d[2] = {2, 3};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *xs[2] = {trit_graph_input(g, TRIT_F32, 3, s, "a"), trit_graph_input(g, TRIT_F32, 3, s2, "b")};
    tg_expect_graph_error(g, trit_concat(g, 2, xs, 1), TRIT_ERR_SHAPE, "all dims but axis 1 must agree");

    g = trit_graph_new(TRIT_F32);
    xs[0] = trit_graph_input(g, TRIT_F32, 3, s, "a");
    xs[1] = trit_graph_input(g, TRIT_F32, 2, s2d, "b");
    tg_expect_graph_error(g, trit_concat(g, 2, xs, 0), TRIT_ERR_SHAPE, "(2, 3)");

    g = trit_graph_new(TRIT_F32);
    xs[0] = xs[1] = trit_graph_input(g, TRIT_F32, 3, s, "a");
    tg_expect_graph_error(g, trit_concat(g, 2, xs, 3), TRIT_ERR_INVALID, "axis 3 out of range");

    g = trit_graph_new(TRIT_F32);
    xs[0] = trit_graph_input(g, TRIT_F32, 3, s, "a");
    xs[1] = trit_graph_input(g, TRIT_I32, 3, s, "b");
    tg_expect_graph_error(g, trit_concat(g, 2, xs, 0), TRIT_ERR_DTYPE, "i32");

    g = trit_graph_new(TRIT_F32);
    xs[0] = trit_graph_input(g, TRIT_F32, 3, s, "a");
    xs[1] = NULL;
    tg_expect_graph_error(g, trit_concat(g, 2, xs, 0), TRIT_ERR_INVALID, "NULL");

    g = trit_graph_new(TRIT_F32);
    tg_expect_graph_error(g, trit_concat(g, 0, xs, 0), TRIT_ERR_INVALID, "n = 0");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_sixteen_inputs),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
