// Causal self-attention: PyTorch parity, finite-difference gradients (with strided views of the
// inputs and one tensor used as q, k and v), f32 against f64, known answers, causality (an
// output never changes when a later position changes), thread-count independence, bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <stdlib.h>
#include <string.h>

// ---- attention ---------------------------------------------------------------------

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) {
    return trit_attention(g, p[0], p[1], p[2], *(int *)ctx);
}

static void test_matches_pytorch(void **state) {
    (void)state;
    tf_file *fx = tf_open("spatial.bin");
    const char *names[3] = {"q", "k", "v"};
    int h2 = 2, h3 = 3;
    double e1 = tf_check_case(fx, "attn1", build_plain, &h2, 3, names, 1e-10);
    double e2 = tf_check_case(fx, "attn2", build_plain, &h3, 3, names, 1e-10);
    print_message("attention vs PyTorch: max rel error %.3g (B=2 T=5 H=2), %.3g (B=1 T=9 H=3)\n", e1, e2);
    tf_close(fx);
}

// q: a column slice of a fused (B, T, 3C) tensor; k: a (T, B, C) tensor transposed to (B, T, C);
// v: (B, C, T) transposed, whose last dim is strided, so the constructor copies it.
static trit_tensor *build_views(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    trit_tensor *q = trit_slice(g, p[0], 2, 8, 16);
    trit_tensor *k = trit_transpose(g, p[1], 0, 1);
    trit_tensor *v = trit_transpose(g, p[2], 1, 2);
    return trit_attention(g, q, k, v, 2);
}

static trit_tensor *build_shared(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    return trit_attention(g, p[0], p[0], p[0], 4);
}

static void test_gradients(void **state) {
    (void)state;
    int64_t s[3] = {2, 5, 8};
    int h = 2;
    trit_tensor *p[3] = {tg_param(3, s, -1, 1, 11), tg_param(3, s, -1, 1, 12), tg_param(3, s, -1, 1, 13)};
    tg_check("attention", build_plain, &h, 3, p, 1e-5);
    tg_free_params(3, p);

    int64_t sq[3] = {2, 5, 24}, sk[3] = {5, 2, 8}, sv[3] = {2, 8, 5};
    trit_tensor *pv[3] = {tg_param(3, sq, -1, 1, 14), tg_param(3, sk, -1, 1, 15), tg_param(3, sv, -1, 1, 16)};
    tg_check("attention of views", build_views, NULL, 3, pv, 1e-5);
    tg_free_params(3, pv);

    int64_t sx[3] = {1, 6, 8};
    trit_tensor *px[1] = {tg_param(3, sx, -1, 1, 17)};
    tg_check("attention with q = k = v", build_shared, NULL, 1, px, 1e-5);
    tg_free_params(1, px);
}

// An f32 graph with graph inputs q, k, v of shape s; returns the output (kept).
static trit_tensor *input_graph(trit_graph *g, const int64_t *s, int n_head, trit_tensor **qkv) {
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) qkv[i] = trit_graph_input(g, trit_graph_dtype(g), 3, s, names[i]);
    trit_tensor *out = trit_attention(g, qkv[0], qkv[1], qkv[2], n_head);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    return out;
}

static void test_known_answers(void **state) {
    (void)state;
    // q = 0: every visible key scores the same, so out_t = mean(v_0 .. v_t).
    int64_t s[3] = {1, 4, 2};
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *in[3];
    trit_tensor *out = input_graph(g, s, 1, in);
    double *q = in[0]->data, *k = in[1]->data, *v = in[2]->data;
    const double vv[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int i = 0; i < 8; i++) {
        q[i] = 0;
        k[i] = 0.5 * i;
        v[i] = vv[i];
    }
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const double want[8] = {1, 2, 2, 3, 3, 4, 4, 5};
    for (int i = 0; i < 8; i++) assert_float_equal(((double *)out->data)[i], want[i], 1e-14);
    trit_graph_free(g);

    // Huge scores: q = k increasing, so each query picks its own position and out = v. Without
    // the row max subtracted, exp overflows and the output is NaN.
    int64_t s1[3] = {1, 3, 1};
    g = trit_graph_new(TRIT_F32);
    out = input_graph(g, s1, 1, in);
    for (int i = 0; i < 3; i++) {
        ((float *)in[0]->data)[i] = ((float *)in[1]->data)[i] = 1000.0f * (float)(i + 1);
        ((float *)in[2]->data)[i] = (float)(i + 7);
    }
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    for (int i = 0; i < 3; i++) assert_true(((float *)out->data)[i] == (float)(i + 7));
    trit_graph_free(g);
}

