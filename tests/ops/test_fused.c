// Fused ops against the unfused ops they replace (the oracle): bias_gelu vs add + gelu,
// add_layernorm vs add + layernorm, classifier_ce vs linear + cross_entropy. Outputs and every
// input gradient agree to 1e-6 (f32) and 1e-12 (f64) relative to each tensor's largest
// magnitude, on odd shapes, with and without weight/bias, with ignored rows, mean and sum, and
// classifier chunks that do not divide the rows. Also: f64 gradient checks (with strided
// inputs), 1 vs 2 threads bit for bit, bad input messages, and the classifier's memory bound.
// The compiler's own fusion pass is switched off (TRIT_FUSE=0) so the oracle stays unfused.
#define _POSIX_C_SOURCE 200809L  // setenv
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "ops/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- harness: run a builder, collect the output and the parameter gradients ------------

#define MAX_P 4

typedef struct run_result {
    int n;
    int64_t numel[MAX_P + 1];
    double *vals[MAX_P + 1];  // [0] the output, [1 + i] the gradient of param i (NULL if none)
} run_result;

static void result_free(run_result *r) {
    for (int i = 0; i <= r->n; i++) free(r->vals[i]);
    memset(r, 0, sizeof *r);
}

static double *copy_values(const trit_tensor *t, int64_t *numel) {
    *numel = trit_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(*numel > 0 ? *numel : 1));
    for (int64_t i = 0; i < *numel; i++) v[i] = trit_tensor_get_flat(t, i);
    return v;
}

// Builds in dtype dt from copies of the f64 params (frozen flags kept), loss = weighted sum of
// the output, then forward and backward once.
static void run_graph(const char *what, trit_dtype dt, tg_build_fn build, void *ctx, int n, trit_tensor **params,
                      run_result *res) {
    memset(res, 0, sizeof *res);
    res->n = n;
    trit_tensor *p[MAX_P];
    for (int i = 0; i < n; i++) p[i] = tg_clone(params[i], dt);
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *out = build(g, p, ctx);
    trit_tensor *loss = out ? tg_weighted_sum(g, out) : NULL;
    if (out) trit_graph_keep(g, out);
    if (!loss || trit_graph_compile(g, loss) != TRIT_OK) fail_msg("%s: build/compile failed: %s", what, trit_last_error());
    trit_graph_zero_grad(g);
    if (trit_graph_forward(g) != TRIT_OK || trit_graph_backward(g) != TRIT_OK)
        fail_msg("%s: run failed: %s", what, trit_last_error());
    res->vals[0] = copy_values(out, &res->numel[0]);
    for (int i = 0; i < n; i++)
        if (p[i]->grad && (p[i]->flags & TRIT_FLAG_PARAM) && !(p[i]->flags & TRIT_FLAG_FROZEN))
            res->vals[1 + i] = copy_values(p[i]->grad, &res->numel[1 + i]);
    trit_graph_free(g);
    tg_free_params(n, p);
}

// max |a - b| / max |b|; 0 when both are all zeros.
static double rel_diff(const double *a, const double *b, int64_t n) {
    double scale = 0, diff = 0;
    for (int64_t i = 0; i < n; i++) {
        scale = fmax(scale, fabs(b[i]));
        diff = fmax(diff, fabs(a[i] - b[i]));
        if (isnan(a[i]) != isnan(b[i])) diff = INFINITY;
    }
    return scale > 0 ? diff / scale : diff;
}

// Fused vs unfused in dt: the output and every gradient within tol (relative).
static void assert_matches(const char *what, trit_dtype dt, tg_build_fn fused, tg_build_fn unfused, void *ctx, int n,
                           trit_tensor **params, double tol) {
    run_result f, u;
    run_graph(what, dt, fused, ctx, n, params, &f);
    run_graph(what, dt, unfused, ctx, n, params, &u);
    assert_int_equal(f.numel[0], u.numel[0]);
    double worst = rel_diff(f.vals[0], u.vals[0], u.numel[0]);
    if (!(worst <= tol)) fail_msg("%s (%s): output differs by %.3g > %.3g", what, trit_dtype_name(dt), worst, tol);
    int grads = 0;
    for (int i = 0; i < n; i++) {
        assert_true((f.vals[1 + i] == NULL) == (u.vals[1 + i] == NULL));
        if (!u.vals[1 + i]) continue;
        grads++;
        const double d = rel_diff(f.vals[1 + i], u.vals[1 + i], u.numel[1 + i]);
        if (!(d <= tol)) fail_msg("%s (%s): gradient of param %d differs by %.3g > %.3g", what, trit_dtype_name(dt), i, d, tol);
    }
    assert_true(grads > 0);
    result_free(&f);
    result_free(&u);
}

