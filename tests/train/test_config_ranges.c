// Every `trit train` flag has an allowed range: -1 and INT64_MIN are values like any other
// (refused, never "unset"), NaN and Inf are refused, sizes whose products overflow are refused
// with the flags named, and a saved config goes through the same checks.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"

// Flags whose values are text (paths, name globs), not numbers.
static bool is_path_flag(const char *name) {
    return strcmp(name, "data") == 0 || strcmp(name, "out") == 0 || strcmp(name, "resume") == 0 ||
           strcmp(name, "init-from") == 0 || strcmp(name, "lora-init") == 0 || strcmp(name, "freeze") == 0 ||
           strcmp(name, "unfreeze") == 0 || strcmp(name, "tensorboard") == 0;
}

// The value is refused and the message names the flag (and `want`, when given).
static void expect_refused(const char *name, const char *value, const char *want) {
    trit_train_config c;
    trit_train_config_init(&c);
    const trit_train_config before = c;
    if (trit_train_config_set(&c, name, value) == TRIT_OK) fail_msg("--%s %s was accepted", name, value);
    char flag[80];
    snprintf(flag, sizeof flag, "--%s ", name);
    if (!strstr(trit_last_error(), flag)) fail_msg("--%s %s: '%s' does not name the flag", name, value, trit_last_error());
    if (want && !strstr(trit_last_error(), want))
        fail_msg("--%s %s: '%s' lacks '%s'", name, value, trit_last_error(), want);
    assert_memory_equal(&c, &before, sizeof c);  // a refused value leaves the field unset
}

static void test_minus_one_is_refused(void **state) {
    (void)state;
    expect_refused("layers", "-1", "--layers must be in [1, 1024], got -1");
    expect_refused("seed", "-1", "--seed must be in [0, 9223372036854775807], got -1");
    expect_refused("warmup", "-1", "--warmup must be in [0, 1000000000], got -1");
    // Every numeric, enum and bool flag: no flag takes -1 or the unset value itself.
    int n = 0;
    for (const trit_train_flag *f = trit_train_flags(); f->name; f++) {
        if (is_path_flag(f->name)) continue;
        expect_refused(f->name, "-1", NULL);
        expect_refused(f->name, "-9223372036854775808", NULL);
        n++;
    }
    assert_true(n >= 40);
}

// Every number flag has an upper bound (the seed's is INT64_MAX itself, the loss scale's 2^100).
static void test_upper_bounds(void **state) {
    (void)state;
    for (const trit_train_flag *f = trit_train_flags(); f->name; f++) {
        if (is_path_flag(f->name) || strcmp(f->name, "seed") == 0 || strcmp(f->name, "loss-scale") == 0) continue;
        expect_refused(f->name, "9223372036854775807", NULL);
    }
    expect_refused("batch", "9223372036854775807", "--batch must be in [1, 1048576], got 9223372036854775807");
    expect_refused("batch", "1048577", "--batch must be in [1, 1048576], got 1048577");
    expect_refused("seq", "1048577", "--seq must be in [1, 1048576]");
    expect_refused("heads", "1025", "--heads must be in [1, 1024]");
    expect_refused("dim", "65537", "--dim must be in [1, 65536]");
    expect_refused("steps", "1000000001", "--steps must be in [1, 1000000000]");
    expect_refused("lr", "11", "--lr must be in (0, 10], got 11");
    expect_refused("lr", "0", "--lr must be in (0, 10], got 0");
    expect_refused("loss-scale", "1e31", "--loss-scale must be in [0, 1.26765e+30], got 1e+31");
    expect_refused("dropout", "1.0000000000000002", "got 1.0000000000000002");  // shown exactly
    trit_train_config c;
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "seed", "9223372036854775807"), TRIT_OK);
    assert_int_equal(c.seed, INT64_MAX);
    assert_int_equal(trit_train_config_set(&c, "batch", "1048576"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "lr", "10"), TRIT_OK);
}

static void test_non_finite_numbers(void **state) {
    (void)state;
    static const char *names[] = {"lr", "min-lr", "beta1", "beta2", "eps", "weight-decay", "clip",
                                  "dropout", "val-fraction", "loss-scale"};
    static const char *bad[] = {"nan", "-nan", "inf", "-inf", "1e999"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        for (size_t j = 0; j < sizeof bad / sizeof bad[0]; j++) expect_refused(names[i], bad[j], "finite number");
    // Set in the struct directly (the library API), NaN is unset and Inf is refused by resolve.
    trit_train_config c;
    trit_train_config_init(&c);
    c.clip = INFINITY;
    assert_int_equal(trit_train_config_resolve(&c), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "--clip must be in [0, 1e+06], got inf"));
}

// Bools and enums set in the struct directly are checked too (and never index a name table
// out of bounds).
static void test_struct_enums_checked(void **state) {
    (void)state;
    trit_train_config c;
    trit_train_config_init(&c);
    c.bias = 2;
    assert_int_equal(trit_train_config_resolve(&c), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "--bias must be in [0, 1], got 2"));
    trit_train_config_init(&c);
    c.norm = 5;
    assert_int_equal(trit_train_config_resolve(&c), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "--norm expects layer|rms, got value 5"));
    trit_train_config_init(&c);
    c.tokenizer = 0;  // "none" is the unset name, not a value
    assert_int_equal(trit_train_config_resolve(&c), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "--tokenizer expects char|bpe, got value 0"));
}

static void expect_resolve(trit_train_config *c, trit_status want, const char *msg) {
    trit_status s = trit_train_config_resolve(c);
    if (s != want || (msg && !strstr(trit_last_error(), msg)))
        fail_msg("resolve gave %d '%s', wanted %d '%s'", (int)s, trit_last_error(), (int)want, msg ? msg : "");
}

