// Fixture cases in f32 or f64 graphs (see fixture_case.h).
#include "fixture_case.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

static double rel_error(const tf_file *f, const char *what, const trit_tensor *got, const char *want_name, double tol) {
    const tf_record *w = tf_get(f, want_name);
    assert_int_equal(trit_tensor_numel(got), w->n);
    double scale = 1e-12, diff = 0;
    for (int64_t i = 0; i < w->n; i++) {
        scale = fmax(scale, fabs(w->data[i]));
        const double e = fabs(trit_tensor_get_flat(got, i) - w->data[i]);
        diff = e <= diff ? diff : e;  // a NaN sticks
    }
    const double err = isnan(diff) ? INFINITY : diff / scale;
    if (!(err <= tol)) fail_msg("%s: differs from PyTorch (%s) by %.3g relative > %.3g", what, want_name, err, tol);
    return err;
}

double fc_check(const tf_file *f, const char *fcase, trit_dtype graph_dt, tg_build_fn build, void *ctx, int n,
                const fc_input *in, double tol) {
    char key[128], what[96];
    trit_tensor *t[8];
    assert_true(n >= 1 && n <= 8);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s.%s", fcase, in[i].name);
        t[i] = tf_tensor(f, key, in[i].param ? graph_dt : in[i].dtype, in[i].param ? TRIT_FLAG_PARAM : 0);
    }
    snprintf(what, sizeof what, "%s (%s graph)", fcase, trit_dtype_name(graph_dt));
    trit_graph *g = trit_graph_new(graph_dt);
    trit_tensor *out = build(g, t, ctx), *r = NULL, *loss = out;
    if (!out) fail_msg("%s: build failed: %s", what, trit_last_error());
    if (out->ndim > 0) {
        snprintf(key, sizeof key, "%s.r", fcase);
        r = tf_tensor(f, key, TRIT_F64, 0);
        loss = tf_dot(g, out, r);
    }
    trit_graph_keep(g, out);
    tg_run(g, loss);
    snprintf(key, sizeof key, "%s.out", fcase);
    double worst = rel_error(f, what, out, key, tol);
    for (int i = 0; i < n; i++) {
        if (!in[i].param) continue;
        snprintf(key, sizeof key, "%s.d%s", fcase, in[i].name);
        assert_non_null(t[i]->grad);
        worst = fmax(worst, rel_error(f, what, t[i]->grad, key, tol));
    }
    trit_graph_free(g);
    trit_tensor_free(r);
    for (int i = 0; i < n; i++) trit_tensor_free(t[i]);
    return worst;
}
