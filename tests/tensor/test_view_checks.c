// Views refuse sizes they cannot mean: expand takes sizes >= 0 or -1 (keep an existing dim),
// and neither expand nor reshape lets an element count overflow int64_t (a wrapped count could
// otherwise match the tensor's and pass).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "trit/graph.h"
#include "trit/ops.h"
#include "trit/tensor.h"

static void expect_shape_error(trit_status s, const char *msg) {
    assert_int_equal(s, TRIT_ERR_SHAPE);
    if (!strstr(trit_last_error(), msg)) fail_msg("'%s' lacks '%s'", trit_last_error(), msg);
}

static void test_expand_negative_sizes(void **state) {
    (void)state;
    trit_tensor *t = trit_tensor_new(TRIT_F32, 2, (int64_t[]){3, 1});
    assert_non_null(t);
    trit_tensor v;
    expect_shape_error(trit_tensor_view_expand(t, 2, (int64_t[]){-2, 5}, &v), "size -2 for dim 0");
    expect_shape_error(trit_tensor_view_expand(t, 2, (int64_t[]){3, -7}, &v), "size -7 for dim 1");
    expect_shape_error(trit_tensor_view_expand(t, 3, (int64_t[]){INT64_MIN, 3, 5}, &v), "for dim 0");
    // -1 keeps one of the tensor's dims, but a new leading dim has nothing to keep.
    expect_shape_error(trit_tensor_view_expand(t, 3, (int64_t[]){-1, 3, 5}, &v), "not a new leading dim");
    assert_int_equal(trit_tensor_view_expand(t, 3, (int64_t[]){2, -1, 5}, &v), TRIT_OK);
    assert_int_equal(v.shape[0], 2);
    assert_int_equal(v.shape[1], 3);
    assert_int_equal(v.shape[2], 5);
    assert_int_equal(v.strides[0], 0);
    assert_int_equal(v.strides[2], 0);
    assert_int_equal(trit_tensor_view_expand(t, 2, (int64_t[]){3, 0}, &v), TRIT_OK);  // an empty expand is fine
    assert_int_equal(trit_tensor_numel(&v), 0);
    trit_tensor_free(t);
}

static void test_expand_overflow(void **state) {
    (void)state;
    trit_tensor *t = trit_tensor_new(TRIT_F32, 1, (int64_t[]){1});
    assert_non_null(t);
    trit_tensor v;
    const int64_t big = INT64_C(1) << 32;
    // 2^96 elements: the count would wrap through int64_t.
    expect_shape_error(trit_tensor_view_expand(t, 3, (int64_t[]){big, big, big}, &v), "more than 2^59 elements");
    // The bound is trit_tensor_init_layout's: below INT64_MAX / 16.
    expect_shape_error(trit_tensor_view_expand(t, 2, (int64_t[]){INT64_C(1) << 29, INT64_C(1) << 30}, &v), "2^59");
    assert_int_equal(trit_tensor_view_expand(t, 2, (int64_t[]){INT64_C(1) << 29, INT64_C(1) << 29}, &v), TRIT_OK);
    assert_int_equal(trit_tensor_numel(&v), INT64_C(1) << 58);
    // The nonzero sizes count even beside a 0: trit_tensor_numel multiplies from the first dim,
    // so (2^32, 2^32, 0) would overflow on its way to 0.
    expect_shape_error(trit_tensor_view_expand(t, 3, (int64_t[]){big, big, 0}, &v), "2^59");
    assert_int_equal(trit_tensor_view_expand(t, 3, (int64_t[]){big, 0, 7}, &v), TRIT_OK);
    assert_int_equal(trit_tensor_numel(&v), 0);
    trit_tensor_free(t);
}

static void test_reshape_overflow(void **state) {
    (void)state;
    // 2^32 x 2^32 wraps to 0 in int64_t arithmetic, the count of this empty tensor.
    trit_tensor *t = trit_tensor_new(TRIT_F32, 1, (int64_t[]){0});
    assert_non_null(t);
    trit_tensor v;
    const int64_t big = INT64_C(1) << 32;
    expect_shape_error(trit_tensor_view_reshape(t, 2, (int64_t[]){big, big}, &v), "more than 2^59 elements");
    expect_shape_error(trit_tensor_view_reshape(t, 2, (int64_t[]){-2, 0}, &v), "dim 0 is -2");
    expect_shape_error(trit_tensor_view_reshape(t, 3, (int64_t[]){big, 0, big}, &v), "2^59");
    assert_int_equal(trit_tensor_view_reshape(t, 2, (int64_t[]){big, 0}, &v), TRIT_OK);
    assert_int_equal(trit_tensor_numel(&v), 0);
    trit_tensor *u = trit_tensor_new(TRIT_F32, 1, (int64_t[]){12});
    assert_non_null(u);
    assert_int_equal(trit_tensor_view_reshape(u, 3, (int64_t[]){2, -1, 3}, &v), TRIT_OK);  // -1 still infers
    assert_int_equal(v.shape[1], 2);
    expect_shape_error(trit_tensor_view_reshape(u, 2, (int64_t[]){-1, INT64_C(1) << 60}, &v), "2^59");
    trit_tensor_free(u);
    trit_tensor_free(t);
}

// The graph constructor takes the same rule: the build is poisoned and compile reports it.
static void test_graph_expand(void **state) {
    (void)state;
    trit_graph *g = trit_graph_new(TRIT_F32);
    assert_non_null(g);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){3, 1}, "x");
    assert_non_null(x);
    assert_null(trit_expand(g, x, 2, (int64_t[]){3, -2}));
    assert_int_not_equal(trit_graph_compile(g, NULL), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "size -2 for dim 1"));
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){3, 1}, "x");
    const int64_t big = INT64_C(1) << 32;
    assert_null(trit_expand(g, x, 4, (int64_t[]){big, big, 3, big}));
    assert_int_not_equal(trit_graph_compile(g, NULL), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "2^59"));
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_negative_sizes),
        cmocka_unit_test(test_expand_overflow),
        cmocka_unit_test(test_reshape_overflow),
        cmocka_unit_test(test_graph_expand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
