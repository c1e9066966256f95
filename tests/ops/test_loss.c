// cross_entropy, mse and huber: gradient checks (with ignored rows, i32/i64 targets, strided
// logits), f32 vs f64, PyTorch parity, all rows ignored, out-of-range targets, logits of 1e4,
// thread independence, and bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fixture_case.h"
#include "gradcheck.h"
#include "tritfix.h"
#include "graph/graph_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops/loss.h"

typedef struct ce_case {
    trit_tensor *targets;
    int64_t ignore;
    trit_reduction red;
    bool strided;
} ce_case;

static trit_tensor *build_ce(trit_graph *g, trit_tensor **p, void *ctx) {
    const ce_case *c = ctx;
    trit_tensor *logits = c->strided ? trit_transpose(g, p[0], 0, 1) : p[0];
    return trit_cross_entropy(g, logits, c->targets, c->ignore, c->red);
}

static void test_cross_entropy_gradcheck(void **state) {
    (void)state;
    // (3, 4, 9) logits, i64 targets with two ignored rows, mean over the 10 others.
    int64_t s0[3] = {3, 4, 9}, ts0[2] = {3, 4};
    int64_t t0[12] = {0, 8, -100, 3, 4, 4, 1, 7, -100, 2, 6, 5};
    trit_tensor *p = tg_param(3, s0, -3, 3, 21);
    ce_case a = {tg_indices(TRIT_I64, 2, ts0, t0), -100, TRIT_REDUCE_MEAN, false};
    tg_check("cross_entropy mean i64", build_ce, &a, 1, &p, 1e-5);
    trit_tensor_free(p);
    trit_tensor_free(a.targets);
    // (9, 6) parameter transposed to strided (6, 9) logits, i32 targets, ignore_index 2, sum.
    int64_t s1[2] = {9, 6}, ts1[1] = {6};
    int64_t t1[6] = {2, 0, 8, 2, 5, 1};
    p = tg_param(2, s1, -3, 3, 22);
    ce_case b = {tg_indices(TRIT_I32, 1, ts1, t1), 2, TRIT_REDUCE_SUM, true};
    tg_check("cross_entropy sum i32 strided", build_ce, &b, 1, &p, 1e-5);
    trit_tensor_free(p);
    trit_tensor_free(b.targets);
}

typedef struct mse_case {
    trit_reduction red;
    trit_tensor *target;  // constant target, or NULL: the target is p[1]
} mse_case;

static trit_tensor *build_mse(trit_graph *g, trit_tensor **p, void *ctx) {
    const mse_case *c = ctx;
    trit_tensor *pred = trit_transpose(g, p[0], 0, 1);  // (5, 4) -> strided (4, 5)
    return trit_mse(g, pred, c->target ? c->target : p[1], c->red);
}

static void test_mse_gradcheck(void **state) {
    (void)state;
    int64_t sp[2] = {5, 4}, st[2] = {4, 5};
    trit_tensor *p[2] = {tg_param(2, sp, -2, 2, 23), tg_param(2, st, -2, 2, 24)};
    mse_case both = {TRIT_REDUCE_MEAN, NULL};
    tg_check("mse mean, target trained", build_mse, &both, 2, p, 1e-5);
    trit_tensor *c = tg_clone(p[1], TRIT_F64);
    c->flags &= ~(uint32_t)TRIT_FLAG_PARAM;
    mse_case fixed = {TRIT_REDUCE_SUM, c};
    trit_tensor *pf = tg_clone(p[0], TRIT_F64);
    // f32 needs a target of its dtype: check gradients in f64 only for the constant case.
    assert_true(tg_gradcheck(build_mse, &fixed, 1, &pf, 64) <= 1e-6);
    trit_tensor_free(pf);
    trit_tensor_free(c);
    tg_free_params(2, p);
}

typedef struct huber_case {
    double delta;
    trit_reduction red;
} huber_case;

static trit_tensor *build_huber(trit_graph *g, trit_tensor **p, void *ctx) {
    const huber_case *c = ctx;
    return trit_huber(g, trit_transpose(g, p[0], 0, 1), p[1], c->delta, c->red);  // strided pred
}

