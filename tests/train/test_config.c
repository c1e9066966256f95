// The training config: defaults per task, flag parsing with full-string number checks, the
// uint16 vocabulary limit, the JSON round trip and the resume merge with its hint.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>

#include "train_fixture.h"

static void test_defaults(void **state) {
    (void)state;
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_equal(c.layers, TRIT_TRAIN_UNSET);
    assert_true(isnan(c.lr));
    assert_int_equal(trit_train_config_resolve(&c), TRIT_OK);
    assert_int_equal(trit_train_config_task(&c), TRIT_TASK_ADDITION);
    assert_int_equal(c.seq, 3 * 3 + 2);
    assert_string_equal(c.out, "run-addition");
    assert_true(c.min_lr == c.lr * 0.1);

    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "data", "x.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "steps", "50"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&c), TRIT_OK);
    assert_int_equal(trit_train_config_task(&c), TRIT_TASK_TEXT);
    assert_int_equal(c.layers, 4);
    assert_int_equal(c.seq, 64);
    assert_int_equal(c.batch, 12);
    assert_int_equal(c.total_batch_tokens, 12 * 64);
    assert_int_equal(trit_train_config_accum(&c), 1);
    assert_int_equal(c.warmup, 50);  // default warmup never exceeds --steps
    assert_true(c.beta1 == 0.9 && c.beta2 == 0.95 && c.eps == 1e-8 && c.weight_decay == 0.1 && c.clip == 1.0);
    assert_int_equal(c.optimizer, TRIT_TRAIN_ADAMW);
}

static void expect_set_error(const char *name, const char *value, const char *msg) {
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_not_equal(trit_train_config_set(&c, name, value), TRIT_OK);
    if (!strstr(trit_last_error(), msg)) fail_msg("--%s %s: '%s' lacks '%s'", name, value, trit_last_error(), msg);
}

static void test_flag_parsing(void **state) {
    (void)state;
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "lr", "6e-4"), TRIT_OK);
    assert_true(c.lr == 6e-4);
    assert_int_equal(trit_train_config_set(&c, "tokenizer", "bpe"), TRIT_OK);
    assert_int_equal(c.tokenizer, TRIT_TOKENIZER_BPE);
    assert_int_equal(trit_train_config_set(&c, "norm", "rms"), TRIT_OK);
    assert_int_equal(c.norm, TRIT_NORM_RMS);
    assert_int_equal(trit_train_config_set(&c, "bias", "off"), TRIT_OK);
    assert_int_equal(c.bias, 0);
    expect_set_error("steps", "abc", "--steps expects an integer, got 'abc'");
    expect_set_error("steps", "12x", "got '12x'");
    expect_set_error("steps", "", "empty");
    expect_set_error("lr", "fast", "--lr expects a number");
    expect_set_error("lr", "inf", "finite");
    expect_set_error("layers", "99999999999999999999999", "out of the 64-bit");
    expect_set_error("tokenizer", "word", "char|bpe");
    expect_set_error("bias", "maybe", "1 or 0");
    assert_int_equal(trit_train_config_set(&c, "optimizer", "adamw8bit"), TRIT_OK);
    assert_int_equal(c.optimizer, TRIT_TRAIN_ADAMW8BIT);
    expect_set_error("optimizer", "sgd", "--optimizer expects adamw|adamw8bit|galore|qgalore, got 'sgd'");
    assert_int_equal(trit_train_config_set(&c, "optimizer", "qgalore"), TRIT_OK);
    assert_int_equal(c.optimizer, TRIT_TRAIN_QGALORE);
    assert_int_equal(trit_train_config_set(&c, "galore-rank", "64"), TRIT_OK);
    assert_int_equal(c.galore_rank, 64);
    expect_set_error("galore-rank", "0", "--galore-rank must be in [1, 65536]");
    expect_set_error("galore-scale", "0", "--galore-scale must be in (0, 1e+06]");
    expect_set_error("no-such-flag", "1", "unknown");
}

static void expect_resolve_error(const char *name, const char *value, const char *msg) {
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "data", "x.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, name, value), TRIT_OK);
    assert_int_not_equal(trit_train_config_resolve(&c), TRIT_OK);
    if (!strstr(trit_last_error(), msg)) fail_msg("--%s %s: '%s' lacks '%s'", name, value, trit_last_error(), msg);
}

// A value outside a flag's own range is refused when it is given; rules between flags when
// the config is resolved.
static void test_ranges(void **state) {
    (void)state;
    expect_set_error("vocab", "70000", "--vocab must be in [257, 65536], got 70000 (");
    expect_set_error("vocab", "70000", "uint16");
    expect_set_error("beta2", "1", "--beta2 must be in [0, 1), got 1");
    expect_set_error("steps", "0", "--steps must be in [1, 1000000000], got 0");
    expect_set_error("dropout", "1", "--dropout must be in [0, 1), got 1");
    expect_set_error("min-lr", "-0.5", "--min-lr must be in [0, 10], got -0.5");
    expect_resolve_error("dim", "130", "multiple of --heads");
    expect_resolve_error("total-batch-tokens", "1000", "multiple of batch * seq");
    expect_resolve_error("min-lr", "1", "--min-lr must be in [0, --lr 0.001], got 1");
    expect_resolve_error("warmup", "3000", "--warmup must be in [0, --steps 2000], got 3000");
}

