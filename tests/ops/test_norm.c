// layernorm and rmsnorm: gradient checks (with and without weight/bias, strided input), f32 vs
// f64, PyTorch parity, a large mean in f32, thread independence, and bad input.
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

// Which of p[1], p[2] are weight and bias; x is p[0], transposed when strided.
typedef struct norm_case {
    bool rms, strided;
    int w, b;  // index into p, or -1 for none
} norm_case;

static trit_tensor *build_norm(trit_graph *g, trit_tensor **p, void *ctx) {
    const norm_case *c = ctx;
    trit_tensor *x = c->strided ? trit_transpose(g, p[0], -1, -2) : p[0];
    trit_tensor *w = c->w >= 0 ? p[c->w] : NULL, *b = c->b >= 0 ? p[c->b] : NULL;
    return c->rms ? trit_rmsnorm(g, x, w, 1e-6) : trit_layernorm(g, x, w, b, 1e-5);
}

static void test_layernorm_gradcheck(void **state) {
    (void)state;
    int64_t sx[3] = {3, 4, 8}, sc[1] = {8}, st[3] = {2, 8, 5};
    trit_tensor *p[3] = {tg_param(3, sx, -2, 2, 41), tg_param(1, sc, 0.5, 1.5, 42), tg_param(1, sc, -1, 1, 43)};
    norm_case affine = {false, false, 1, 2}, wonly = {false, false, 1, -1};
    tg_check("layernorm weight+bias", build_norm, &affine, 3, p, 1e-5);
    tg_check("layernorm weight only", build_norm, &wonly, 2, p, 1e-5);
    trit_tensor *q[2] = {tg_param(3, st, -2, 2, 44), p[2]};
    norm_case bonly = {false, true, -1, 1}, plain = {false, true, -1, -1};
    tg_check("layernorm bias only strided", build_norm, &bonly, 2, q, 1e-5);
    tg_check("layernorm plain strided", build_norm, &plain, 1, q, 1e-5);
    trit_tensor_free(q[0]);
    tg_free_params(3, p);
}

static void test_rmsnorm_gradcheck(void **state) {
    (void)state;
    int64_t sx[3] = {2, 3, 10}, sc[1] = {10}, st[2] = {10, 4};
    trit_tensor *p[2] = {tg_param(3, sx, -2, 2, 45), tg_param(1, sc, 0.5, 1.5, 46)};
    norm_case w = {true, false, 1, -1};
    tg_check("rmsnorm weight", build_norm, &w, 2, p, 1e-5);
    trit_tensor *q = tg_param(2, st, -2, 2, 47);
    norm_case plain = {true, true, -1, -1};
    tg_check("rmsnorm plain strided", build_norm, &plain, 1, &q, 1e-5);
    trit_tensor_free(q);
    tg_free_params(2, p);
}

// Runs a fixture case: inputs <c>.x and optionally <c>.w, <c>.b; compares out and gradients.
static double norm_fixture(const tf_file *nf, const char *c, bool rms, bool has_w, bool has_b, double eps) {
    char n[64];
    const char *names[3] = {"x", "w", "b"};
    const bool have[3] = {true, has_w, has_b};
    trit_tensor *t[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) {
        if (!have[i]) continue;
        snprintf(n, sizeof n, "%s.%s", c, names[i]);
        t[i] = tf_tensor(nf, n, TRIT_F64, TRIT_FLAG_PARAM);
    }
    snprintf(n, sizeof n, "%s.r", c);
    trit_tensor *r = tf_tensor(nf, n, TRIT_F64, 0);
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *y = rms ? trit_rmsnorm(g, t[0], t[1], eps) : trit_layernorm(g, t[0], t[1], t[2], eps);
    trit_graph_keep(g, y);
    tg_run(g, tf_dot(g, y, r));
    snprintf(n, sizeof n, "%s.out", c);
    double worst = tf_compare(nf, n, y, n, 1e-10);
    for (int i = 0; i < 3; i++) {
        if (!have[i]) continue;
        snprintf(n, sizeof n, "%s.d%s", c, names[i]);
        worst = fmax(worst, tf_compare(nf, n, t[i]->grad, n, 1e-10));
        trit_tensor_free(t[i]);
    }
    trit_graph_free(g);
    trit_tensor_free(r);
    return worst;
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *nf = tf_open("nn.bin");
    double worst = norm_fixture(nf, "ln_affine", false, true, true, 1e-5);
    worst = fmax(worst, norm_fixture(nf, "ln_plain", false, false, false, 1e-5));
    worst = fmax(worst, norm_fixture(nf, "rms", true, true, false, 1e-6));
    print_message("layernorm/rmsnorm vs PyTorch: max abs error %.3g\n", worst);
    tf_close(nf);
}

