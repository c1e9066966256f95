// mean_pool and last_token_pool: gradient checks (mask, lengths, no selector, a strided x, a size
// that takes the threaded path), f32 vs f64, PyTorch parity in f64 and f32, known answers for
// right- and left-padded rows, run-time errors (an empty row, a mask value other than 0/1, a
// length outside [1, T]), bad shapes and dtypes, and the same bits with 1 and 2 threads.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "fixture_case.h"
#include "gradcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct pool_case {
    bool last;
    trit_tensor *sel;  // constant selector or NULL
    bool strided;      // p[0] is (B, C, T): pool its transpose
} pool_case;

static trit_tensor *build_pool(trit_graph *g, trit_tensor **p, void *ctx) {
    const pool_case *c = ctx;
    trit_tensor *x = c->strided ? trit_transpose(g, p[0], 1, 2) : p[0];
    return (c->last ? trit_last_token_pool : trit_mean_pool)(g, x, c->sel);
}

// A (3, 5) mask: row 0 full, row 1 right-padded, row 2 left-padded with a hole.
static const int64_t MASK35[15] = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 1};

static void test_gradients(void **state) {
    (void)state;
    const int64_t sx[3] = {3, 5, 4}, sxt[3] = {3, 4, 5}, sm[2] = {3, 5}, sl[1] = {3}, len[3] = {5, 2, 4};
    trit_tensor *mask = tg_indices(TRIT_I32, 2, sm, MASK35), *fmask = tg_indices(TRIT_F64, 2, sm, MASK35);
    trit_tensor *lens = tg_indices(TRIT_I64, 1, sl, len);
    trit_tensor *p = tg_param(3, sx, -2, 2, 61), *pt = tg_param(3, sxt, -2, 2, 62);
    for (int last = 0; last < 2; last++) {
        const char *nm = last ? "last_token_pool" : "mean_pool";
        char what[64];
        pool_case c = {last, mask, false};
        snprintf(what, sizeof what, "%s i32 mask", nm);
        tg_check(what, build_pool, &c, 1, &p, 1e-6);
        c.sel = fmask;
        snprintf(what, sizeof what, "%s f64 mask", nm);
        tg_check(what, build_pool, &c, 1, &p, 1e-6);
        c.sel = lens;
        snprintf(what, sizeof what, "%s i64 lengths", nm);
        tg_check(what, build_pool, &c, 1, &p, 1e-6);
        c.sel = NULL;
        snprintf(what, sizeof what, "%s all positions", nm);
        tg_check(what, build_pool, &c, 1, &p, 1e-6);
        c = (pool_case){last, mask, true};
        snprintf(what, sizeof what, "%s strided x", nm);
        tg_check(what, build_pool, &c, 1, &pt, 1e-6);
    }
    trit_tensor_free(mask);
    trit_tensor_free(fmask);
    trit_tensor_free(lens);
    trit_tensor_free(p);
    trit_tensor_free(pt);
}

// (4, 64, 128): enough reads of x for the threaded loops.
static void test_gradients_threaded_size(void **state) {
    (void)state;
    const int64_t sx[3] = {4, 64, 128}, sl[1] = {4}, len[4] = {64, 1, 33, 50};
    trit_tensor *lens = tg_indices(TRIT_I32, 1, sl, len), *p = tg_param(3, sx, -1, 1, 63);
    pool_case c = {false, lens, false};
    tg_assert_gradcheck_sampled("mean_pool (4, 64, 128)", build_pool, &c, 1, &p);
    tg_assert_f32_close("mean_pool (4, 64, 128)", build_pool, &c, 1, &p, 1e-6);
    c.last = true;
    tg_assert_gradcheck_sampled("last_token_pool (4, 64, 128)", build_pool, &c, 1, &p);
    trit_tensor_free(lens);
    trit_tensor_free(p);
}

static trit_tensor *build_fixture(trit_graph *g, trit_tensor **t, void *ctx) {
    return (*(const bool *)ctx ? trit_last_token_pool : trit_mean_pool)(g, t[0], t[1]);
}

