// dropout: the mask is the documented Philox draw, keeps about 1 - p, scales by 1 / (1 - p),
// repeats for the same (seed, step) and changes with the step, does not depend on threads; its
// gradient is mask / (1 - p) times upstream; eval mode and p = 0 are the identity; bad p fails.
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
#include "ops/dropout.h"
#include "ops/op_build.h"

// The stream a dropout node draws from: its attribute, fixed when it was built.
static uint64_t stream_of(const trit_tensor *y) {
    const trit_graph *g = y->graph;
    const trit_node *n = &g->nodes[g->values[y->graph_value].producer];
    assert_string_equal(n->def->name, "dropout");
    return ((const trit_dropout_attr *)n->attr)->stream;
}

static bool kept(uint64_t seed, uint64_t node, uint64_t step, int64_t i, double p) {
    return trit_rng_uniform(seed, node, (step << TRIT_DROPOUT_STEP_SHIFT) + (uint64_t)i) >= p;
}

enum { N = 100000 };

// A forward-only f32 graph y = dropout(x, p) with x filled with values 1 + i / N.
typedef struct drop_graph {
    trit_graph *g;
    trit_tensor *x, *y;
} drop_graph;

static drop_graph make_graph(double p) {
    drop_graph d;
    int64_t s[2] = {N / 100, 100};
    d.g = trit_graph_new(TRIT_F32);
    d.x = trit_graph_input(d.g, TRIT_F32, 2, s, "x");
    d.y = trit_dropout(d.g, d.x, p);
    assert_non_null(d.y);
    trit_graph_keep(d.g, d.y);
    assert_int_equal(trit_graph_compile(d.g, NULL), TRIT_OK);
    float *xd = d.x->data;
    for (int i = 0; i < N; i++) xd[i] = 1.0f + (float)i / N;
    return d;
}

static void run(drop_graph *d, uint64_t seed, uint64_t step, float *out) {
    trit_graph_set_rng(d->g, seed, step);
    assert_int_equal(trit_graph_forward(d->g), TRIT_OK);
    memcpy(out, d->y->data, sizeof(float) * N);
}

static void test_mask_and_scale(void **state) {
    (void)state;
    const double p = 0.3;
    drop_graph d = make_graph(p);
    float *y = malloc(sizeof(float) * N);
    run(&d, 1234, 5, y);
    const uint64_t node = stream_of(d.y);
    assert_true(node == (TRIT_STREAM_AUTO | 0));  // the graph's first random op without a stream
    const float *x = d.x->data, scale = (float)(1.0 / (1.0 - p));
    int64_t n_kept = 0;
    for (int i = 0; i < N; i++) {
        const bool k = kept(1234, node, 5, i, p);
        n_kept += k;
        if (k) assert_true(y[i] == x[i] * scale);
        else assert_true(y[i] == 0.0f);
    }
    const double frac = (double)n_kept / N;
    print_message("dropout p = 0.3: kept fraction %.4f over %d elements\n", frac, N);
    assert_true(fabs(frac - (1 - p)) < 0.01);  // about 7 standard deviations
    free(y);
    trit_graph_free(d.g);
}

static void test_same_step_same_mask(void **state) {
    (void)state;
    drop_graph d = make_graph(0.5);
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N), *c = malloc(sizeof(float) * N),
          *e = malloc(sizeof(float) * N);
    run(&d, 99, 7, a);
    run(&d, 99, 8, c);
    run(&d, 100, 7, e);
    run(&d, 99, 7, b);
    assert_memory_equal(a, b, sizeof(float) * N);
    int64_t diff_step = 0, diff_seed = 0;
    for (int i = 0; i < N; i++) {
        diff_step += (a[i] == 0) != (c[i] == 0);
        diff_seed += (a[i] == 0) != (e[i] == 0);
    }
    // Independent masks with p = 0.5 differ in about half the elements.
    assert_true(diff_step > N * 4 / 10 && diff_step < N * 6 / 10);
    assert_true(diff_seed > N * 4 / 10 && diff_seed < N * 6 / 10);
    free(a);
    free(b);
    free(c);
    free(e);
    trit_graph_free(d.g);
}

static void test_threads_do_not_change_mask(void **state) {
    (void)state;
    const int keep = trit_threads_get();
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N);
    trit_threads_set(1);
    drop_graph d1 = make_graph(0.2);
    run(&d1, 5, 11, a);
    trit_threads_set(2);
    drop_graph d2 = make_graph(0.2);
    run(&d2, 5, 11, b);
    trit_threads_set(keep);
    assert_memory_equal(a, b, sizeof(float) * N);
    free(a);
    free(b);
    trit_graph_free(d1.g);
    trit_graph_free(d2.g);
}

