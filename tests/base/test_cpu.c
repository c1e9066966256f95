// CPU feature detection agrees with itself and with /proc/cpuinfo; levels can be lowered but
// never raised beyond what the machine runs.
#define _POSIX_C_SOURCE 200809L // fork, setenv
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trit/base.h"

// TRIT_CPU is read once per process, so each setting is tried in a fresh child. Runs before any
// other test touches the level, so the children start uninitialized.
static trit_cpu_isa level_under_env(const char *value) {
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TRIT_CPU", value, 1);
        trit_log_set_level(TRIT_LOG_OFF);
        _exit((int)trit_cpu_level());
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return (trit_cpu_isa)-1;
    return (trit_cpu_isa)WEXITSTATUS(status);
}

static void test_env_level(void **state) {
    (void)state;
    trit_cpu_isa det = trit_cpu_detected_level();
    assert_int_equal(level_under_env("ref"), TRIT_CPU_REF);
    assert_int_equal(level_under_env("nonsense"), det);      // unknown: ignored
    assert_int_equal(level_under_env("amx"), det);           // refused (no AMX kernel): a warning
    if (det >= TRIT_CPU_AVX2) assert_int_equal(level_under_env("avx2"), TRIT_CPU_AVX2);
    if (det >= TRIT_CPU_AVX512) assert_int_equal(level_under_env("avx512"), TRIT_CPU_AVX512);
    if (det < TRIT_CPU_AVX512) assert_int_equal(level_under_env("avx512"), det);
}