// Changing q, k and v at position t0 leaves every output before t0 bit-identical.
static void check_causal(trit_dtype dt) {
    int64_t s[3] = {2, 37, 32};
    const int64_t B = 2, T = 37, C = 32, t0 = 21;
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *in[3];
    trit_tensor *out = input_graph(g, s, 4, in);
    for (int i = 0; i < 3; i++) trit_tensor_fill_uniform(in[i], -2, 2, 99, (uint64_t)i);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const size_t esz = trit_dtype_size(dt), row = (size_t)C * esz;
    uint8_t *before = malloc(trit_tensor_nbytes(out));
    memcpy(before, out->data, trit_tensor_nbytes(out));
    for (int i = 0; i < 3; i++)
        for (int64_t b = 0; b < B; b++)
            for (int64_t c = 0; c < C; c++) {
                int64_t idx[3] = {b, t0, c};
                trit_tensor_set(in[i], idx, trit_tensor_get(in[i], idx) * -3.0 + 0.25);
            }
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const uint8_t *after = out->data;
    for (int64_t b = 0; b < B; b++) {
        for (int64_t t = 0; t < t0; t++)
            assert_memory_equal(after + (size_t)(b * T + t) * row, before + (size_t)(b * T + t) * row, row);
        assert_memory_not_equal(after + (size_t)(b * T + t0) * row, before + (size_t)(b * T + t0) * row, row);
    }
    free(before);
    trit_graph_free(g);
}

static void test_causal(void **state) {
    (void)state;
    check_causal(TRIT_F32);
    check_causal(TRIT_F64);
}

// Output and gradients of an f32 step with `threads` threads, copied into buf.
static void run_f32(int threads, double *buf, int64_t *n) {
    int64_t s[3] = {2, 40, 48};
    trit_tensor *p[3];
    for (int i = 0; i < 3; i++) {
        trit_tensor *p64 = tg_param(3, s, -1, 1, (uint64_t)(40 + i));
        p[i] = tg_clone(p64, TRIT_F32);
        trit_tensor_free(p64);
    }
    trit_threads_set(threads);
    trit_graph *g = trit_graph_new(TRIT_F32);
    int h = 3;
    trit_tensor *out = build_plain(g, p, &h);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, tg_weighted_sum(g, out)), TRIT_OK);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    *n = 0;
    for (int64_t i = 0; i < trit_tensor_numel(out); i++) buf[(*n)++] = trit_tensor_get_flat(out, i);
    for (int j = 0; j < 3; j++)
        for (int64_t i = 0; i < trit_tensor_numel(p[j]); i++) buf[(*n)++] = trit_tensor_get_flat(p[j]->grad, i);
    trit_graph_free(g);
    tg_free_params(3, p);
    trit_threads_set(0);
}

static void test_thread_count_independent(void **state) {
    (void)state;
    const int64_t cap = 4 * 2 * 40 * 48;
    double *a = malloc(sizeof(double) * (size_t)cap), *b = malloc(sizeof(double) * (size_t)cap);
    int64_t na = 0, nb = 0;
    run_f32(1, a, &na);
    run_f32(2, b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, sizeof(double) * (size_t)na);
    free(a);
    free(b);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t s[3] = {2, 5, 8}, s2[3] = {2, 4, 8}, s2d[2] = {5, 8};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *a = trit_graph_input(g, TRIT_F32, 3, s, "a"), *b = trit_graph_input(g, TRIT_F32, 3, s2, "b");
    tg_expect_graph_error(g, trit_attention(g, a, b, a, 2), TRIT_ERR_SHAPE, "one shape");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 3, s, "a");
    tg_expect_graph_error(g, trit_attention(g, a, a, a, 3), TRIT_ERR_SHAPE, "multiple of n_head");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 3, s, "a");
    tg_expect_graph_error(g, trit_attention(g, a, a, a, 0), TRIT_ERR_INVALID, "n_head");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 2, s2d, "a");
    tg_expect_graph_error(g, trit_attention(g, a, a, a, 2), TRIT_ERR_SHAPE, "(B, T, C)");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 3, s, "a");
    b = trit_graph_input(g, TRIT_I32, 3, s, "b");
    tg_expect_graph_error(g, trit_attention(g, a, a, b, 2), TRIT_ERR_DTYPE, "i32");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 3, s, "a");
    tg_expect_graph_error(g, trit_attention(g, a, NULL, a, 2), TRIT_ERR_INVALID, "NULL");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