static void test_huber_gradcheck(void **state) {
    (void)state;
    int64_t sp[2] = {6, 5}, st[2] = {5, 6};
    trit_tensor *p[2] = {tg_param(2, sp, -2, 2, 27), tg_param(2, st, -2, 2, 28)};
    // differences on both sides of delta, none within 1e-3 of it: central differences stay on
    // one piece of the function
    int quad = 0, lin = 0;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 6; j++) {
            const double d = fabs(trit_tensor_get_flat(p[0], j * 5 + i) - trit_tensor_get_flat(p[1], i * 6 + j));
            assert_true(fabs(d - 1.0) > 1e-3 && fabs(d - 0.5) > 1e-3);
            quad += d < 0.5;
            lin += d > 1.0;
        }
    assert_true(quad > 0 && lin > 0);
    huber_case c = {1.0, TRIT_REDUCE_MEAN};
    tg_check("huber mean delta 1", build_huber, &c, 2, p, 1e-5);
    c = (huber_case){0.5, TRIT_REDUCE_SUM};
    tg_check("huber sum delta 0.5", build_huber, &c, 2, p, 1e-5);
    tg_free_params(2, p);
}

static trit_tensor *build_huber_fixture(trit_graph *g, trit_tensor **t, void *ctx) {
    const huber_case *c = ctx;
    return trit_huber(g, t[0], t[1], c->delta, c->red);
}

// embed.bin (tests/reference/make_embed_fixtures.py): f64 to 1e-12, f32 to 1e-6 relative.
static void test_huber_pytorch_parity(void **state) {
    (void)state;
    tf_file *f = tf_open("embed.bin");
    const fc_input both[2] = {{"pred", true, TRIT_F64}, {"target", true, TRIT_F64}};
    const fc_input pred_only[2] = {{"pred", true, TRIT_F64}, {"target", false, TRIT_F64}};
    huber_case m = {1.0, TRIT_REDUCE_MEAN}, s = {0.5, TRIT_REDUCE_SUM};
    double w64 = fc_check(f, "huber_mean", TRIT_F64, build_huber_fixture, &m, 2, both, 1e-12);
    double w32 = fc_check(f, "huber_mean", TRIT_F32, build_huber_fixture, &m, 2, both, 1e-6);
    w64 = fmax(w64, fc_check(f, "huber_sum", TRIT_F64, build_huber_fixture, &s, 2, pred_only, 1e-12));
    const fc_input pred_only32[2] = {{"pred", true, TRIT_F64}, {"target", false, TRIT_F32}};  // the compute dtype
    w32 = fmax(w32, fc_check(f, "huber_sum", TRIT_F32, build_huber_fixture, &s, 2, pred_only32, 1e-6));
    print_message("huber vs PyTorch: max rel error f64 %.3g, f32 %.3g\n", w64, w32);
    tf_close(f);
}

static void ce_fixture(const tf_file *nf, const char *cs, int64_t ignore, trit_reduction red, double *worst) {
    char n[64];
    trit_graph *g = trit_graph_new(TRIT_F64);
    snprintf(n, sizeof n, "%s.logits", cs);
    trit_tensor *x = tf_tensor(nf, n, TRIT_F64, TRIT_FLAG_PARAM);
    snprintf(n, sizeof n, "%s.target", cs);
    trit_tensor *t = tf_tensor(nf, n, TRIT_I64, 0);
    trit_tensor *loss = trit_cross_entropy(g, x, t, ignore, red);
    tg_run(g, loss);
    snprintf(n, sizeof n, "%s.out", cs);
    *worst = fmax(*worst, tf_compare(nf, n, loss, n, 1e-10));
    snprintf(n, sizeof n, "%s.dlogits", cs);
    *worst = fmax(*worst, tf_compare(nf, n, x->grad, n, 1e-10));
    trit_graph_free(g);
    trit_tensor_free(x);
    trit_tensor_free(t);
}

