// The logger called from several OpenMP threads at once: the lazily read TRIT_LOG level is taken
// once and seen alike by every thread, a level set meanwhile is not lost, and each line stays
// whole. Every case runs in a fresh child (the level is read once per process), whose stderr goes
// to a file the parent then reads. The parent never starts OpenMP itself, so a child's thread
// team is its own.
#define _POSIX_C_SOURCE 200809L  // fork, setenv, mkstemp
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trit/base.h"

enum { THREADS = 4, LINES = 400 };

typedef int (*child_fn)(void);

// Runs fn in a child with TRIT_LOG=env (unset when NULL) and stderr in a file; returns the
// child's exit code, and the file's text in *err (malloc'ed).
static int run_child(const char *env, child_fn fn, char **err) {
    char path[] = "/tmp/trit_test_log_XXXXXX";
    const int fd = mkstemp(path);
    assert_true(fd >= 0);
    fflush(NULL);
    const pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (env)
            setenv("TRIT_LOG", env, 1);
        else
            unsetenv("TRIT_LOG");
        dup2(fd, 2);
        _exit(fn());
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    FILE *fp = fdopen(fd, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    const long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    *err = malloc((size_t)n + 1);
    assert_non_null(*err);
    assert_int_equal(fread(*err, 1, (size_t)n, fp), (size_t)n);
    (*err)[n] = 0;
    fclose(fp);
    unlink(path);
    return WEXITSTATUS(status);
}

// Every thread reads the level first thing (so the lazy read races), then logs LINES warnings
// and as many infos; exits 1 if a thread saw a level other than warn.
static int log_from_threads(void) {
    int wrong = 0;
#pragma omp parallel num_threads(THREADS) reduction(+ : wrong)
    {
        const int t = omp_get_thread_num();
        wrong += trit_log_get_level() != TRIT_LOG_WARN;
        for (int i = 0; i < LINES; i++) {
            trit_log(TRIT_LOG_WARN, "thread %d line %d of the test", t, i);
            trit_log(TRIT_LOG_INFO, "filtered %d %d", t, i);
        }
    }
    return wrong != 0;
}

static void test_threads_share_the_level_and_lines_stay_whole(void **state) {
    (void)state;
    char *err = NULL;
    assert_int_equal(run_child("warn", log_from_threads, &err), 0);
    static bool seen[THREADS][LINES];
    memset(seen, 0, sizeof seen);
    int lines = 0;
    for (char *line = strtok(err, "\n"); line; line = strtok(NULL, "\n"), lines++) {
        int t = -1, i = -1, end = 0;
        // A line cut by another thread's output does not parse to its end.
        if (sscanf(line, "trit warn: thread %d line %d of the test%n", &t, &i, &end) != 2 || line[end] != 0 || t < 0 ||
            t >= THREADS || i < 0 || i >= LINES)
            fail_msg("line %d is not one whole warning: '%s'", lines, line);
        assert_false(seen[t][i]);
        seen[t][i] = true;
    }
    assert_int_equal(lines, THREADS * LINES);
    free(err);
}

static int read_level_from_threads(void) {
    int sum = 0;
#pragma omp parallel num_threads(THREADS) reduction(+ : sum)
    sum += (int)trit_log_get_level();
    return sum == THREADS * (int)TRIT_LOG_INFO ? 0 : 1;
}

// An unknown TRIT_LOG value is named once, however many threads read the level first.
static void test_unknown_value_warned_once(void **state) {
    (void)state;
    char *err = NULL;
    assert_int_equal(run_child("loud", read_level_from_threads, &err), 0);
    const char *first = strstr(err, "TRIT_LOG=loud is not one of debug|info|warn|error|off");
    assert_non_null(first);
    assert_null(strstr(first + 1, "TRIT_LOG=loud"));
    free(err);
    assert_int_equal(run_child(NULL, read_level_from_threads, &err), 0);  // unset: info, quietly
    assert_string_equal(err, "");
    free(err);
}

// One thread sets the level while the others make the lazy read: the set level stands after.
static int set_while_reading(void) {
#pragma omp parallel num_threads(THREADS)
    {
        if (omp_get_thread_num() == 0)
            trit_log_set_level(TRIT_LOG_ERROR);
        else
            (void)trit_log_get_level();
    }
    return trit_log_get_level() == TRIT_LOG_ERROR ? 0 : 1;
}

static void test_set_level_not_lost_to_a_lazy_read(void **state) {
    (void)state;
    for (int round = 0; round < 20; round++) {  // the lazy read happens once per process
        char *err = NULL;
        assert_int_equal(run_child("debug", set_while_reading, &err), 0);
        free(err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threads_share_the_level_and_lines_stay_whole),
        cmocka_unit_test(test_unknown_value_warned_once),
        cmocka_unit_test(test_set_level_not_lost_to_a_lazy_read),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