static void assert_both_dtypes(const char *what, tg_build_fn fused, tg_build_fn unfused, void *ctx, int n,
                               trit_tensor **params) {
    assert_matches(what, TRIT_F64, fused, unfused, ctx, n, params, 1e-12);
    assert_matches(what, TRIT_F32, fused, unfused, ctx, n, params, 1e-6);
}

// The fused builder run in f32 with 1 and with 2 threads gives the same bits.
static void assert_thread_independent(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params) {
    run_result a, b;
    trit_threads_set(1);
    run_graph(what, TRIT_F32, build, ctx, n, params, &a);
    trit_threads_set(2);
    run_graph(what, TRIT_F32, build, ctx, n, params, &b);
    trit_threads_set(0);
    for (int i = 0; i <= n; i++) {
        if (!a.vals[i]) continue;
        if (memcmp(a.vals[i], b.vals[i], sizeof(double) * (size_t)a.numel[i]) != 0)
            fail_msg("%s: value %d differs between 1 and 2 threads", what, i);
    }
    result_free(&a);
    result_free(&b);
}

static trit_tensor *frozen(trit_tensor *p) {
    p->flags |= TRIT_FLAG_FROZEN;
    return p;
}

// The last error message contains `want`, and compiling the failed graph reports it.
static void assert_build_error(trit_graph *g, trit_tensor *out, const char *want) {
    assert_null(out);
    if (!strstr(trit_last_error(), want)) fail_msg("expected an error containing '%s', got '%s'", want, trit_last_error());
    assert_int_not_equal(trit_graph_compile(g, NULL), TRIT_OK);
    if (!strstr(trit_last_error(), want)) fail_msg("compile: expected '%s' in '%s'", want, trit_last_error());
}

// ---- bias_gelu -----------------------------------------------------------------------

typedef struct { bool strided; } bg_case;

// p[0] = h (..., N), p[1] = b (N); strided: p[0] is (N, rows) and is transposed.
static trit_tensor *bg_fused(trit_graph *g, trit_tensor **p, void *ctx) {
    const bg_case *c = ctx;
    return trit_bias_gelu(g, c && c->strided ? trit_transpose(g, p[0], 0, 1) : p[0], p[1]);
}

static trit_tensor *bg_unfused(trit_graph *g, trit_tensor **p, void *ctx) {
    const bg_case *c = ctx;
    return trit_gelu(g, trit_add(g, c && c->strided ? trit_transpose(g, p[0], 0, 1) : p[0], p[1]));
}

static void test_bias_gelu_matches(void **state) {
    (void)state;
    const int64_t rows[3] = {1, 7, 33}, cols[2] = {5, 64};
    uint64_t seed = 100;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++) {
            int64_t sh[2] = {rows[i], cols[j]}, sb[1] = {cols[j]};
            trit_tensor *p[2] = {tg_param(2, sh, -5, 5, seed), tg_param(1, sb, -1, 1, seed + 1)};
            seed += 2;
            char what[64];
            snprintf(what, sizeof what, "bias_gelu (%lld, %lld)", (long long)rows[i], (long long)cols[j]);
            assert_both_dtypes(what, bg_fused, bg_unfused, NULL, 2, p);
            tg_free_params(2, p);
        }
    // 3-D h, and each of h, b frozen in turn (the other gradient alone).
    int64_t sh[3] = {3, 11, 5}, sb[1] = {5};
    trit_tensor *p[2] = {tg_param(3, sh, -4, 4, seed), tg_param(1, sb, -1, 1, seed + 1)};
    assert_both_dtypes("bias_gelu 3-D", bg_fused, bg_unfused, NULL, 2, p);
    frozen(p[1]);
    assert_both_dtypes("bias_gelu, b frozen", bg_fused, bg_unfused, NULL, 2, p);
    p[1]->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
    frozen(p[0]);
    assert_both_dtypes("bias_gelu, h frozen", bg_fused, bg_unfused, NULL, 2, p);
    tg_free_params(2, p);
}

static void test_bias_gelu_gradcheck(void **state) {
    (void)state;
    int64_t sh[2] = {7, 5}, st[2] = {5, 7}, sb[1] = {5};
    trit_tensor *p[2] = {tg_param(2, sh, -3, 3, 1), tg_param(1, sb, -1, 1, 2)};
    tg_assert_gradcheck("bias_gelu", bg_fused, NULL, 2, p);
    tg_free_params(2, p);
    bg_case strided = {true};
    trit_tensor *q[2] = {tg_param(2, st, -3, 3, 3), tg_param(1, sb, -1, 1, 4)};
    tg_assert_gradcheck("bias_gelu strided h", bg_fused, &strided, 2, q);
    assert_matches("bias_gelu strided h", TRIT_F64, bg_fused, bg_unfused, &strided, 2, q, 1e-12);
    tg_free_params(2, q);
}

