// Checks shared by the attention op tests (see attn_check.h).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "attn_check.h"
#include "gradcheck.h"

#include <stdlib.h>
#include <string.h>

void ta_result_free(ta_result *r) {
    for (int i = 0; i < 4; i++) free(r->v[i]);
}

ta_result ta_run(ta_attn_fn fn, trit_dtype dt, trit_tensor **p64, int n_head, int threads) {
    trit_tensor *p[3];
    for (int i = 0; i < 3; i++) p[i] = tg_clone(p64[i], dt);
    trit_threads_set(threads);
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *out = fn(g, p[0], p[1], p[2], n_head);
    assert_non_null(out);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, tg_weighted_sum(g, out)), TRIT_OK);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    ta_result r = {.n = trit_tensor_numel(out)};
    const trit_tensor *src[4] = {out, p[0]->grad, p[1]->grad, p[2]->grad};
    for (int j = 0; j < 4; j++) {
        r.v[j] = malloc(sizeof(double) * (size_t)r.n);
        for (int64_t i = 0; i < r.n; i++) r.v[j][i] = trit_tensor_get_flat(src[j], i);
    }
    trit_graph_free(g);
    tg_free_params(3, p);
    trit_threads_set(0);
    return r;
}

trit_tensor *ta_input_graph(trit_graph *g, ta_attn_fn fn, const int64_t *s, int n_head, trit_tensor **qkv) {
    const char *names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) qkv[i] = trit_graph_input(g, trit_graph_dtype(g), 3, s, names[i]);
    trit_tensor *out = fn(g, qkv[0], qkv[1], qkv[2], n_head);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    return out;
}

void ta_check_causal(ta_attn_fn fn, trit_dtype dt, int64_t B, int64_t T, int64_t C, int n_head, int64_t t0) {
    int64_t s[3] = {B, T, C};
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *in[3];
    trit_tensor *out = ta_input_graph(g, fn, s, n_head, in);
    for (int i = 0; i < 3; i++) trit_tensor_fill_uniform(in[i], -2, 2, 99, (uint64_t)i);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const size_t row = (size_t)C * trit_dtype_size(dt);
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

void ta_check_bad_input(ta_attn_fn fn) {
    int64_t s[3] = {2, 5, 8}, s2[3] = {2, 4, 8}, s2d[2] = {5, 8};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *a = trit_graph_input(g, TRIT_F32, 3, s, "a"), *b = trit_graph_input(g, TRIT_F32, 3, s2, "b");
    tg_expect_graph_error(g, fn(g, a, b, a, 2), TRIT_ERR_SHAPE, "one shape");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 3, s, "a");
    tg_expect_graph_error(g, fn(g, a, a, a, 3), TRIT_ERR_SHAPE, "multiple of n_head");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 3, s, "a");
    tg_expect_graph_error(g, fn(g, a, a, a, 0), TRIT_ERR_INVALID, "n_head");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 2, s2d, "a");
    tg_expect_graph_error(g, fn(g, a, a, a, 2), TRIT_ERR_SHAPE, "(B, T, C)");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 3, s, "a");
    b = trit_graph_input(g, TRIT_I32, 3, s, "b");
    tg_expect_graph_error(g, fn(g, a, a, b, 2), TRIT_ERR_DTYPE, "i32");

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 3, s, "a");
    tg_expect_graph_error(g, fn(g, a, NULL, a, 2), TRIT_ERR_INVALID, "NULL");
}
