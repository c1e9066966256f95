// embedding: gradient checks (i32/i64 indices, repeated indices, a transposed table), f32 vs
// f64, PyTorch parity, out-of-range indices, a scatter-add independent of threads, bad input.
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
#include "ops/embedding.h"

typedef struct emb_case {
    trit_tensor *idx;
    bool strided;  // the table is p0 (C, V) transposed
} emb_case;

static trit_tensor *build_emb(trit_graph *g, trit_tensor **p, void *ctx) {
    const emb_case *c = ctx;
    return trit_embedding(g, c->strided ? trit_transpose(g, p[0], 0, 1) : p[0], c->idx);
}

static void test_gradcheck(void **state) {
    (void)state;
    int64_t sw[2] = {7, 5}, si[2] = {2, 6};
    const int64_t iv[12] = {3, 3, 0, 6, 3, 1, 6, 6, 2, 0, 3, 5};
    trit_tensor *p = tg_param(2, sw, -1, 1, 31);
    emb_case a = {tg_indices(TRIT_I64, 2, si, iv), false};
    tg_check("embedding i64", build_emb, &a, 1, &p, 1e-6);
    trit_tensor_free(a.idx);
    trit_tensor_free(p);
    int64_t st[2] = {5, 7}, s1[1] = {12};
    p = tg_param(2, st, -1, 1, 32);
    emb_case b = {tg_indices(TRIT_I32, 1, s1, iv), true};
    tg_check("embedding i32 strided", build_emb, &b, 1, &p, 1e-6);
    trit_tensor_free(b.idx);
    trit_tensor_free(p);
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *nf = tf_open("nn.bin");
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *w = tf_tensor(nf, "emb.weight", TRIT_F64, TRIT_FLAG_PARAM);
    trit_tensor *idx = tf_tensor(nf, "emb.idx", TRIT_I32, 0);
    trit_tensor *r = tf_tensor(nf, "emb.r", TRIT_F64, 0);
    trit_tensor *y = trit_embedding(g, w, idx);
    trit_graph_keep(g, y);
    tg_run(g, tf_dot(g, y, r));
    double worst = tf_compare(nf, "emb.out", y, "emb.out", 1e-10);
    worst = fmax(worst, tf_compare(nf, "emb.dweight", w->grad, "emb.dweight", 1e-10));
    print_message("embedding vs PyTorch: max abs error %.3g\n", worst);
    trit_graph_free(g);
    trit_tensor_free(w);
    trit_tensor_free(idx);
    trit_tensor_free(r);
    tf_close(nf);
}

// The op's message names the position and the index; the graph returns TRIT_ERR_RANGE.
static void test_index_out_of_range(void **state) {
    (void)state;
    int64_t sw[2] = {4, 3}, si[1] = {3};
    const int64_t bad[2][3] = {{0, 4, 1}, {2, 1, -1}};
    const char *want[2] = {"index 4 at position 1", "index -1 at position 2"};
    for (int k = 0; k < 2; k++) {
        trit_tensor *w = tg_param(2, sw, -1, 1, 33), *idx = tg_indices(k ? TRIT_I32 : TRIT_I64, 1, si, bad[k]);
        double out[9];
        trit_tensor o;
        trit_tensor_init_layout(&o, TRIT_F64, 2, (int64_t[]){3, 3});
        o.data = out;
        trit_exec_ctx ctx = {.training = true};
        trit_op_call c = {.n_in = 2, .in = {w, idx}, .out = &o, .ctx = &ctx};
        assert_int_equal(trit_op_embedding_f64.forward(&c), TRIT_ERR_RANGE);
        assert_non_null(strstr(trit_last_error(), want[k]));

        trit_graph *g = trit_graph_new(TRIT_F64);
        trit_tensor *y = trit_embedding(g, w, idx);
        assert_int_equal(trit_graph_compile(g, tg_weighted_sum(g, y)), TRIT_OK);
        assert_int_equal(trit_graph_forward(g), TRIT_ERR_RANGE);
        trit_graph_free(g);
        trit_tensor_free(w);
        trit_tensor_free(idx);
    }
}