// ---- add_layernorm -------------------------------------------------------------------

typedef struct {
    bool weight, bias, same;  // same: r is x itself
    double eps;
} aln_case;

static trit_tensor *aln_w(trit_tensor **p, const aln_case *c) { return c->weight ? p[2] : NULL; }
static trit_tensor *aln_b(trit_tensor **p, const aln_case *c) { return c->bias ? p[2 + c->weight] : NULL; }

// p[0] = x, p[1] = r, then w, b as the case says.
static trit_tensor *aln_fused(trit_graph *g, trit_tensor **p, void *ctx) {
    const aln_case *c = ctx;
    return trit_add_layernorm(g, p[0], c->same ? p[0] : p[1], aln_w(p, c), aln_b(p, c), c->eps);
}

// stack(s, layernorm(s)) along a new first dim.
static trit_tensor *aln_unfused(trit_graph *g, trit_tensor **p, void *ctx) {
    const aln_case *c = ctx;
    trit_tensor *s = trit_add(g, p[0], c->same ? p[0] : p[1]);
    trit_tensor *y = trit_layernorm(g, s, aln_w(p, c), aln_b(p, c), c->eps);
    int64_t shape[TRIT_MAX_DIMS] = {1};
    memcpy(shape + 1, p[0]->shape, sizeof(int64_t) * (size_t)p[0]->ndim);
    trit_tensor *parts[2] = {trit_reshape(g, s, p[0]->ndim + 1, shape), trit_reshape(g, y, p[0]->ndim + 1, shape)};
    return trit_concat(g, 2, parts, 0);
}

static void aln_params(int ndim, const int64_t *shape, const aln_case *c, uint64_t seed, trit_tensor **p, int *n) {
    const int64_t C = shape[ndim - 1];
    p[0] = tg_param(ndim, shape, -2, 2, seed);
    p[1] = tg_param(ndim, shape, -2, 2, seed + 1);
    *n = 2;
    if (c->weight) p[(*n)++] = tg_param(1, &C, 0.5, 1.5, seed + 2);
    if (c->bias) p[(*n)++] = tg_param(1, &C, -1, 1, seed + 3);
}

static void test_add_layernorm_matches(void **state) {
    (void)state;
    const int64_t rows[3] = {1, 7, 33}, cols[2] = {5, 64};
    uint64_t seed = 200;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            for (int wb = 0; wb < 4; wb++) {
                aln_case c = {.weight = wb & 1, .bias = wb >> 1, .eps = 1e-5};
                int64_t sh[2] = {rows[i], cols[j]};
                trit_tensor *p[MAX_P];
                int n;
                aln_params(2, sh, &c, seed, p, &n);
                seed += 4;
                char what[96];
                snprintf(what, sizeof what, "add_layernorm (%lld, %lld) w%d b%d", (long long)rows[i], (long long)cols[j],
                         c.weight, c.bias);
                assert_both_dtypes(what, aln_fused, aln_unfused, &c, n, p);
                tg_free_params(n, p);
            }
    // 3-D x with a large eps; x + x (one value on both inputs); frozen weight.
    aln_case c = {.weight = true, .bias = true, .eps = 0.1};
    int64_t sh[3] = {3, 11, 5};
    trit_tensor *p[MAX_P];
    int n;
    aln_params(3, sh, &c, seed, p, &n);
    assert_both_dtypes("add_layernorm 3-D eps 0.1", aln_fused, aln_unfused, &c, n, p);
    c.same = true;
    assert_both_dtypes("add_layernorm x + x", aln_fused, aln_unfused, &c, n, p);
    c.same = false;
    frozen(p[2]);
    frozen(p[1]);
    assert_both_dtypes("add_layernorm, r and w frozen", aln_fused, aln_unfused, &c, n, p);
    tg_free_params(n, p);
}

static void test_add_layernorm_gradcheck(void **state) {
    (void)state;
    aln_case c = {.weight = true, .bias = true, .eps = 1e-5};
    int64_t sh[2] = {7, 5};
    trit_tensor *p[MAX_P];
    int n;
    aln_params(2, sh, &c, 300, p, &n);
    tg_assert_gradcheck("add_layernorm", aln_fused, &c, n, p);
    tg_free_params(n, p);
    aln_case plain = {.eps = 1e-5};
    aln_params(2, sh, &plain, 310, p, &n);
    tg_assert_gradcheck("add_layernorm no affine", aln_fused, &plain, n, p);
    tg_free_params(n, p);
}

