// How the OpenMP threads of a `trit` process wait between parallel regions.
//
// libgomp's default lets a thread that finished its share spin for 300000 iterations (a large
// fraction of a millisecond) before it sleeps. On an idle machine that keeps short parallel
// regions cheap; on a shared one, a spinning thread burns the time slice that the thread it
// waits for needs, and a training step slows several-fold. OMP_WAIT_POLICY=passive (sleep at
// once) fixes that at a cost on idle machines. trit's default is a spin limit in between: long
// enough to cover the gap between two of its parallel regions, short enough to give the core
// up soon when it is contended.
//
// libgomp reads its environment once, in its own constructor, before main runs and before
// anything of ours could set it (the C library resets the environment after the executable's
// pre-initialisers), so the limit is put in the environment and the program re-executes itself
// once. A user's own OMP_WAIT_POLICY, GOMP_SPINCOUNT or (LLVM's runtime) KMP_BLOCKTIME is kept,
// and a process under valgrind is not re-executed (valgrind does not follow an exec by default,
// so the tool would lose the program).
#define _POSIX_C_SOURCE 200809L  // setenv
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// Iterations of libgomp's wait loop, and LLVM libomp's block time; chosen by measurement
// (README, "Threads and waiting").
#define TRIT_GOMP_SPINCOUNT "20000"
#define TRIT_KMP_BLOCKTIME "20us"
// Marks a process that trit re-executed, so it is done once.
#define TRIT_WAIT_MARK "TRIT_WAIT_DEFAULT"

void trit_cli_default_wait_policy(char **argv) {
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT") || getenv("KMP_BLOCKTIME") || getenv(TRIT_WAIT_MARK))
        return;
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) return;
    if (setenv("GOMP_SPINCOUNT", TRIT_GOMP_SPINCOUNT, 1) || setenv("KMP_BLOCKTIME", TRIT_KMP_BLOCKTIME, 1) ||
        setenv(TRIT_WAIT_MARK, "1", 1))
        return;
    execv("/proc/self/exe", argv);
    // No /proc, or no exec: go on with the runtime's own default (already initialised).
    unsetenv("GOMP_SPINCOUNT");
    unsetenv("KMP_BLOCKTIME");
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
