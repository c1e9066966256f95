// Helpers shared by the tests of the nn ops (softmax, losses, embedding, norms, batchnorm,
// dropout): reading PyTorch fixtures from tests/reference/fixtures/nn.bin (layout documented in
// tests/reference/make_nn_fixtures.py) and a test-only loss op, sum(out * r) with a given r, so
// a graph's gradients are those of the fixture's loss. Include after <cmocka.h>.
#ifndef TRIT_TEST_NN_FIXTURE_H
#define TRIT_TEST_NN_FIXTURE_H

#include "gradcheck.h"
#include "graph/graph_internal.h"
#include "trit/trit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct nnf_record {
    char name[80];
    int ndim;
    int64_t shape[TRIT_MAX_DIMS];
    int64_t numel;
    double *data;
} nnf_record;

typedef struct nnf_file {
    int n;
    nnf_record *recs;
} nnf_file;

static inline bool nnf_read(FILE *f, void *p, size_t n) { return fread(p, 1, n, f) == n; }

// Loads nn.bin; fails the current test if it is missing or malformed.
static inline nnf_file *nnf_open(void) {
    const char *root = getenv("TRIT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/nn.bin", root ? root : ".");
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (set TRIT_SOURCE_DIR to the repository root)", path);
    char magic[8];
    uint32_t hdr[2];
    if (!nnf_read(f, magic, 8) || memcmp(magic, "TRITFIX1", 8) != 0 || !nnf_read(f, hdr, sizeof hdr) || hdr[0] != 1)
        fail_msg("%s: not a version 1 TRITFIX1 file", path);
    nnf_file *nf = calloc(1, sizeof *nf);
    nf->n = (int)hdr[1];
    nf->recs = calloc((size_t)nf->n, sizeof *nf->recs);
    for (int i = 0; i < nf->n; i++) {
        nnf_record *r = &nf->recs[i];
        uint32_t len = 0, ndim = 0;
        if (!nnf_read(f, &len, 4) || len >= sizeof r->name || !nnf_read(f, r->name, len) || !nnf_read(f, &ndim, 4) ||
            ndim > TRIT_MAX_DIMS || !nnf_read(f, r->shape, 8 * (size_t)ndim))
            fail_msg("%s: record %d is malformed", path, i);
        r->ndim = (int)ndim;
        r->numel = 1;
        for (int d = 0; d < r->ndim; d++) r->numel *= r->shape[d];
        r->data = malloc(sizeof(double) * (size_t)(r->numel ? r->numel : 1));
        if (!nnf_read(f, r->data, sizeof(double) * (size_t)r->numel)) fail_msg("%s: record '%s' is truncated", path, r->name);
    }
    fclose(f);
    return nf;
}

static inline void nnf_close(nnf_file *nf) {
    for (int i = 0; i < nf->n; i++) free(nf->recs[i].data);
    free(nf->recs);
    free(nf);
}

static inline const nnf_record *nnf_find(const nnf_file *nf, const char *name) {
    for (int i = 0; i < nf->n; i++)
        if (strcmp(nf->recs[i].name, name) == 0) return &nf->recs[i];
    fail_msg("fixture record '%s' not found; rerun tests/reference/make_nn_fixtures.py", name);
    return NULL;
}

// A new tensor of dtype dt (float or integer) holding the record, with the given flags.
static inline trit_tensor *nnf_tensor(const nnf_file *nf, const char *name, trit_dtype dt, uint32_t flags) {
    const nnf_record *r = nnf_find(nf, name);
    trit_tensor *t = trit_tensor_new(dt, r->ndim, r->shape);
    for (int64_t i = 0; i < r->numel; i++) trit_tensor_set_flat(t, i, r->data[i]);
    t->flags |= flags;
    snprintf(t->name, sizeof t->name, "%s", name);
    return t;
}