// embed.bin (tests/reference/make_embed_fixtures.py): f64 to 1e-12, f32 to 1e-6 relative.
static void test_matches_pytorch(void **state) {
    (void)state;
    tf_file *f = tf_open("embed.bin");
    static const struct {
        const char *fcase, *sel;
        bool last;
        trit_dtype dt;
    } cases[] = {
        {"mean_mask", "mask", false, TRIT_I32}, {"mean_mask", "mask", false, TRIT_F32},
        {"mean_len", "lengths", false, TRIT_I64}, {"last_mask", "mask", true, TRIT_U8},
        {"last_mask", "mask", true, TRIT_F64}, {"last_len", "lengths", true, TRIT_I32},
    };
    double w64 = 0, w32 = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bool last = cases[i].last;
        const fc_input in[2] = {{"x", true, TRIT_F64}, {cases[i].sel, false, cases[i].dt}};
        w64 = fmax(w64, fc_check(f, cases[i].fcase, TRIT_F64, build_fixture, &last, 2, in, 1e-12));
        w32 = fmax(w32, fc_check(f, cases[i].fcase, TRIT_F32, build_fixture, &last, 2, in, 1e-6));
    }
    print_message("pooling vs PyTorch: max rel error f64 %.3g, f32 %.3g\n", w64, w32);
    tf_close(f);
}

// x[b, t, c] = 100 b + 10 t + c: every pooled value is known exactly.
static void test_known_answers(void **state) {
    (void)state;
    const int64_t sx[3] = {3, 5, 2}, sm[2] = {3, 5};
    trit_tensor *mask = tg_indices(TRIT_I64, 2, sm, MASK35);
    for (int last = 0; last < 2; last++) {
        trit_graph *g = trit_graph_new(TRIT_F32);
        trit_tensor *x = trit_graph_input(g, TRIT_F32, 3, sx, "x");
        trit_tensor *out = (last ? trit_last_token_pool : trit_mean_pool)(g, x, mask);
        assert_non_null(out);
        assert_int_equal(out->ndim, 2);
        assert_int_equal(out->shape[0], 3);
        assert_int_equal(out->shape[1], 2);
        trit_graph_keep(g, out);
        assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
        for (int64_t i = 0; i < 30; i++) trit_tensor_set_flat(x, i, (double)(100 * (i / 10) + 10 * (i / 2 % 5) + i % 2));
        assert_int_equal(trit_graph_forward(g), TRIT_OK);
        // mean: rows keep t = 0..4, t = 0..1, t = {2, 4}; last: t = 4, 1, 4
        const double mean_t[3] = {2, 0.5, 3}, last_t[3] = {4, 1, 4};
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 2; c++)
                assert_true(trit_tensor_get_flat(out, b * 2 + c) == 100 * b + 10 * (last ? last_t[b] : mean_t[b]) + c);
        trit_graph_free(g);
    }
    trit_tensor_free(mask);
}

// A selector the op refuses when it runs: forward fails with TRIT_ERR_RANGE and a message.
static void expect_run_error(bool last, trit_tensor *sel, const char *text) {
    const int64_t sx[3] = {3, 5, 2};
    trit_tensor *p = tg_param(3, sx, -1, 1, 64);
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *out = (last ? trit_last_token_pool : trit_mean_pool)(g, p, sel);
    trit_tensor *loss = tg_weighted_sum(g, out);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    assert_int_equal(trit_graph_forward(g), TRIT_ERR_RANGE);
    if (!strstr(trit_last_error(), text)) fail_msg("error '%s' does not mention '%s'", trit_last_error(), text);
    assert_int_equal(trit_graph_backward(g), TRIT_ERR_STATE);
    trit_graph_free(g);
    trit_tensor_free(p);
    trit_tensor_free(sel);
}

