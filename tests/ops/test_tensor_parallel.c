// tp_copy and tp_reduce (Megatron-LM's f and g): finite-difference gradients and f32 against f64
// of a split MLP in a group of one; two ranks simulated by two threads whose all-reduce meets at
// a barrier, against the unsplit MLP in f64 (outputs, every piece of every gradient, the input's
// gradient on both ranks); the all-reduce called once per forward of tp_reduce and once per
// backward of tp_copy; bad input.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "pair_sum.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

// ---- a group of one: the sum is the identity (counted) -------------------------------------

static trit_status sum_alone(void *ctx, void *data, trit_dtype dtype, int64_t n) {
    (void)data, (void)dtype, (void)n;
    (*(int *)ctx)++;
    return TRIT_OK;
}

// x (B, K), W1 (F, K), b1 (F), W2 (N, F), b2 (N): tp_reduce(gelu(tp_copy(x) W1^T + b1) W2^T) + b2,
// the shape of a block's MLP on one rank.
static trit_tensor *mlp_split(trit_graph *g, trit_tensor **p, const trit_allreduce *r) {
    trit_tensor *h = trit_gelu(g, trit_linear(g, trit_tp_copy(g, p[0], r), p[1], p[2]));
    return trit_add(g, trit_tp_reduce(g, trit_linear(g, h, p[3], NULL), r), p[4]);
}

static trit_tensor *build_alone(trit_graph *g, trit_tensor **p, void *ctx) {
    trit_allreduce r = {.fn = sum_alone, .ctx = ctx};
    return mlp_split(g, p, &r);
}

static void test_gradients_group_of_one(void **state) {
    (void)state;
    int calls = 0;
    trit_tensor *p[5] = {tg_param(2, (int64_t[]){3, 5}, -1, 1, 1), tg_param(2, (int64_t[]){8, 5}, -1, 1, 2),
                         tg_param(1, (int64_t[]){8}, -1, 1, 3), tg_param(2, (int64_t[]){4, 8}, -1, 1, 4),
                         tg_param(1, (int64_t[]){4}, -1, 1, 5)};
    tg_check("tp_copy/tp_reduce, 1 rank", build_alone, &calls, 5, p, 1e-5);
    assert_true(calls > 0);
    tg_free_params(5, p);
}

// ---- two ranks as two threads ----------------------------------------------------------------

enum { RANKS = PAIR_RANKS, B = 6, K = 7, F = 12, N = 5 };

typedef struct rank_run {
    pair_member m;
    trit_tensor *p[5];  // this rank's x, W1 piece, b1 piece, W2 piece, b2
    trit_tensor *out;   // (B, N) copy of the output
    trit_status status;
    int calls_forward, calls_step, calls_eval;
} rank_run;

static void *run_rank(void *arg) {
    rank_run *r = arg;
    trit_allreduce sum = pair_sum_of(&r->m);
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *y = mlp_split(g, r->p, &sum);
    trit_graph_keep(g, y);
    trit_tensor *loss = tg_weighted_sum(g, y);
    r->status = trit_graph_compile(g, loss);
    if (r->status == TRIT_OK) {
        trit_graph_zero_grad(g);
        r->status = trit_graph_forward(g);
    }
    r->calls_forward = r->m.g->calls[r->m.rank];
    if (r->status == TRIT_OK) r->status = trit_graph_backward(g);
    r->calls_step = r->m.g->calls[r->m.rank];
    if (r->status == TRIT_OK) {
        memcpy(r->out->data, trit_tensor_ptr(y), sizeof(double) * B * N);
        trit_graph_set_training(g, false);
        r->status = trit_graph_forward(g);  // an evaluation: forward only
    }
    r->calls_eval = r->m.g->calls[r->m.rank];
    trit_graph_free(g);
    return NULL;
}

static double at(const trit_tensor *t, int64_t i) { return ((const double *)trit_tensor_ptr(t))[i]; }

// |a - b| against the larger magnitude of the whole reference tensor: f64 sums in another order.
static void expect_close(const char *what, double a, double b, double scale) {
    if (!(fabs(a - b) <= 1e-12 * (scale > 1 ? scale : 1))) fail_msg("%s: %.17g against %.17g", what, a, b);
}

static double max_abs(const trit_tensor *t) {
    double m = 0;
    for (int64_t i = 0; i < trit_tensor_numel(t); i++) m = fabs(at(t, i)) > m ? fabs(at(t, i)) : m;
    return m;
}

static trit_tensor *piece_rows(const trit_tensor *w, int r) {  // rows [r F/2, (r + 1) F/2) of (F, ...) or (F)
    const int64_t cols = w->ndim == 2 ? w->shape[1] : 1, rows = w->shape[0] / RANKS;
    trit_tensor *p = w->ndim == 2 ? trit_tensor_new(TRIT_F64, 2, (int64_t[]){rows, cols})
                                  : trit_tensor_new(TRIT_F64, 1, &rows);
    memcpy(p->data, (const double *)trit_tensor_ptr(w) + r * rows * cols, sizeof(double) * (size_t)(rows * cols));
    p->flags |= TRIT_FLAG_PARAM;
    return p;
}

