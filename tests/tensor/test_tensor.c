// Tensors: layouts, views, copies, element access and bad arguments.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <string.h>

static trit_tensor *iota(int ndim, const int64_t *shape) {
    trit_tensor *t = trit_tensor_new(TRIT_F32, ndim, shape);
    int64_t n = trit_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) ((float *)t->data)[i] = (float)i;
    return t;
}

static void test_layout(void **state) {
    (void)state;
    int64_t s[3] = {2, 3, 4};
    trit_tensor *t = trit_tensor_new(TRIT_F64, 3, s);
    assert_int_equal(trit_tensor_numel(t), 24);
    assert_int_equal(trit_tensor_nbytes(t), 192);
    assert_int_equal(t->strides[0], 12);
    assert_int_equal(t->strides[1], 4);
    assert_int_equal(t->strides[2], 1);
    assert_true(trit_tensor_is_contiguous(t));
    assert_int_equal((uintptr_t)t->data % 64, 0);
    char buf[64];
    assert_string_equal(trit_tensor_shape_str(t, buf, sizeof buf), "(2, 3, 4)");
    trit_tensor_free(t);
    trit_tensor *sc = trit_tensor_new(TRIT_I64, 0, NULL);  // a scalar
    assert_int_equal(trit_tensor_numel(sc), 1);
    trit_tensor_set_flat(sc, 0, 42);
    assert_int_equal(((int64_t *)sc->data)[0], 42);
    trit_tensor_free(sc);
    for (int d = 0; d < TRIT_DTYPE_COUNT; d++)
        assert_true(trit_dtype_size((trit_dtype)d) > 0 || trit_dtype_block((trit_dtype)d) > 1);
    assert_int_equal(trit_dtype_size(TRIT_BF16), 2);
}

static void test_transpose_permute_slice(void **state) {
    (void)state;
    int64_t s[3] = {2, 3, 4};
    trit_tensor *t = iota(3, s), v, w;
    assert_int_equal(trit_tensor_view_transpose(t, 0, 2, &v), TRIT_OK);
    assert_int_equal(v.shape[0], 4);
    assert_false(trit_tensor_is_contiguous(&v));
    // v[i][j][k] == t[k][j][i]
    assert_true(trit_tensor_get(&v, (int64_t[]){3, 1, 1}) == 12 + 4 + 3);
    int perm[3] = {1, 2, 0};
    assert_int_equal(trit_tensor_view_permute(t, perm, &w), TRIT_OK);
    assert_true(trit_tensor_get(&w, (int64_t[]){2, 3, 1}) == 12 + 8 + 3);
    assert_int_equal(trit_tensor_view_slice(t, 2, 1, 4, 2, &w), TRIT_OK);  // k = 1, 3
    assert_int_equal(w.shape[2], 2);
    assert_true(trit_tensor_get(&w, (int64_t[]){1, 2, 1}) == 12 + 8 + 3);
    assert_int_equal(trit_tensor_view_slice(t, -1, -2, 4, 1, &w), TRIT_OK);
    assert_true(trit_tensor_get(&w, (int64_t[]){0, 0, 0}) == 2);
    trit_tensor *c = trit_tensor_contiguous(&v);
    assert_true(trit_tensor_is_contiguous(c));
    for (int64_t i = 0; i < 24; i++) assert_true(trit_tensor_get_flat(c, i) == trit_tensor_get_flat(&v, i));
    trit_tensor_free(c);
    assert_int_equal(trit_tensor_view_slice(t, 0, 1, 5, 1, &w), TRIT_ERR_RANGE);
    assert_int_equal(trit_tensor_view_permute(t, (int[]){0, 0, 1}, &w), TRIT_ERR_INVALID);
    assert_int_equal(trit_tensor_view_transpose(t, 0, 3, &w), TRIT_ERR_INVALID);
    trit_tensor_free(t);
}

static void test_reshape(void **state) {
    (void)state;
    int64_t s[3] = {2, 3, 4};
    trit_tensor *t = iota(3, s), v, w;
    assert_int_equal(trit_tensor_view_reshape(t, 2, (int64_t[]){6, -1}, &v), TRIT_OK);
    assert_int_equal(v.shape[1], 4);
    assert_true(trit_tensor_get(&v, (int64_t[]){5, 3}) == 23);
    assert_int_equal(trit_tensor_view_reshape(t, 2, (int64_t[]){5, 5}, &v), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "24 elements"));
    // A transposed tensor can merge its untouched dims but not the swapped ones.
    assert_int_equal(trit_tensor_view_transpose(t, 1, 2, &v), TRIT_OK);  // (2, 4, 3)
    assert_int_equal(trit_tensor_view_reshape(&v, 2, (int64_t[]){2, 12}, &w), TRIT_ERR_SHAPE);
    assert_int_equal(trit_tensor_view_reshape(&v, 4, (int64_t[]){2, 1, 4, 3}, &w), TRIT_OK);
    assert_true(trit_tensor_get(&w, (int64_t[]){1, 0, 2, 1}) == trit_tensor_get(&v, (int64_t[]){1, 2, 1}));
    // A slice along the first dim keeps the rest mergeable.
    assert_int_equal(trit_tensor_view_slice(t, 0, 1, 2, 1, &v), TRIT_OK);
    assert_int_equal(trit_tensor_view_reshape(&v, 1, (int64_t[]){12}, &w), TRIT_OK);
    assert_true(trit_tensor_get(&w, (int64_t[]){11}) == 23);
    assert_int_equal(trit_tensor_view_reshape(t, 0, NULL, &w), TRIT_ERR_SHAPE);
    trit_tensor_free(t);
}

