// info_nce, triplet_margin and cosine_embedding: gradient checks (with hard negatives, strided
// inputs, i32 and float targets, both reductions, a size that takes the threaded loops), f32 vs
// f64, PyTorch parity in f64 and f32, numerics (tau down to 1e-3, a zero anchor), run-time errors
// (targets not +1/-1), bad input, and the same bits with 1 and 2 threads.
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

// ---- InfoNCE -------------------------------------------------------------------------------

typedef struct nce_case {
    double tau;
    trit_reduction red;
    bool strided;  // p[1] is (C, N): use its transpose
} nce_case;

static trit_tensor *build_nce(trit_graph *g, trit_tensor **p, void *ctx) {
    const nce_case *c = ctx;
    return trit_info_nce(g, p[0], c->strided ? trit_transpose(g, p[1], 0, 1) : p[1], c->tau, c->red);
}

static void test_info_nce_gradients(void **state) {
    (void)state;
    const int64_t sa[2] = {4, 5}, sp[2] = {7, 5}, spt[2] = {5, 4};
    trit_tensor *p[2] = {tg_param(2, sa, -1, 1, 71), tg_param(2, sp, -1, 1, 72)};
    nce_case c = {0.1, TRIT_REDUCE_MEAN, false};
    tg_check("info_nce 3 hard negatives", build_nce, &c, 2, p, 1e-5);
    c = (nce_case){1.0, TRIT_REDUCE_SUM, false};
    tg_check("info_nce sum tau 1", build_nce, &c, 2, p, 1e-5);
    trit_tensor *q[2] = {tg_param(2, sa, -1, 1, 73), tg_param(2, spt, -1, 1, 74)};
    c = (nce_case){0.05, TRIT_REDUCE_MEAN, true};
    tg_check("info_nce N = B, strided", build_nce, &c, 2, q, 1e-5);
    tg_free_params(2, p);
    tg_free_params(2, q);
    // B * N * C above the threaded loops' threshold
    const int64_t sa2[2] = {32, 40}, sp2[2] = {48, 40};
    trit_tensor *r[2] = {tg_param(2, sa2, -1, 1, 75), tg_param(2, sp2, -1, 1, 76)};
    c = (nce_case){0.2, TRIT_REDUCE_MEAN, false};
    tg_assert_gradcheck("info_nce (32, 40) x (48, 40)", build_nce, &c, 2, r);
    tg_assert_f32_close("info_nce (32, 40) x (48, 40)", build_nce, &c, 2, r, 1e-5);
    tg_free_params(2, r);
}

// The same anchors as candidates (one value read twice): the gradients of both uses add up.
static trit_tensor *build_nce_self(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    return trit_info_nce(g, p[0], p[0], 0.3, TRIT_REDUCE_MEAN);
}

static void test_info_nce_same_tensor(void **state) {
    (void)state;
    const int64_t s[2] = {5, 3};
    trit_tensor *p = tg_param(2, s, -1, 1, 77);
    tg_check("info_nce(a, a)", build_nce_self, NULL, 1, &p, 1e-5);
    trit_tensor_free(p);
}

// Loss of f32-representable anchors/candidates in an f32 or f64 graph.
static double run_nce(trit_dtype dt, const float *a, const float *p, int64_t B, int64_t N, int64_t C, double tau,
                      double *ga) {
    const int64_t sa[2] = {B, C}, sp[2] = {N, C};
    trit_tensor *ta = trit_tensor_new_param(dt, 2, sa, "a"), *tp = trit_tensor_new_param(dt, 2, sp, "p");
    for (int64_t i = 0; i < B * C; i++) trit_tensor_set_flat(ta, i, a[i]);
    for (int64_t i = 0; i < N * C; i++) trit_tensor_set_flat(tp, i, p[i]);
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *loss = trit_info_nce(g, ta, tp, tau, TRIT_REDUCE_MEAN);
    tg_run(g, loss);
    const double l = trit_tensor_get_flat(loss, 0);
    for (int64_t i = 0; i < B * C; i++) ga[i] = trit_tensor_get_flat(ta->grad, i);
    trit_graph_free(g);
    trit_tensor_free(ta);
    trit_tensor_free(tp);
    return l;
}

