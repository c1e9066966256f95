// SwiGLU gate silu(gate) * up: PyTorch parity (including saturated gates), finite-difference
// gradients with the two halves of one tensor as inputs, f32 against f64, bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <math.h>
#include <string.h>

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    return trit_swiglu(g, p[0], p[1]);
}

static void test_matches_pytorch(void **state) {
    (void)state;
    tf_file *f = tf_open("gpt_ops.bin");
    const char *names[2] = {"gate", "up"};
    double e1 = tf_check_case(f, "swiglu1", build_plain, NULL, 2, names, 1e-10);
    double e2 = tf_check_case(f, "swiglu2", build_plain, NULL, 2, names, 1e-10);
    print_message("swiglu vs PyTorch: max rel error %.3g, %.3g\n", e1, e2);
    tf_close(f);
}

// gate and up are the two halves of one (2, 3, 10) tensor (as in a fused c_fc output); a second
// term uses a transposed gate, and the same tensor as gate and up.
static trit_tensor *build_views(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    trit_tensor *parts[2];
    trit_split(g, p[0], 2, 2, (const int64_t[]){5, 5}, parts);
    trit_tensor *a = trit_swiglu(g, parts[0], parts[1]);
    trit_tensor *b = trit_swiglu(g, trit_transpose(g, p[1], 0, 1), p[2]);
    trit_tensor *c = trit_swiglu(g, p[2], p[2]);
    return trit_add(g, trit_add(g, a, b), c);
}

static void test_gradients(void **state) {
    (void)state;
    int64_t s[2] = {6, 7};
    trit_tensor *p[2] = {tg_param(2, s, -4, 4, 31), tg_param(2, s, -1, 1, 32)};
    tg_check("swiglu", build_plain, NULL, 2, p, 1e-5);
    tg_free_params(2, p);

    int64_t s0[3] = {2, 3, 10}, s1[3] = {3, 2, 5}, s2[3] = {2, 3, 5};
    trit_tensor *pv[3] = {tg_param(3, s0, -3, 3, 33), tg_param(3, s1, -3, 3, 34), tg_param(3, s2, -3, 3, 35)};
    tg_check("swiglu of views", build_views, NULL, 3, pv, 1e-5);
    tg_free_params(3, pv);
}

// Known values, including gates far in the tails where exp would overflow a naive sigmoid.
static void test_known_values(void **state) {
    (void)state;
    int64_t s[1] = {5};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *gate = trit_graph_input(g, TRIT_F32, 1, s, "gate"), *up = trit_graph_input(g, TRIT_F32, 1, s, "up");
    trit_tensor *y = trit_swiglu(g, gate, up);
    trit_graph_keep(g, y);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    const float gv[5] = {0.0f, 1.0f, -2.0f, 200.0f, -200.0f}, uv[5] = {3.0f, 2.0f, -1.0f, 0.5f, 7.0f};
    memcpy(gate->data, gv, sizeof gv);
    memcpy(up->data, uv, sizeof uv);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const float *yd = y->data;
    for (int i = 0; i < 5; i++) {
        double want = gv[i] / (1.0 + exp(-(double)gv[i])) * uv[i];
        assert_true(isfinite(yd[i]));
        assert_float_equal(yd[i], want, 1e-6 * fmax(1.0, fabs(want)));
    }
    trit_graph_free(g);
}

static void expect_fail(trit_graph *g, trit_tensor *y, const char *msg) {
    assert_null(y);
    if (!strstr(trit_last_error(), msg)) fail_msg("expected an error containing '%s', got '%s'", msg, trit_last_error());
    assert_int_not_equal(trit_graph_compile(g, NULL), TRIT_OK);
    trit_graph_free(g);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t s[2] = {2, 3}, t[2] = {3, 2};
    trit_graph *g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_swiglu(g, trit_graph_input(g, TRIT_F32, 2, s, "a"), trit_graph_input(g, TRIT_F32, 2, t, "b")),
                "one shape");
    g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_swiglu(g, trit_graph_input(g, TRIT_F32, 2, s, "a"), trit_graph_input(g, TRIT_I32, 2, s, "b")),
                "compute dtype");
    g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_swiglu(g, NULL, trit_graph_input(g, TRIT_F32, 2, s, "b")), "NULL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