static void mse_fixture(const tf_file *nf, const char *cs, trit_reduction red, bool target_grad, double *worst) {
    char n[64];
    trit_graph *g = trit_graph_new(TRIT_F64);
    snprintf(n, sizeof n, "%s.pred", cs);
    trit_tensor *pr = tf_tensor(nf, n, TRIT_F64, TRIT_FLAG_PARAM);
    snprintf(n, sizeof n, "%s.target", cs);
    trit_tensor *t = tf_tensor(nf, n, TRIT_F64, target_grad ? TRIT_FLAG_PARAM : 0);
    trit_tensor *loss = trit_mse(g, pr, t, red);
    tg_run(g, loss);
    snprintf(n, sizeof n, "%s.out", cs);
    *worst = fmax(*worst, tf_compare(nf, n, loss, n, 1e-10));
    snprintf(n, sizeof n, "%s.dpred", cs);
    *worst = fmax(*worst, tf_compare(nf, n, pr->grad, n, 1e-10));
    if (target_grad) {
        snprintf(n, sizeof n, "%s.dtarget", cs);
        *worst = fmax(*worst, tf_compare(nf, n, t->grad, n, 1e-10));
    } else {
        assert_null(t->grad);
    }
    trit_graph_free(g);
    trit_tensor_free(pr);
    trit_tensor_free(t);
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *nf = tf_open("nn.bin");
    double worst = 0;
    ce_fixture(nf, "ce_mean", -100, TRIT_REDUCE_MEAN, &worst);
    ce_fixture(nf, "ce_sum", 2, TRIT_REDUCE_SUM, &worst);
    ce_fixture(nf, "ce_1d", -100, TRIT_REDUCE_MEAN, &worst);
    mse_fixture(nf, "mse_mean", TRIT_REDUCE_MEAN, true, &worst);
    mse_fixture(nf, "mse_sum", TRIT_REDUCE_SUM, false, &worst);
    print_message("cross_entropy/mse vs PyTorch: max abs error %.3g\n", worst);
    tf_close(nf);
}

static void test_all_rows_ignored(void **state) {
    (void)state;
    int64_t s[2] = {3, 5}, ts[1] = {3}, tv[3] = {-100, -100, -100};
    for (int red = 0; red < 2; red++) {
        trit_tensor *p = tg_param(2, s, -1, 1, 25), *t = tg_indices(TRIT_I32, 1, ts, tv);
        trit_graph *g = trit_graph_new(TRIT_F64);
        trit_tensor *loss = trit_cross_entropy(g, p, t, -100, (trit_reduction)red);
        tg_run(g, loss);
        assert_true(trit_tensor_get_flat(loss, 0) == 0.0);
        for (int i = 0; i < 15; i++) assert_true(((double *)p->grad->data)[i] == 0.0);
        trit_graph_free(g);
        trit_tensor_free(p);
        trit_tensor_free(t);
    }
}

// The op's own message names the row and the value; the graph reports TRIT_ERR_RANGE.
static void test_target_out_of_range(void **state) {
    (void)state;
    int64_t s[2] = {4, 5}, ts[1] = {4};
    const int64_t bad[2][4] = {{1, 2, -100, 7}, {0, -1, 3, 4}};
    const char *want[2] = {"target 7 at row 3", "target -1 at row 1"};
    for (int k = 0; k < 2; k++) {
        trit_tensor *p = tg_param(2, s, -1, 1, 26), *t = tg_indices(TRIT_I64, 1, ts, bad[k]);
        double out, saved[9], scratch[4];
        trit_tensor o;
        trit_tensor_init_layout(&o, TRIT_F64, 0, NULL);
        o.data = &out;
        trit_cross_entropy_attr a = {.ignore_index = -100, .reduction = TRIT_REDUCE_MEAN};
        trit_exec_ctx ctx = {.training = true};
        trit_op_call c = {.n_in = 2, .in = {p, t}, .out = &o, .saved = saved, .scratch = scratch, .attr = &a, .ctx = &ctx};
        assert_int_equal(trit_op_cross_entropy_f64.forward(&c), TRIT_ERR_RANGE);
        assert_non_null(strstr(trit_last_error(), want[k]));

        trit_graph *g = trit_graph_new(TRIT_F64);
        trit_tensor *loss = trit_cross_entropy(g, p, t, -100, TRIT_REDUCE_MEAN);
        assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
        assert_int_equal(trit_graph_forward(g), TRIT_ERR_RANGE);
        assert_non_null(strstr(trit_last_error(), "cross_entropy"));
        assert_int_equal(trit_graph_backward(g), TRIT_ERR_STATE);
        trit_graph_free(g);
        trit_tensor_free(p);
        trit_tensor_free(t);
    }
}