static void test_json_round_trip(void **state) {
    (void)state;
    trit_train_config c, d;
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "data", "some \"quoted\" path.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "seed", "9007199254740993"), TRIT_OK);  // 2^53 + 1
    assert_int_equal(trit_train_config_set(&c, "lr", "0.1"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&c), TRIT_OK);
    char *json = trit_train_config_to_json(&c);
    assert_non_null(json);
    assert_int_equal(trit_train_config_from_json(&d, json), TRIT_OK);
    free(json);
    assert_memory_equal(&c, &d, sizeof c);
    assert_int_not_equal(trit_train_config_from_json(&d, "[1, 2]"), TRIT_OK);
    assert_int_not_equal(trit_train_config_from_json(&d, "{\"layers\": 4}"), TRIT_OK);  // ints are strings
}

// The heap config of bindings starts as unset as trit_train_config_init's, and takes flags.
static void test_heap_config(void **state) {
    (void)state;
    trit_train_config *h = trit_train_config_new(), c;
    assert_non_null(h);
    trit_train_config_init(&c);
    assert_memory_equal(h, &c, sizeof c);
    assert_int_equal(trit_train_config_set(h, "layers", "3"), TRIT_OK);
    assert_int_equal(trit_train_config_set(h, "tensorboard", "tb/dir"), TRIT_OK);
    assert_int_equal(h->layers, 3);
    assert_string_equal(h->tensorboard, "tb/dir");
    assert_int_not_equal(trit_train_config_set(h, "layers", "x"), TRIT_OK);
    assert_int_equal(h->layers, 3);
    trit_train_config_free(h);
    trit_train_config_free(NULL);
}

static void test_resume_merge(void **state) {
    (void)state;
    trit_train_config saved, cli, out;
    trit_train_config_init(&saved);
    assert_int_equal(trit_train_config_set(&saved, "data", "x.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&saved), TRIT_OK);

    trit_train_config_init(&cli);
    assert_int_equal(trit_train_config_set(&cli, "resume", "runs/a"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&cli, "threads", "1"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&cli, "layers", "4"), TRIT_OK);  // same value: fine
    assert_int_equal(trit_train_config_merge(&out, &saved, &cli), TRIT_OK);
    assert_int_equal(out.threads, 1);
    assert_string_equal(out.out, "runs/a");

    assert_int_equal(trit_train_config_set(&cli, "layers", "6"), TRIT_OK);
    assert_int_not_equal(trit_train_config_merge(&out, &saved, &cli), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "trained with --layers 4, but --layers 6 was given"));
    assert_non_null(strstr(trit_last_error(), "pass --layers 4"));

    // The optimizer's state is in the checkpoint: a resume keeps the saved one.
    trit_train_config_init(&cli);
    assert_int_equal(trit_train_config_set(&cli, "resume", "runs/a"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&cli, "optimizer", "adamw8bit"), TRIT_OK);
    assert_int_not_equal(trit_train_config_merge(&out, &saved, &cli), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "trained with --optimizer adamw, but --optimizer adamw8bit was given"));
    // A checkpoint from before the flag existed has no field: it was AdamW, the default.
    saved.optimizer = TRIT_TRAIN_UNSET;
    assert_int_not_equal(trit_train_config_merge(&out, &saved, &cli), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "trained with --optimizer adamw, but"));
    assert_int_equal(trit_train_config_set(&cli, "optimizer", "adamw"), TRIT_OK);
    assert_int_equal(trit_train_config_merge(&out, &saved, &cli), TRIT_OK);
}

// A flag whose default differs for the addition task says so in its help, with the task's
// value after "task" (as "--layers ... (4; task 2)"); --seq gives its rule instead of a number.
static void test_help_names_task_defaults(void **state) {
    (void)state;
    trit_train_config text, task;
    trit_train_config_init(&text);
    trit_train_config_init(&task);
    assert_int_equal(trit_train_config_set(&text, "data", "x.txt"), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&text), TRIT_OK);
    assert_int_equal(trit_train_config_resolve(&task), TRIT_OK);
    char *jt = trit_train_config_to_json(&text), *ja = trit_train_config_to_json(&task);
    cJSON *a = cJSON_Parse(jt), *b = cJSON_Parse(ja);
    assert_non_null(a);
    assert_non_null(b);
    int differ = 0;
    for (const trit_train_flag *f = trit_train_flags(); f->name; f++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, f->name), *y = cJSON_GetObjectItemCaseSensitive(b, f->name);
        if (!y || !cJSON_IsString(y) || (x && cJSON_IsString(x) && strcmp(x->valuestring, y->valuestring) == 0)) continue;
        if (strcmp(f->name, "data") == 0 || strcmp(f->name, "total-batch-tokens") == 0) continue;  // B*T in both
        differ++;
        const char *at = strstr(f->help, "task");
        if (!at) fail_msg("--%s: the task's default %s is not in its help '%s'", f->name, y->valuestring, f->help);
        if (strcmp(f->name, "seq") == 0) continue;
        char value[64];
        char *end = NULL;
        double v = strtod(y->valuestring, &end);
        snprintf(value, sizeof value, "%s", y->valuestring);
        if (end && *end == 0) snprintf(value, sizeof value, "%g", v);
        if (!strstr(at, value)) fail_msg("--%s: help '%s' does not give the task's default %s", f->name, f->help, value);
    }
    assert_true(differ >= 8);  // layers, seq, batch, steps, beta2, threads, out, ...
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(jt);
    free(ja);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),        cmocka_unit_test(test_flag_parsing),
        cmocka_unit_test(test_ranges),          cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_resume_merge),    cmocka_unit_test(test_help_names_task_defaults),
        cmocka_unit_test(test_heap_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