// ---- classifier_ce -------------------------------------------------------------------

typedef struct {
    trit_tensor *targets;  // (...) constant
    int64_t ignore, chunk;
    trit_reduction red;
    bool bias, strided_w;  // strided_w: p[1] is stored (C, V) and transposed
} cls_case;

// Targets for `rows` rows of V classes: every 4th row (from row 2) is ignore_index.
static trit_tensor *make_targets(trit_dtype dt, int ndim, const int64_t *shape, int64_t V, int64_t ignore, uint64_t seed) {
    trit_tensor *t = trit_tensor_new(dt, ndim, shape);
    const int64_t n = trit_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        int64_t v = (int64_t)(trit_rng_u32(seed, 9, (uint64_t)i) % (uint32_t)V);
        if (i % 4 == 2) v = ignore;
        trit_tensor_set_flat(t, i, (double)v);
    }
    return t;
}

static trit_tensor *cls_w(trit_graph *g, trit_tensor **p, const cls_case *c) {
    return c->strided_w ? trit_transpose(g, p[1], 0, 1) : p[1];
}

// p[0] = x (..., C), p[1] = W (V, C), p[2] = b (V) if the case has a bias.
static trit_tensor *cls_fused(trit_graph *g, trit_tensor **p, void *ctx) {
    const cls_case *c = ctx;
    return trit_classifier_ce_chunked(g, p[0], cls_w(g, p, c), c->bias ? p[2] : NULL, c->targets, c->ignore, c->red,
                                      c->chunk);
}

static trit_tensor *cls_unfused(trit_graph *g, trit_tensor **p, void *ctx) {
    const cls_case *c = ctx;
    return trit_cross_entropy(g, trit_linear(g, p[0], cls_w(g, p, c), c->bias ? p[2] : NULL), c->targets, c->ignore,
                              c->red);
}

static int cls_params(int64_t rows, int64_t C, int64_t V, bool bias, uint64_t seed, trit_tensor **p) {
    int64_t sx[2] = {rows, C}, sw[2] = {V, C};
    p[0] = tg_param(2, sx, -1, 1, seed);
    p[1] = tg_param(2, sw, -0.5, 0.5, seed + 1);
    if (bias) p[2] = tg_param(1, &V, -1, 1, seed + 2);
    return bias ? 3 : 2;
}

// f32 tolerance of the fused gradients against the pair's. The harness's loss weights the
// output by w != 1: the pair scales its dlogits by w / count before the GEMMs, the fused op (in
// a training forward, before w is known) by 1 / count and multiplies by w after. Each dlogit then
// rounds differently (about one unit u = 2^-24 apart), and a GEMM over V of them sums those
// differences like a random walk: about sqrt(V) u relative to the largest gradient; 4 sqrt(V) u
// leaves a margin, and never less than the 1e-6 of the other fused ops. With w = 1 (a loss as
// graph root) or a power of two (the loss scaler) the two orders give the same bits
// (test_classifier_forward_grads checks the fused op's two paths bit for bit).
static double cls_f32_tol(int64_t V) { return fmax(1e-6, 4.0 * sqrt((double)V) * ldexp(1.0, -24)); }

static void test_classifier_matches(void **state) {
    (void)state;
    // (rows, C, V, chunk): chunks smaller than the rows and not dividing them, one chunk of
    // exactly all rows, and the default choice.
    const int64_t cases[][4] = {{1, 5, 1, 0},  {1, 5, 3, 1},   {7, 5, 3, 4},    {7, 64, 97, 3}, {33, 5, 97, 5},
                                {33, 64, 1000, 8}, {33, 64, 1000, 0}, {33, 5, 1000, 33}, {33, 64, 3, 10}};
    uint64_t seed = 400;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const int64_t rows = cases[k][0], C = cases[k][1], V = cases[k][2];
        for (int variant = 0; variant < 4; variant++) {
            const bool bias = variant & 1;
            const trit_reduction red = variant & 2 ? TRIT_REDUCE_SUM : TRIT_REDUCE_MEAN;
            // i64 targets ignoring -100; i32 targets ignoring class 0 (a valid class).
            const int64_t ignore = variant & 2 ? 0 : -100;
            cls_case c = {.targets = make_targets(variant & 2 ? TRIT_I32 : TRIT_I64, 1, &rows, V, ignore, seed),
                          .ignore = ignore, .chunk = cases[k][3], .red = red, .bias = bias};
            trit_tensor *p[MAX_P];
            const int n = cls_params(rows, C, V, bias, seed, p);
            seed += 3;
            char what[128];
            snprintf(what, sizeof what, "classifier rows %lld C %lld V %lld chunk %lld bias %d %s", (long long)rows,
                     (long long)C, (long long)V, (long long)cases[k][3], bias, red == TRIT_REDUCE_SUM ? "sum" : "mean");
            assert_matches(what, TRIT_F64, cls_fused, cls_unfused, &c, n, p, 1e-12);
            assert_matches(what, TRIT_F32, cls_fused, cls_unfused, &c, n, p, cls_f32_tol(V));
            tg_free_params(n, p);
            trit_tensor_free(c.targets);
        }
    }
}

