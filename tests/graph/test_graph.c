// The graph core: views and their gradients, liveness-planned memory, and API misuse.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"

#include <string.h>

static trit_tensor *build_views(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    // p0: (3, 4, 5) -> permute (5, 3, 4) -> slice dim 0 [1, 4) -> reshape needs a copy
    int perm[3] = {2, 0, 1};
    trit_tensor *a = trit_permute(g, p[0], perm);
    a = trit_slice(g, a, 0, 1, 4);
    int64_t shp[2] = {3, 12};
    a = trit_reshape(g, a, 2, shp);  // (3, 12)
    // p1: (1, 12) expanded to (3, 12); both views feed a contiguous copy of the pair.
    int64_t ex[2] = {3, 12};
    trit_tensor *b = trit_expand(g, p[1], 2, ex);
    trit_tensor *bc = trit_contiguous(g, b);
    trit_tensor *ac = trit_contiguous(g, trit_transpose(g, a, 0, 1));
    int64_t flat[1] = {36};
    trit_tensor *x = trit_reshape(g, ac, 1, flat);
    trit_tensor *y = trit_reshape(g, bc, 1, flat);
    trit_tensor *parts[2];
    int64_t sizes[2] = {10, 26};
    trit_split(g, x, 0, 2, sizes, parts);
    (void)y;
    // Use x twice and y once so gradients accumulate into one buffer.
    trit_tensor *z = trit_contiguous(g, parts[1]);
    (void)z;
    return trit_contiguous(g, trit_expand(g, trit_reshape(g, bc, 2, (int64_t[]){36, 1}), 2, (int64_t[]){36, 2}));
}

static void test_view_gradients(void **state) {
    (void)state;
    int64_t s0[3] = {3, 4, 5}, s1[2] = {1, 12};
    trit_tensor *p[2] = {tg_param(3, s0, -1, 1, 1), tg_param(2, s1, -1, 1, 2)};
    tg_assert_gradcheck("views", build_views, NULL, 2, p);
    tg_free_params(2, p);
}

static trit_tensor *build_twice(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    // The same parameter reaches the output along two paths: gradients must add.
    trit_tensor *a = trit_contiguous(g, trit_transpose(g, p[0], 0, 1));
    trit_tensor *b = trit_contiguous(g, trit_transpose(g, a, 0, 1));
    trit_tensor *c = trit_contiguous(g, p[0]);
    int64_t shp[3] = {2, 4, 6};
    trit_tensor *parts[2] = {b, c};
    (void)parts;
    trit_tensor *r1 = trit_reshape(g, b, 1, (int64_t[]){24});
    trit_tensor *r2 = trit_reshape(g, c, 1, (int64_t[]){24});
    trit_tensor *e = trit_expand(g, trit_reshape(g, r1, 2, (int64_t[]){1, 24}), 2, (int64_t[]){2, 24});
    (void)shp;
    (void)r2;
    return trit_contiguous(g, e);
}

static void test_gradient_accumulates_over_uses(void **state) {
    (void)state;
    int64_t s[2] = {4, 6};
    trit_tensor *p[1] = {tg_param(2, s, -1, 1, 3)};
    tg_assert_gradcheck("reuse", build_twice, NULL, 1, p);
    // Analytic check: out = expand of p (twice along dim 0), loss = sum(out * r):
    // d loss / d p[i] = r[i] + r[24 + i].
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *out = build_twice(g, p, NULL);
    trit_tensor *loss = tg_weighted_sum(g, out);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    for (int i = 0; i < 24; i++) {
        double want = (trit_rng_uniform(424242, 7, (uint64_t)i) - 0.5) + (trit_rng_uniform(424242, 7, (uint64_t)(24 + i)) - 0.5);
        assert_float_equal(((double *)p[0]->grad->data)[i], want, 1e-12);
    }
    trit_graph_free(g);
    tg_free_params(1, p);
}

