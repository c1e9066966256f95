// Finite-difference gradient checks (see gradcheck.h).
#include "gradcheck.h"

#include "graph/graph_internal.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

// ---- the weighted-sum loss op: out = sum_i x_i * r_i with r_i from Philox ------------

static double weight_at(int64_t i) { return trit_rng_uniform(424242, 7, (uint64_t)i) - 0.5; }

static trit_status wsum_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    (void)attr;
    if (in[0]->dtype != TRIT_F32 && in[0]->dtype != TRIT_F64)
        return trit_error(TRIT_ERR_DTYPE, "weighted_sum needs f32/f64");
    return trit_tensor_init_layout(out, in[0]->dtype, 0, NULL);
}

#define WSUM_DEFS(T, SUF)                                                                \
    static trit_status wsum_fwd_##SUF(const trit_op_call *c) {                          \
        const T *x = c->in[0]->data;                                                     \
        double s = 0;                                                                    \
        int64_t n = trit_tensor_numel(c->in[0]);                                         \
        for (int64_t i = 0; i < n; i++) s += (double)x[i] * weight_at(i);               \
        *(T *)c->out->data = (T)s;                                                       \
        return TRIT_OK;                                                                  \
    }                                                                                    \
    static trit_status wsum_bwd_##SUF(const trit_op_call *c) {                          \
        if (!c->gin[0]) return TRIT_OK;                                                  \
        T go = *(const T *)c->gout->data, *gi = c->gin[0]->data;                         \
        int64_t n = trit_tensor_numel(c->in[0]);                                         \
        for (int64_t i = 0; i < n; i++) gi[i] += go * (T)weight_at(i);                   \
        return TRIT_OK;                                                                  \
    }                                                                                    \
    static const trit_op_def wsum_##SUF = {.name = "weighted_sum", .infer = wsum_infer,  \
                                           .forward = wsum_fwd_##SUF,                    \
                                           .backward = wsum_bwd_##SUF,                   \
                                           .contiguous_inputs = 1};
WSUM_DEFS(float, f32)
WSUM_DEFS(double, f64)

trit_tensor *tg_weighted_sum(trit_graph *g, trit_tensor *x) {
    return trit_graph_apply(g, &wsum_f32, &wsum_f64, 1, &x, NULL);
}

// ---- parameters ----------------------------------------------------------------------

trit_tensor *tg_param(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed) {
    trit_tensor *p = trit_tensor_new(TRIT_F64, ndim, shape);
    if (!p) return NULL;
    trit_tensor_fill_uniform(p, lo, hi, seed, 1);
    p->flags |= TRIT_FLAG_PARAM;
    snprintf(p->name, sizeof p->name, "p%llu", (unsigned long long)seed);
    return p;
}

trit_tensor *tg_clone(const trit_tensor *p, trit_dtype dt) {
    trit_tensor *c = trit_tensor_new(dt, p->ndim, p->shape);
    if (!c) return NULL;
    trit_tensor_copy(c, p);
    c->flags |= p->flags & (TRIT_FLAG_PARAM | TRIT_FLAG_FROZEN);
    snprintf(c->name, sizeof c->name, "%s", p->name);
    return c;
}

void tg_free_params(int n, trit_tensor **params) {
    for (int i = 0; i < n; i++) trit_tensor_free(params[i]);
}

// ---- the checks ----------------------------------------------------------------------

typedef struct built {
    trit_graph *g;
    trit_tensor *out, *loss;
} built;

static bool build_graph(built *b, trit_dtype dt, tg_build_fn build, void *ctx, trit_tensor **params) {
    b->g = trit_graph_new(dt);
    b->out = build(b->g, params, ctx);
    b->loss = b->out ? tg_weighted_sum(b->g, b->out) : NULL;
    if (b->out) trit_graph_keep(b->g, b->out);
    if (!b->loss || trit_graph_compile(b->g, b->loss) != TRIT_OK) {
        fprintf(stderr, "gradcheck: build/compile failed: %s\n", trit_last_error());
        trit_graph_free(b->g);
        return false;
    }
    // Every step must write what a later one reads: in an arena full of NaN, a value or gradient
    // left unwritten (by an op that stores a gradient it was asked to, say) shows in the check.
    memset(b->g->arena.base, 0xff, b->g->arena.size);
    return true;
}

static double loss_at(built *b) {
    if (trit_graph_forward(b->g) != TRIT_OK) return NAN;
    return trit_tensor_get_flat(b->loss, 0);
}

double tg_gradcheck(tg_build_fn build, void *ctx, int n, trit_tensor **params, int max_per_param) {
    built b;
    if (!build_graph(&b, TRIT_F64, build, ctx, params)) return -1;
    trit_graph_zero_grad(b.g);
    if (trit_graph_forward(b.g) != TRIT_OK || trit_graph_backward(b.g) != TRIT_OK) {
        fprintf(stderr, "gradcheck: run failed: %s\n", trit_last_error());
        trit_graph_free(b.g);
        return -1;
    }
    double worst = 0;
    const double h = 1e-5;
    for (int p = 0; p < n; p++) {
        trit_tensor *t = params[p];
        if (!(t->flags & TRIT_FLAG_PARAM) || (t->flags & TRIT_FLAG_FROZEN)) continue;
        double *x = t->data;
        const double *gr = t->grad ? t->grad->data : NULL;
        int64_t numel = trit_tensor_numel(t);
        int64_t step = max_per_param > 0 && numel > max_per_param ? numel / max_per_param : 1;
        for (int64_t i = 0; i < numel; i += step) {
            double keep = x[i];
            x[i] = keep + h;
            double fp = loss_at(&b);
            x[i] = keep - h;
            double fm = loss_at(&b);
            x[i] = keep;
            double num = (fp - fm) / (2 * h), ana = gr ? gr[i] : 0;
            double den = fmax(fmax(fabs(num), fabs(ana)), 1e-2);
            double err = fabs(num - ana) / den;
            if (!(err <= worst)) {
                worst = isnan(err) ? INFINITY : err;
                if (err > 1e-6)
                    fprintf(stderr, "gradcheck: %s[%lld] analytic %.10g numeric %.10g\n", t->name, (long long)i, ana, num);
            }
        }
    }
    trit_graph_free(b.g);
    return worst;
}

