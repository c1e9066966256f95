// The job over MPI: joining it, the small collectives the trainer agrees on (losses, flags,
// outcomes of setup), and the refusal of ranks that were started differently. Errors are
// returned (MPI_ERRORS_RETURN on the job's communicator), never fatal inside MPI.
#define _POSIX_C_SOURCE 200809L
#include "dist/dist_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static struct {
    bool joined;     // MPI_Init was called by trit_dist_init
    bool world;      // init done (MPI or a world of one)
    MPI_Comm comm;   // a duplicate of MPI_COMM_WORLD with MPI_ERRORS_RETURN
    int rank, size;
} job = {.size = 1};

bool trit_dist_has_mpi(void) { return true; }
int trit_dist_rank(void) { return job.rank; }
int trit_dist_size(void) { return job.size; }
MPI_Comm trit_dist_comm(void) { return job.comm; }

trit_status trit_dist_mpi_error(int code, const char *what) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, msg, &len) != MPI_SUCCESS) snprintf(msg, sizeof msg, "MPI error %d", code);
    return trit_error(TRIT_ERR_IO, "rank %d of %d: %s failed: %s", job.rank, job.size, what, msg);
}

static void finalize(void) {
    int done = 0;
    trit_dist_heartbeat_stop();
    if (job.joined && MPI_Finalized(&done) == MPI_SUCCESS && !done) MPI_Finalize();
}

// Open MPI, PMIx and Hydra launchers each leave their variables in a rank's environment.
static bool launched(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", NULL};
    for (int i = 0; vars[i]; i++)
        if (getenv(vars[i])) return true;
    return false;
}

trit_status trit_dist_init(void) {
    if (job.world) return TRIT_OK;
    if (!launched()) {  // one process, as if mpirun -np 1 had started it
        job.world = true;
        return TRIT_OK;
    }
    int inited = 0, provided = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        // Kernels' OpenMP threads never call MPI; the hooks run on the main thread.
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return trit_error(TRIT_ERR_IO, "MPI_Init failed: is this process started by mpirun of the MPI trit "
                              "was built with?");
        job.joined = true;
        atexit(finalize);
    }
    int rc = MPI_Comm_dup(MPI_COMM_WORLD, &job.comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(job.comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_rank(job.comm, &job.rank);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_size(job.comm, &job.size);
    if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "joining the job");
    job.world = true;
    return TRIT_OK;
}

static MPI_Op op_of(trit_dist_op op) {
    return op == TRIT_DIST_MAX ? MPI_MAX : op == TRIT_DIST_MIN ? MPI_MIN : MPI_SUM;
}

trit_status trit_dist_allreduce_f64(double *v, int n, trit_dist_op op) {
    if (job.size == 1) return TRIT_OK;
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op_of(op), job.comm, &req);
    if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "MPI_Iallreduce");
    return trit_dist_wait(&req, 1, "an all-reduce of the step's numbers", NULL);
}

trit_status trit_dist_agree(trit_status s, const char *phase) {
    if (job.size == 1) return s;
    int first = s == TRIT_OK ? INT32_MAX : job.rank;
    char why[768];
    snprintf(why, sizeof why, "%s", s == TRIT_OK ? "" : trit_last_error());
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, &first, 1, MPI_INT, MPI_MIN, job.comm, &req);
    trit_status w = rc == MPI_SUCCESS ? trit_dist_wait(&req, 1, phase, NULL) : trit_dist_mpi_error(rc, phase);
    if (w != TRIT_OK) return w;
    if (s != TRIT_OK) return trit_error(s, "%s", why);
    if (first == INT32_MAX) return TRIT_OK;
    return trit_error(TRIT_ERR_STATE, "rank %d failed in %s (its message is above), so rank %d stops too", first,
                      phase, job.rank);
}

// FNV-1a, 64 bits: enough to tell two configurations or two binaries apart.
static uint64_t hash_bytes(const void *bytes, size_t n) {
    const unsigned char *p = bytes;
    uint64_t h = UINT64_C(0xcbf29ce484222325);
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * UINT64_C(0x100000001b3);
    return h;
}

trit_status trit_dist_check_same(const void *bytes, size_t n, const char *what) {
    if (job.size == 1) return TRIT_OK;
    const uint64_t mine = hash_bytes(bytes, n);
    uint64_t *all = malloc(sizeof *all * (size_t)job.size);
    if (!all) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    MPI_Request req;
    int rc = MPI_Iallgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, job.comm, &req);
    trit_status w = rc == MPI_SUCCESS ? trit_dist_wait(&req, 1, what, NULL) : trit_dist_mpi_error(rc, what);
    if (w != TRIT_OK) {
        free(all);
        return w;
    }
    int differs = -1;
    for (int r = 1; r < job.size && differs < 0; r++)
        if (all[r] != all[0]) differs = r;
    free(all);
    if (differs < 0) return TRIT_OK;
    return trit_error(TRIT_ERR_INVALID, "rank %d was started with another %s than rank 0: start every rank with "
                      "the same trit binary and flags", differs, what);
}

// Waiting polls the requests, so that a rank that stopped answering is noticed: after
// TRIT_DIST_TIMEOUT seconds (20 unless set) with no completion the job is ended, naming what
// was awaited. Open MPI has no progress thread, and MPI_Wait spins as well: the poll sleeps
// 50 us between tests once the first millisecond has passed.
static double timeout_s(void) {
    const char *v = getenv("TRIT_DIST_TIMEOUT");
    double t = v ? strtod(v, NULL) : 0;
    return t > 0 ? t : 20.0;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

trit_status trit_dist_wait(MPI_Request *reqs, int n, const char *what, double *waited_ms) {
    const double start = now_s(), limit = timeout_s();
    double t0 = start, last = start;
    int done = 0;
    for (long polls = 0;; polls++) {
        int rc = MPI_Testall(n, reqs, &done, MPI_STATUSES_IGNORE);
        if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, what);
        if (done) break;
        // A gap between two polls means this process itself was stopped (SIGSTOP, a debugger):
        // that time says nothing about the others, so it is not counted against them.
        const double now = now_s();
        if (now - last > 1.0) {
            t0 += now - last;
            trit_dist_heartbeat_forgive(now - last);
        }
        last = now;
        const double t = now - t0;
        if (t > limit) {
            fprintf(stderr, "trit: rank %d of %d: no answer from the other ranks for %.0f s while waiting for %s: %s; "
                    "ending the job\n", job.rank, job.size, t, what, trit_dist_heartbeat_report());
            fflush(stderr);
            _exit(3);  // mpirun ends the job when a rank exits before MPI_Finalize
        }
        if (t > 1e-3) nanosleep(&(struct timespec){0, 50000}, NULL);
        if (polls % 256 == 0) trit_dist_heartbeat_tick();
    }
    if (waited_ms) *waited_ms += (now_s() - start) * 1e3;
    return TRIT_OK;
}

void trit_dist_abort(int code) {
    if (job.size > 1) MPI_Abort(job.comm, code);
    exit(code);
}