// Many tokens hit few rows: the weight gradient is bit-identical with 1 and 2 threads and
// equals a serial sum in token order.
static void test_scatter_add_is_deterministic(void **state) {
    (void)state;
    enum { V = 5, C = 300, N = 2000 };
    int64_t sw[2] = {V, C}, si[1] = {N}, *iv = malloc(sizeof(int64_t) * N);
    for (int i = 0; i < N; i++) iv[i] = (int64_t)(trit_rng_u32(3, 1, (uint64_t)i) % V);
    trit_tensor *idx = tg_indices(TRIT_I32, 1, si, iv);
    float *grads[2];
    const int keep = trit_threads_get();
    for (int th = 1; th <= 2; th++) {
        trit_threads_set(th);
        trit_tensor *w = trit_tensor_new_param(TRIT_F32, 2, sw, "w");
        trit_tensor_fill_uniform(w, -1, 1, 4, 1);
        trit_graph *g = trit_graph_new(TRIT_F32);
        tg_run(g, tg_weighted_sum(g, trit_embedding(g, w, idx)));
        grads[th - 1] = malloc(sizeof(float) * V * C);
        memcpy(grads[th - 1], w->grad->data, sizeof(float) * V * C);
        trit_graph_free(g);
        trit_tensor_free(w);
    }
    trit_threads_set(keep);
    assert_memory_equal(grads[0], grads[1], sizeof(float) * V * C);
    // The same sum, serially: gw[idx[n], j] += r[n * C + j] in token order, in float.
    float *want = calloc(V * C, sizeof(float));
    for (int n = 0; n < N; n++)
        for (int j = 0; j < C; j++) want[iv[n] * C + j] += (float)(trit_rng_uniform(424242, 7, (uint64_t)(n * C + j)) - 0.5);
    assert_memory_equal(grads[0], want, sizeof(float) * V * C);
    free(want);
    free(grads[0]);
    free(grads[1]);
    free(iv);
    trit_tensor_free(idx);
}

static void test_bad_input(void **state) {
    (void)state;
    int64_t sw[2] = {4, 3}, s1[1] = {4}, si[1] = {2};
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *w = trit_graph_input(g, TRIT_F64, 2, sw, "w");
    trit_tensor *fi = trit_graph_input(g, TRIT_F64, 1, si, "fi");
    assert_null(trit_embedding(g, w, fi));
    assert_non_null(strstr(trit_last_error(), "embedding: expected i32 or i64 indices, got f64"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_DTYPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    trit_tensor *w1 = trit_graph_input(g, TRIT_F64, 1, s1, "w1");
    trit_tensor *ii = trit_graph_input(g, TRIT_I64, 1, si, "ii");
    assert_null(trit_embedding(g, w1, ii));
    assert_non_null(strstr(trit_last_error(), "expected weight (V, C)"));
    assert_non_null(strstr(trit_last_error(), "got weight (4,)"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_SHAPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F32);
    trit_tensor *w64 = trit_graph_input(g, TRIT_F64, 2, sw, "w64");
    ii = trit_graph_input(g, TRIT_I64, 1, si, "ii");
    assert_null(trit_embedding(g, w64, ii));
    assert_non_null(strstr(trit_last_error(), "expected a f32 weight"));
    assert_null(trit_embedding(g, NULL, ii));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_DTYPE);  // the first error wins
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F32);
    ii = trit_graph_input(g, TRIT_I64, 1, si, "ii");
    assert_null(trit_embedding(g, NULL, ii));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradcheck),
        cmocka_unit_test(test_pytorch_parity),
        cmocka_unit_test(test_index_out_of_range),
        cmocka_unit_test(test_scatter_add_is_deterministic),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
