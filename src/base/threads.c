// Thread count for OpenMP kernels. Results never depend on it (kernels reduce in a fixed block
// order), so it is a speed knob only. The default is TRIT_THREADS if set, else what OpenMP chose
// at start-up (OMP_NUM_THREADS, or all cores).
#include "trit/base.h"

#include <omp.h>
#include <pthread.h>
#include <stdlib.h>

static pthread_once_t threads_once = PTHREAD_ONCE_INIT;
static int default_threads = 1, thread_slots = 1;

static int threads_from_env(void) {
    const char *s = getenv("TRIT_THREADS");
    if (!s || !*s) return 0;
    char *end = NULL;
    long n = strtol(s, &end, 10);
    if (*end != '\0' || n <= 0 || n > 4096) {
        trit_log(TRIT_LOG_WARN, "TRIT_THREADS=%s is not a positive thread count; ignored", s);
        return 0;
    }
    return (int)n;
}

static void init_threads(void) {
    int env = threads_from_env();
    int omp_default = omp_get_max_threads();
    if (omp_default < 1) omp_default = omp_get_num_procs();
    default_threads = env > 0 ? env : omp_default;
    if (env > 0) omp_set_num_threads(env);
    // Fixed now for the life of the process: omp_get_num_procs() follows the calling thread's
    // affinity, which may widen later (taskset, MPI binding), and per-thread scratch planned
    // from one value must not be indexed by threads counted from another.
    int procs = omp_get_num_procs();
    thread_slots = procs > default_threads ? procs : default_threads;
    if (omp_default > thread_slots) thread_slots = omp_default;
    if (thread_slots > 4096) thread_slots = 4096;
}

int trit_thread_slots(void) {
    pthread_once(&threads_once, init_threads);
    return thread_slots;
}

// OpenMP keeps the thread count per calling thread: call this from the thread that runs kernels.
void trit_threads_set(int n) {
    pthread_once(&threads_once, init_threads);
    omp_set_num_threads(n > 0 ? n : default_threads);
}

int trit_threads_get(void) {
    pthread_once(&threads_once, init_threads);
    return omp_get_max_threads();
}
