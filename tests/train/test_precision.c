// Training in mixed precision and the skip mechanism: a NaN injected into one step's gradient
// skips that step (weights and optimizer state unchanged, counted in metrics.jsonl) and the run
// finishes; a run that is all NaN stops after --max-skips with a loadable checkpoint; bf16,
// fp16 (with its dynamic loss scaler) and bf16 without master weights train and resume
// bit-exactly.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"

enum { STEPS = 12 };

typedef struct poison {
    int64_t at;           // poison the gradient of this 0-based step; -1 = every step; -2 = none
    uint8_t *before;      // the first parameter's bytes before that step's update
    size_t nbytes;
    double loss[STEPS + 1], scale[STEPS + 1];
    int64_t skipped[STEPS + 1];
} poison;

static void on_grads(void *ctx, int64_t step, trit_tensor *const *params, int n) {
    poison *p = ctx;
    (void)n;
    if (p->at == step) {
        p->nbytes = trit_tensor_nbytes(params[0]);
        p->before = malloc(p->nbytes);
        memcpy(p->before, trit_tensor_ptr(params[0]), p->nbytes);
    }
    if (p->at == step || p->at == -1) ((float *)trit_tensor_ptr(params[1]->grad))[3] = NAN;
}

static void on_step(void *ctx, const trit_train_step_info *info) {
    poison *p = ctx;
    p->loss[info->step] = info->loss;
    p->scale[info->step] = info->loss_scale;
    p->skipped[info->step] = info->skipped;
}

static trit_status train(trit_train_config *c, poison *p, trit_train_result *r) {
    trit_train_hooks h = {.on_step = on_step, .ctx = p, .on_grads = on_grads};
    return trit_train_run(c, &h, r);
}

typedef struct dirs {
    char root[512], text[600], out[600], out2[600];
} dirs;

static void make_dirs(dirs *d, const char *tag) {
    tfile_mkdtemp(d->root, sizeof d->root, tag);
    snprintf(d->text, sizeof d->text, "%s/corpus.txt", d->root);
    snprintf(d->out, sizeof d->out, "%s/run", d->root);
    snprintf(d->out2, sizeof d->out2, "%s/run2", d->root);
    tf_write_corpus(d->text);
}

static void test_nan_step_is_skipped(void **state) {
    (void)state;
    dirs d;
    make_dirs(&d, "skip");
    trit_train_config c;
    tf_tiny_config(&c, d.text, d.out);
    poison p = {.at = 5};
    trit_train_result r;
    if (train(&c, &p, &r) != TRIT_OK) fail_msg("%s", trit_last_error());
    assert_int_equal(r.step, STEPS);  // the run went on
    assert_true(isfinite(r.val_loss));
    assert_int_equal(p.skipped[5], 0);
    assert_int_equal(p.skipped[6], 1);  // step 6 (0-based 5) was skipped
    assert_int_equal(p.skipped[STEPS], 1);
    char path[700];
    snprintf(path, sizeof path, "%s/%s", d.out, TRIT_CKPT_METRICS);
    uint8_t *m;
    size_t n;
    assert_int_equal(trit_file_read_all(path, &m, &n), TRIT_OK);
    assert_non_null(strstr((char *)m, "\"step\":6,\"loss\":"));
    assert_non_null(strstr((char *)m, "\"skipped\":1"));
    assert_null(strstr((char *)m, "nan"));  // the file stays JSON
    free(m);
    free(p.before);
    tfile_rm_rf(d.root);
}

// The weights right after the skipped step equal those right before it: stop there and look.
static void test_skipped_step_leaves_weights(void **state) {
    (void)state;
    dirs d;
    make_dirs(&d, "skipw");
    trit_train_config c;
    tf_tiny_config(&c, d.text, d.out);
    c.stop_after = 6;
    poison p = {.at = 5};
    trit_train_result r;
    if (train(&c, &p, &r) != TRIT_OK) fail_msg("%s", trit_last_error());
    char path[700];
    snprintf(path, sizeof path, "%s/%s", d.out, TRIT_CKPT_MODEL);
    trit_safetensors *f = trit_safetensors_open(path);
    assert_non_null(f);
    const trit_safetensors_info *wte = trit_safetensors_find(f, "wte.weight");
    trit_tensor *w = trit_tensor_new(TRIT_F32, wte->ndim, wte->shape);
    assert_int_equal(trit_safetensors_load(f, "wte.weight", w), TRIT_OK);
    assert_int_equal(trit_tensor_nbytes(w), p.nbytes);
    assert_memory_equal(w->data, p.before, p.nbytes);
    trit_safetensors_close(f);
    trit_tensor_free(w);
    free(p.before);
    tfile_rm_rf(d.root);
}