static void test_classifier_shapes_and_frozen(void **state) {
    (void)state;
    // 3-D x (2, 7, C) with (2, 7) targets; then W frozen (dx and db only), then x frozen.
    int64_t sx[3] = {2, 7, 6}, sw[2] = {13, 6}, st[2] = {2, 7}, V = 13;
    cls_case c = {.targets = make_targets(TRIT_I64, 2, st, V, -1, 5), .ignore = -1, .chunk = 3,
                  .red = TRIT_REDUCE_MEAN, .bias = true};
    trit_tensor *p[3] = {tg_param(3, sx, -1, 1, 500), tg_param(2, sw, -1, 1, 501), tg_param(1, &V, -1, 1, 502)};
    assert_both_dtypes("classifier 3-D", cls_fused, cls_unfused, &c, 3, p);
    frozen(p[1]);
    assert_both_dtypes("classifier W frozen", cls_fused, cls_unfused, &c, 3, p);
    p[1]->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
    frozen(p[0]);
    assert_both_dtypes("classifier x frozen", cls_fused, cls_unfused, &c, 3, p);
    tg_free_params(3, p);
    trit_tensor_free(c.targets);
}

static void test_classifier_all_ignored(void **state) {
    (void)state;
    int64_t rows = 5, V = 7;
    trit_tensor *t = trit_tensor_new(TRIT_I64, 1, &rows);
    trit_tensor_fill(t, -100);
    cls_case c = {.targets = t, .ignore = -100, .chunk = 2, .red = TRIT_REDUCE_MEAN, .bias = true};
    trit_tensor *p[3];
    cls_params(rows, 4, V, true, 600, p);
    run_result r;
    run_graph("all ignored", TRIT_F32, cls_fused, &c, 3, p, &r);
    assert_true(r.vals[0][0] == 0.0);
    for (int i = 1; i <= 3; i++)
        for (int64_t j = 0; j < r.numel[i]; j++) assert_true(r.vals[i][j] == 0.0);
    result_free(&r);
    tg_free_params(3, p);
    trit_tensor_free(t);
}

static void test_classifier_gradcheck(void **state) {
    (void)state;
    int64_t rows = 7, V = 11;
    cls_case c = {.targets = make_targets(TRIT_I64, 1, &rows, V, -100, 7), .ignore = -100, .chunk = 3,
                  .red = TRIT_REDUCE_MEAN, .bias = true};
    trit_tensor *p[3];
    cls_params(rows, 5, V, true, 700, p);
    tg_assert_gradcheck("classifier_ce mean", cls_fused, &c, 3, p);
    tg_free_params(3, p);
    // W stored (C, V) and transposed: the constructor makes it contiguous; sum, no bias.
    int64_t sw[2] = {5, V}, sx[2] = {rows, 5};
    cls_case s = {.targets = c.targets, .ignore = -100, .chunk = 2, .red = TRIT_REDUCE_SUM, .strided_w = true};
    trit_tensor *q[2] = {tg_param(2, sx, -1, 1, 710), tg_param(2, sw, -1, 1, 711)};
    tg_assert_gradcheck("classifier_ce sum strided W", cls_fused, &s, 2, q);
    assert_matches("classifier_ce sum strided W", TRIT_F64, cls_fused, cls_unfused, &s, 2, q, 1e-12);
    tg_free_params(2, q);
    trit_tensor_free(c.targets);
}

// Forward leaves the gradients in saved memory when backward follows (training mode), so
// backward reads neither x nor W; after an eval-mode forward, backward makes the logits itself.
// Both give the same bits. Overwriting W between forward and backward shows which ran: it
// leaves the first untouched and changes the second (so this test can tell them apart).
typedef enum { CLS_TRAIN, CLS_EVAL_FORWARD, CLS_TRAIN_W_ZEROED, CLS_EVAL_W_ZEROED } cls_mode;