// Loss and gradient of the same f32-representable logits in an f32 and an f64 graph.
static void run_ce(trit_dtype dt, const float *logits, int64_t rows, int64_t V, trit_tensor *t, double *loss_out,
                   double *grad_out) {
    int64_t s[2] = {rows, V};
    trit_tensor *p = trit_tensor_new_param(dt, 2, s, "logits");
    for (int64_t i = 0; i < rows * V; i++) trit_tensor_set_flat(p, i, logits[i]);
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *loss = trit_cross_entropy(g, p, t, -100, TRIT_REDUCE_MEAN);
    tg_run(g, loss);
    *loss_out = trit_tensor_get_flat(loss, 0);
    for (int64_t i = 0; i < rows * V; i++) grad_out[i] = trit_tensor_get_flat(p->grad, i);
    trit_graph_free(g);
    trit_tensor_free(p);
}

static void test_huge_logits(void **state) {
    (void)state;
    enum { ROWS = 4, V = 6 };
    float x[ROWS * V];
    for (int i = 0; i < ROWS * V; i++) x[i] = (trit_rng_uniform(9, 1, (uint64_t)i) * 2 - 1) * 1e4f;
    // Near ties at 1e4 in two rows, so the softmax there is not one-hot.
    x[0] = 1e4f, x[1] = 1e4f - 0.5f, x[2] = 1e4f - 2;
    x[V + 4] = -9000, x[V + 5] = -9000.25f;
    for (int j = 0; j < 4; j++) x[V + j] = -1e4f;
    int64_t ts[1] = {ROWS}, tv[ROWS] = {0, 5, 2, 3};
    trit_tensor *t = tg_indices(TRIT_I64, 1, ts, tv);
    double l32, l64, g32[ROWS * V], g64[ROWS * V];
    run_ce(TRIT_F32, x, ROWS, V, t, &l32, g32);
    run_ce(TRIT_F64, x, ROWS, V, t, &l64, g64);
    assert_true(isfinite(l32) && l64 > 1000);  // far from the target: a loss of thousands
    assert_true(fabs(l32 - l64) <= 1e-6 * l64);
    double worst = 0;
    for (int i = 0; i < ROWS * V; i++) {
        assert_true(isfinite(g32[i]));
        worst = fmax(worst, fabs(g32[i] - g64[i]));
    }
    assert_true(worst <= 1e-6);
    print_message("logits of 1e4: loss %.6g (f32 %.6g), max grad diff f32 vs f64 %.2g\n", l64, l32, worst);
    trit_tensor_free(t);
}

// The loss of a larger problem is bit-identical with 1 and 2 threads.
static void test_threads_do_not_change_loss(void **state) {
    (void)state;
    enum { ROWS = 64, V = 1000 };
    float *x = malloc(sizeof(float) * ROWS * V);
    for (int i = 0; i < ROWS * V; i++) x[i] = (trit_rng_uniform(10, 1, (uint64_t)i) * 2 - 1) * 5;
    int64_t ts[1] = {ROWS}, tv[ROWS];
    for (int i = 0; i < ROWS; i++) tv[i] = i % 7 == 3 ? -100 : (int64_t)(trit_rng_u32(10, 2, (uint64_t)i) % V);
    trit_tensor *t = tg_indices(TRIT_I32, 1, ts, tv);
    double l1, l2, *g1 = malloc(sizeof(double) * ROWS * V), *g2 = malloc(sizeof(double) * ROWS * V);
    const int keep = trit_threads_get();
    trit_threads_set(1);
    run_ce(TRIT_F32, x, ROWS, V, t, &l1, g1);
    trit_threads_set(2);
    run_ce(TRIT_F32, x, ROWS, V, t, &l2, g2);
    trit_threads_set(keep);
    assert_true(l1 == l2);
    assert_memory_equal(g1, g2, sizeof(double) * ROWS * V);
    free(x);
    free(g1);
    free(g2);
    trit_tensor_free(t);
}

// Huber's loss and gradients over 3 blocks of partial sums: the same bits with 1 and 2 threads.
static void run_huber(int threads, double *loss, float *grad, int64_t n) {
    int64_t s[1] = {n};
    trit_tensor *p = trit_tensor_new_param(TRIT_F32, 1, s, "pred"), *t = trit_tensor_new(TRIT_F32, 1, s);
    trit_tensor_fill_uniform(p, -3, 3, 29, 1);
    trit_tensor_fill_uniform(t, -3, 3, 29, 2);
    trit_threads_set(threads);
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *l = trit_huber(g, p, t, 0.7, TRIT_REDUCE_MEAN);
    tg_run(g, l);
    *loss = trit_tensor_get_flat(l, 0);
    memcpy(grad, p->grad->data, sizeof(float) * (size_t)n);
    trit_graph_free(g);
    trit_tensor_free(p);
    trit_tensor_free(t);
}