static void test_memory_is_reused(void **state) {
    (void)state;
    // A chain of 40 copies of a 64x64 f32 matrix: forward-only needs about two live buffers.
    int64_t s[2] = {64, 64};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, s, "x");
    trit_tensor *y = x;
    for (int i = 0; i < 40; i++) y = trit_contiguous(g, trit_transpose(g, y, 0, 1));
    trit_graph_keep(g, y);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    trit_graph_memory m;
    assert_int_equal(trit_graph_memory_report(g, &m), TRIT_OK);
    assert_int_equal(m.activation_bytes, 40 * 64 * 64 * 4);
    assert_true(m.arena_bytes <= 3 * 64 * 64 * 4 + 1024);
    float *xd = x->data;
    for (int i = 0; i < 64 * 64; i++) xd[i] = (float)i;
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const float *yd = y->data;  // an even number of transposes: the identity
    for (int i = 0; i < 64 * 64; i++) assert_true(yd[i] == (float)i);
    trit_graph_free(g);
}

static void test_misuse_is_reported(void **state) {
    (void)state;
    int64_t s[2] = {2, 3};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, s, "x");
    trit_tensor *c = trit_contiguous(g, x);
    assert_int_equal(trit_graph_forward(g), TRIT_ERR_STATE);
    assert_non_null(strstr(trit_last_error(), "compile"));
    assert_int_equal(trit_graph_compile(g, c), TRIT_ERR_SHAPE);  // not a scalar
    assert_non_null(strstr(trit_last_error(), "scalar"));
    // NULL input poisons the graph; compile reports the first error.
    assert_null(trit_contiguous(g, NULL));
    assert_null(trit_transpose(g, x, 0, 5));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "NULL"));
    trit_graph_free(g);

    // A tensor of one graph used in another.
    trit_graph *g1 = trit_graph_new(TRIT_F32), *g2 = trit_graph_new(TRIT_F32);
    trit_tensor *a = trit_graph_input(g1, TRIT_F32, 2, s, "a");
    assert_null(trit_contiguous(g2, a));
    assert_non_null(strstr(trit_last_error(), "another graph"));
    trit_graph_free(g1);
    trit_graph_free(g2);

    // Backward before forward; a parameter of the wrong dtype.
    trit_graph *g3 = trit_graph_new(TRIT_F64);
    trit_tensor *p = tg_param(2, s, -1, 1, 5);
    trit_tensor *l = tg_weighted_sum(g3, trit_contiguous(g3, p));
    assert_int_equal(trit_graph_compile(g3, l), TRIT_OK);
    assert_int_equal(trit_graph_backward(g3), TRIT_ERR_STATE);
    trit_graph_free(g3);
    trit_graph *g4 = trit_graph_new(TRIT_F32);
    l = tg_weighted_sum(g4, trit_contiguous(g4, p));
    assert_int_equal(trit_graph_compile(g4, l), TRIT_ERR_DTYPE);
    trit_graph_free(g4);
    trit_tensor_free(p);
    assert_null(trit_graph_new(TRIT_I32));

    // A NULL graph: the calls that cannot report an error do nothing.
    trit_graph_set_training(NULL, true);
    assert_false(trit_graph_training(NULL));
    trit_graph_set_rng(NULL, 1, 2);
    trit_graph_set_fusion(NULL, true);
    trit_graph_set_grad_scale(NULL, 2.0);
    trit_graph_print(NULL);
    assert_int_equal(trit_graph_backward(NULL), TRIT_ERR_INVALID);
}

static void test_frozen_param_gets_no_grad(void **state) {
    (void)state;
    int64_t s[2] = {2, 3};
    trit_tensor *p = tg_param(2, s, -1, 1, 6), *q = tg_param(2, s, -1, 1, 7);
    q->flags |= TRIT_FLAG_FROZEN;
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *l = tg_weighted_sum(g, trit_contiguous(g, trit_expand(g, trit_reshape(g, p, 3, (int64_t[]){1, 2, 3}), 3, (int64_t[]){2, 2, 3})));
    trit_tensor *l2 = tg_weighted_sum(g, trit_contiguous(g, q));
    (void)l2;
    assert_int_equal(trit_graph_compile(g, l), TRIT_OK);
    assert_null(q->grad);
    assert_non_null(p->grad);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    trit_graph_free(g);
    trit_tensor_free(p);
    trit_tensor_free(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_view_gradients),
        cmocka_unit_test(test_gradient_accumulates_over_uses),
        cmocka_unit_test(test_memory_is_reused),
        cmocka_unit_test(test_misuse_is_reported),
        cmocka_unit_test(test_frozen_param_gets_no_grad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
