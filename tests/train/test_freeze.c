// Freezing by name: globs apply in flag order (--unfreeze after --freeze re-opens, before it does
// nothing), a glob matching nothing or leaving nothing to train is refused with some names; a
// frozen parameter has no gradient buffer and no optimizer state (the memory report's gradient
// and optimizer bytes fall by exactly its bytes), and a fine-tune with frozen attention leaves
// those weights bit for bit as the base had them while the others move.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "train/trainer.h"
#include "train_fixture.h"
#include "trit/bench.h"

#include <fnmatch.h>

static char root[512], corpus[600], base[600];

static const char *at(const char *name) { return tfile_join(root, name); }

// A tiny fine-tune of the base: its architecture is the base's.
static void ft_config(trit_train_config *c, const char *out) {
    tf_tiny_config(c, corpus, out);
    c->layers = c->heads = c->dim = c->seq = TRIT_TRAIN_UNSET;
    assert_int_equal(trit_train_config_set(c, "init-from", base), TRIT_OK);
}

static trit_gpt *small_model(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = 16, c.n_head = 2, c.seq_len = 8, c.vocab_size = 20;
    trit_gpt *m = trit_gpt_new(&c, 1);
    assert_non_null(m);
    return m;
}

static bool frozen(const trit_gpt *m, const char *name) {
    const trit_tensor *t = trit_gpt_find(m, name);
    assert_non_null(t);
    return (t->flags & TRIT_FLAG_FROZEN) != 0;
}

static void test_rules_in_order(void **state) {
    (void)state;
    trit_gpt *m = small_model();
    int64_t n = 0, attn = 0;
    assert_int_equal(trit_train_freeze(m, "h.*.attn.*", &n), TRIT_OK);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        const bool want = fnmatch("h.*.attn.*", t->name, 0) == 0;
        assert_int_equal((t->flags & TRIT_FLAG_FROZEN) != 0, want);
        attn += want ? trit_tensor_numel(t) : 0;
    }
    assert_int_equal(attn, 2 * (3 * 16 * 16 + 3 * 16 + 16 * 16 + 16));
    int64_t all = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) all += trit_tensor_numel(trit_gpt_tensor(m, i));
    assert_int_equal(n, all - attn);

    // Later rules win: re-open block 0's attention.
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) trit_gpt_tensor(m, i)->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
    assert_int_equal(trit_train_freeze(m, "h.*.attn.*,!h.0.attn.*", NULL), TRIT_OK);
    assert_false(frozen(m, "h.0.attn.c_attn.weight"));
    assert_true(frozen(m, "h.1.attn.c_attn.weight"));
    assert_true(frozen(m, "h.1.attn.c_proj.bias"));
    // An --unfreeze before the --freeze it would open is overridden by it.
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) trit_gpt_tensor(m, i)->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
    assert_int_equal(trit_train_freeze(m, "!h.0.attn.*,h.*.attn.*,wte.weight", NULL), TRIT_OK);
    assert_true(frozen(m, "h.0.attn.c_attn.weight"));
    assert_true(frozen(m, "wte.weight"));
    assert_false(frozen(m, "h.0.mlp.c_fc.weight"));
    char d[256];
    trit_train_freeze_describe("h.*,!h.0.*", d, sizeof d);
    assert_string_equal(d, "--freeze 'h.*' --unfreeze 'h.0.*'");
    trit_gpt_free(m);
}

static void test_bad_rules(void **state) {
    (void)state;
    trit_gpt *m = small_model();
    assert_int_equal(trit_train_freeze(m, "h.*.atn.*", NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "--freeze 'h.*.atn.*' matches no parameter of the model; its names are "
                                              "wte.weight, wpe.weight, h.0.ln_1.weight"));
    assert_non_null(strstr(trit_last_error(), "..., ln_f.bias"));
    assert_int_equal(trit_train_freeze(m, "h.*,!h.9.*", NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "--unfreeze 'h.9.*' matches no parameter"));
    assert_int_equal(trit_train_freeze(m, "*", NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "leaves no parameter to train"));
    assert_int_equal(trit_train_freeze(m, "!", NULL), TRIT_ERR_INVALID);
    trit_gpt_free(m);
    // The flags build the list in order; an empty item is refused.
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "freeze", "h.*.attn.*"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "unfreeze", "h.0.*,h.1.attn.c_proj.*"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "freeze", "wte.weight"), TRIT_OK);
    assert_string_equal(c.freeze, "h.*.attn.*,!h.0.*,!h.1.attn.c_proj.*,wte.weight");
    assert_int_equal(trit_train_config_set(&c, "freeze", "a,,b"), TRIT_ERR_INVALID);
    // Saved once (as "freeze"), read back the same.
    char *json = trit_train_config_to_json(&c);
    assert_non_null(json);
    assert_null(strstr(json, "unfreeze"));
    trit_train_config back;
    assert_int_equal(trit_train_config_from_json(&back, json), TRIT_OK);
    assert_string_equal(back.freeze, c.freeze);
    free(json);
}

