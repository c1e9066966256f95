// Gradient accumulation: 4 micro-batches of 8 with grad scale 1/4 give the same gradients and
// the same AdamW update as one batch of 32 (mean losses), to 1e-6.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>
#include <string.h>

enum { N = 32, K = 7, M = 3, MICRO = 8 };

typedef struct model {
    trit_tensor *w, *b, *w2;
} model;

static model make_model(void) {
    model m = {trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){M, K}, "w"),
               trit_tensor_new_param(TRIT_F32, 1, (int64_t[]){M}, "b"),
               trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){M, M}, "w2")};
    trit_tensor_fill_normal(m.w, 0, 0.5, 3, 1);
    trit_tensor_fill_normal(m.b, 0, 0.5, 3, 2);
    trit_tensor_fill_normal(m.w2, 0, 0.5, 3, 3);
    return m;
}

static void free_model(model *m) {
    trit_tensor_free(m->w);
    trit_tensor_free(m->b);
    trit_tensor_free(m->w2);
}

typedef struct net {
    trit_graph *g;
    trit_tensor *x, *y, *loss;
} net;

static net make_net(model *m, int64_t rows) {
    net n;
    n.g = trit_graph_new(TRIT_F32);
    n.x = trit_graph_input(n.g, TRIT_F32, 2, (int64_t[]){rows, K}, "x");
    n.y = trit_graph_input(n.g, TRIT_F32, 2, (int64_t[]){rows, M}, "y");
    trit_tensor *h = trit_tanh(n.g, trit_linear(n.g, n.x, m->w, m->b));
    n.loss = trit_mse(n.g, trit_linear(n.g, h, m->w2, NULL), n.y, TRIT_REDUCE_MEAN);
    assert_int_equal(trit_graph_compile(n.g, n.loss), TRIT_OK);
    return n;
}

static void data(float *x /* (N, K) */, float *y /* (N, M) */) {
    trit_rng_fill_normal(x, N * K, 17, 1, 0, 0, 1);
    trit_rng_fill_normal(y, N * M, 17, 2, 0, 0, 1);
}

static void assert_close(const trit_tensor *a, const trit_tensor *b, double tol) {
    int64_t n = trit_tensor_numel(a);
    double scale = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(trit_tensor_get_flat(b, i)));
    for (int64_t i = 0; i < n; i++) {
        double d = fabs(trit_tensor_get_flat(a, i) - trit_tensor_get_flat(b, i));
        if (d > tol * fmax(scale, 1e-6)) fail_msg("%s[%lld]: %.9g vs %.9g", a->name, (long long)i, trit_tensor_get_flat(a, i), trit_tensor_get_flat(b, i));
    }
}

static void test_four_micro_batches_equal_one_batch(void **state) {
    (void)state;
    float x[N * K], y[N * M];
    data(x, y);
    model full = make_model(), acc = make_model();
    net big = make_net(&full, N), small = make_net(&acc, MICRO);
    trit_optim_config cfg = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_tensor *pf[3] = {full.w, full.b, full.w2}, *pa[3] = {acc.w, acc.b, acc.w2};
    trit_optim *of = trit_optim_new_gpt2(&cfg, pf, 3, 0.1), *oa = trit_optim_new_gpt2(&cfg, pa, 3, 0.1);
    assert_non_null(of);
    assert_non_null(oa);
    for (int step = 0; step < 3; step++) {
        trit_optim_zero_grad(of);
        memcpy(big.x->data, x, sizeof x);
        memcpy(big.y->data, y, sizeof y);
        assert_int_equal(trit_graph_forward(big.g), TRIT_OK);
        assert_int_equal(trit_graph_backward(big.g), TRIT_OK);

        trit_optim_zero_grad(oa);
        trit_graph_set_grad_scale(small.g, 1.0 / (N / MICRO));
        for (int mb = 0; mb < N / MICRO; mb++) {
            memcpy(small.x->data, x + mb * MICRO * K, sizeof(float) * MICRO * K);
            memcpy(small.y->data, y + mb * MICRO * M, sizeof(float) * MICRO * M);
            assert_int_equal(trit_graph_forward(small.g), TRIT_OK);
            assert_int_equal(trit_graph_backward(small.g), TRIT_OK);
        }
        for (int i = 0; i < 3; i++) assert_close(pa[i]->grad, pf[i]->grad, 1e-6);
        double nf, na;
        assert_int_equal(trit_optim_clip_grads(of, 1.0, &nf), TRIT_OK);
        assert_int_equal(trit_optim_clip_grads(oa, 1.0, &na), TRIT_OK);
        assert_true(fabs(nf - na) <= 1e-6 * nf);
        assert_int_equal(trit_optim_step(of, 1e-2), TRIT_OK);
        assert_int_equal(trit_optim_step(oa, 1e-2), TRIT_OK);
        for (int i = 0; i < 3; i++) assert_close(pa[i], pf[i], 1e-6);
    }
    trit_optim_free(of);
    trit_optim_free(oa);
    trit_graph_free(big.g);
    trit_graph_free(small.g);
    free_model(&full);
    free_model(&acc);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_four_micro_batches_equal_one_batch)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