// Fields set in the struct are checked before the defaults are computed from them, and the
// products of sizes never overflow into a division by zero.
static void test_size_products(void **state) {
    (void)state;
    trit_train_config c;
    trit_train_config_init(&c);
    c.batch = INT64_C(1) << 62;
    c.seq = 4;  // B * T would wrap to 0 in int64_t
    expect_resolve(&c, TRIT_ERR_RANGE, "--batch must be in [1, 1048576], got 4611686018427387904");
    assert_int_equal(trit_train_config_accum(&c), 1);  // no SIGFPE on an unchecked config either
    c.seq = INT64_C(1) << 62;
    assert_int_equal(trit_train_config_accum(&c), 1);

    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "batch", "1048576"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "seq", "1048576"), TRIT_OK);
    expect_resolve(&c, TRIT_ERR_RANGE, "--batch 1048576 x --seq 1048576 x 4 --dim 128");

    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "batch", "4096"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "seq", "4096"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "dim", "65536"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "heads", "1"), TRIT_OK);
    expect_resolve(&c, TRIT_ERR_RANGE, "lower --batch, --seq or --dim");

    // Just inside: 2^40 activations in the widest layer.
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "batch", "1024"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "seq", "4096"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "dim", "65536"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "heads", "1"), TRIT_OK);
    expect_resolve(&c, TRIT_OK, NULL);
    assert_int_equal(c.total_batch_tokens, 1024 * 4096);
    assert_int_equal(trit_train_config_accum(&c), 1);
}

static void expect_json_refused(const char *json, const char *msg) {
    trit_train_config c;
    if (trit_train_config_from_json(&c, json) == TRIT_OK) fail_msg("%s was accepted", json);
    if (!strstr(trit_last_error(), msg)) fail_msg("%s: '%s' lacks '%s'", json, trit_last_error(), msg);
}

// A saved config (train_state.bin) is read through the same checks as the flags.
static void test_saved_config_checked(void **state) {
    (void)state;
    expect_json_refused("{\"layers\": \"-1\"}", "--layers must be in [1, 1024], got -1");
    expect_json_refused("{\"layers\": \"-1\"}", "saved training config");
    expect_json_refused("{\"seed\": \"-9223372036854775808\"}", "--seed must be in");
    expect_json_refused("{\"bias\": \"7\"}", "bias expects 1 or 0");
    expect_json_refused("{\"lr\": -3}", "--lr must be in (0, 10], got -3");
    expect_json_refused("{\"lr\": 1e300}", "--lr must be in (0, 10]");
    expect_json_refused("{\"lr\": \"nan\"}", "lr expects a finite number");
    // A subnormal JSON number could be saved but not read back as a flag (fuzz finding).
    expect_json_refused("{\"eps\": 8e-310}", "--eps must be in [1e-30, 1]");
    expect_json_refused("{\"weight-decay\": 8e-310}", "below the smallest normal double");
    expect_json_refused("{\"weight-decay\": \"8e-310\"}", "below the smallest normal double");
    expect_json_refused("{\"tokenizer\": \"none\"}", "tokenizer expects char|bpe");
    expect_json_refused("{\"data\": \"\"}", "data needs a non-empty value");
    trit_train_config c;
    assert_int_equal(trit_train_config_from_json(&c, "{\"layers\": \"6\", \"lr\": 0.5, \"future-flag\": 1}"), TRIT_OK);
    assert_int_equal(c.layers, 6);
    assert_true(c.lr == 0.5);
    assert_int_equal(c.seed, TRIT_TRAIN_UNSET);
}

// --help shows each number's range.
static void test_help_shows_ranges(void **state) {
    (void)state;
    int found = 0;
    for (const trit_train_flag *f = trit_train_flags(); f->name; f++) {
        if (strcmp(f->name, "layers") == 0) found += strstr(f->help, "[1, 1024]") != NULL;
        if (strcmp(f->name, "dropout") == 0) found += strstr(f->help, "[0, 1)") != NULL;
        if (strcmp(f->name, "val-fraction") == 0) found += strstr(f->help, "(0, 1)") != NULL;
    }
    assert_int_equal(found, 3);
}

// The range helpers the other verbs use.
static void test_arg_helpers(void **state) {
    (void)state;
    int64_t i = 7;
    double d = 7;
    assert_int_equal(trit_arg_int_in("--n", "-1", 0, 10, &i), TRIT_ERR_RANGE);
    assert_int_equal(i, 7);  // untouched on failure
    assert_string_equal(trit_last_error(), "--n must be in [0, 10], got -1");
    assert_int_equal(trit_arg_int_in("--n", "10", 0, 10, &i), TRIT_OK);
    assert_int_equal(i, 10);
    assert_int_equal(trit_arg_double_in("--p", "0", 0, 1, TRIT_OPEN_LO, &d), TRIT_ERR_RANGE);
    assert_string_equal(trit_last_error(), "--p must be in (0, 1], got 0");
    assert_true(d == 7);
    assert_int_equal(trit_arg_double_in("--p", "1", 0, 1, TRIT_OPEN_LO, &d), TRIT_OK);
    assert_true(d == 1);
    assert_int_equal(trit_check_double("--p", NAN, -INFINITY, INFINITY, 0), TRIT_ERR_RANGE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_minus_one_is_refused), cmocka_unit_test(test_upper_bounds),
        cmocka_unit_test(test_non_finite_numbers),   cmocka_unit_test(test_size_products),
        cmocka_unit_test(test_saved_config_checked), cmocka_unit_test(test_help_shows_ranges),
        cmocka_unit_test(test_arg_helpers),          cmocka_unit_test(test_struct_enums_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