// d loss / dx = mask / (1 - p) * r for loss = sum(dropout(x) * r); eval mode gives r itself.
static void test_gradient(void **state) {
    (void)state;
    const double p = 0.4;
    int64_t s[2] = {25, 40};
    for (int training = 1; training >= 0; training--) {
        trit_tensor *x = tg_param(2, s, -1, 1, 61), *r = tg_param(2, s, -1, 1, 62);
        r->flags &= ~(uint32_t)TRIT_FLAG_PARAM;
        trit_graph *g = trit_graph_new(TRIT_F64);
        trit_graph_set_training(g, training);
        trit_graph_set_rng(g, 42, 3);
        trit_tensor *y = trit_dropout_stream(g, x, p, 0xb10c2);
        trit_graph_keep(g, y);
        tg_run(g, tf_dot(g, y, r));
        const uint64_t node = stream_of(y);
        assert_true(node == 0xb10c2);
        const double *xd = x->data, *rd = r->data, *gd = x->grad->data, *yd = y->data;
        for (int i = 0; i < 1000; i++) {
            const double m = training ? (kept(42, node, 3, i, p) ? 1.0 / (1.0 - p) : 0.0) : 1.0;
            assert_float_equal(gd[i], m * rd[i], 1e-15);
            assert_float_equal(yd[i], m * xd[i], 1e-15);
        }
        trit_graph_free(g);
        trit_tensor_free(x);
        trit_tensor_free(r);
    }
}

typedef struct drop_case {
    double p;
    bool strided;
} drop_case;

static trit_tensor *build_drop(trit_graph *g, trit_tensor **p, void *ctx) {
    const drop_case *c = ctx;
    trit_graph_set_rng(g, 2024, 17);  // a fixed mask
    return trit_dropout(g, c->strided ? trit_transpose(g, p[0], 0, 1) : p[0], c->p);
}

static void test_gradcheck(void **state) {
    (void)state;
    int64_t s[3] = {4, 6, 5}, st[2] = {7, 9};
    trit_tensor *a = tg_param(3, s, -1, 1, 63), *b = tg_param(2, st, -1, 1, 64);
    drop_case c1 = {0.25, false}, c2 = {0.6, true}, c3 = {0.0, true};
    tg_check("dropout p=0.25", build_drop, &c1, 1, &a, 1e-6);
    tg_check("dropout p=0.6 strided", build_drop, &c2, 1, &b, 1e-6);
    tg_check("dropout p=0 strided", build_drop, &c3, 1, &b, 1e-6);
    trit_tensor_free(a);
    trit_tensor_free(b);
}

static void test_identity_cases(void **state) {
    (void)state;
    drop_graph d = make_graph(0.0);  // p = 0 in training mode
    float *y = malloc(sizeof(float) * N);
    run(&d, 1, 1, y);
    assert_memory_equal(y, d.x->data, sizeof(float) * N);
    trit_graph_free(d.g);
    d = make_graph(0.9);  // eval mode
    trit_graph_set_training(d.g, false);
    run(&d, 1, 1, y);
    assert_memory_equal(y, d.x->data, sizeof(float) * N);
    free(y);
    trit_graph_free(d.g);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t s[1] = {8};
    const double bad[3] = {1.0, -0.1, NAN};
    for (int k = 0; k < 3; k++) {
        trit_graph *g = trit_graph_new(TRIT_F32);
        trit_tensor *x = trit_graph_input(g, TRIT_F32, 1, s, "x");
        assert_null(trit_dropout(g, x, bad[k]));
        assert_non_null(strstr(trit_last_error(), "dropout: p must be in [0, 1)"));
        assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
        trit_graph_free(g);
    }
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *xi = trit_graph_input(g, TRIT_I64, 1, s, "xi");
    assert_null(trit_dropout(g, xi, 0.5));
    assert_non_null(strstr(trit_last_error(), "dropout: expected a f32 input"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_DTYPE);
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F32);
    assert_null(trit_dropout(g, NULL, 0.5));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mask_and_scale),
        cmocka_unit_test(test_same_step_same_mask),
        cmocka_unit_test(test_threads_do_not_change_mask),
        cmocka_unit_test(test_gradient),
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_identity_cases),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
