// Parity with torch.optim: replays the gradients of tests/reference/fixtures/optim_fixtures.bin
// (made by tests/reference/make_optim_fixtures.py) and compares the params after every step
// with PyTorch's to 1e-6 relative to each tensor's scale: |a_i - b_i| <= 1e-6 * max_j |b_j|
// (about 16 fp32 ulps). Element-wise relative error is not used: an element that has cancelled
// to near zero carries the rounding of its O(1) history, and torch's own fp32 run differs from
// its fp64 run by more than 1e-6 element-wise on such elements.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trit/optim.h"

#define STEPS 8
#define REL_TOL 1e-6
#define MAX_ENTRIES 512

typedef struct entry {
    char name[64];
    uint32_t dtype;  // 0 f32, 1 f64
    uint64_t n;
    void *data;
} entry;

static entry entries[MAX_ENTRIES];
static int n_entries;
static double worst_rel;

static int load_fixture(void **state) {
    (void)state;
    const char *root = getenv("TRIT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/optim_fixtures.bin", root ? root : ".");
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (set TRIT_SOURCE_DIR)\n", path);
        return -1;
    }
    char magic[8];
    uint32_t count = 0;
    int ok = fread(magic, 1, 8, f) == 8 && memcmp(magic, "TRITOPT1", 8) == 0 &&
             fread(&count, 4, 1, f) == 1 && count <= MAX_ENTRIES;
    for (uint32_t i = 0; ok && i < count; i++) {
        entry *e = &entries[i];
        uint32_t len = 0;
        ok = fread(&len, 4, 1, f) == 1 && len < sizeof e->name && fread(e->name, 1, len, f) == len &&
             fread(&e->dtype, 4, 1, f) == 1 && fread(&e->n, 8, 1, f) == 1 && e->dtype <= 1 &&
             e->n < (1u << 20);
        if (!ok) break;
        e->name[len] = '\0';
        size_t sz = e->dtype ? 8 : 4;
        e->data = malloc(e->n * sz);
        ok = e->data && fread(e->data, sz, e->n, f) == e->n;
        n_entries = (int)i + 1;
    }
    fclose(f);
    if (!ok) fprintf(stderr, "%s is truncated or not an optim fixture\n", path);
    return ok ? 0 : -1;
}

static int free_fixture(void **state) {
    (void)state;
    for (int i = 0; i < n_entries; i++) free(entries[i].data);
    fprintf(stderr, "worst relative difference to torch: %.3g\n", worst_rel);
    return 0;
}