static void test_huber_threads(void **state) {
    (void)state;
    const int64_t n = 3 * 8192 + 123;
    const int keep = trit_threads_get();
    double l1, l2;
    float *g1 = malloc(sizeof(float) * (size_t)n), *g2 = malloc(sizeof(float) * (size_t)n);
    run_huber(1, &l1, g1, n);
    run_huber(2, &l2, g2, n);
    trit_threads_set(keep);
    assert_true(l1 == l2 && l1 > 0);
    assert_memory_equal(g1, g2, sizeof(float) * (size_t)n);
    free(g1);
    free(g2);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t s[2] = {3, 5}, s4[1] = {4}, s3[1] = {3};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, s, "x");
    trit_tensor *tf = trit_graph_input(g, TRIT_F32, 1, s3, "tf");
    tg_expect_graph_error(g, trit_cross_entropy(g, x, tf, -100, TRIT_REDUCE_MEAN), TRIT_ERR_DTYPE, "i32 or i64");

    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 2, s, "x");
    trit_tensor *t4 = trit_graph_input(g, TRIT_I64, 1, s4, "t4");
    tg_expect_graph_error(g, trit_cross_entropy(g, x, t4, -100, TRIT_REDUCE_MEAN),
                          TRIT_ERR_SHAPE, "logits (3, 5) and targets (4,)");

    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 2, s, "x");
    trit_tensor *t3 = trit_graph_input(g, TRIT_I64, 1, s3, "t3");
    tg_expect_graph_error(g, trit_cross_entropy(g, x, t3, -100, (trit_reduction)7), TRIT_ERR_INVALID, "reduction");

    g = trit_graph_new(TRIT_F32);
    tg_expect_graph_error(g, trit_cross_entropy(g, NULL, NULL, -100, TRIT_REDUCE_MEAN), TRIT_ERR_INVALID, "NULL");

    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_F64, 2, s, "x");
    trit_tensor *y = trit_graph_input(g, TRIT_F64, 1, s3, "y");
    tg_expect_graph_error(g, trit_mse(g, x, y, TRIT_REDUCE_SUM),
                          TRIT_ERR_SHAPE, "mse: expected pred and target of the same shape, got (3, 5) and (3,)");

    const double deltas[3] = {0, -1, NAN};
    for (int i = 0; i < 3; i++) {
        g = trit_graph_new(TRIT_F32);
        x = trit_graph_input(g, TRIT_F32, 2, s, "x");
        trit_tensor *x2 = trit_graph_input(g, TRIT_F32, 2, s, "x2");
        tg_expect_graph_error(g, trit_huber(g, x, x2, deltas[i], TRIT_REDUCE_MEAN), TRIT_ERR_INVALID,
                              "huber: delta must be finite and > 0");
    }
    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 2, s, "x");
    trit_tensor *y3 = trit_graph_input(g, TRIT_F32, 1, s3, "y");
    tg_expect_graph_error(g, trit_huber(g, x, y3, 1.0, TRIT_REDUCE_MEAN), TRIT_ERR_SHAPE,
                          "huber: expected pred and target of the same shape, got (3, 5) and (3,)");
    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 2, s, "x");
    tg_expect_graph_error(g, trit_huber(g, x, x, 1.0, (trit_reduction)-1), TRIT_ERR_INVALID, "huber: reduction");

    g = trit_graph_new(TRIT_F64);
    x = trit_graph_input(g, TRIT_F64, 2, s, "x");
    trit_tensor *yi = trit_graph_input(g, TRIT_I32, 2, s, "yi");
    tg_expect_graph_error(g, trit_mse(g, x, yi, TRIT_REDUCE_MEAN), TRIT_ERR_DTYPE, "mse: expected f64 pred and target");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_entropy_gradcheck),
        cmocka_unit_test(test_mse_gradcheck),
        cmocka_unit_test(test_huber_gradcheck),
        cmocka_unit_test(test_pytorch_parity),
        cmocka_unit_test(test_huber_pytorch_parity),
        cmocka_unit_test(test_huber_threads),
        cmocka_unit_test(test_all_rows_ignored),
        cmocka_unit_test(test_target_out_of_range),
        cmocka_unit_test(test_huge_logits),
        cmocka_unit_test(test_threads_do_not_change_loss),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