// tau = 1e-3 puts |S| up to 1000, where exp overflows f32 (and f64 past 710): the log-sum-exp
// keeps the f32 loss finite and within 1e-5 of the f64 one.
static void test_info_nce_small_tau(void **state) {
    (void)state;
    enum { B = 6, N = 6, C = 8 };
    float a[B * C], p[N * C];
    for (int i = 0; i < B * C; i++) a[i] = (float)(trit_rng_uniform(78, 1, (uint64_t)i) * 2 - 1);
    for (int i = 0; i < N * C; i++) p[i] = a[i] + (float)(trit_rng_uniform(78, 2, (uint64_t)i) - 0.5);
    double g32[B * C], g64[B * C];
    const double l32 = run_nce(TRIT_F32, a, p, B, N, C, 1e-3, g32), l64 = run_nce(TRIT_F64, a, p, B, N, C, 1e-3, g64);
    assert_true(isfinite(l32) && l64 > 0);
    assert_true(fabs(l32 - l64) <= 1e-5 * fmax(1, l64));
    double scale = 0, diff = 0;
    for (int i = 0; i < B * C; i++) {
        assert_true(isfinite(g32[i]));
        scale = fmax(scale, fabs(g64[i]));
        diff = fmax(diff, fabs(g32[i] - g64[i]));
    }
    assert_true(diff <= 1e-4 * scale);
    print_message("info_nce tau 1e-3: loss %.6g (f32 %.6g), grad rel diff %.2g\n", l64, l32, diff / scale);
}

// A zero anchor is scored 0 against every candidate: its row loss is log N exactly; the clamped
// norm gives it a finite gradient.
static void test_info_nce_zero_anchor(void **state) {
    (void)state;
    enum { B = 3, N = 5, C = 4 };
    float a[B * C], p[N * C];
    for (int i = 0; i < B * C; i++) a[i] = i < C ? 0.0f : (float)(trit_rng_uniform(79, 1, (uint64_t)i) - 0.5);
    for (int i = 0; i < N * C; i++) p[i] = (float)(trit_rng_uniform(79, 2, (uint64_t)i) - 0.5);
    double ga[B * C];
    const double full = run_nce(TRIT_F64, a, p, B, N, C, 0.5, ga);
    for (int i = 0; i < B * C; i++) assert_true(isfinite(ga[i]));
    // Rows 1 and 2 alone, as anchors 0 and 1 of the same candidates rotated so that their
    // positives come first: the same row losses, summed.
    const int64_t sa[2] = {2, C}, sp[2] = {N, C};
    trit_tensor *ta = trit_tensor_new(TRIT_F64, 2, sa), *tp = trit_tensor_new(TRIT_F64, 2, sp);
    for (int i = 0; i < 2 * C; i++) trit_tensor_set_flat(ta, i, a[C + i]);
    for (int j = 0; j < N; j++)
        for (int k = 0; k < C; k++) trit_tensor_set_flat(tp, j * C + k, p[((j + 1) % N) * C + k]);
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *loss = trit_info_nce(g, ta, tp, 0.5, TRIT_REDUCE_SUM);
    trit_graph_keep(g, loss);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const double others = trit_tensor_get_flat(loss, 0);
    assert_true(fabs(full - (log((double)N) + others) / 3) <= 1e-12);
    trit_graph_free(g);
    trit_tensor_free(ta);
    trit_tensor_free(tp);
}

// ---- triplet margin ------------------------------------------------------------------------

typedef struct trip_case {
    double margin;
    trit_reduction red;
} trip_case;

static trit_tensor *build_triplet(trit_graph *g, trit_tensor **p, void *ctx) {
    const trip_case *c = ctx;
    return trit_triplet_margin_loss(g, p[0], p[1], p[2], c->margin, c->red);
}

// Rows of p[0..2] whose hinge margin + d(a, p) - d(a, n) lies within `gap` of 0.
static int near_kink(trit_tensor **p, double margin, double gap) {
    const int64_t C = p[0]->shape[p[0]->ndim - 1], rows = trit_tensor_numel(p[0]) / C;
    int n = 0;
    for (int64_t r = 0; r < rows; r++) {
        double dp = 0, dn = 0;
        for (int64_t k = r * C; k < (r + 1) * C; k++) {
            const double a = trit_tensor_get_flat(p[0], k);
            dp += pow(a - trit_tensor_get_flat(p[1], k) + 1e-6, 2);
            dn += pow(a - trit_tensor_get_flat(p[2], k) + 1e-6, 2);
        }
        n += fabs(margin + sqrt(dp) - sqrt(dn)) < gap;
    }
    return n;
}