static void test_all_nan_stops_at_max_skips(void **state) {
    (void)state;
    dirs d;
    make_dirs(&d, "maxskip");
    trit_train_config c;
    tf_tiny_config(&c, d.text, d.out);
    c.max_skips = 3;
    poison p = {.at = -1};
    trit_train_result r;
    assert_int_equal(train(&c, &p, &r), TRIT_ERR_NUMERIC);
    assert_non_null(strstr(trit_last_error(), "3 steps in a row"));
    assert_non_null(strstr(trit_last_error(), "--max-skips"));
    int64_t step = 0;
    assert_int_equal(trit_train_run_info(d.out, NULL, &step), TRIT_OK);  // a loadable checkpoint
    assert_int_equal(step, 3);
    tfile_rm_rf(d.root);
}

// A mode trains (loss goes down) and a run stopped at step 5 and resumed repeats the
// uninterrupted one bit for bit, loss scale included.
static void mode_config(trit_train_config *c, const char *text, const char *out, const char *precision,
                        const char *master, const char *rounding, double loss_scale) {
    tf_tiny_config(c, text, out);
    assert_int_equal(trit_train_config_set(c, "precision", precision), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "master-weights", master), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "rounding", rounding), TRIT_OK);
    c->loss_scale = loss_scale;
}

static void check_mode(const char *precision, const char *master, const char *rounding, double loss_scale) {
    dirs d;
    make_dirs(&d, "prec");
    trit_train_config c;
    mode_config(&c, d.text, d.out, precision, master, rounding, loss_scale);
    poison a = {.at = -2}, b = {.at = -2};
    trit_train_result r;
    if (train(&c, &a, &r) != TRIT_OK) fail_msg("%s: %s", precision, trit_last_error());
    printf("  %s, master weights %s, %s rounding: loss %.4f -> %.4f, scale %g\n", precision, master, rounding,
           a.loss[1], a.loss[STEPS], a.scale[STEPS]);
    assert_true(a.loss[STEPS] < a.loss[1] - 0.1);
    mode_config(&c, d.text, d.out2, precision, master, rounding, loss_scale);
    c.stop_after = 5;
    if (train(&c, &b, &r) != TRIT_OK) fail_msg("%s: %s", precision, trit_last_error());
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "resume", d.out2), TRIT_OK);
    c.quiet = 1;
    if (train(&c, &b, &r) != TRIT_OK) fail_msg("%s resume: %s", precision, trit_last_error());
    for (int s = 1; s <= STEPS; s++) {
        assert_memory_equal(&a.loss[s], &b.loss[s], sizeof(double));
        assert_memory_equal(&a.scale[s], &b.scale[s], sizeof(double));
    }
    tfile_rm_rf(d.root);
}

static void test_modes_train_and_resume(void **state) {
    (void)state;
    check_mode("bf16", "on", "stochastic", 0);
    check_mode("fp16", "on", "stochastic", 0);
    check_mode("bf16", "off", "stochastic", 0);
    check_mode("bf16", "off", "nearest", 0);
    check_mode("fp32", "on", "stochastic", 1024);  // a static scale on fp32
}

static void test_bad_precision_flags(void **state) {
    (void)state;
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_not_equal(trit_train_config_set(&c, "precision", "fp8"), TRIT_OK);
    assert_int_not_equal(trit_train_config_set(&c, "matmul-precision", "low"), TRIT_OK);
    assert_int_not_equal(trit_train_config_set(&c, "loss-scale", "nan"), TRIT_OK);
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "master-weights", "off"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&c), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "--master-weights off needs --precision bf16 or fp16"));
    trit_train_config_init(&c);
    c.max_skips = 0;
    assert_int_equal(trit_train_config_resolve(&c), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "--max-skips must be in [1, 1000000], got 0"));
    trit_train_config_init(&c);
    c.loss_scale = -1;
    assert_int_equal(trit_train_config_resolve(&c), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "--loss-scale must be in [0, "));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nan_step_is_skipped),       cmocka_unit_test(test_skipped_step_leaves_weights),
        cmocka_unit_test(test_all_nan_stops_at_max_skips), cmocka_unit_test(test_modes_train_and_resume),
        cmocka_unit_test(test_bad_precision_flags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
