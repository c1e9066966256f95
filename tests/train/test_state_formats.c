// The training-state file across versions and dtypes.
// - A version-1 training state (every tensor f32, no dtype, no scaler) still loads and resumes
//   bit-exactly: tests/reference/fixtures/state_v1/ is a run stopped at step 2 of 4 by the trit of
//   version-1 states (`trit train --layers 1 --dim 16 --heads 2 --steps 4 --batch 4 --eval-every 0
//   --task-test 10 --log-every 1 --stop-after 2`, the addition task); that trit's uninterrupted
//   run logged loss 2.44477367 at step 3 and 2.4672296 (val 2.43542869) at step 4. The test
//   resumes at TRIT_CPU=ref, as for version 2 below: the portable kernels are scalar C built for
//   the base x86-64 ISA (no FMA to contract into, sums in a fixed order), so they give the same
//   bits on every x86-64 CPU class, and those bits are the logged ones (the avx2 kernels give
//   them too on this model; nothing says the avx512 ones must, so the test does not rely on it).
// - A version-2 run directory (written before states had shapes and block scales) resumes, and
//   bit-exactly: tests/reference/fixtures/state_v2/ is a run stopped at step 2 of 4 by the trit of
//   version-2 states, at TRIT_CPU=ref (`trit train --layers 1 --dim 16 --heads 2 --steps 4
//   --batch 4 --eval-every 0 --task-test 10 --log-every 1 --precision fp16 --master-weights off
//   --threads 1 --stop-after 2`, the addition task: 16-bit weights and a loss scaler in the
//   state); that trit's uninterrupted run logged loss 2.45518851 at step 3 and 2.49027348 (val
//   2.46667528) at step 4. The portable kernels compute the same bits on every x86-64, so the
//   test forces them.
// - Version 3 keeps any dtype of the table with its shape and f32 block scales: buffers of a
//   blocked dtype (q8_0), of codes with scales (qint8 in blocks), and of another shape than a
//   parameter's come back byte for byte, and a reader whose buffers disagree (shape, scale count,
//   dtype) is refused with a message.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "train/train_internal.h"
#include "trit/trit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// Resumes a copy of fixture dir (a run stopped at step 2 of 4) at CPU level `level` and checks
// the losses its writer logged, then that the file it wrote (the current version) loads.
static void resume_fixture(const char *dir, trit_cpu_isa level, float loss3, float loss4, float val4) {
    const char *root = getenv("TRIT_SOURCE_DIR");
    char fix[1024], run[512];
    snprintf(fix, sizeof fix, "%s/tests/reference/fixtures/%s", root ? root : ".", dir);
    tfile_mkdtemp(run, sizeof run, dir);
    const char *files[4] = {"train_state.bin", "tokenizer.bin", "model.safetensors", "metrics.jsonl"};
    for (int i = 0; i < 4; i++) copy_file(fix, run, files[i]);
    const trit_cpu_isa saved = trit_cpu_level();
    assert_int_equal(trit_cpu_set_level(level), TRIT_OK);
    trit_train_config c;
    trit_train_config_init(&c);
    snprintf(c.resume, sizeof c.resume, "%s", run);
    c.quiet = 1;
    trit_train_hooks h = {.on_step = on_step};
    trit_train_result r;
    const trit_status s = trit_train_run(&c, &h, &r);
    trit_cpu_set_level(saved);
    if (s != TRIT_OK) fail_msg("resume of %s: %s", dir, trit_last_error());
    assert_int_equal(r.step, 4);
    assert_true((float)losses[3] == loss3);
    assert_true((float)losses[4] == loss4);
    assert_true((float)r.val_loss == val4);
    int64_t step = 0;
    assert_int_equal(trit_train_run_info(run, NULL, &step), TRIT_OK);
    assert_int_equal(step, 4);
    tfile_rm_rf(run);
}