static void test_triplet_gradients(void **state) {
    (void)state;
    const int64_t s[2] = {6, 5}, sb[2] = {600, 64};
    trit_tensor *p[3] = {tg_param(2, s, -1, 1, 81), tg_param(2, s, -1, 1, 82), tg_param(2, s, -1, 1, 83)};
    trip_case c = {0.5, TRIT_REDUCE_MEAN};
    assert_int_equal(near_kink(p, c.margin, 1e-3), 0);
    tg_check("triplet_margin mean", build_triplet, &c, 3, p, 1e-5);
    c = (trip_case){-0.2, TRIT_REDUCE_SUM};
    assert_int_equal(near_kink(p, c.margin, 1e-3), 0);
    tg_check("triplet_margin sum", build_triplet, &c, 3, p, 1e-5);
    tg_free_params(3, p);
    trit_tensor *q[3] = {tg_param(2, sb, -1, 1, 84), tg_param(2, sb, -1, 1, 85), tg_param(2, sb, -1, 1, 86)};
    c = (trip_case){1.0, TRIT_REDUCE_MEAN};
    assert_int_equal(near_kink(q, c.margin, 1e-3), 0);
    tg_assert_gradcheck_sampled("triplet_margin (600, 64)", build_triplet, &c, 3, q);
    tg_assert_f32_close("triplet_margin (600, 64)", build_triplet, &c, 3, q, 1e-5);
    tg_free_params(3, q);
}

// ---- cosine embedding ----------------------------------------------------------------------

typedef struct cos_case {
    trit_tensor *y;
    double margin;
    trit_reduction red;
} cos_case;

static trit_tensor *build_cosine(trit_graph *g, trit_tensor **p, void *ctx) {
    const cos_case *c = ctx;
    return trit_cosine_embedding_loss(g, p[0], p[1], c->y, c->margin, c->red);
}

static void test_cosine_gradients(void **state) {
    (void)state;
    const int64_t s[2] = {8, 5}, sy[1] = {8}, yv[8] = {1, -1, -1, 1, -1, -1, 1, -1};
    trit_tensor *p[2] = {tg_param(2, s, -1, 1, 91), tg_param(2, s, -1, 1, 92)};
    trit_tensor *y32 = tg_indices(TRIT_I32, 1, sy, yv), *yf = tg_indices(TRIT_F64, 1, sy, yv);
    cos_case c = {y32, 0.1, TRIT_REDUCE_MEAN};
    tg_check("cosine_embedding i32 targets", build_cosine, &c, 2, p, 1e-5);
    c = (cos_case){yf, -0.3, TRIT_REDUCE_SUM};
    tg_check("cosine_embedding f64 targets", build_cosine, &c, 2, p, 1e-5);
    // unbatched: x (C), target 0-d
    const int64_t s1[1] = {7}, one[1] = {-1};
    trit_tensor *u[2] = {tg_param(1, s1, -1, 1, 93), tg_param(1, s1, -1, 1, 94)};
    trit_tensor *y0 = tg_indices(TRIT_I64, 0, NULL, one);
    c = (cos_case){y0, -0.5, TRIT_REDUCE_MEAN};
    tg_check("cosine_embedding unbatched", build_cosine, &c, 2, u, 1e-5);
    tg_free_params(2, p);
    tg_free_params(2, u);
    trit_tensor_free(y32);
    trit_tensor_free(yf);
    trit_tensor_free(y0);
    // threaded size, targets alternating
    const int64_t sb[2] = {700, 48}, syb[1] = {700};
    int64_t *ybv = malloc(sizeof(int64_t) * 700);
    for (int i = 0; i < 700; i++) ybv[i] = i % 3 ? -1 : 1;
    trit_tensor *q[2] = {tg_param(2, sb, -1, 1, 95), tg_param(2, sb, -1, 1, 96)};
    trit_tensor *yb = tg_indices(TRIT_I32, 1, syb, ybv);
    c = (cos_case){yb, 0.05, TRIT_REDUCE_MEAN};
    tg_assert_gradcheck_sampled("cosine_embedding (700, 48)", build_cosine, &c, 2, q);
    tg_assert_f32_close("cosine_embedding (700, 48)", build_cosine, &c, 2, q, 1e-5);
    tg_free_params(2, q);
    trit_tensor_free(yb);
    free(ybv);
}

// ---- PyTorch parity ------------------------------------------------------------------------