static const entry *find(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const entry *find(const char *fmt, ...) {
    char name[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    for (int i = 0; i < n_entries; i++)
        if (strcmp(entries[i].name, name) == 0) return &entries[i];
    fail_msg("fixture entry %s missing", name);
    return NULL;
}

static double scalar(const entry *e) {
    assert_int_equal(e->dtype, 1);
    return ((const double *)e->data)[0];
}

static trit_tensor *param(const char *name, int ndim, const int64_t *shape) {
    trit_tensor *t = trit_tensor_new(TRIT_F32, ndim, shape);
    assert_non_null(t);
    t->grad = trit_tensor_new(TRIT_F32, ndim, shape);
    assert_non_null(t->grad);
    t->flags |= TRIT_FLAG_PARAM;
    assert_int_equal(trit_tensor_set_name(t, name), TRIT_OK);
    const entry *e = find("init.%s", name);
    assert_int_equal(e->n, trit_tensor_numel(t));
    memcpy(t->data, e->data, e->n * 4);
    return t;
}

static void load_grad(trit_tensor *t, const char *name, int s) {
    const entry *e = find("grad.%s.%d", name, s);
    assert_int_equal(e->n, trit_tensor_numel(t));
    memcpy(t->grad->data, e->data, e->n * 4);
}

static void expect_close(const trit_tensor *t, const char *c, const char *name, int s) {
    const entry *e = find("%s.%s.%d", c, name, s);
    const float *want = e->data, *got = t->data;
    assert_int_equal(e->n, trit_tensor_numel(t));
    double scale = 0.0;
    for (uint64_t i = 0; i < e->n; i++) scale = fmax(scale, fabs((double)want[i]));
    for (uint64_t i = 0; i < e->n; i++) {
        double d = fabs((double)got[i] - (double)want[i]);
        double rel = d / scale;
        if (rel > worst_rel) worst_rel = rel;
        if (rel > REL_TOL)
            fail_msg("%s: %s[%llu] after step %d is %.9g, torch has %.9g", c, name,
                     (unsigned long long)i, s, got[i], want[i]);
    }
}

// Runs one fixture case with a constant lr on one group holding w (6, 5) and b (6).
static void run_case(const char *c, trit_optim_config cfg, double lr, double wd) {
    trit_tensor *w = param("w", 2, (int64_t[]){6, 5}), *b = param("b", 1, (int64_t[]){6});
    trit_tensor *ps[2] = {w, b};
    trit_optim *o = trit_optim_new_single(&cfg, ps, 2, wd);
    assert_non_null(o);
    for (int s = 0; s < STEPS; s++) {
        load_grad(w, "w", s);
        load_grad(b, "b", s);
        assert_int_equal(trit_optim_step(o, lr), TRIT_OK);
        expect_close(w, c, "w", s);
        expect_close(b, c, "b", s);
    }
    assert_int_equal(trit_optim_get_step(o), STEPS);
    trit_optim_free(o);
    trit_tensor_free(w);
    trit_tensor_free(b);
}

static void test_sgd(void **state) {
    (void)state;
    run_case("sgd", trit_optim_sgd(0.0, false), 0.1, 0.0);
}

static void test_sgd_weight_decay(void **state) {
    (void)state;
    run_case("sgd_wd", trit_optim_sgd(0.0, false), 0.1, 0.05);
}

static void test_momentum(void **state) {
    (void)state;
    run_case("momentum", trit_optim_sgd(0.9, false), 0.1, 0.0);
}

static void test_nesterov(void **state) {
    (void)state;
    run_case("nesterov", trit_optim_sgd(0.9, true), 0.1, 0.01);
}

static void test_rmsprop(void **state) {
    (void)state;
    run_case("rmsprop", trit_optim_rmsprop(0.99, 1e-4, 0.0), 0.01, 0.0);
}

static void test_rmsprop_momentum(void **state) {
    (void)state;
    run_case("rmsprop_momentum", trit_optim_rmsprop(0.9, 1e-8, 0.9), 0.01, 0.01);
}

static void test_adam_weight_decay(void **state) {
    (void)state;
    run_case("adam_wd", trit_optim_adam(0.9, 0.999, 1e-4), 0.01, 0.01);
}

// AdamW, GPT-2 groups (decay on the 2-D weight only; the bias group at half the lr), warmup +
// cosine lr, and clip_grad_norm_(1.0) before every step.
static void test_adamw_groups_schedule_clip(void **state) {
    (void)state;
    trit_tensor *w = param("w", 2, (int64_t[]){6, 5}), *b = param("b", 1, (int64_t[]){6});
    trit_tensor *ps[2] = {b, w};  // the rule, not the order, decides the groups
    trit_optim_config cfg = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *o = trit_optim_new_gpt2(&cfg, ps, 2, 0.1);
    assert_non_null(o);
    assert_int_equal(trit_optim_num_groups(o), 2);
    trit_optim_group g0, g1;
    assert_int_equal(trit_optim_get_group(o, 0, &g0), TRIT_OK);
    assert_int_equal(trit_optim_get_group(o, 1, &g1), TRIT_OK);
    assert_int_equal(g0.num_params, 1);
    assert_ptr_equal(g0.params[0], w);
    assert_true(g0.weight_decay == 0.1);
    assert_int_equal(g1.num_params, 1);
    assert_ptr_equal(g1.params[0], b);
    assert_true(g1.weight_decay == 0.0);
    assert_int_equal(trit_optim_set_group(o, 1, 0.5, 0.0), TRIT_OK);

    trit_lr_schedule sched = trit_lr_warmup_cosine(0.02, 0.002, 2, 6);
    for (int s = 0; s < STEPS; s++) {
        load_grad(w, "w", s);
        load_grad(b, "b", s);
        double norm = 0.0;
        assert_int_equal(trit_optim_clip_grads(o, 1.0, &norm), TRIT_OK);
        double want_norm = scalar(find("adamw_groups.norm.%d", s));
        assert_true(fabs(norm - want_norm) <= REL_TOL * want_norm);
        double lr = trit_lr_at(&sched, s), want_lr = scalar(find("adamw_groups.lr.%d", s));
        assert_true(fabs(lr - want_lr) <= 1e-15 * want_lr);
        assert_int_equal(trit_optim_step(o, lr), TRIT_OK);
        expect_close(w, "adamw_groups", "w", s);
        expect_close(b, "adamw_groups", "b", s);
    }
    trit_optim_free(o);
    trit_tensor_free(w);
    trit_tensor_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd),
        cmocka_unit_test(test_sgd_weight_decay),
        cmocka_unit_test(test_momentum),
        cmocka_unit_test(test_nesterov),
        cmocka_unit_test(test_rmsprop),
        cmocka_unit_test(test_rmsprop_momentum),
        cmocka_unit_test(test_adam_weight_decay),
        cmocka_unit_test(test_adamw_groups_schedule_clip),
    };
    return cmocka_run_group_tests(tests, load_fixture, free_fixture);
}
