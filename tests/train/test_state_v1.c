// A version-1 training state (every tensor f32, no dtype, no scaler) still loads and resumes
// bit-exactly: tests/reference/fixtures/state_v1/ is a run stopped at step 2 of 4 by the trit of
// version-1 states (`trit train --layers 1 --dim 16 --heads 2 --steps 4 --batch 4 --eval-every 0
// --task-test 10 --log-every 1 --stop-after 2`, the addition task); that trit's uninterrupted run
// logged loss 2.44477367 at step 3 and 2.4672296 (val 2.43542869) at step 4.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "trit/trit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void copy_file(const char *from_dir, const char *to_dir, const char *name) {
    char a[1200], b[1200];
    snprintf(a, sizeof a, "%s/%s", from_dir, name);
    snprintf(b, sizeof b, "%s/%s", to_dir, name);
    uint8_t *data;
    size_t n;
    if (trit_file_read_all(a, &data, &n) != TRIT_OK) fail_msg("%s", trit_last_error());
    tfile_write(b, data, n);
    free(data);
}

static double losses[5];

static void on_step(void *ctx, const trit_train_step_info *info) {
    (void)ctx;
    if (info->step >= 1 && info->step <= 4) losses[info->step] = info->loss;
}

static void test_v1_state_resumes(void **state) {
    (void)state;
    const char *root = getenv("TRIT_SOURCE_DIR");
    char fix[1024], run[512];
    snprintf(fix, sizeof fix, "%s/tests/reference/fixtures/state_v1", root ? root : ".");
    tfile_mkdtemp(run, sizeof run, "state-v1");
    const char *files[4] = {"train_state.bin", "tokenizer.bin", "model.safetensors", "metrics.jsonl"};
    for (int i = 0; i < 4; i++) copy_file(fix, run, files[i]);
    trit_train_config c;
    trit_train_config_init(&c);
    snprintf(c.resume, sizeof c.resume, "%s", run);
    c.quiet = 1;
    trit_train_hooks h = {.on_step = on_step};
    trit_train_result r;
    if (trit_train_run(&c, &h, &r) != TRIT_OK) fail_msg("resume of a version-1 state: %s", trit_last_error());
    assert_int_equal(r.step, 4);
    assert_true((float)losses[3] == 2.44477367f);
    assert_true((float)losses[4] == 2.4672296f);
    assert_true((float)r.val_loss == 2.43542869f);
    // The checkpoint it wrote is version 2 and loads again.
    int64_t step = 0;
    assert_int_equal(trit_train_run_info(run, NULL, &step), TRIT_OK);
    assert_int_equal(step, 4);
    tfile_rm_rf(run);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_v1_state_resumes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
