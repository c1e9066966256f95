// A 200-step run with --optimizer adamw8bit against the same run with AdamW: 2 layers of width
// 64, every matrix but the embeddings (vocabulary x 64 < 4096) with 8-bit moments. The final
// training loss (mean of the last 20 steps) and the validation loss must be within 1% of
// AdamW's, and the run must learn (its loss falls by more than half from the first step's).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"

enum { STEPS = 200, TAIL = 20 };

typedef struct record {
    double loss[STEPS + 1];
} record;

static void on_step(void *ctx, const trit_train_step_info *info) {
    record *r = ctx;
    r->loss[info->step] = info->loss;
}

static void train(const char *text, const char *out, trit_train_optimizer opt, record *r, trit_train_result *res) {
    trit_train_config c;
    tf_tiny_config(&c, text, out);
    c.layers = 2;
    c.dim = 64;
    c.seq = 32;
    c.batch = 8;
    c.steps = STEPS;
    c.warmup = 20;
    c.eval_every = 0;
    c.eval_batches = 8;
    c.log_every = 50;
    c.optimizer = opt;
    trit_train_hooks h = {.on_step = on_step, .ctx = r};
    if (trit_train_run(&c, &h, res) != TRIT_OK) fail_msg("train: %s", trit_last_error());
}

static double tail_mean(const record *r) {
    double s = 0;
    for (int i = STEPS - TAIL + 1; i <= STEPS; i++) s += r->loss[i];
    return s / TAIL;
}

static void test_close_to_adamw(void **state) {
    (void)state;
    char root[512], text[600], a_dir[600], b_dir[600];
    tfile_mkdtemp(root, sizeof root, "adamw8bit");
    snprintf(text, sizeof text, "%s/corpus.txt", root);
    snprintf(a_dir, sizeof a_dir, "%s/adamw", root);
    snprintf(b_dir, sizeof b_dir, "%s/adamw8bit", root);
    tf_write_corpus(text);
    record a = {0}, b = {0};
    trit_train_result ra, rb;
    train(text, a_dir, TRIT_TRAIN_ADAMW, &a, &ra);
    train(text, b_dir, TRIT_TRAIN_ADAMW8BIT, &b, &rb);
    const double ta = tail_mean(&a), tb = tail_mean(&b);
    print_message("loss (mean of last %d steps): adamw %.4f, adamw8bit %.4f (%+.2f%%); val: %.4f, %.4f (%+.2f%%)\n",
                  TAIL, ta, tb, 100 * (tb / ta - 1), ra.val_loss, rb.val_loss, 100 * (rb.val_loss / ra.val_loss - 1));
    assert_true(a.loss[1] == b.loss[1]);  // the same model, data and first forward
    assert_true(tb < 0.5 * b.loss[1]);
    assert_true(fabs(tb / ta - 1) < 0.01);
    assert_true(fabs(rb.val_loss / ra.val_loss - 1) < 0.01);
    tfile_rm_rf(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_close_to_adamw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
