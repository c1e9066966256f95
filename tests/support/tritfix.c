// TRITFIX1 fixture reader and parity check (see tritfix.h).
#include "tritfix.h"

#include "graph/graph_internal.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

struct tf_file {
    char path[1024];
    tf_record *rec;
    int n;
};

static bool read_exact(FILE *fp, void *dst, size_t size, size_t count) {
    return fread(dst, size, count, fp) == count;
}

tf_file *tf_open(const char *file) {
    const char *root = getenv("TRIT_SOURCE_DIR");
    tf_file *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->path, sizeof f->path, "%s/tests/reference/fixtures/%s", root ? root : ".", file);
    FILE *fp = fopen(f->path, "rb");
    if (!fp) fail_msg("cannot open %s (set TRIT_SOURCE_DIR to the repository root)", f->path);
    char magic[8];
    uint32_t ver = 0, count = 0;
    assert_true(read_exact(fp, magic, 1, 8) && memcmp(magic, "TRITFIX1", 8) == 0);
    assert_true(read_exact(fp, &ver, 4, 1) && ver == 1);
    assert_true(read_exact(fp, &count, 4, 1) && count <= 100000);
    f->rec = calloc(count ? count : 1, sizeof *f->rec);
    assert_non_null(f->rec);
    for (uint32_t i = 0; i < count; i++) {
        tf_record *x = &f->rec[i];
        uint32_t len = 0, nd = 0;
        assert_true(read_exact(fp, &len, 4, 1) && len < sizeof x->name);
        assert_true(read_exact(fp, x->name, 1, len));
        assert_true(read_exact(fp, &nd, 4, 1) && nd <= TRIT_MAX_DIMS);
        x->ndim = (int)nd;
        assert_true(read_exact(fp, x->shape, 8, nd));
        x->n = 1;
        for (uint32_t d = 0; d < nd; d++) {
            assert_true(x->shape[d] >= 0 && x->shape[d] < (1 << 24));
            x->n *= x->shape[d];
        }
        x->data = malloc(sizeof(double) * (size_t)x->n + 8);
        assert_non_null(x->data);
        assert_true(read_exact(fp, x->data, 8, (size_t)x->n));
        f->n = (int)i + 1;
    }
    fclose(fp);
    return f;
}

void tf_close(tf_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->rec[i].data);
    free(f->rec);
    free(f);
}

const tf_record *tf_get(const tf_file *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->rec[i].name, name) == 0) return &f->rec[i];
    fail_msg("fixture record %s missing from %s: rerun its script in tests/reference/", name, f->path);
    return NULL;
}

trit_tensor *tf_tensor(const tf_file *f, const char *name, trit_dtype dt, uint32_t flags) {
    const tf_record *x = tf_get(f, name);
    trit_tensor *t = trit_tensor_new(dt, x->ndim, x->shape);
    assert_non_null(t);
    for (int64_t i = 0; i < x->n; i++) trit_tensor_set_flat(t, i, x->data[i]);
    t->flags |= flags;
    snprintf(t->name, sizeof t->name, "%.*s", (int)sizeof t->name - 1, name);
    return t;
}

trit_tensor *tf_param(const tf_file *f, const char *name) { return tf_tensor(f, name, TRIT_F64, TRIT_FLAG_PARAM); }

double tf_compare(const tf_file *f, const char *what, const trit_tensor *got, const char *want_name, double tol) {
    const tf_record *w = tf_get(f, want_name);
    assert_int_equal(trit_tensor_numel(got), w->n);
    double worst = 0;
    for (int64_t i = 0; i < w->n; i++) {
        double e = fabs(trit_tensor_get_flat(got, i) - w->data[i]) / fmax(1.0, fabs(w->data[i]));
        if (!(e <= worst)) worst = e;
    }
    if (!(worst <= tol)) fail_msg("%s: differs from PyTorch (%s) by %.3g > %.3g", what, want_name, worst, tol);
    return worst;
}

// loss = sum(x * r) for a fixed r: the fixture's upstream gradient is r.
typedef struct dot_attr {
    const trit_tensor *r;
} dot_attr;

static trit_status dot_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    const dot_attr *a = attr;
    if (trit_tensor_numel(in[0]) != trit_tensor_numel(a->r)) return trit_error(TRIT_ERR_SHAPE, "tf_dot: r has another size");
    return trit_tensor_init_layout(out, in[0]->dtype, 0, NULL);
}
static trit_status dot_forward(const trit_op_call *c) {
    const dot_attr *a = c->attr;
    double s = 0;
    for (int64_t i = 0; i < trit_tensor_numel(c->in[0]); i++) s += trit_tensor_get_flat(c->in[0], i) * trit_tensor_get_flat(a->r, i);
    trit_tensor_set_flat(c->out, 0, s);
    return TRIT_OK;
}
static trit_status dot_backward(const trit_op_call *c) {
    const dot_attr *a = c->attr;
    if (!c->gin[0]) return TRIT_OK;
    const double go = trit_tensor_get_flat(c->gout, 0);
    for (int64_t i = 0; i < trit_tensor_numel(c->in[0]); i++)
        trit_tensor_set_flat(c->gin[0], i, trit_tensor_get_flat(c->gin[0], i) + go * trit_tensor_get_flat(a->r, i));
    return TRIT_OK;
}

trit_tensor *tf_dot(trit_graph *g, trit_tensor *x, const trit_tensor *r) {
    static const trit_op_def def = {.name = "fixture_dot", .infer = dot_infer, .forward = dot_forward,
                                    .backward = dot_backward, .contiguous_inputs = 1, .attr_size = sizeof(dot_attr)};
    dot_attr a = {r};
    return trit_graph_apply(g, &def, &def, 1, &x, &a);
}

double tf_check_case(const tf_file *f, const char *fcase, tg_build_fn build, void *ctx, int n,
                     const char *const *names, double tol) {
    char key[128];
    trit_tensor *p[8];
    assert_true(n >= 1 && n <= 8);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s.%s", fcase, names[i]);
        p[i] = tf_param(f, key);
    }
    snprintf(key, sizeof key, "%s.r", fcase);
    trit_tensor *r = tf_tensor(f, key, TRIT_F64, 0);
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *out = build(g, p, ctx);
    assert_non_null(out);
    trit_tensor *loss = tf_dot(g, out, r);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    snprintf(key, sizeof key, "%s.out", fcase);
    double worst = tf_compare(f, fcase, out, key, tol);
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof key, "%s.d%s", fcase, names[i]);
        worst = fmax(worst, tf_compare(f, fcase, p[i]->grad, key, tol));
    }
    trit_graph_free(g);
    trit_tensor_free(r);
    tg_free_params(n, p);
    return worst;
}