static void cls_run_mode(cls_mode mode, cls_case *c, trit_tensor **params, double *out[3], int64_t numel[3]) {
    trit_tensor *p[3];
    for (int i = 0; i < 3; i++) p[i] = tg_clone(params[i], TRIT_F32);
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *loss = cls_fused(g, p, c);
    assert_non_null(loss);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    trit_graph_zero_grad(g);
    const bool eval = mode == CLS_EVAL_FORWARD || mode == CLS_EVAL_W_ZEROED;
    trit_graph_set_training(g, !eval);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    trit_graph_set_training(g, true);
    if (mode == CLS_TRAIN_W_ZEROED || mode == CLS_EVAL_W_ZEROED) trit_tensor_fill(p[1], 0.0);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    for (int i = 0; i < 3; i++) out[i] = copy_values(p[i]->grad, &numel[i]);
    trit_graph_free(g);
    tg_free_params(3, p);
}

static void test_classifier_forward_grads(void **state) {
    (void)state;
    int64_t rows = 33, V = 1000;
    cls_case c = {.targets = make_targets(TRIT_I64, 1, &rows, V, -100, 9), .ignore = -100, .chunk = 8,
                  .red = TRIT_REDUCE_MEAN, .bias = true};
    trit_tensor *p[3];
    cls_params(rows, 64, V, true, 900, p);
    double *ref[3], *got[3];
    int64_t n[3], m[3];
    cls_run_mode(CLS_TRAIN, &c, p, ref, n);
    for (cls_mode mode = CLS_EVAL_FORWARD; mode <= CLS_EVAL_W_ZEROED; mode++) {
        cls_run_mode(mode, &c, p, got, m);
        for (int i = 0; i < 3; i++) {
            assert_int_equal(n[i], m[i]);
            const bool same = memcmp(ref[i], got[i], sizeof(double) * (size_t)n[i]) == 0;
            // Zeroed W after an eval forward: dx = dlogit W is 0, dW and db change with the logits.
            if (mode == CLS_EVAL_W_ZEROED) {
                if (same) fail_msg("classifier_ce: backward after an eval forward did not make the logits again (grad %d)", i);
            } else if (!same) {
                fail_msg("classifier_ce: mode %d, gradient %d differs from forward's", (int)mode, i);
            }
            free(got[i]);
        }
    }
    for (int i = 0; i < 3; i++) free(ref[i]);
    tg_free_params(3, p);
    trit_tensor_free(c.targets);
}

// At bf16 matmul precision the op rounds an f32 W to bf16 once per call and its GEMMs read the
// copy, and the dlogits are rounded to bf16 as they are made: the same bits as a graph that
// casts W to bf16 itself (the op then reads that bf16 W, and its GEMMs round the f32 dlogits as
// they pack them), in the loss and in the gradients of x and W, the logits made in chunks of 8
// rows.
static void cls_run_rounded(const cls_case *c, trit_tensor *const *p64, bool cast_w, float *out[3]) {
    const trit_compute_policy bf16 = {TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM};
    trit_graph *g = trit_graph_new_policy(&bf16);
    trit_tensor *x = tg_clone(p64[0], TRIT_F32), *w = tg_clone(p64[1], TRIT_F32);
    trit_tensor *loss = trit_classifier_ce_chunked(g, x, cast_w ? trit_cast(g, w, TRIT_BF16) : w, NULL, c->targets,
                                                   c->ignore, c->red, c->chunk);
    assert_non_null(loss);
    tg_run(g, loss);
    const trit_tensor *t[3] = {loss, x->grad, w->grad};
    for (int i = 0; i < 3; i++) {
        const size_t bytes = sizeof(float) * (size_t)trit_tensor_numel(t[i]);
        assert_non_null(out[i] = malloc(bytes));
        memcpy(out[i], t[i]->data, bytes);
    }
    trit_graph_free(g);
    trit_tensor_free(x);
    trit_tensor_free(w);
}

static void test_classifier_rounded_w(void **state) {
    (void)state;
    // An odd V too: each row's dlogits then end in an unpaired bf16 value.
    for (int64_t V = 999; V <= 1000; V++) {
        int64_t rows = 33, C = 64;
        cls_case c = {.targets = make_targets(TRIT_I64, 1, &rows, V, -100, 11), .ignore = -100, .chunk = 8,
                      .red = TRIT_REDUCE_MEAN};
        trit_tensor *p[2];
        cls_params(rows, C, V, false, 950, p);
        float *a[3], *b[3];
        cls_run_rounded(&c, p, false, a);
        cls_run_rounded(&c, p, true, b);
        const int64_t n[3] = {1, rows * C, V * C};
        const char *names[3] = {"loss", "x's gradient", "W's gradient"};
        for (int i = 0; i < 3; i++) {
            if (memcmp(a[i], b[i], sizeof(float) * (size_t)n[i]) != 0)
                fail_msg("classifier_ce at bf16 matmul precision, V %lld: %s differs from a graph that casts W to bf16",
                         (long long)V, names[i]);
            free(a[i]), free(b[i]);
        }
        tg_free_params(2, p);
        trit_tensor_free(c.targets);
    }
}

