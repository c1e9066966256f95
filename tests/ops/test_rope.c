// Rotary position embedding: PyTorch parity (rotate-half form), finite-difference gradients with
// strided input views, f32 against f64, the relative-position property that motivates RoPE,
// and bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <math.h>
#include <string.h>

typedef struct rope_ctx {
    int n_head;
    double theta;
} rope_ctx;

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) {
    const rope_ctx *r = ctx;
    return trit_rope(g, p[0], r->n_head, r->theta);
}

static void test_matches_pytorch(void **state) {
    (void)state;
    tf_file *f = tf_open("gpt_ops.bin");
    const char *names[1] = {"x"};
    rope_ctx c1 = {2, 10000.0}, c2 = {3, 100.0}, c3 = {1, 10000.0};
    double e1 = tf_check_case(f, "rope1", build_plain, &c1, 1, names, 1e-10);
    double e2 = tf_check_case(f, "rope2", build_plain, &c2, 1, names, 1e-10);
    double e3 = tf_check_case(f, "rope3", build_plain, &c3, 1, names, 1e-10);
    print_message("rope vs PyTorch: max rel error %.3g, %.3g, %.3g\n", e1, e2, e3);
    tf_close(f);
}

// x: columns [8, 20) of a (2, 5, 24) tensor (the q part of a fused qkv, strided rows);
// y: a (5, 2, 12) tensor transposed to (2, 5, 12), so batch and time strides are swapped.
static trit_tensor *build_views(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    trit_tensor *x = trit_rope(g, trit_slice(g, p[0], 2, 8, 20), 3, 10000.0);
    trit_tensor *y = trit_rope(g, trit_transpose(g, p[1], 0, 1), 2, 500.0);
    return trit_add(g, x, y);
}

static void test_gradients(void **state) {
    (void)state;
    int64_t s[3] = {3, 7, 16};
    rope_ctx c = {4, 10000.0};
    trit_tensor *p[1] = {tg_param(3, s, -1, 1, 21)};
    tg_check("rope", build_plain, &c, 1, p, 1e-5);
    tg_free_params(1, p);

    int64_t sa[3] = {2, 5, 24}, sb[3] = {5, 2, 12};
    trit_tensor *pv[2] = {tg_param(3, sa, -1, 1, 22), tg_param(3, sb, -1, 1, 23)};
    tg_check("rope of views", build_views, NULL, 2, pv, 1e-5);
    tg_free_params(2, pv);
}

// Runs rope on an f64 input filled by the caller; returns the graph (output kept in *out).
static trit_graph *run_rope(const double *x, int64_t B, int64_t T, int64_t C, int H, double theta, trit_tensor **out) {
    trit_graph *g = trit_graph_new(TRIT_F64);
    int64_t s[3] = {B, T, C};
    trit_tensor *in = trit_graph_input(g, TRIT_F64, 3, s, "x");
    *out = trit_rope(g, in, H, theta);
    trit_graph_keep(g, *out);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    memcpy(in->data, x, sizeof(double) * (size_t)(B * T * C));
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    return g;
}

// The same q and k at every position: after RoPE, q_t . k_s depends on t - s only, position 0 is
// left unchanged, and each rotated pair keeps its length.
static void test_relative_positions(void **state) {
    (void)state;
    enum { T = 9, C = 8 };
    double x[2 * T * C];  // batch 0: q repeated, batch 1: k repeated
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) {
            x[t * C + c] = sin(1.0 + c);
            x[T * C + t * C + c] = cos(2.0 + 3 * c);
        }
    trit_tensor *y;
    trit_graph *g = run_rope(x, 2, T, C, 2, 10000.0, &y);
    const double *yd = y->data, *q = yd, *k = yd + T * C;
    for (int c = 0; c < C; c++) assert_float_equal(q[c], x[c], 1e-15);
    for (int t = 0; t < T; t++)
        for (int h = 0; h < 2; h++)
            for (int i = 0; i < 2; i++) {
                int j1 = t * C + h * 4 + i, j2 = j1 + 2;
                assert_float_equal(hypot(q[j1], q[j2]), hypot(x[j1], x[j2]), 1e-14);
            }
    for (int d = 0; d < T; d++) {
        double ref = 0;
        for (int c = 0; c < C; c++) ref += q[d * C + c] * k[c];
        for (int s = 0; s + d < T; s++) {
            double dot = 0;
            for (int c = 0; c < C; c++) dot += q[(s + d) * C + c] * k[s * C + c];
            assert_float_equal(dot, ref, 1e-12);
        }
    }
    trit_graph_free(g);
}

static void expect_fail(trit_graph *g, trit_tensor *y, const char *msg) {
    assert_null(y);
    if (!strstr(trit_last_error(), msg)) fail_msg("expected an error containing '%s', got '%s'", msg, trit_last_error());
    trit_status s = trit_graph_compile(g, NULL);
    assert_int_not_equal(s, TRIT_OK);
    trit_graph_free(g);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t s[3] = {2, 3, 12}, s2[2] = {3, 12};
    trit_graph *g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_rope(g, trit_graph_input(g, TRIT_F32, 3, s, "x"), 5, 1e4), "multiple of n_head");
    g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_rope(g, trit_graph_input(g, TRIT_F32, 3, s, "x"), 4, 1e4), "even");  // hs = 3
    g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_rope(g, trit_graph_input(g, TRIT_F32, 2, s2, "x"), 2, 1e4), "(B, T, C)");
    g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_rope(g, trit_graph_input(g, TRIT_I32, 3, s, "x"), 2, 1e4), "compute dtype");
    g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_rope(g, trit_graph_input(g, TRIT_F32, 3, s, "x"), 2, 0.0), "theta");
    g = trit_graph_new(TRIT_F32);
    expect_fail(g, trit_rope(g, NULL, 2, 1e4), "NULL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_relative_positions),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