static void test_bad_selectors_at_run_time(void **state) {
    (void)state;
    const int64_t sm[2] = {3, 5}, sl[1] = {3};
    const int64_t empty_row[15] = {1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1};
    const int64_t two[15] = {1, 1, 1, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    const int64_t len0[3] = {5, 0, 1}, len6[3] = {5, 6, 1}, len_neg[3] = {-1, 2, 2};
    for (int last = 0; last < 2; last++) {
        const char *op = last ? "last_token_pool" : "mean_pool";
        char want[96];
        snprintf(want, sizeof want, "%s: mask row 1 keeps no position", op);
        expect_run_error(last, tg_indices(TRIT_I32, 2, sm, empty_row), want);
        expect_run_error(last, tg_indices(TRIT_F32, 2, sm, empty_row), want);
        expect_run_error(last, tg_indices(TRIT_I64, 2, sm, two), "mask value 2 at (0, 3) is not 0 or 1");
        expect_run_error(last, tg_indices(TRIT_I32, 1, sl, len0), "length 0 of row 1");
        expect_run_error(last, tg_indices(TRIT_I32, 1, sl, len6), "length 6 of row 1 is not a whole number in [1, 5]");
        expect_run_error(last, tg_indices(TRIT_I64, 1, sl, len_neg), "length -1 of row 0");
        trit_tensor *half = tg_indices(TRIT_F32, 2, sm, MASK35), *nanm = tg_indices(TRIT_F64, 2, sm, MASK35);
        trit_tensor *flen = tg_indices(TRIT_F64, 1, sl, len0);
        trit_tensor_set_flat(half, 7, 0.5);
        trit_tensor_set_flat(nanm, 0, NAN);
        trit_tensor_set_flat(flen, 1, 2.5);
        expect_run_error(last, half, "mask value 0.5 at (1, 2)");
        expect_run_error(last, nanm, "mask value nan at (0, 0)");
        expect_run_error(last, flen, "length 2.5 of row 1");
    }
}

static void test_bad_input(void **state) {
    (void)state;
    const int64_t sx[3] = {3, 5, 2}, s2[2] = {3, 5}, sm[2] = {3, 6}, sl[1] = {4}, s4[4] = {1, 3, 5, 2};
    for (int last = 0; last < 2; last++) {
        trit_tensor *(*pool)(trit_graph *, trit_tensor *, trit_tensor *) = last ? trit_last_token_pool : trit_mean_pool;
        const char *op = last ? "last_token_pool" : "mean_pool";
        char want[160];
        trit_graph *g = trit_graph_new(TRIT_F32);
        trit_tensor *x = trit_graph_input(g, TRIT_F32, 3, sx, "x"), *m = trit_graph_input(g, TRIT_I32, 2, sm, "m");
        snprintf(want, sizeof want, "%s: expected a mask (3, 5) or lengths (3) for hidden states (3, 5, 2), got (3, 6)", op);
        tg_expect_graph_error(g, pool(g, x, m), TRIT_ERR_SHAPE, want);

        g = trit_graph_new(TRIT_F32);
        x = trit_graph_input(g, TRIT_F32, 3, sx, "x");
        m = trit_graph_input(g, TRIT_I64, 1, sl, "lengths");
        tg_expect_graph_error(g, pool(g, x, m), TRIT_ERR_SHAPE, "got (4,)");

        g = trit_graph_new(TRIT_F32);
        x = trit_graph_input(g, TRIT_F32, 2, s2, "x");
        snprintf(want, sizeof want, "%s: expected hidden states (B, T, C) with B, T, C >= 1, got (3, 5)", op);
        tg_expect_graph_error(g, pool(g, x, NULL), TRIT_ERR_SHAPE, want);

        g = trit_graph_new(TRIT_F32);
        x = trit_graph_input(g, TRIT_F32, 4, s4, "x");
        tg_expect_graph_error(g, pool(g, x, NULL), TRIT_ERR_SHAPE, "got (1, 3, 5, 2)");

        g = trit_graph_new(TRIT_F64);
        x = trit_graph_input(g, TRIT_I32, 3, sx, "x");
        tg_expect_graph_error(g, pool(g, x, NULL), TRIT_ERR_DTYPE, "expected f64 hidden states");

        g = trit_graph_new(TRIT_F32);
        tg_expect_graph_error(g, pool(g, NULL, NULL), TRIT_ERR_INVALID, "NULL");
    }
}

// Pooled values and x's gradient of a (6, 200, 96) f32 problem are the same bits with 1 and 2
// threads (the threaded loops run at this size).
static void run_big(bool last, int threads, float *out, float *dx) {
    const int64_t sx[3] = {6, 200, 96}, sl[1] = {6}, len[6] = {200, 1, 17, 150, 199, 64};
    trit_tensor *p = trit_tensor_new_param(TRIT_F32, 3, sx, "x"), *lens = tg_indices(TRIT_I32, 1, sl, len);
    trit_tensor_fill_uniform(p, -3, 3, 65, 1);
    trit_threads_set(threads);
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *o = (last ? trit_last_token_pool : trit_mean_pool)(g, p, lens);
    trit_graph_keep(g, o);
    tg_run(g, tg_weighted_sum(g, o));
    memcpy(out, o->data, sizeof(float) * 6 * 96);
    memcpy(dx, p->grad->data, sizeof(float) * 6 * 200 * 96);
    trit_graph_free(g);
    trit_tensor_free(p);
    trit_tensor_free(lens);
}

static void test_threads_same_bits(void **state) {
    (void)state;
    const int keep = trit_threads_get();
    const size_t nx = 6 * 200 * 96;
    float o1[6 * 96], o2[6 * 96], *d1 = malloc(sizeof(float) * nx), *d2 = malloc(sizeof(float) * nx);
    for (int last = 0; last < 2; last++) {
        run_big(last, 1, o1, d1);
        run_big(last, 2, o2, d2);
        assert_memory_equal(o1, o2, sizeof o1);
        assert_memory_equal(d1, d2, sizeof(float) * nx);
    }
    trit_threads_set(keep);
    free(d1);
    free(d2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_gradients_threaded_size),
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_bad_selectors_at_run_time),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_threads_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