// trit_cpu_env_check in a child with TRIT_CPU=value: its status, times 2, plus 1 when its message
// holds `want`.
static int env_check_under(const char *value, const char *want) {
    pid_t pid = fork();
    if (pid == 0) {
        setenv("TRIT_CPU", value, 1);
        const trit_status s = trit_cpu_env_check();
        _exit(2 * (int)s + (strstr(trit_last_error(), want) != NULL));
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

// No AMX kernel exists, so TRIT_CPU=amx is refused with a message that says what to use, as is a
// value that is not a level; the levels themselves pass.
static void test_env_check(void **state) {
    (void)state;
    assert_int_equal(env_check_under("amx", "TRIT_CPU=amx is refused: trit has no AMX kernel yet"),
                     2 * TRIT_ERR_UNSUPPORTED + 1);
    assert_int_equal(env_check_under("amx", "set TRIT_CPU=avx512"), 2 * TRIT_ERR_UNSUPPORTED + 1);
    assert_int_equal(env_check_under("AVX2", "TRIT_CPU=AVX2 is not one of ref|avx2|avx512"), 2 * TRIT_ERR_INVALID + 1);
    assert_int_equal(env_check_under("ref", ""), 1);
    assert_int_equal(env_check_under("avx2", ""), 1);
    assert_int_equal(env_check_under("avx512", ""), 1);  // above this machine's level: clamped, not refused
    assert_int_equal(env_check_under("", ""), 1);
}

static void test_level_names(void **state) {
    (void)state;
    assert_string_equal(trit_cpu_level_name(TRIT_CPU_REF), "ref");
    assert_string_equal(trit_cpu_level_name(TRIT_CPU_AVX2), "avx2");
    assert_string_equal(trit_cpu_level_name(TRIT_CPU_AVX512), "avx512");
    assert_string_equal(trit_cpu_level_name(TRIT_CPU_AMX), "amx");
    assert_string_equal(trit_cpu_level_name((trit_cpu_isa)7), "unknown");
}

// The detected level follows from the feature flags by the documented rules.
static void test_detected_consistent(void **state) {
    (void)state;
    const trit_cpu_features *f = trit_cpu_features_get();
    assert_ptr_equal(f, trit_cpu_features_get());
    trit_cpu_isa det = trit_cpu_detected_level();
    bool avx2 = f->avx2 && f->fma && f->os_avx;
    bool avx512 = avx2 && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->os_avx512;
    bool amx = avx512 && f->amx_tile && f->amx_bf16 && f->os_amx;
    if (det >= TRIT_CPU_AVX2) assert_true(avx2);
    if (det >= TRIT_CPU_AVX512) assert_true(avx512);
    if (!avx2) assert_int_equal(det, TRIT_CPU_REF);
    if (avx2 && !avx512) assert_int_equal(det, TRIT_CPU_AVX2);
    if (avx512) assert_int_equal(det, TRIT_CPU_AVX512);  // with or without AMX: no AMX kernel yet
    if (amx) assert_true(trit_cpu_detected_features() & TRIT_FEAT_AMX_BF16);
    // OS support never claims more than the register state it builds on.
    if (f->os_avx512) assert_true(f->os_avx);
    assert_true(trit_cpu_level() <= det);
    printf("detected %s, dispatching at %s\n", trit_cpu_level_name(det),
           trit_cpu_level_name(trit_cpu_level()));
}

// On Linux x86, /proc/cpuinfo names the same CPU features (OS-masked flags aside).
static void test_matches_proc_cpuinfo(void **state) {
    (void)state;
#if defined(__x86_64__) && defined(__linux__)
    FILE *fp = fopen("/proc/cpuinfo", "r");
    if (!fp) {
        print_message("no /proc/cpuinfo to compare with: skipped\n");
        skip();
    }
    static char line[1 << 16];
    bool found = false;
    while (fgets(line, sizeof line, fp))
        if (strncmp(line, "flags", 5) == 0) {
            found = true;
            break;
        }
    fclose(fp);
    if (!found) {
        print_message("/proc/cpuinfo has no flags line to compare with: skipped\n");
        skip();
    }
    const trit_cpu_features *f = trit_cpu_features_get();
    struct { const char *name; bool have; } flags[] = {
        {" avx2 ", f->avx2},           {" fma ", f->fma},
        {" f16c ", f->f16c},           {" avx512f ", f->avx512f},
        {" avx512bw ", f->avx512bw},   {" avx512vl ", f->avx512vl},
        {" avx512dq ", f->avx512dq},   {" avx512_bf16 ", f->avx512_bf16},
        {" avx512_vnni ", f->avx512_vnni}, {" amx_tile ", f->amx_tile},
        {" amx_bf16 ", f->amx_bf16},   {" amx_int8 ", f->amx_int8},
    };
    // Make every flag space-delimited on both sides.
    size_t len = strlen(line);
    if (len && line[len - 1] == '\n') line[len - 1] = ' ';
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        bool listed = strstr(line, flags[i].name) != NULL;
        // The kernel hides flags whose state it does not enable, so cpuinfo may list less.
        if (listed && !flags[i].have) fail_msg("cpuinfo lists%sbut cpuid did not", flags[i].name);
    }
#else
    print_message("not Linux on x86-64: no /proc/cpuinfo flags to compare with; skipped\n");
    skip();
#endif
}

static void test_set_level(void **state) {
    (void)state;
    trit_cpu_isa det = trit_cpu_detected_level();
    trit_cpu_isa before = trit_cpu_level();
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_REF), TRIT_OK);
    assert_int_equal(trit_cpu_level(), TRIT_CPU_REF);
    for (int l = TRIT_CPU_REF; l <= TRIT_CPU_AMX; l++) {
        trit_clear_error();
        trit_status s = trit_cpu_set_level((trit_cpu_isa)l);
        if (l <= (int)det) {
            assert_int_equal(s, TRIT_OK);
            assert_int_equal(trit_cpu_level(), l);
        } else {
            assert_int_equal(s, TRIT_ERR_UNSUPPORTED);
            assert_true(strstr(trit_last_error(), trit_cpu_level_name((trit_cpu_isa)l)) != NULL);
            assert_int_equal(trit_cpu_level(), det); // unchanged by the failed call
            assert_int_equal(trit_cpu_set_level(det), TRIT_OK);
        }
    }
    // amx is refused on every machine, saying why, until an AMX kernel exists.
    trit_clear_error();
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_AMX), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "no AMX kernel yet"));
    assert_true(det <= TRIT_CPU_AVX512);
    assert_int_equal(trit_cpu_set_level((trit_cpu_isa)9), TRIT_ERR_INVALID);
    assert_int_equal(trit_cpu_set_level((trit_cpu_isa)-1), TRIT_ERR_INVALID);
    assert_int_equal(trit_cpu_set_level(before), TRIT_OK);
}

static void test_amx_request_idempotent(void **state) {
    (void)state;
    const trit_cpu_features *f = trit_cpu_features_get();
    trit_status first = trit_cpu_amx_request();
    char msg[256];
    snprintf(msg, sizeof msg, "%s", trit_last_error());
    for (int i = 0; i < 3; i++) {
        trit_clear_error();
        assert_int_equal(trit_cpu_amx_request(), first);
        if (first != TRIT_OK) assert_string_equal(trit_last_error(), msg);
    }
    if (!(f->amx_tile && f->amx_bf16 && f->os_amx)) assert_int_equal(first, TRIT_ERR_UNSUPPORTED);
    if (first == TRIT_OK) assert_true(f->amx_tile && f->os_amx);
    if (first == TRIT_OK && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq &&
        f->os_avx512 && f->avx2 && f->fma && f->amx_bf16)
        assert_int_equal(trit_cpu_detected_level(), TRIT_CPU_AVX512);  // AMX is no level of its own yet
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_env_level),
        cmocka_unit_test(test_env_check),
        cmocka_unit_test(test_level_names),
        cmocka_unit_test(test_detected_consistent),
        cmocka_unit_test(test_matches_proc_cpuinfo),
        cmocka_unit_test(test_set_level),
        cmocka_unit_test(test_amx_request_idempotent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
