// Leveled logging to stderr; TRIT_LOG=debug|info|warn|error|off sets the starting level.
#define _POSIX_C_SOURCE 200809L  // flockfile
#include "trit/base.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// -1 until the first reader takes TRIT_LOG. Kernels log from OpenMP worker threads, so the lazy
// read is a compare-and-swap: the first thread's value wins, and a level set meanwhile by
// trit_log_set_level is never overwritten by a reader that looked before it.
static atomic_int level = -1;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

static trit_log_level level_from_env(bool *unknown) {
    const char *s = getenv("TRIT_LOG");
    *unknown = false;
    if (!s) return TRIT_LOG_INFO;
    for (int i = 0; i <= TRIT_LOG_OFF; i++)
        if (strcmp(s, level_names[i]) == 0) return (trit_log_level)i;
    *unknown = true;
    return TRIT_LOG_INFO;
}

void trit_log_set_level(trit_log_level l) { atomic_store(&level, (int)l); }

trit_log_level trit_log_get_level(void) {
    int l = atomic_load_explicit(&level, memory_order_relaxed);
    if (l >= 0) return (trit_log_level)l;
    bool unknown;
    int expected = -1;
    const int from_env = (int)level_from_env(&unknown);
    if (atomic_compare_exchange_strong(&level, &expected, from_env)) {
        if (unknown)  // only the thread whose value was taken says so, once
            fprintf(stderr, "trit warn: TRIT_LOG=%s is not one of debug|info|warn|error|off; logging at info\n",
                    getenv("TRIT_LOG"));
        return (trit_log_level)from_env;
    }
    return (trit_log_level)expected;  // another thread got there first
}

void trit_log(trit_log_level l, const char *fmt, ...) {
    if ((int)l < TRIT_LOG_DEBUG || l >= TRIT_LOG_OFF || l < trit_log_get_level()) return;
    // stderr is unbuffered, so each call below is a write of its own: the lock keeps a line whole
    // when worker threads log at the same time.
    flockfile(stderr);
    fprintf(stderr, "trit %s: ", level_names[l]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    funlockfile(stderr);
}
