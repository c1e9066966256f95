// How the OpenMP threads of a `trit` process wait between parallel regions.
//
// libgomp's default lets a thread that finished its share spin 300000 times before it sleeps.
// On an idle machine that keeps short parallel regions cheap; on a shared one, a spinning thread
// burns the time slice that the thread it waits for needs. Measured on a 2-core AMD EPYC (Zen 5)
// with one core held by another process, a baby training step took about 1000 ms instead of 40
// (README, "Threads and waiting"). OMP_WAIT_POLICY=passive (sleep at once) fixes that but costs
// 10-30% on an idle machine. trit's default is a short spin, 1000 iterations: idle steps as fast
// as the default, contended ones near passive.
//
// libgomp reads its environment once, in its own constructor, before main runs and before
// anything of ours could set it (the C library resets the environment after the executable's
// pre-initialisers), so the limit is put in the environment and the program re-executes itself
// once. A user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept, and a process under valgrind is
// not re-executed (valgrind does not follow an exec by default, so the tool would lose the
// program). LLVM's libomp (a clang build) is left at its own default.
#define _POSIX_C_SOURCE 200809L  // setenv
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Iterations of libgomp's wait loop; chosen by measurement (README, "Threads and waiting").
#define TRIT_GOMP_SPINCOUNT "1000"
// Marks a process that trit re-executed, so it is done once.
#define TRIT_WAIT_MARK "TRIT_WAIT_DEFAULT"

void trit_cli_default_wait_policy(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv(TRIT_WAIT_MARK)) return;
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return;
    if (setenv("GOMP_SPINCOUNT", TRIT_GOMP_SPINCOUNT, 1) || setenv(TRIT_WAIT_MARK, "1", 1)) return;
    execv("/proc/self/exe", argv);
    // No /proc, or no exec: go on with the runtime's own default (already initialised).
    unsetenv("GOMP_SPINCOUNT");
    unsetenv(TRIT_WAIT_MARK);
}

void trit_cli_describe_wait_policy(char *buf, size_t n) {
    const char *policy = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    if (getenv(TRIT_WAIT_MARK))
        snprintf(buf, n, "GOMP_SPINCOUNT=%s (trit's default; set OMP_WAIT_POLICY or GOMP_SPINCOUNT to override)", spin);
    else
        snprintf(buf, n, "OMP_WAIT_POLICY=%s GOMP_SPINCOUNT=%s (from the environment)", policy ? policy : "unset",
                 spin ? spin : "unset");
}
