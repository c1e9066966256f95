// --recompute and --memory-budget in the trainer: every policy (none, attn, mlp, block, auto)
// trains to the same weights bit for bit; auto recomputes the fewest blocks whose memory report
// total fits the budget (none when the run fits as it is); a budget that even full recompute
// cannot meet is refused before the run directory is made.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "train/trainer.h"
#include "train_fixture.h"
#include "trit/bench.h"

static char root[512], corpus[600];

static const char *at(const char *name) { return tfile_join(root, name); }

static void config(trit_train_config *c, const char *out, const char *policy, double budget_mb) {
    tf_tiny_config(c, corpus, out);
    c->layers = 3, c->dim = 32, c->heads = 4, c->steps = 3, c->dropout = 0.1;
    assert_int_equal(trit_train_config_set(c, "recompute", policy), TRIT_OK);
    c->memory_budget = budget_mb;
}

// The setup of a run: its blocks recomputed and memory report total.
static void plan(const char *policy, double budget_mb, int64_t *blocks, size_t *total, size_t *plain) {
    trit_train_config c;
    config(&c, at("plan"), policy, budget_mb);
    trainer t;
    if (trit_trainer_setup(&t, &c) != TRIT_OK) fail_msg("setup: %s", trit_last_error());
    trit_memory_report r;
    assert_int_equal(trit_memory_report_make(t.gg.graph, t.opt, 0, &r), TRIT_OK);
    *blocks = t.recompute_blocks;
    *total = r.total;
    if (plain) *plain = t.total_plain;
    trit_trainer_free(&t, true);
}

static void test_auto_fewest_blocks(void **state) {
    (void)state;
    int64_t k = -1;
    size_t none = 0, full = 0, got = 0, plain = 0;
    plan("none", 0, &k, &none, NULL);
    assert_int_equal(k, 0);
    plan("block", 0, &k, &full, &plain);
    assert_int_equal(k, 3);
    assert_int_equal(plain, none);
    assert_true(full < none);
    // Room for everything: nothing recomputed.
    plan("auto", (double)none / 1e6 + 0.01, &k, &got, NULL);
    assert_int_equal(k, 0);
    assert_int_equal(got, none);
    // Just under the plain total: one block is enough; exactly the full-recompute total: all three.
    plan("auto", (double)(none - 1) / 1e6, &k, &got, NULL);
    print_message("total %zu bytes without recompute, %zu with every block; auto under the first: %lld block(s), %zu\n",
                  none, full, (long long)k, got);
    assert_int_equal(k, 1);
    assert_true(got < none);
    plan("auto", ((double)full + 0.5) / 1e6, &k, &got, NULL);
    assert_true(k >= 2 && k <= 3);
    assert_true(got <= full);
    // A fixed policy with a budget it fits.
    plan("mlp", (double)none / 1e6, &k, &got, NULL);
    assert_int_equal(k, 3);
    assert_true(got < none);

    // Too small even for full recompute: refused, with what it needs, and no run directory.
    trit_train_config c;
    config(&c, at("too-small"), "auto", (double)full / 1e6 * 0.5);
    assert_int_equal(trit_train_run(&c, NULL, NULL), TRIT_ERR_RANGE);
    char want[128];
    snprintf(want, sizeof want, "even recomputing every block, the run needs %.2f MB", (double)full / 1e6);
    if (!strstr(trit_last_error(), want)) fail_msg("'%s' lacks '%s'", trit_last_error(), want);
    assert_false(tfile_exists(at("too-small")));
    config(&c, at("too-small"), "none", (double)none / 1e6 * 0.9);
    assert_int_equal(trit_train_run(&c, NULL, NULL), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "with --recompute none the run needs"));
    assert_false(tfile_exists(at("too-small")));
    // auto without a budget: the config says what to pass.
    config(&c, at("too-small"), "auto", 0);
    assert_int_equal(trit_train_run(&c, NULL, NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "pass one, or choose none|attn|mlp|block"));
    // "off" is still "none".
    assert_int_equal(trit_train_config_set(&c, "recompute", "off"), TRIT_OK);
    assert_int_equal(c.recompute, TRIT_RECOMPUTE_NONE);
    assert_int_equal(trit_train_config_set(&c, "recompute", "none"), TRIT_OK);
    assert_int_equal(c.recompute, TRIT_RECOMPUTE_NONE);
}

static void test_same_weights(void **state) {
    (void)state;
    static const char *policies[] = {"none", "attn", "mlp", "block", "auto"};
    trit_gpt *ref = NULL;
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "run-%s", policies[i]);
        trit_train_config c;
        config(&c, at(name), policies[i], i == 4 ? 0.001 : 0);
        if (i == 4) {  // a budget that needs some recompute
            int64_t k;
            size_t none, full;
            plan("none", 0, &k, &none, NULL);
            plan("block", 0, &k, &full, NULL);
            c.memory_budget = (double)(full + (none - full) / 2) / 1e6;
        }
        if (trit_train_run(&c, NULL, NULL) != TRIT_OK) fail_msg("%s: %s", policies[i], trit_last_error());
        trit_gpt *m = trit_checkpoint_load_model(at(name), NULL);
        assert_non_null(m);
        if (!ref) {
            ref = m;
            continue;
        }
        for (int j = 0; j < trit_gpt_num_tensors(m); j++) {
            const trit_tensor *a = trit_gpt_tensor(ref, j), *b = trit_gpt_tensor(m, j);
            if (memcmp(a->data, b->data, trit_tensor_nbytes(a)) != 0)
                fail_msg("--recompute %s: '%s' differs from --recompute none", policies[i], a->name);
        }
        trit_gpt_free(m);
    }
    trit_gpt_free(ref);
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "recompute-budget");
    snprintf(corpus, sizeof corpus, "%s", at("corpus.txt"));
    tf_write_corpus(corpus);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_fewest_blocks),
        cmocka_unit_test(test_same_weights),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