typedef struct fix_case {
    const char *fcase;
    int kind;  // 0 info_nce, 1 triplet, 2 cosine
    double arg;
    trit_reduction red;
} fix_case;

static trit_tensor *build_fixture(trit_graph *g, trit_tensor **t, void *ctx) {
    const fix_case *c = ctx;
    if (c->kind == 0) return trit_info_nce(g, t[0], t[1], c->arg, c->red);
    if (c->kind == 1) return trit_triplet_margin_loss(g, t[0], t[1], t[2], c->arg, c->red);
    return trit_cosine_embedding_loss(g, t[0], t[1], t[2], c->arg, c->red);
}

// embed.bin (tests/reference/make_embed_fixtures.py): f64 to 1e-12, f32 to 1e-6 relative (the
// inputs are f32 values, so this is the f32 arithmetic's error alone; measured about 5e-8).
static void test_matches_pytorch(void **state) {
    (void)state;
    tf_file *f = tf_open("embed.bin");
    static const fix_case cases[] = {
        {"nce_hard", 0, 0.05, TRIT_REDUCE_MEAN}, {"nce_zero", 0, 0.5, TRIT_REDUCE_MEAN},
        {"nce_sum", 0, 0.7, TRIT_REDUCE_SUM},
        {"triplet_mean", 1, 1.0, TRIT_REDUCE_MEAN}, {"triplet_sum", 1, 0.3, TRIT_REDUCE_SUM},
        {"cos_mean", 2, 0.2, TRIT_REDUCE_MEAN}, {"cos_sum", 2, -0.1, TRIT_REDUCE_SUM},
    };
    static const fc_input nce_in[2] = {{"a", true, TRIT_F64}, {"p", true, TRIT_F64}};
    static const fc_input trip_in[3] = {{"a", true, TRIT_F64}, {"p", true, TRIT_F64}, {"n", true, TRIT_F64}};
    static const fc_input cos_in[2][3] = {{{"x1", true, TRIT_F64}, {"x2", true, TRIT_F64}, {"y", false, TRIT_I64}},
                                          {{"x1", true, TRIT_F64}, {"x2", true, TRIT_F64}, {"y", false, TRIT_F32}}};
    double w64 = 0, w32 = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fix_case c = cases[i];
        const fc_input *in = c.kind == 0 ? nce_in : c.kind == 1 ? trip_in : cos_in[c.red == TRIT_REDUCE_SUM];
        const int n = c.kind == 0 ? 2 : 3;
        const double e64 = fc_check(f, c.fcase, TRIT_F64, build_fixture, &c, n, in, 1e-12);
        const double e32 = fc_check(f, c.fcase, TRIT_F32, build_fixture, &c, n, in, 1e-6);
        print_message("%-13s vs PyTorch: max rel error f64 %.3g, f32 %.3g\n", c.fcase, e64, e32);
        w64 = fmax(w64, e64);
        w32 = fmax(w32, e32);
    }
    print_message("embedding losses vs PyTorch: worst f64 %.3g, f32 %.3g\n", w64, w32);
    tf_close(f);
}

// ---- errors --------------------------------------------------------------------------------

// A target other than +1/-1 fails forward with TRIT_ERR_RANGE naming the row and value.
static void test_cosine_bad_targets(void **state) {
    (void)state;
    const int64_t s[2] = {4, 3}, sy[1] = {4};
    const int64_t bad[3][4] = {{1, -1, 0, 1}, {1, 2, -1, -1}, {-1, -1, -1, -2}};
    const char *want[3] = {"target 0 at row 2", "target 2 at row 1", "target -2 at row 3"};
    for (int k = 0; k < 4; k++) {
        trit_tensor *p[2] = {tg_param(2, s, -1, 1, 97), tg_param(2, s, -1, 1, 98)};
        trit_tensor *y = tg_indices(k == 3 ? TRIT_F32 : TRIT_I32, 1, sy, bad[k % 3]);
        if (k == 3) trit_tensor_set_flat(y, 0, 0.5);
        trit_graph *g = trit_graph_new(TRIT_F64);
        trit_tensor *loss = trit_cosine_embedding_loss(g, p[0], p[1], y, 0, TRIT_REDUCE_MEAN);
        assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
        assert_int_equal(trit_graph_forward(g), TRIT_ERR_RANGE);
        const char *w = k == 3 ? "cosine_embedding: target 0.5 at row 0 is not 1 (similar) or -1 (dissimilar)" : want[k];
        if (!strstr(trit_last_error(), w)) fail_msg("error '%s' does not mention '%s'", trit_last_error(), w);
        trit_graph_free(g);
        tg_free_params(2, p);
        trit_tensor_free(y);
    }
}

