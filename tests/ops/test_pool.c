// maxpool2d and avgpool2d: PyTorch parity (including windows full of ties, where the gradient
// goes to the first maximum), finite-difference gradients with a strided view of x, f32 against
// f64, known answers for the padding rules (-inf for max, counted zeros for average), bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <string.h>

// ---- pools -------------------------------------------------------------------------

typedef struct pool_case {
    bool max;
    int kernel, stride, padding;
} pool_case;

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) {
    const pool_case *pc = ctx;
    return (pc->max ? trit_maxpool2d : trit_avgpool2d)(g, p[0], pc->kernel, pc->stride, pc->padding);
}

// x: a (2, 3, 6, 7) tensor with H and W swapped.
static trit_tensor *build_view(trit_graph *g, trit_tensor **p, void *ctx) {
    const pool_case *pc = ctx;
    trit_tensor *x = trit_transpose(g, p[0], 2, 3);
    return (pc->max ? trit_maxpool2d : trit_avgpool2d)(g, x, pc->kernel, pc->stride, pc->padding);
}

static void test_matches_pytorch(void **state) {
    (void)state;
    tf_file *fx = tf_open("spatial.bin");
    const char *names[1] = {"x"};
    static const struct {
        const char *name;
        pool_case pc;
    } cases[] = {
        {"max1", {true, 3, 2, 1}}, {"max2", {true, 2, 2, 0}}, {"maxtie", {true, 3, 1, 1}},
        {"avg1", {false, 3, 2, 1}}, {"avg2", {false, 2, 2, 0}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pool_case pc = cases[i].pc;
        double e = tf_check_case(fx, cases[i].name, build_plain, &pc, 1, names, 1e-10);
        print_message("%s vs PyTorch: max rel error %.3g\n", cases[i].name, e);
    }
    tf_close(fx);
}

static void test_gradients(void **state) {
    (void)state;
    int64_t sx[4] = {2, 3, 7, 6}, tx[4] = {2, 3, 6, 7};
    trit_tensor *p[1] = {tg_param(4, sx, -1, 1, 51)};
    trit_tensor *pv[1] = {tg_param(4, tx, -1, 1, 52)};
    pool_case mx = {true, 3, 2, 1}, av = {false, 3, 2, 1}, av2 = {false, 2, 1, 0};
    tg_check("maxpool2d", build_plain, &mx, 1, p, 1e-6);
    tg_check("avgpool2d", build_plain, &av, 1, p, 1e-6);
    tg_check("maxpool2d of a view", build_view, &mx, 1, pv, 1e-6);
    tg_check("avgpool2d of a view", build_view, &av2, 1, pv, 1e-6);
    tg_free_params(1, p);
    tg_free_params(1, pv);
}

// One 4-d f64 input graph: fills x with `fill`, runs the pool and returns out's values.
static void run_pool(const pool_case *pc, const int64_t *sx, double fill, double *out_vals, int64_t *n_out) {
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *x = trit_graph_input(g, TRIT_F64, 4, sx, "x");
    trit_tensor *out = build_plain(g, &x, (void *)pc);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    trit_tensor_fill(x, fill);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    *n_out = trit_tensor_numel(out);
    for (int64_t i = 0; i < *n_out; i++) out_vals[i] = trit_tensor_get_flat(out, i);
    trit_graph_free(g);
}

static void test_padding_rules(void **state) {
    (void)state;
    int64_t sx[4] = {1, 1, 2, 2}, n = 0;
    double v[16];
    // Max pads with -inf: a window over padding and -5s gives -5, not 0.
    pool_case mx = {true, 2, 1, 1};
    run_pool(&mx, sx, -5.0, v, &n);
    assert_int_equal(n, 9);
    for (int i = 0; i < 9; i++) assert_true(v[i] == -5.0);
    // Average counts the padding zeros: ones over a 2x2 window that sees 1, 2 or 4 of them.
    pool_case av = {false, 2, 1, 1};
    run_pool(&av, sx, 1.0, v, &n);
    const double want[9] = {0.25, 0.5, 0.25, 0.5, 1.0, 0.5, 0.25, 0.5, 0.25};
    assert_int_equal(n, 9);
    for (int i = 0; i < 9; i++) assert_true(v[i] == want[i]);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t sx[4] = {2, 3, 7, 6}, s3[3] = {3, 7, 6};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 4, sx, "x");
    tg_expect_graph_error(g, trit_maxpool2d(g, x, 3, 1, 2), TRIT_ERR_INVALID, "padding <= kernel / 2");

    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 4, sx, "x");
    tg_expect_graph_error(g, trit_avgpool2d(g, x, 8, 1, 0), TRIT_ERR_SHAPE, "output would be empty");

    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 4, sx, "x");
    tg_expect_graph_error(g, trit_avgpool2d(g, x, 2, 0, 0), TRIT_ERR_INVALID, "stride >= 1");

    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 3, s3, "x");
    tg_expect_graph_error(g, trit_maxpool2d(g, x, 2, 2, 0), TRIT_ERR_SHAPE, "(N, C, H, W)");

    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_I64, 4, sx, "x");
    tg_expect_graph_error(g, trit_avgpool2d(g, x, 2, 2, 0), TRIT_ERR_DTYPE, "i64");

    g = trit_graph_new(TRIT_F32);
    tg_expect_graph_error(g, trit_maxpool2d(g, NULL, 2, 2, 0), TRIT_ERR_INVALID, "NULL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_padding_rules),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