// Rows with mean 1000 and spread 1 in f32: the statistics are taken in double, so the output
// matches an f64 graph on the same values to float precision (a one-pass float variance would not).
static void test_large_mean_f32(void **state) {
    (void)state;
    enum { ROWS = 8, C = 64 };
    int64_t s[2] = {ROWS, C};
    double out[2][ROWS * C];
    for (int k = 0; k < 2; k++) {
        trit_dtype dt = k ? TRIT_F64 : TRIT_F32;
        trit_graph *g = trit_graph_new(dt);
        trit_tensor *x = trit_graph_input(g, dt, 2, s, "x");
        trit_tensor *y = trit_layernorm(g, x, NULL, NULL, 1e-5);
        trit_graph_keep(g, y);
        assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
        for (int i = 0; i < ROWS * C; i++) trit_tensor_set_flat(x, i, (double)(1000.0f + (float)trit_rng_uniform(5, 1, (uint64_t)i) * 2 - 1));
        assert_int_equal(trit_graph_forward(g), TRIT_OK);
        for (int i = 0; i < ROWS * C; i++) out[k][i] = trit_tensor_get_flat(y, i);
        trit_graph_free(g);
    }
    double worst = 0;
    for (int i = 0; i < ROWS * C; i++) worst = fmax(worst, fabs(out[0][i] - out[1][i]));
    print_message("layernorm f32 at mean 1000: max abs error %.2g\n", worst);
    assert_true(worst < 2e-4);
}

// Weight and bias gradients are sums over rows: bit-identical with 1 and 2 threads.
static void test_threads_do_not_change_grads(void **state) {
    (void)state;
    enum { ROWS = 300, C = 200 };
    int64_t s[2] = {ROWS, C}, sc[1] = {C};
    float *res[2];
    const int keep = trit_threads_get();
    for (int th = 1; th <= 2; th++) {
        trit_threads_set(th);
        trit_tensor *x = trit_tensor_new_param(TRIT_F32, 2, s, "x"), *w = trit_tensor_new_param(TRIT_F32, 1, sc, "w"),
                    *b = trit_tensor_new_param(TRIT_F32, 1, sc, "b");
        trit_tensor_fill_uniform(x, -2, 2, 6, 1);
        trit_tensor_fill_uniform(w, 0.5, 1.5, 6, 2);
        trit_tensor_fill_uniform(b, -1, 1, 6, 3);
        trit_graph *g = trit_graph_new(TRIT_F32);
        trit_tensor *ln = trit_layernorm(g, x, w, b, 1e-5);
        tg_run(g, tg_weighted_sum(g, trit_rmsnorm(g, ln, w, 1e-6)));
        res[th - 1] = malloc(sizeof(float) * (ROWS * C + 2 * C));
        memcpy(res[th - 1], x->grad->data, sizeof(float) * ROWS * C);
        memcpy(res[th - 1] + ROWS * C, w->grad->data, sizeof(float) * C);
        memcpy(res[th - 1] + ROWS * C + C, b->grad->data, sizeof(float) * C);
        trit_graph_free(g);
        trit_tensor_free(x);
        trit_tensor_free(w);
        trit_tensor_free(b);
    }
    trit_threads_set(keep);
    assert_memory_equal(res[0], res[1], sizeof(float) * (ROWS * C + 2 * C));
    free(res[0]);
    free(res[1]);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t s[2] = {3, 5}, s4[1] = {4}, s5[1] = {5};
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *x = trit_graph_input(g, TRIT_F64, 2, s, "x");
    trit_tensor *w4 = trit_graph_input(g, TRIT_F64, 1, s4, "w4");
    assert_null(trit_layernorm(g, x, w4, NULL, 1e-5));
    assert_non_null(strstr(trit_last_error(), "layernorm: expected weight and bias of shape (5) for x (3, 5), got (4,)"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_SHAPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_F64, 2, s, "x");
    trit_tensor *w32 = trit_graph_input(g, TRIT_F32, 1, s5, "w32");
    assert_null(trit_rmsnorm(g, x, w32, 1e-6));
    assert_non_null(strstr(trit_last_error(), "rmsnorm: expected f64 inputs"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_DTYPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_F64, 2, s, "x");
    assert_null(trit_layernorm(g, x, NULL, NULL, -1.0));
    assert_non_null(strstr(trit_last_error(), "eps must be finite and >= 0"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    assert_null(trit_rmsnorm(g, NULL, NULL, 1e-6));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layernorm_gradcheck),
        cmocka_unit_test(test_rmsnorm_gradcheck),
        cmocka_unit_test(test_pytorch_parity),
        cmocka_unit_test(test_large_mean_f32),
        cmocka_unit_test(test_threads_do_not_change_grads),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