static void test_expand_broadcast(void **state) {
    (void)state;
    int64_t s[2] = {3, 1};
    trit_tensor *t = iota(2, s), v;
    assert_int_equal(trit_tensor_view_expand(t, 3, (int64_t[]){2, 3, 5}, &v), TRIT_OK);
    assert_int_equal(v.strides[0], 0);
    assert_int_equal(v.strides[2], 0);
    assert_true(trit_tensor_get(&v, (int64_t[]){1, 2, 4}) == 2);
    assert_int_equal(trit_tensor_view_expand(t, 2, (int64_t[]){4, 5}, &v), TRIT_ERR_SHAPE);
    trit_tensor *b = trit_tensor_new(TRIT_F32, 1, (int64_t[]){5});
    int nd;
    int64_t shp[8];
    assert_int_equal(trit_broadcast_shape(t, b, &nd, shp), TRIT_OK);
    assert_int_equal(nd, 2);
    assert_int_equal(shp[0], 3);
    assert_int_equal(shp[1], 5);
    trit_tensor *c = trit_tensor_new(TRIT_F32, 1, (int64_t[]){4});
    assert_int_equal(trit_broadcast_shape(b, c, &nd, shp), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "(5,)"));
    trit_tensor_free(t);
    trit_tensor_free(b);
    trit_tensor_free(c);
}

static void test_copy_convert_fill(void **state) {
    (void)state;
    int64_t s[2] = {4, 5};
    trit_tensor *a = iota(2, s), *h = trit_tensor_new(TRIT_BF16, 2, s), *d = trit_tensor_new(TRIT_F64, 2, s);
    assert_int_equal(trit_tensor_copy(h, a), TRIT_OK);
    assert_int_equal(trit_tensor_copy(d, h), TRIT_OK);
    for (int i = 0; i < 20; i++) assert_true(((double *)d->data)[i] == i);  // small ints are exact in bf16
    trit_tensor *wrong = trit_tensor_new(TRIT_F32, 1, (int64_t[]){20});
    assert_int_equal(trit_tensor_copy(wrong, a), TRIT_ERR_SHAPE);
    // Fills are reproducible and do not depend on anything but (seed, stream).
    trit_tensor *n1 = trit_tensor_new(TRIT_F32, 2, s), *n2 = trit_tensor_new(TRIT_F32, 2, s);
    trit_tensor_fill_normal(n1, 0, 1, 9, 3);
    trit_tensor_fill_normal(n2, 0, 1, 9, 3);
    assert_memory_equal(n1->data, n2->data, 80);
    trit_tensor_fill_normal(n2, 0, 1, 9, 4);
    assert_memory_not_equal(n1->data, n2->data, 80);
    trit_tensor *ints = trit_tensor_new(TRIT_I32, 0, NULL);
    assert_int_equal(trit_tensor_fill_normal(ints, 0, 1, 1, 1), TRIT_ERR_DTYPE);
    trit_tensor_free(ints);
    trit_tensor_free(a);
    trit_tensor_free(h);
    trit_tensor_free(d);
    trit_tensor_free(wrong);
    trit_tensor_free(n1);
    trit_tensor_free(n2);
}

static void test_bad_arguments(void **state) {
    (void)state;
    assert_null(trit_tensor_new(TRIT_F32, 9, (int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}));
    assert_non_null(strstr(trit_last_error(), "dims"));
    assert_null(trit_tensor_new(TRIT_F32, 1, (int64_t[]){-3}));
    assert_null(trit_tensor_new(TRIT_F32, 2, (int64_t[]){INT64_MAX / 2, 4}));
    assert_null(trit_tensor_new(TRIT_DTYPE_COUNT, 0, NULL));
    assert_null(trit_tensor_wrap(TRIT_F32, 0, NULL, NULL));
    // 64-bit sizes: a (B, T, V) shape past 2^31 elements is representable without allocating.
    trit_tensor big;
    assert_int_equal(trit_tensor_init_layout(&big, TRIT_F32, 3, (int64_t[]){64, 1024, 50304}), TRIT_OK);
    assert_true(trit_tensor_numel(&big) == (int64_t)64 * 1024 * 50304);
    assert_true(big.strides[0] == (int64_t)1024 * 50304);
}

// A tensor's own data moved into caller memory: the values, read through the tensor, are the
// same; the tensor no longer frees it; one that does not own its data is refused.
static void test_move_data(void **state) {
    (void)state;
    trit_tensor *t = trit_tensor_new(TRIT_F32, 2, (int64_t[]){3, 5});
    assert_non_null(t);
    for (int i = 0; i < 15; i++) ((float *)t->data)[i] = (float)i * 0.5f;
    float *dst = trit_pages_alloc(sizeof(float) * 15);
    assert_non_null(dst);
    assert_int_equal(trit_tensor_move_data(t, dst), TRIT_OK);
    assert_ptr_equal(t->data, dst);
    assert_false(t->flags & TRIT_FLAG_OWNS_DATA);
    for (int i = 0; i < 15; i++) assert_true(trit_tensor_get_flat(t, i) == (float)i * 0.5f);
    assert_int_not_equal(trit_tensor_move_data(t, dst), TRIT_OK);  // owns nothing now
    trit_clear_error();
    trit_tensor_free(t);  // leaves dst alone
    assert_true(dst[14] == 7.0f);
    trit_pages_free(dst, sizeof(float) * 15);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_move_data),
        cmocka_unit_test(test_layout),        cmocka_unit_test(test_transpose_permute_slice),
        cmocka_unit_test(test_reshape),       cmocka_unit_test(test_expand_broadcast),
        cmocka_unit_test(test_copy_convert_fill), cmocka_unit_test(test_bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