// |t - record| <= tol * max(1, |record|) element-wise, same shape. Returns the max abs error.
static inline double nnf_assert_close(const nnf_file *nf, const char *name, const trit_tensor *t, double tol) {
    const nnf_record *r = nnf_find(nf, name);
    if (!t) fail_msg("%s: tensor is NULL", name);
    if (trit_tensor_numel(t) != r->numel) fail_msg("%s: %lld elements, fixture has %lld", name, (long long)trit_tensor_numel(t), (long long)r->numel);
    double worst = 0;
    for (int64_t i = 0; i < r->numel; i++) {
        const double got = trit_tensor_get_flat(t, i), want = r->data[i], err = fabs(got - want);
        if (!(err <= tol * fmax(1.0, fabs(want)))) fail_msg("%s[%lld]: got %.17g, PyTorch %.17g", name, (long long)i, got, want);
        worst = fmax(worst, err);
    }
    return worst;
}

// ---- the test loss: out = sum(x * r), r a caller-owned f64 tensor of x's shape -------------

typedef struct nnf_dot_attr {
    const trit_tensor *r;
} nnf_dot_attr;

static inline trit_status nnf_dot_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    (void)n_in;
    const nnf_dot_attr *a = attr;
    if (trit_tensor_numel(in[0]) != trit_tensor_numel(a->r)) return trit_error(TRIT_ERR_SHAPE, "nnf_dot: r has another size");
    return trit_tensor_init_layout(out, in[0]->dtype, 0, NULL);
}

static inline trit_status nnf_dot_forward(const trit_op_call *c) {
    const nnf_dot_attr *a = c->attr;
    double s = 0;
    for (int64_t i = 0; i < trit_tensor_numel(c->in[0]); i++) s += trit_tensor_get_flat(c->in[0], i) * trit_tensor_get_flat(a->r, i);
    trit_tensor_set_flat(c->out, 0, s);
    return TRIT_OK;
}

static inline trit_status nnf_dot_backward(const trit_op_call *c) {
    const nnf_dot_attr *a = c->attr;
    if (!c->gin[0]) return TRIT_OK;
    const double go = trit_tensor_get_flat(c->gout, 0);
    for (int64_t i = 0; i < trit_tensor_numel(c->in[0]); i++)
        trit_tensor_set_flat(c->gin[0], i, trit_tensor_get_flat(c->gin[0], i) + go * trit_tensor_get_flat(a->r, i));
    return TRIT_OK;
}

static inline trit_tensor *nnf_dot(trit_graph *g, trit_tensor *x, const trit_tensor *r) {
    static const trit_op_def def = {.name = "nnf_dot", .infer = nnf_dot_infer, .forward = nnf_dot_forward,
                                    .backward = nnf_dot_backward, .contiguous_inputs = 1, .attr_size = sizeof(nnf_dot_attr)};
    nnf_dot_attr a = {r};
    return trit_graph_apply(g, &def, &def, 1, &x, &a);
}

// Gradient check (<= 1e-6) and f32 vs f64 (<= f32_tol) of one builder, printing both errors.
static inline void nnf_check(const char *what, tg_build_fn build, void *ctx, int n, trit_tensor **params, double f32_tol) {
    const double gc = tg_gradcheck(build, ctx, n, params, 64), fd = tg_f32_vs_f64(build, ctx, n, params);
    print_message("%-28s gradcheck %.2e  f32 vs f64 %.2e\n", what, gc, fd);
    if (!(gc >= 0 && gc <= 1e-6)) fail_msg("%s: gradient check relative error %.3g > 1e-6", what, gc);
    if (!(fd >= 0 && fd <= f32_tol)) fail_msg("%s: f32 differs from f64 by %.3g > %.3g", what, fd, f32_tol);
}

// Compile with `loss`, zero the grads, run forward and backward; fails the test on an error.
static inline void nnf_run(trit_graph *g, trit_tensor *loss) {
    if (trit_graph_compile(g, loss) != TRIT_OK) fail_msg("compile: %s", trit_last_error());
    trit_graph_zero_grad(g);
    if (trit_graph_forward(g) != TRIT_OK) fail_msg("forward: %s", trit_last_error());
    if (trit_graph_backward(g) != TRIT_OK) fail_msg("backward: %s", trit_last_error());
}

// An index tensor (i32 or i64) holding vals[0..n) with the given shape.
static inline trit_tensor *nnf_indices(trit_dtype dt, int ndim, const int64_t *shape, const int64_t *vals) {
    trit_tensor *t = trit_tensor_new(dt, ndim, shape);
    for (int64_t i = 0; i < trit_tensor_numel(t); i++) trit_tensor_set_flat(t, i, (double)vals[i]);
    return t;
}

#endif
