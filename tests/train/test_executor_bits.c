// The step-list executor gives the bits the executor before it gave: short training runs of the
// addition task (a 2-layer GPT; fp32, bf16 and fp16; one micro-batch or three accumulated; with
// block recompute too, which must change nothing) at TRIT_CPU=ref on one thread, each
// fingerprinted by the CRC-32 of its final weights' bytes and of its losses. The expected values
// were computed by this file built against the library at the commit before the step list
// (b97efda), which ran every forward node in build order and then a compiled backward order with
// per-step zero lists. The portable kernels compute the same bits on every x86-64, so the
// fingerprints hold on any machine. Dropout is left out: its masks moved to streams fixed by the
// model's structure on purpose (tests/nn/test_gpt_steps.c checks recompute keeps them).
// One change since, also on purpose: classifier_ce now sums its row chunks' dW in a training
// forward and backward adds that sum to the gradient, where before backward added each chunk
// into the gradient. With one micro-batch the gradient starts at zero and the bits are the same
// (those fingerprints are still b97efda's); with three accumulated, the earlier micro-batches'
// sum is added once instead of chunk by chunk, so the -accum3 fingerprints are those of that
// change, computed by this file (every other difference from b97efda would still show).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "trit/trit.h"

#include <stdio.h>
#include <string.h>

// CRC-32 (IEEE), bitwise: the fingerprint must not depend on the library under test.
static uint32_t crc(uint32_t c, const void *data, size_t n) {
    const uint8_t *p = data;
    c = ~c;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
    }
    return ~c;
}

static uint32_t loss_crc;

static void on_step(void *ctx, const trit_train_step_info *info) {
    (void)ctx;
    const float l = (float)info->loss;
    loss_crc = crc(loss_crc, &l, sizeof l);
}

// The fingerprint of a 6-step run: weights' bytes, then the losses. recompute: --recompute block
// (set where the library has the flag; the expected values come from one that had none).
static uint32_t run(int precision, int64_t accum, bool recompute, const char *name) {
    char dir[512];
    tfile_mkdtemp(dir, sizeof dir, name);
    trit_train_config c;
    trit_train_config_init(&c);
    c.layers = 2, c.heads = 2, c.dim = 32, c.batch = 8, c.steps = 6, c.warmup = 2, c.threads = 1, c.quiet = 1;
    c.eval_every = 0, c.task_test = 10, c.sample_tokens = 0, c.precision = precision;
    if (recompute) c.recompute = TRIT_RECOMPUTE_BLOCK;
    if (accum > 1) c.total_batch_tokens = accum * 8 * 11;  // the task's T is 3 digits x 3 + 2
    snprintf(c.out, sizeof c.out, "%s", dir);
    loss_crc = 0;
    trit_train_hooks h = {.on_step = on_step};
    trit_train_result r;
    if (trit_train_run(&c, &h, &r) != TRIT_OK) fail_msg("%s: %s", name, trit_last_error());
    trit_gpt *m = trit_checkpoint_load_model(dir, NULL);
    assert_non_null(m);
    uint32_t w = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        w = crc(w, trit_tensor_ptr(t), trit_tensor_nbytes(t));
    }
    trit_gpt_free(m);
    tfile_rm_rf(dir);
    print_message("%s: weights %08x losses %08x\n", name, w, loss_crc);
    return w ^ loss_crc;
}

static void test_same_bits_as_before(void **state) {
    (void)state;
    const struct {
        const char *name;
        int precision;
        int64_t accum;
        uint32_t want;
    } cases[] = {
        {"fp32", 0, 1, 0x2efd8d6a}, {"fp32-accum3", 0, 3, 0x085b5814},
        {"bf16", 1, 1, 0xa7bd807c}, {"bf16-accum3", 1, 3, 0xbfd931e8},
        {"fp16", 2, 1, 0x0d32cbb1}, {"fp16-accum3", 2, 3, 0xf46d8f05},
    };
    const trit_cpu_isa level = trit_cpu_level();
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_REF), TRIT_OK);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        for (int rec = 0; rec <= 1; rec++) {
            const uint32_t got = run(cases[k].precision, cases[k].accum, rec, cases[k].name);
            if (got != cases[k].want)
                fail_msg("%s%s: fingerprint %08x, expected %08x", cases[k].name,
                         rec ? " with block recompute" : "", got, cases[k].want);
        }
    }
    trit_cpu_set_level(level);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_same_bits_as_before)};
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