static trit_graph *graph_with(trit_dtype dt, int n, const int64_t (*shapes)[2], const int *ndims, trit_tensor **out) {
    trit_graph *g = trit_graph_new(dt);
    for (int i = 0; i < n; i++) out[i] = trit_graph_input(g, dt, ndims[i], shapes[i], "x");
    return g;
}

static void test_bad_input(void **state) {
    (void)state;
    trit_tensor *t[3];
    const int two[3] = {2, 2, 2};
    const int64_t ok[3][2] = {{4, 5}, {6, 5}, {4, 5}}, narrow[2][2] = {{4, 5}, {4, 3}}, few[2][2] = {{4, 5}, {3, 5}};
    trit_graph *g;

    const double taus[3] = {0, -0.1, NAN};
    for (int i = 0; i < 3; i++) {
        g = graph_with(TRIT_F32, 2, ok, two, t);
        tg_expect_graph_error(g, trit_info_nce(g, t[0], t[1], taus[i], TRIT_REDUCE_MEAN), TRIT_ERR_INVALID,
                              "info_nce: temperature tau must be finite and > 0");
    }
    g = graph_with(TRIT_F32, 2, narrow, two, t);
    tg_expect_graph_error(g, trit_info_nce(g, t[0], t[1], 0.05, TRIT_REDUCE_MEAN), TRIT_ERR_SHAPE,
                          "info_nce: expected anchors (B, C) and candidates (N, C) with N >= B >= 1 and C >= 1 "
                          "(candidate i is anchor i's positive), got (4, 5) and (4, 3)");
    g = graph_with(TRIT_F32, 2, few, two, t);
    tg_expect_graph_error(g, trit_info_nce(g, t[0], t[1], 0.05, TRIT_REDUCE_MEAN), TRIT_ERR_SHAPE, "got (4, 5) and (3, 5)");
    g = graph_with(TRIT_F32, 2, ok, two, t);
    tg_expect_graph_error(g, trit_info_nce(g, t[0], t[1], 0.05, (trit_reduction)3), TRIT_ERR_INVALID, "reduction");
    g = trit_graph_new(TRIT_F64);
    t[0] = trit_graph_input(g, TRIT_F64, 2, ok[0], "a");
    t[1] = trit_graph_input(g, TRIT_I32, 2, ok[1], "p");
    tg_expect_graph_error(g, trit_info_nce(g, t[0], t[1], 0.05, TRIT_REDUCE_MEAN), TRIT_ERR_DTYPE,
                          "info_nce: expected f64 anchors and candidates");

    g = graph_with(TRIT_F32, 3, ok, two, t);
    tg_expect_graph_error(g, trit_triplet_margin_loss(g, t[0], t[1], t[2], 1.0, TRIT_REDUCE_MEAN), TRIT_ERR_SHAPE,
                          "triplet_margin: expected anchor, positive and negative of one shape, got (4, 5) and (6, 5) (input 1)");
    const int64_t same[3][2] = {{4, 5}, {4, 5}, {4, 5}};
    g = graph_with(TRIT_F32, 3, same, two, t);
    tg_expect_graph_error(g, trit_triplet_margin_loss(g, t[0], t[1], t[2], INFINITY, TRIT_REDUCE_MEAN),
                          TRIT_ERR_INVALID, "triplet_margin: margin must be finite");
    g = graph_with(TRIT_F32, 3, same, two, t);
    tg_expect_graph_error(g, trit_triplet_margin_loss(g, t[0], t[1], NULL, 1.0, TRIT_REDUCE_MEAN), TRIT_ERR_INVALID,
                          "NULL");

    const int64_t sy[1] = {4}, sy5[1] = {5};
    g = graph_with(TRIT_F32, 2, same, two, t);
    t[2] = trit_graph_input(g, TRIT_I32, 1, sy5, "y");
    tg_expect_graph_error(g, trit_cosine_embedding_loss(g, t[0], t[1], t[2], 0, TRIT_REDUCE_MEAN), TRIT_ERR_SHAPE,
                          "cosine_embedding: expected targets of x1's shape without its last dim for x1 (4, 5), got (5,)");
    g = graph_with(TRIT_F32, 2, ok, two, t);
    t[2] = trit_graph_input(g, TRIT_I32, 1, sy, "y");
    tg_expect_graph_error(g, trit_cosine_embedding_loss(g, t[0], t[1], t[2], 0, TRIT_REDUCE_MEAN), TRIT_ERR_SHAPE,
                          "cosine_embedding: expected x1 and x2 of one shape, got (4, 5) and (6, 5)");
    const double margins[3] = {1.5, -1.01, NAN};
    for (int i = 0; i < 3; i++) {
        g = graph_with(TRIT_F32, 2, same, two, t);
        t[2] = trit_graph_input(g, TRIT_I32, 1, sy, "y");
        tg_expect_graph_error(g, trit_cosine_embedding_loss(g, t[0], t[1], t[2], margins[i], TRIT_REDUCE_SUM),
                              TRIT_ERR_INVALID, "cosine_embedding: margin must be in [-1, 1]");
    }
}