// ---- threads -------------------------------------------------------------------------

static void test_thread_independence(void **state) {
    (void)state;
    if (trit_threads_get() < 2) trit_threads_set(2);
    // Shapes big enough that every parallel loop runs on both threads.
    int64_t sh[2] = {257, 96}, sb[1] = {96};
    trit_tensor *p[MAX_P] = {tg_param(2, sh, -4, 4, 800), tg_param(1, sb, -1, 1, 801)};
    assert_thread_independent("bias_gelu", bg_fused, NULL, 2, p);
    tg_free_params(2, p);
    aln_case a = {.weight = true, .bias = true, .eps = 1e-5};
    int n;
    aln_params(2, sh, &a, 810, p, &n);
    assert_thread_independent("add_layernorm", aln_fused, &a, n, p);
    tg_free_params(n, p);
    int64_t rows = 70, V = 1000;
    cls_case c = {.targets = make_targets(TRIT_I64, 1, &rows, V, -100, 8), .ignore = -100, .chunk = 32,
                  .red = TRIT_REDUCE_MEAN, .bias = true};
    n = cls_params(rows, 64, V, true, 820, p);
    assert_thread_independent("classifier_ce", cls_fused, &c, n, p);
    tg_free_params(n, p);
    trit_tensor_free(c.targets);
}

// ---- memory ----------------------------------------------------------------------------

// saved + scratch bytes of classifier_ce on N rows of x (N, C) and W (V, C) in f32, with the
// gradients of x and W asked for or not.
static size_t classifier_bytes_at(int64_t N, int64_t C, int64_t V, bool grads, trit_matmul_precision matmul) {
    trit_tensor x, w, t, out;
    assert_int_equal(trit_tensor_init_layout(&x, TRIT_F32, 2, (int64_t[]){N, C}), TRIT_OK);
    assert_int_equal(trit_tensor_init_layout(&w, TRIT_F32, 2, (int64_t[]){V, C}), TRIT_OK);
    assert_int_equal(trit_tensor_init_layout(&t, TRIT_I64, 1, &N), TRIT_OK);
    trit_classifier_attr a = {.ignore_index = -100, .reduction = TRIT_REDUCE_MEAN, .has_bias = false, .chunk_rows = 0};
    const trit_tensor *in[3] = {&x, &w, &t};
    assert_int_equal(trit_op_classifier_ce_f32.infer(in, 3, &a, &out), TRIT_OK);
    const trit_exec_ctx ctx = {.matmul = matmul};
    trit_op_call call = {.n_in = 3, .in = {&x, &w, &t}, .out = &out, .attr = &a,
                         .grad_inputs = grads ? TRIT_IN(0) | TRIT_IN(1) : 0, .ctx = &ctx};
    return trit_op_classifier_ce_f32.saved_bytes(&call) + trit_op_classifier_ce_f32.scratch_bytes(&call);
}

static size_t classifier_bytes(int64_t N, int64_t C, int64_t V, bool grads) {
    return classifier_bytes_at(N, C, V, grads, TRIT_MATMUL_HIGHEST);
}

static void test_classifier_memory_bound(void **state) {
    (void)state;
    // GPT-2's padded BPE vocabulary on 2048 rows: the unfused logits alone are N * V * 4 bytes
    // (and their gradient as much again).
    const int64_t N = 2048, C = 768, V = 50304;
    const size_t used = classifier_bytes(N, C, V, false), full = (size_t)N * (size_t)V * 4;
    print_message("classifier_ce N %lld V %lld: saved + scratch %zu bytes, full logits %zu bytes\n", (long long)N,
                  (long long)V, used, full);
    assert_true(used * 6 < full);
    // More rows cost only the per-row statistics (2 doubles), never more logits.
    assert_int_equal(classifier_bytes(8 * N, C, V, false) - used, (size_t)(7 * N) * 2 * sizeof(double));
    // Forward's gradients (training): exactly dx (N, C) and dW (V, C) more, still no logits.
    assert_int_equal(classifier_bytes(N, C, V, true) - used, (size_t)(N * C + V * C) * 4);
    // At bf16 matmul precision W is rounded to bf16 once per call: V * C more bytes of 2.
    assert_int_equal(classifier_bytes_at(N, C, V, false, TRIT_MATMUL_MEDIUM) - used, (size_t)(V * C) * 2);
}

