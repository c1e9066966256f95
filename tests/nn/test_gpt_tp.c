// Tensor-parallel shards of a GPT (nn/gpt_tp.c): the pieces of every parameter put back together
// are the whole model's bits; two shards trained as two threads whose sums meet at a barrier give
// the whole model's loss and gradients (each piece against the whole gradient's piece); the
// configs a split cannot take are refused with the reason.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include "pair_sum.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { RANKS = PAIR_RANKS, B = 2, T = 16, V = 37 };

static trit_gpt_config config(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 32, c.n_head = 4, c.seq_len = T, c.vocab_size = V, c.dropout = 0.1;
    return c;
}

static void fill(trit_gpt_graph *gg) {
    int32_t *x = gg->idx->data, *y = gg->targets->data;
    for (int i = 0; i < B * T; i++) {
        x[i] = (int32_t)(trit_rng_u32(5, 0, (uint64_t)i) % V);
        y[i] = (x[i] * 7 + 3) % V;
    }
}

// One training forward and backward of m (a whole model or a shard), dropout keyed as one step.
static trit_status step(trit_gpt *m, double *loss) {
    trit_gpt_graph gg;
    trit_status s = trit_gpt_build_train(m, B, T, &gg);
    if (s != TRIT_OK) return s;
    fill(&gg);
    trit_graph_set_rng(gg.graph, 11, 3);
    trit_graph_zero_grad(gg.graph);
    s = trit_graph_forward(gg.graph);
    if (s == TRIT_OK) s = trit_graph_backward(gg.graph);
    *loss = trit_tensor_get_flat(gg.loss, 0);
    trit_gpt_graph_free(&gg);
    return s;
}

typedef struct rank_run {
    pair_member m;
    trit_gpt *shard;
    double loss;
    trit_status status;
} rank_run;

static void *run_rank(void *arg) {
    rank_run *r = arg;
    r->status = step(r->shard, &r->loss);
    return NULL;
}

static void test_pieces_put_back(void **state) {
    (void)state;
    trit_gpt_config c = config();
    trit_gpt *m = trit_gpt_new(&c, 3);
    assert_non_null(m);
    trit_allreduce none = pair_sum_of(NULL);  // never called: nothing runs
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *w = trit_gpt_tensor(m, i);
        float *back = calloc((size_t)trit_tensor_numel(w), sizeof *back);
        assert_non_null(back);
        int64_t pieces = 0;
        for (int r = 0; r < RANKS; r++) {
            trit_gpt *s = trit_gpt_tp_shard(m, r, RANKS, &none);
            assert_non_null(s);
            const trit_tensor *p = trit_gpt_tensor(s, i);
            assert_string_equal(p->name, w->name);
            pieces += trit_tensor_numel(p);
            trit_gpt_tp_copy_piece(trit_gpt_tp_split_of(w->name), w->ndim, w->shape, sizeof(float), back,
                                   trit_tensor_ptr(p), r, RANKS, true);
            trit_gpt_free(s);
        }
        const bool split = trit_gpt_tp_split_of(w->name).dim >= 0;
        // A split parameter is in two halves, a whole one on both ranks.
        assert_int_equal(pieces, split ? trit_tensor_numel(w) : RANKS * trit_tensor_numel(w));
        if (memcmp(back, trit_tensor_ptr(w), trit_tensor_nbytes(w)) != 0) fail_msg("'%s' put back differs", w->name);
        free(back);
    }
    // c_attn's piece of rank 1 holds heads 2-3 of q, then of k, then of v: rows 16-31, 48-63, 80-95.
    trit_gpt *s = trit_gpt_tp_shard(m, 1, RANKS, &none);
    const trit_tensor *a = trit_gpt_find(s, "h.0.attn.c_attn.weight"), *w = trit_gpt_find(m, "h.0.attn.c_attn.weight");
    assert_int_equal(a->shape[0], 48);
    for (int part = 0; part < 3; part++)
        assert_memory_equal((const float *)trit_tensor_ptr(a) + part * 16 * 32,
                            (const float *)trit_tensor_ptr(w) + (part * 32 + 16) * 32, 16 * 32 * sizeof(float));
    trit_gpt_free(s);
    trit_gpt_free(m);
}

