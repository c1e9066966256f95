// conv2d: PyTorch parity (stride 2 padding 1 with bias; stride 1 padding 0 with a non-square
// kernel, no bias), finite-difference gradients with strided views of x and w, f32 against f64,
// a known answer (a centred delta kernel copies its input), thread-count independence, bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <stdlib.h>
#include <string.h>

// ---- conv2d ------------------------------------------------------------------------

typedef struct conv_case {
    int stride, padding;
} conv_case;

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) {
    const conv_case *cc = ctx;
    return trit_conv2d(g, p[0], p[1], cc->padding == 1 ? p[2] : NULL, cc->stride, cc->padding);
}

static void test_matches_pytorch(void **state) {
    (void)state;
    tf_file *fx = tf_open("spatial.bin");
    const char *names[3] = {"x", "w", "b"};
    conv_case c1 = {2, 1}, c2 = {1, 0};
    double e1 = tf_check_case(fx, "conv1", build_plain, &c1, 3, names, 1e-10);
    double e2 = tf_check_case(fx, "conv2", build_plain, &c2, 2, names, 1e-10);
    print_message("conv2d vs PyTorch: max rel error %.3g (stride 2 pad 1 bias), %.3g (stride 1 pad 0)\n", e1, e2);
    tf_close(fx);
}

// x: a (2, 3, 6, 7) tensor with H and W swapped; w: a slice of 6 output channels down to 4.
static trit_tensor *build_views(trit_graph *g, trit_tensor **p, void *ctx) {
    const conv_case *cc = ctx;
    trit_tensor *x = trit_transpose(g, p[0], 2, 3);
    trit_tensor *w = trit_slice(g, p[1], 0, 1, 5);
    return trit_conv2d(g, x, w, p[2], cc->stride, cc->padding);
}

static void test_gradients(void **state) {
    (void)state;
    int64_t sx[4] = {2, 3, 7, 6}, sw[4] = {4, 3, 3, 3}, sb[1] = {4};
    conv_case c1 = {2, 1}, c2 = {1, 0};
    trit_tensor *p[3] = {tg_param(4, sx, -1, 1, 21), tg_param(4, sw, -1, 1, 22), tg_param(1, sb, -1, 1, 23)};
    tg_check("conv2d stride 2 pad 1", build_plain, &c1, 3, p, 1e-5);
    tg_check("conv2d stride 1 pad 0", build_plain, &c2, 2, p, 1e-5);
    tg_free_params(3, p);

    int64_t tx[4] = {2, 3, 6, 7}, tw[4] = {6, 3, 3, 3};
    trit_tensor *pv[3] = {tg_param(4, tx, -1, 1, 24), tg_param(4, tw, -1, 1, 25), tg_param(1, sb, -1, 1, 26)};
    tg_check("conv2d of views", build_views, &c1, 3, pv, 1e-5);
    tg_free_params(3, pv);
}

static void test_delta_kernel_copies_input(void **state) {
    (void)state;
    // Cout = Cin = 2, w[o][i] = delta at the centre when o == i: out == x with padding 1.
    int64_t sx[4] = {1, 2, 4, 5}, sw[4] = {2, 2, 3, 3};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 4, sx, "x");
    trit_tensor *w = trit_tensor_new(TRIT_F32, 4, sw);
    for (int64_t o = 0; o < 2; o++) trit_tensor_set(w, (int64_t[]){o, o, 1, 1}, 1.0);
    trit_tensor *out = trit_conv2d(g, x, w, NULL, 1, 1);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    trit_tensor_fill_uniform(x, -3, 3, 5, 0);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_true(trit_tensor_same_shape(out, x));
    assert_memory_equal(out->data, x->data, trit_tensor_nbytes(x));
    trit_graph_free(g);
    trit_tensor_free(w);
}

