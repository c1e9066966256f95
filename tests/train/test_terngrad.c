// --terngrad in training (the codec itself is tested in tests/quant/test_terngrad.c): the run
// trains through the ternary wire form (its losses leave a plain run's after the first
// update), a run stopped at step 5 and resumed repeats the uninterrupted one bit for bit, and
// a NaN gradient skips the step as without TernGrad.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"

enum { STEPS = 12 };

typedef struct watch {
    double loss[STEPS + 1];
    int64_t skipped[STEPS + 1];
    bool poison;
} watch;

static void on_grads(void *ctx, int64_t step, trit_tensor *const *params, int n) {
    watch *w = ctx;
    (void)n;
    if (w->poison && step == 3) ((float *)trit_tensor_ptr(params[0]->grad))[1] = NAN;
}

static void on_step(void *ctx, const trit_train_step_info *info) {
    watch *w = ctx;
    w->loss[info->step] = info->loss;
    w->skipped[info->step] = info->skipped;
}

static trit_status train(trit_train_config *c, watch *w) {
    trit_train_hooks h = {.on_step = on_step, .on_grads = on_grads, .ctx = w};
    trit_train_result r;
    return trit_train_run(c, &h, &r);
}

static void config(trit_train_config *c, const char *text, const char *out) {
    tf_tiny_config(c, text, out);
    assert_int_equal(trit_train_config_set(c, "terngrad", "1"), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "terngrad-min-size", "256"), TRIT_OK);
    c->steps = STEPS;
}

static void test_trains_and_resumes(void **state) {
    (void)state;
    char root[512], text[600], out[600], out2[600];
    tfile_mkdtemp(root, sizeof root, "tern");
    snprintf(text, sizeof text, "%s/corpus.txt", root);
    snprintf(out, sizeof out, "%s/a", root);
    snprintf(out2, sizeof out2, "%s/b", root);
    tf_write_corpus(text);
    trit_train_config c;
    watch a = {0}, b = {0}, plain = {0};
    config(&c, text, out);
    assert_int_equal(train(&c, &a), TRIT_OK);
    assert_true(a.loss[STEPS] < a.loss[1] - 0.1);
    config(&c, text, out2);
    c.stop_after = 5;
    assert_int_equal(train(&c, &b), TRIT_OK);
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "resume", out2), TRIT_OK);
    c.quiet = 1;
    assert_int_equal(train(&c, &b), TRIT_OK);
    for (int s = 1; s <= STEPS; s++) assert_memory_equal(&a.loss[s], &b.loss[s], sizeof(double));
    // Without TernGrad the same run differs from step 2 on.
    tfile_rm_rf(out2);
    tf_tiny_config(&c, text, out2);
    c.steps = STEPS;
    assert_int_equal(train(&c, &plain), TRIT_OK);
    assert_true(plain.loss[1] == a.loss[1] && plain.loss[3] != a.loss[3]);
    // A NaN gradient with TernGrad on: skipped and counted.
    tfile_rm_rf(out2);
    watch p = {.poison = true};
    config(&c, text, out2);
    assert_int_equal(train(&c, &p), TRIT_OK);
    assert_int_equal(p.skipped[4], 1);
    assert_int_equal(p.skipped[STEPS], 1);
    tfile_rm_rf(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_trains_and_resumes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