static double max_rel_diff(const trit_tensor *a, const trit_tensor *b) {
    int64_t n = trit_tensor_numel(a);
    double scale = 1e-30, diff = 0;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(trit_tensor_get_flat(b, i)));
    for (int64_t i = 0; i < n; i++) diff = fmax(diff, fabs(trit_tensor_get_flat(a, i) - trit_tensor_get_flat(b, i)));
    return diff / scale;
}

double tg_f32_vs_f64(tg_build_fn build, void *ctx, int n, trit_tensor **params) {
    trit_tensor **p32 = calloc((size_t)n, sizeof *p32);
    for (int i = 0; i < n; i++) p32[i] = tg_clone(params[i], TRIT_F32);
    built b64, b32;
    double worst = -1;
    if (build_graph(&b64, TRIT_F64, build, ctx, params)) {
        if (build_graph(&b32, TRIT_F32, build, ctx, p32)) {
            trit_graph_zero_grad(b64.g);
            trit_graph_zero_grad(b32.g);
            if (trit_graph_forward(b64.g) == TRIT_OK && trit_graph_backward(b64.g) == TRIT_OK &&
                trit_graph_forward(b32.g) == TRIT_OK && trit_graph_backward(b32.g) == TRIT_OK) {
                worst = max_rel_diff(b32.out, b64.out);
                for (int i = 0; i < n; i++)
                    if (params[i]->grad && p32[i]->grad) worst = fmax(worst, max_rel_diff(p32[i]->grad, params[i]->grad));
            } else {
                fprintf(stderr, "f32 vs f64: run failed: %s\n", trit_last_error());
            }
            trit_graph_free(b32.g);
        }
        trit_graph_free(b64.g);
    }
    tg_free_params(n, p32);
    free(p32);
    return worst;
}

void tg_assert_gradcheck(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params) {
    double err = tg_gradcheck(build, ctx, n, params, 64);
    if (!(err >= 0 && err <= 1e-6)) fail_msg("%s: gradient check relative error %.3g > 1e-6", what, err);
}

void tg_assert_f32_close(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params, double tol) {
    double err = tg_f32_vs_f64(build, ctx, n, params);
    if (!(err >= 0 && err <= tol)) fail_msg("%s: f32 differs from f64 by %.3g > %.3g", what, err, tol);
}

void tg_check(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params, double f32_tol) {
    const double gc = tg_gradcheck(build, ctx, n, params, 64), fd = tg_f32_vs_f64(build, ctx, n, params);
    print_message("%-28s gradcheck %.2e  f32 vs f64 %.2e\n", what, gc, fd);
    if (!(gc >= 0 && gc <= 1e-6)) fail_msg("%s: gradient check relative error %.3g > 1e-6", what, gc);
    if (!(fd >= 0 && fd <= f32_tol)) fail_msg("%s: f32 differs from f64 by %.3g > %.3g", what, fd, f32_tol);
}

void tg_run(trit_graph *g, trit_tensor *loss) {
    if (trit_graph_compile(g, loss) != TRIT_OK) fail_msg("compile: %s", trit_last_error());
    trit_graph_zero_grad(g);
    if (trit_graph_forward(g) != TRIT_OK) fail_msg("forward: %s", trit_last_error());
    if (trit_graph_backward(g) != TRIT_OK) fail_msg("backward: %s", trit_last_error());
}

trit_tensor *tg_indices(trit_dtype dt, int ndim, const int64_t *shape, const int64_t *vals) {
    trit_tensor *t = trit_tensor_new(dt, ndim, shape);
    assert_non_null(t);
    for (int64_t i = 0; i < trit_tensor_numel(t); i++) trit_tensor_set_flat(t, i, (double)vals[i]);
    return t;
}

void tg_assert_gradcheck_sampled(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params) {
    int64_t most = 0;
    for (int i = 0; i < n; i++) most = trit_tensor_numel(params[i]) > most ? trit_tensor_numel(params[i]) : most;
    if (most <= 4096) {
        tg_assert_gradcheck(what, build, ctx, n, params);
        return;
    }
    const double err = tg_gradcheck(build, ctx, n, params, 8);
    if (!(err >= 0 && err <= 1e-6)) fail_msg("%s: gradient check relative error %.3g > 1e-6", what, err);
}

void tg_expect_graph_error(trit_graph *g, trit_tensor *r, trit_status code, const char *text) {
    assert_null(r);
    if (!strstr(trit_last_error(), text)) fail_msg("error '%s' does not mention '%s'", trit_last_error(), text);
    assert_int_equal(trit_graph_compile(g, NULL), code);
    trit_graph_free(g);
}
