// Causal self-attention: PyTorch parity, finite-difference gradients (with strided views of the
// inputs and one tensor used as q, k and v), f32 against f64, known answers, causality (an
// output never changes when a later position changes), thread-count independence, bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "attn_check.h"
#include "gradcheck.h"
#include "tritfix.h"

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

static void test_known_answers(void **state) {
    (void)state;
    // q = 0: every visible key scores the same, so out_t = mean(v_0 .. v_t).
    int64_t s[3] = {1, 4, 2};
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *in[3];
    trit_tensor *out = ta_input_graph(g, trit_attention, s, 1, in);
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
    out = ta_input_graph(g, trit_attention, s1, 1, in);
    for (int i = 0; i < 3; i++) {
        ((float *)in[0]->data)[i] = ((float *)in[1]->data)[i] = 1000.0f * (float)(i + 1);
        ((float *)in[2]->data)[i] = (float)(i + 7);
    }
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    for (int i = 0; i < 3; i++) assert_true(((float *)out->data)[i] == (float)(i + 7));
    trit_graph_free(g);
}

// Changing q, k and v at position 21 of 37 leaves every output before it bit-identical.
static void test_causal(void **state) {
    (void)state;
    ta_check_causal(trit_attention, TRIT_F32, 2, 37, 32, 4, 21);
    ta_check_causal(trit_attention, TRIT_F64, 2, 37, 32, 4, 21);
}

// Output and gradients of an f32 step are the same with 1 and 2 threads.
static void test_thread_count_independent(void **state) {
    (void)state;
    int64_t s[3] = {2, 40, 48};
    trit_tensor *p[3];
    for (int i = 0; i < 3; i++) p[i] = tg_param(3, s, -1, 1, (uint64_t)(40 + i));
    ta_result a = ta_run(trit_attention, TRIT_F32, p, 3, 1);
    ta_result b = ta_run(trit_attention, TRIT_F32, p, 3, 2);
    assert_int_equal(a.n, b.n);
    for (int j = 0; j < 4; j++) assert_memory_equal(a.v[j], b.v[j], sizeof(double) * (size_t)a.n);
    ta_result_free(&a);
    ta_result_free(&b);
    tg_free_params(3, p);
}

static void test_bad_input(void **state) {
    (void)state;
    ta_check_bad_input(trit_attention);
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