// The trainer's memory report with and without freezing: gradients and optimizer state fall by
// the frozen parameters' bytes (4 and 8 per element: one f32 gradient, two f32 moments).
static void test_memory_report(void **state) {
    (void)state;
    trit_memory_report r[2];
    int64_t frozen_elems = 0;
    for (int k = 0; k < 2; k++) {
        trit_train_config c;
        ft_config(&c, at(k ? "mem-frozen" : "mem-plain"));
        if (k) assert_int_equal(trit_train_config_set(&c, "freeze", "h.*.attn.*"), TRIT_OK);
        trainer t;
        if (trit_trainer_setup(&t, &c) != TRIT_OK) fail_msg("setup: %s", trit_last_error());
        assert_int_equal(trit_memory_report_make(t.gg.graph, t.opt, 1, &r[k]), TRIT_OK);
        for (int i = 0; k && i < t.n_params; i++) {
            if (!(t.params[i]->flags & TRIT_FLAG_FROZEN)) continue;
            assert_null(t.params[i]->grad);
            frozen_elems += trit_tensor_numel(t.params[i]);
        }
        trit_trainer_free(&t, true);
    }
    print_message("gradients %zu -> %zu bytes, optimizer %zu -> %zu bytes (%lld frozen)\n", r[0].grads, r[1].grads,
                  r[0].optimizer, r[1].optimizer, (long long)frozen_elems);
    assert_true(frozen_elems > 0);
    assert_int_equal(r[0].params, r[1].params);
    assert_int_equal(r[0].optimizer - r[1].optimizer, 8 * (size_t)frozen_elems);
    assert_int_equal(r[0].grads - r[1].grads, 4 * (size_t)frozen_elems);
}

static void test_frozen_weights_stay(void **state) {
    (void)state;
    trit_train_config c;
    ft_config(&c, at("ft"));
    assert_int_equal(trit_train_config_set(&c, "freeze", "h.*.attn.*"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "unfreeze", "h.0.attn.c_proj.*"), TRIT_OK);
    c.steps = 4;
    if (trit_train_run(&c, NULL, NULL) != TRIT_OK) fail_msg("train: %s", trit_last_error());
    trit_gpt *before = trit_checkpoint_load_model(base, NULL), *after = trit_checkpoint_load_model(at("ft"), NULL);
    assert_non_null(before);
    assert_non_null(after);
    int same = 0, moved = 0;
    for (int i = 0; i < trit_gpt_num_tensors(before); i++) {
        const trit_tensor *p = trit_gpt_tensor(before, i), *q = trit_gpt_tensor(after, i);
        const bool equal = memcmp(p->data, q->data, trit_tensor_nbytes(p)) == 0;
        const bool want_frozen = fnmatch("h.*.attn.*", p->name, 0) == 0 && fnmatch("h.0.attn.c_proj.*", p->name, 0) != 0;
        if (equal != want_frozen) fail_msg("'%s' %s", p->name, equal ? "did not move" : "moved while frozen");
        same += equal, moved += !equal;
    }
    assert_int_equal(same, 6);  // h.1.attn's four, h.0.attn.c_attn's two
    assert_true(moved > 6);
    trit_gpt_free(before);
    trit_gpt_free(after);
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "freeze");
    snprintf(corpus, sizeof corpus, "%s", at("corpus.txt"));
    tf_write_corpus(corpus);
    snprintf(base, sizeof base, "%s", at("base"));
    trit_train_config c;
    tf_tiny_config(&c, corpus, base);
    c.layers = 2;
    if (trit_train_run(&c, NULL, NULL) != TRIT_OK) fail_msg("base: %s", trit_last_error());
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_in_order),
        cmocka_unit_test(test_bad_rules),
        cmocka_unit_test(test_memory_report),
        cmocka_unit_test(test_frozen_weights_stay),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