// ---- bad input -------------------------------------------------------------------------

static void test_bad_input(void **state) {
    (void)state;
    int64_t s75[2] = {7, 5}, s76[2] = {7, 6}, s5[1] = {5}, s6[1] = {6}, s7[1] = {7}, s35[2] = {3, 5};
    trit_tensor *h = tg_param(2, s75, -1, 1, 1), *h6 = tg_param(2, s76, -1, 1, 2);
    trit_tensor *b5 = tg_param(1, s5, -1, 1, 3), *b6 = tg_param(1, s6, -1, 1, 4), *w35 = tg_param(2, s35, -1, 1, 5);
    trit_tensor *i5 = trit_tensor_new(TRIT_I32, 1, s5), *t7 = trit_tensor_new(TRIT_I64, 1, s7);
    trit_tensor *f7 = trit_tensor_new(TRIT_F64, 1, s7);
    trit_graph *g;

    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_bias_gelu(g, h, b6), "bias_gelu: expected h (..., N) and b (N)");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_bias_gelu(g, h, i5), "bias_gelu: expected f64 inputs");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_bias_gelu(g, NULL, b5), "input 0 is NULL");
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_add_layernorm(g, h, h6, NULL, NULL, 1e-5), "add_layernorm: expected x and r of the same shape");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_add_layernorm(g, h, h, b6, NULL, 1e-5), "add_layernorm: expected weight and bias of shape (5)");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_add_layernorm(g, h, h, NULL, NULL, -1), "eps must be finite and >= 0");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_add_layernorm(g, h, NULL, NULL, NULL, 1e-5), "input 1 is NULL");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F32);  // f64 parameters in an f32 graph
    assert_build_error(g, trit_add_layernorm(g, h, h, NULL, NULL, 1e-5), "add_layernorm: expected f32 inputs");
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_classifier_ce(g, h, h6, NULL, t7, -100, TRIT_REDUCE_MEAN),
                       "classifier_ce: expected x (..., C) and W (V, C)");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_classifier_ce(g, h, w35, NULL, i5, -100, TRIT_REDUCE_MEAN),
                       "classifier_ce: expected targets of x's shape without its last dim");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_classifier_ce(g, h, w35, NULL, f7, -100, TRIT_REDUCE_MEAN),
                       "expected i32 or i64 class indices");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_classifier_ce(g, h, w35, b5, t7, -100, TRIT_REDUCE_MEAN),
                       "classifier_ce: expected bias (3) to match W (3, 5)");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_classifier_ce(g, h, w35, NULL, t7, -100, (trit_reduction)7), "reduction must be");
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_build_error(g, trit_classifier_ce_chunked(g, h, w35, NULL, t7, -100, TRIT_REDUCE_SUM, -2), "chunk_rows");
    trit_graph_free(g);

    // A target outside [0, V) is the data's fault: forward reports the row, nothing crashes.
    g = trit_graph_new(TRIT_F64);
    for (int64_t i = 0; i < 7; i++) trit_tensor_set_flat(t7, i, (double)(i % 3));
    trit_tensor_set_flat(t7, 4, 3);
    trit_tensor *loss = trit_classifier_ce_chunked(g, h, w35, NULL, t7, -100, TRIT_REDUCE_MEAN, 2);
    assert_non_null(loss);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    assert_int_equal(trit_graph_forward(g), TRIT_ERR_RANGE);
    if (!strstr(trit_last_error(), "target 3 at row 4 is outside [0, 3)")) fail_msg("got '%s'", trit_last_error());
    trit_graph_free(g);

    tg_free_params(1, &h);
    tg_free_params(1, &h6);
    tg_free_params(1, &b5);
    tg_free_params(1, &b6);
    tg_free_params(1, &w35);
    trit_tensor_free(i5);
    trit_tensor_free(t7);
    trit_tensor_free(f7);
}

int main(void) {
    setenv("TRIT_FUSE", "0", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bias_gelu_matches),
        cmocka_unit_test(test_bias_gelu_gradcheck),
        cmocka_unit_test(test_add_layernorm_matches),
        cmocka_unit_test(test_add_layernorm_gradcheck),
        cmocka_unit_test(test_classifier_matches),
        cmocka_unit_test(test_classifier_shapes_and_frozen),
        cmocka_unit_test(test_classifier_all_ignored),
        cmocka_unit_test(test_classifier_gradcheck),
        cmocka_unit_test(test_classifier_forward_grads),
        cmocka_unit_test(test_thread_independence),
        cmocka_unit_test(test_classifier_memory_bound),
        cmocka_unit_test(test_classifier_rounded_w),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