// ---- thread independence -------------------------------------------------------------------

// Loss and input gradients of each op on an f32 problem above the threaded loops' thresholds.
static void run_all(int threads, double *loss, float **grads) {
    enum { B = 48, N = 64, C = 96 };
    const int64_t sa[2] = {B, C}, sp[2] = {N, C}, sy[1] = {B};
    trit_tensor *a = trit_tensor_new_param(TRIT_F32, 2, sa, "a"), *p = trit_tensor_new_param(TRIT_F32, 2, sp, "p");
    trit_tensor *n = trit_tensor_new_param(TRIT_F32, 2, sa, "n"), *y = trit_tensor_new(TRIT_I32, 1, sy);
    trit_tensor_fill_uniform(a, -1, 1, 101, 1);
    trit_tensor_fill_uniform(p, -1, 1, 102, 1);
    trit_tensor_fill_uniform(n, -1, 1, 103, 1);
    for (int i = 0; i < B; i++) trit_tensor_set_flat(y, i, i % 2 ? 1 : -1);
    trit_threads_set(threads);
    for (int op = 0; op < 3; op++) {
        trit_graph *g = trit_graph_new(TRIT_F32);
        trit_tensor *pb = op == 0 ? p : trit_slice(g, p, 0, 0, B);
        trit_tensor *l = op == 0   ? trit_info_nce(g, a, p, 0.05, TRIT_REDUCE_MEAN)
                         : op == 1 ? trit_triplet_margin_loss(g, a, pb, n, 1.0, TRIT_REDUCE_MEAN)
                                   : trit_cosine_embedding_loss(g, a, pb, y, 0.1, TRIT_REDUCE_MEAN);
        tg_run(g, l);
        loss[op] = trit_tensor_get_flat(l, 0);
        memcpy(grads[2 * op], a->grad->data, sizeof(float) * B * C);
        memcpy(grads[2 * op + 1], p->grad->data, sizeof(float) * N * C);
        trit_graph_free(g);
    }
    trit_tensor_free(a);
    trit_tensor_free(p);
    trit_tensor_free(n);
    trit_tensor_free(y);
}

static void test_threads_same_bits(void **state) {
    (void)state;
    const int keep = trit_threads_get();
    double l1[3], l2[3];
    float *g1[6], *g2[6];
    for (int i = 0; i < 6; i++) {
        g1[i] = malloc(sizeof(float) * 64 * 96);
        g2[i] = malloc(sizeof(float) * 64 * 96);
    }
    run_all(1, l1, g1);
    run_all(2, l2, g2);
    trit_threads_set(keep);
    for (int op = 0; op < 3; op++) {
        assert_true(l1[op] == l2[op] && isfinite(l1[op]) && l1[op] > 0);
        assert_memory_equal(g1[2 * op], g2[2 * op], sizeof(float) * 48 * 96);
        assert_memory_equal(g1[2 * op + 1], g2[2 * op + 1], sizeof(float) * 64 * 96);
    }
    for (int i = 0; i < 6; i++) {
        free(g1[i]);
        free(g2[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_info_nce_gradients),
        cmocka_unit_test(test_info_nce_same_tensor),
        cmocka_unit_test(test_info_nce_small_tau),
        cmocka_unit_test(test_info_nce_zero_anchor),
        cmocka_unit_test(test_triplet_gradients),
        cmocka_unit_test(test_cosine_gradients),
        cmocka_unit_test(test_matches_pytorch),
        cmocka_unit_test(test_cosine_bad_targets),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_threads_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