// Output and gradients of an f32 step with `threads` threads, appended to buf.
static int64_t run_f32(int threads, double *buf) {
    int64_t sx[4] = {2, 8, 24, 24}, sw[4] = {16, 8, 3, 3}, sb[1] = {16};
    const int64_t *shapes[3] = {sx, sw, sb};
    const int nd[3] = {4, 4, 1};
    trit_tensor *p[3];
    for (int i = 0; i < 3; i++) {
        trit_tensor *p64 = tg_param(nd[i], shapes[i], -1, 1, (uint64_t)(30 + i));
        p[i] = tg_clone(p64, TRIT_F32);
        trit_tensor_free(p64);
    }
    trit_threads_set(threads);
    trit_graph *g = trit_graph_new(TRIT_F32);
    conv_case cc = {1, 1};
    trit_tensor *out = build_plain(g, p, &cc);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, tg_weighted_sum(g, out)), TRIT_OK);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    int64_t n = 0;
    for (int64_t i = 0; i < trit_tensor_numel(out); i++) buf[n++] = trit_tensor_get_flat(out, i);
    for (int j = 0; j < 3; j++)
        for (int64_t i = 0; i < trit_tensor_numel(p[j]); i++) buf[n++] = trit_tensor_get_flat(p[j]->grad, i);
    trit_graph_free(g);
    tg_free_params(3, p);
    trit_threads_set(0);
    return n;
}

static void test_thread_count_independent(void **state) {
    (void)state;
    const size_t cap = 2 * 16 * 24 * 24 + 2 * 8 * 24 * 24 + 16 * 8 * 9 + 16;
    double *a = malloc(sizeof(double) * cap), *b = malloc(sizeof(double) * cap);
    int64_t na = run_f32(1, a), nb = run_f32(2, b);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, sizeof(double) * (size_t)na);
    free(a);
    free(b);
}

// conv2d of a graph input x (dtype xdt, shape sx, meant to be (N, Cin, H, W)) with weights w
// (Cout, Cin, kh, kw) and bias b (Cout,) or NULL, in an f32 graph, is refused with `code` and an
// error mentioning `text`.
static void expect_conv_error(trit_dtype xdt, int ndim, const int64_t *sx, trit_tensor *w, trit_tensor *b,
                              int stride, trit_status code, const char *text) {
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, xdt, ndim, sx, "x");
    tg_expect_graph_error(g, trit_conv2d(g, x, w, b, stride, 0), code, text);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t sx[4] = {2, 3, 7, 6}, sw[4] = {4, 3, 3, 3}, sw2[4] = {4, 2, 3, 3}, sbig[4] = {4, 3, 9, 3}, sb[1] = {5},
            s3[3] = {3, 7, 6};
    trit_tensor *w = trit_tensor_new(TRIT_F32, 4, sw), *w2 = trit_tensor_new(TRIT_F32, 4, sw2),
                *wbig = trit_tensor_new(TRIT_F32, 4, sbig), *b5 = trit_tensor_new(TRIT_F32, 1, sb);
    expect_conv_error(TRIT_F32, 4, sx, w2, NULL, 1, TRIT_ERR_SHAPE, "input channels");
    expect_conv_error(TRIT_F32, 4, sx, wbig, NULL, 1, TRIT_ERR_SHAPE, "output would be empty");
    expect_conv_error(TRIT_F32, 4, sx, w, NULL, 0, TRIT_ERR_INVALID, "stride");
    expect_conv_error(TRIT_F32, 4, sx, w, b5, 1, TRIT_ERR_SHAPE, "bias");
    expect_conv_error(TRIT_F32, 3, s3, w, NULL, 1, TRIT_ERR_SHAPE, "(N, Cin, H, W)");
    expect_conv_error(TRIT_F64, 4, sx, w, NULL, 1, TRIT_ERR_DTYPE, "f64");

    trit_graph *g = trit_graph_new(TRIT_F32);
    tg_expect_graph_error(g, trit_conv2d(g, NULL, w, NULL, 1, 0), TRIT_ERR_INVALID, "NULL");
    trit_tensor_free(w);
    trit_tensor_free(w2);
    trit_tensor_free(wbig);
    trit_tensor_free(b5);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_delta_kernel_copies_input),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