static void test_v1_run_resumes(void **state) {
    (void)state;
    resume_fixture("state_v1", TRIT_CPU_REF, 2.44477367f, 2.4672296f, 2.43542869f);
}

static void test_v2_run_resumes(void **state) {
    (void)state;
    resume_fixture("state_v2", TRIT_CPU_REF, 2.45518851f, 2.49027348f, 2.46667528f);
}

// ---- version 3: any dtype, any shape, block scales ------------------------------------------------

enum { NQ = 256 };

typedef struct buffers {
    uint8_t q8[NQ / 32 * 34];  // q8_0 blocks of 32 codes and an f16 scale
    int8_t codes[NQ];          // qint8 codes in blocks of 64
    float scales[NQ / 64];
    uint16_t low[3 * 5];       // a bf16 state of shape (3, 5)
} buffers;

static void entries(buffers *b, trit_state_entry e[3], int64_t shape_low0, int64_t nscales) {
    e[0] = (trit_state_entry){.name = "w.q8", .role = "optim", .dtype = TRIT_Q8_0, .ndim = 1, .shape = {NQ},
                              .count = NQ, .data = b->q8};
    e[1] = (trit_state_entry){.name = "w.exp_avg", .role = "optim", .dtype = TRIT_I8, .ndim = 2, .shape = {4, NQ / 4},
                              .count = NQ, .data = b->codes, .scales = b->scales, .num_scales = nscales};
    e[2] = (trit_state_entry){.name = "w.low", .role = "optim", .dtype = TRIT_BF16, .ndim = 2,
                              .shape = {shape_low0, 15 / shape_low0}, .count = 15, .data = b->low};
}

static void test_v3_blocked_round_trip(void **state) {
    (void)state;
    buffers in, out;
    for (size_t i = 0; i < sizeof in; i++) ((uint8_t *)&in)[i] = (uint8_t)(i * 37 + 11);
    for (int i = 0; i < NQ / 64; i++) in.scales[i] = 0.01f * (float)(i + 1);
    trit_state_entry e[3];
    entries(&in, e, 3, NQ / 64);
    trit_train_state st;
    memset(&st, 0, sizeof st);
    trit_train_config_init(&st.config);
    st.config.steps = 10;
    st.step = 5;
    char path[512];
    snprintf(path, sizeof path, "%s", tfile_path("blocked.bin"));
    assert_int_equal(trit_state_write(path, &st, e, 3, "adamw", 5), TRIT_OK);
    memset(&out, 0, sizeof out);
    entries(&out, e, 3, NQ / 64);
    trit_train_state back;
    int64_t ostep = 0;
    if (trit_state_read(path, &back, e, 3, &ostep) != TRIT_OK) fail_msg("%s", trit_last_error());
    assert_int_equal(ostep, 5);
    assert_int_equal(back.step, 5);
    assert_memory_equal(in.q8, out.q8, sizeof in.q8);
    assert_memory_equal(in.codes, out.codes, sizeof in.codes);
    assert_memory_equal(in.scales, out.scales, sizeof in.scales);
    assert_memory_equal(in.low, out.low, sizeof in.low);
    // A reader whose buffers differ: another shape, another scale count, another dtype.
    entries(&out, e, 5, NQ / 64);
    assert_int_equal(trit_state_read(path, &back, e, 3, &ostep), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "another shape"));
    entries(&out, e, 3, NQ / 32);
    assert_int_equal(trit_state_read(path, &back, e, 3, &ostep), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "scales"));
    entries(&out, e, 3, NQ / 64);
    e[0].dtype = TRIT_Q4_0;
    assert_int_equal(trit_state_read(path, &back, e, 3, &ostep), TRIT_ERR_DTYPE);
    assert_non_null(strstr(trit_last_error(), "saved as q8_0"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v1_run_resumes),
        cmocka_unit_test(test_v2_run_resumes),
        cmocka_unit_test(test_v3_blocked_round_trip),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