static trit_tensor *piece_cols(const trit_tensor *w, int r) {  // columns [r F/2, (r + 1) F/2) of (N, F)
    const int64_t rows = w->shape[0], cols = w->shape[1] / RANKS;
    trit_tensor *p = trit_tensor_new(TRIT_F64, 2, (int64_t[]){rows, cols});
    for (int64_t i = 0; i < rows; i++)
        memcpy((double *)p->data + i * cols, (const double *)trit_tensor_ptr(w) + i * w->shape[1] + r * cols,
               sizeof(double) * (size_t)cols);
    p->flags |= TRIT_FLAG_PARAM;
    return p;
}

static void test_two_ranks_equal_unsplit(void **state) {
    (void)state;
    trit_threads_set(1);
    trit_tensor *w[5] = {tg_param(2, (int64_t[]){B, K}, -1, 1, 11), tg_param(2, (int64_t[]){F, K}, -1, 1, 12),
                         tg_param(1, (int64_t[]){F}, -1, 1, 13), tg_param(2, (int64_t[]){N, F}, -1, 1, 14),
                         tg_param(1, (int64_t[]){N}, -1, 1, 15)};
    // The unsplit MLP, the reference.
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *ref = trit_add(g, trit_linear(g, trit_gelu(g, trit_linear(g, w[0], w[1], w[2])), w[3], NULL), w[4]);
    trit_graph_keep(g, ref);
    tg_run(g, tg_weighted_sum(g, ref));

    pair_group grp;
    pair_group_init(&grp);
    rank_run runs[RANKS];
    pthread_t th[RANKS];
    for (int r = 0; r < RANKS; r++) {
        runs[r] = (rank_run){.m = {&grp, r}, .out = trit_tensor_new(TRIT_F64, 2, (int64_t[]){B, N})};
        runs[r].p[0] = tg_clone(w[0], TRIT_F64);
        runs[r].p[1] = piece_rows(w[1], r);
        runs[r].p[2] = piece_rows(w[2], r);
        runs[r].p[3] = piece_cols(w[3], r);
        runs[r].p[4] = tg_clone(w[4], TRIT_F64);
    }
    for (int r = 0; r < RANKS; r++) pthread_create(&th[r], NULL, run_rank, &runs[r]);
    for (int r = 0; r < RANKS; r++) pthread_join(th[r], NULL);
    assert_true(pair_group_finish(&grp));
    for (int r = 0; r < RANKS; r++) {
        rank_run *x = &runs[r];
        if (x->status != TRIT_OK) fail_msg("rank %d: %s", r, trit_last_error());
        // One sum in forward (tp_reduce), one in backward (tp_copy), one in the evaluation's forward.
        assert_int_equal(x->calls_forward, 1);
        assert_int_equal(x->calls_step, 2);
        assert_int_equal(x->calls_eval, 3);
        const double so = max_abs(ref);
        for (int64_t i = 0; i < B * N; i++) expect_close("output", at(x->out, i), at(ref, i), so);
        // x's gradient (tp_copy summed both ranks' parts) and b2's are whole on each rank.
        for (int k = 0; k < 5; k += 4) {
            const double s = max_abs(w[k]->grad);
            for (int64_t i = 0; i < trit_tensor_numel(w[k]); i++)
                expect_close(k == 0 ? "dx" : "db2", at(x->p[k]->grad, i), at(w[k]->grad, i), s);
        }
        trit_tensor *d1 = piece_rows(w[1]->grad, r), *db1 = piece_rows(w[2]->grad, r), *d2 = piece_cols(w[3]->grad, r);
        const trit_tensor *want[3] = {d1, db1, d2};
        const char *names[3] = {"dW1 piece", "db1 piece", "dW2 piece"};
        for (int k = 0; k < 3; k++) {
            const double s = max_abs(k == 0 ? w[1]->grad : k == 1 ? w[2]->grad : w[3]->grad);
            for (int64_t i = 0; i < trit_tensor_numel(want[k]); i++)
                expect_close(names[k], at(x->p[k + 1]->grad, i), at(want[k], i), s);
        }
        trit_tensor_free(d1);
        trit_tensor_free(db1);
        trit_tensor_free(d2);
        trit_tensor_free(x->out);
        tg_free_params(5, x->p);
    }
    trit_graph_free(g);
    tg_free_params(5, w);
}

// A failing sum stops the pass with the function's message.
static trit_status sum_fails(void *ctx, void *data, trit_dtype dtype, int64_t n) {
    (void)ctx, (void)data, (void)dtype, (void)n;
    return trit_error(TRIT_ERR_IO, "rank 1 of 2: MPI_Iallreduce failed: test");
}

static void test_bad_input(void **state) {
    (void)state;
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){2, 3}, "x");
    tg_expect_graph_error(g, trit_tp_copy(g, x, NULL), TRIT_ERR_INVALID, "needs an all-reduce function");
    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){2, 3}, "x");
    tg_expect_graph_error(g, trit_tp_reduce(g, x, &(trit_allreduce){0}), TRIT_ERR_INVALID,
                          "needs an all-reduce function");
    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){2, 3}, "x");
    trit_tensor *y = trit_tp_reduce(g, x, &(trit_allreduce){.fn = sum_fails});
    assert_non_null(y);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    assert_int_equal(trit_graph_forward(g), TRIT_ERR_IO);
    assert_non_null(strstr(trit_last_error(), "MPI_Iallreduce failed"));
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_group_of_one),
        cmocka_unit_test(test_two_ranks_equal_unsplit),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