// Largest |piece - whole's piece| over a parameter, and the whole gradient's largest magnitude.
static void compare_grad(const trit_tensor *whole, const trit_tensor *piece, int r, double *err, double *scale) {
    const int64_t n = trit_tensor_numel(piece);
    float *want = malloc(sizeof(float) * (size_t)n);
    assert_non_null(want);
    trit_gpt_tp_copy_piece(trit_gpt_tp_split_of(whole->name), whole->ndim, whole->shape, sizeof(float),
                           trit_tensor_ptr(whole->grad), want, r, RANKS, false);
    const float *got = trit_tensor_ptr(piece->grad), *all = trit_tensor_ptr(whole->grad);
    for (int64_t i = 0; i < n; i++) *err = fmax(*err, fabs((double)got[i] - want[i]));
    for (int64_t i = 0; i < trit_tensor_numel(whole); i++) *scale = fmax(*scale, fabs((double)all[i]));
    free(want);
}

static void test_two_shards_equal_whole(void **state) {
    (void)state;
    trit_threads_set(1);
    trit_gpt_config c = config();
    trit_gpt *m = trit_gpt_new(&c, 3);
    assert_non_null(m);
    pair_group grp;
    pair_group_init(&grp);
    rank_run runs[RANKS];
    pthread_t th[RANKS];
    trit_allreduce sums[RANKS];
    for (int r = 0; r < RANKS; r++) {
        runs[r] = (rank_run){.m = {&grp, r}};
        sums[r] = pair_sum_of(&runs[r].m);
        runs[r].shard = trit_gpt_tp_shard(m, r, RANKS, &sums[r]);
        assert_non_null(runs[r].shard);
    }
    for (int r = 0; r < RANKS; r++) pthread_create(&th[r], NULL, run_rank, &runs[r]);
    for (int r = 0; r < RANKS; r++) pthread_join(th[r], NULL);
    assert_true(pair_group_finish(&grp));
    double loss = 0;
    assert_int_equal(step(m, &loss), TRIT_OK);
    // f32 sums of at most 4C = 128 products, the halves added at the end instead of in the
    // running sum: about 2^-24 of the sum of magnitudes per rounding, a few roundings deep
    // through two blocks; 1e-5 of the largest gradient bounds it (seen: 4.1e-7).
    double worst = 0;
    for (int r = 0; r < RANKS; r++) {
        if (runs[r].status != TRIT_OK) fail_msg("rank %d: %s", r, trit_last_error());
        if (!(fabs(runs[r].loss - loss) <= 1e-6 * loss))
            fail_msg("rank %d: loss %.9g, whole %.9g", r, runs[r].loss, loss);
        for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
            double err = 0, scale = 0;
            compare_grad(trit_gpt_tensor(m, i), trit_gpt_tensor(runs[r].shard, i), r, &err, &scale);
            if (!(err <= 1e-5 * scale))
                fail_msg("rank %d '%s': gradient %.3g from the whole's (largest %.3g)", r, trit_gpt_tensor(m, i)->name,
                         err, scale);
            worst = fmax(worst, err / (scale > 0 ? scale : 1));
        }
        trit_gpt_free(runs[r].shard);
    }
    print_message("losses %.9g / %.9g against %.9g; largest gradient difference %.2e of the gradient's largest\n",
                  runs[0].loss, runs[1].loss, loss, worst);
    trit_gpt_free(m);
}

static void test_refusals(void **state) {
    (void)state;
    trit_gpt_config c = config();
    assert_int_equal(trit_gpt_tp_check(&c, 3), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "--heads 4 is not divisible by 3 (each rank computes whole heads)"));
    c.mlp = TRIT_MLP_SWIGLU;
    assert_int_equal(trit_gpt_tp_check(&c, 2), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "drop --mlp swiglu"));
    c = config();
    c.mlp_hidden = 30;
    assert_int_equal(trit_gpt_tp_check(&c, 4), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "the MLP's width 30 (4C) is not divisible by 4"));
    // A shard decodes nothing: its cache is refused.
    c = config();
    trit_gpt *m = trit_gpt_new(&c, 3);
    trit_allreduce none = pair_sum_of(NULL);
    trit_gpt *s = trit_gpt_tp_shard(m, 0, RANKS, &none);
    assert_non_null(s);
    assert_null(trit_gpt_cache_new(s));
    assert_non_null(strstr(trit_last_error(), "tensor-parallel shard (rank 0 of 2)"));
    assert_null(trit_gpt_tp_shard(s, 0, RANKS, &none));
    trit_gpt_free(s);
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pieces_put_back),
        cmocka_unit_test(test_two_shards_equal_whole),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
