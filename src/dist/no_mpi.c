// src/dist in a build without MPI: a world of one process, and `--dist` refused with the reason.
#include "trit/dist.h"

#include <stdlib.h>

static trit_status no_mpi(void) {
    return trit_error(TRIT_ERR_UNSUPPORTED, "this build of trit has no MPI, so --dist cannot run: install Open MPI "
                      "(libopenmpi-dev and openmpi-bin, tools/setup.sh) and build again, or leave --dist out to "
                      "train in one process");
}

bool trit_dist_has_mpi(void) { return false; }
trit_status trit_dist_init(void) { return no_mpi(); }
int trit_dist_rank(void) { return 0; }
int trit_dist_size(void) { return 1; }

trit_status trit_dist_allreduce_f64(double *v, int n, trit_dist_op op) {
    (void)v, (void)n, (void)op;
    return TRIT_OK;
}

trit_status trit_dist_agree(trit_status s, const char *phase) {
    (void)phase;
    return s;
}

trit_status trit_dist_check_same(const void *bytes, size_t n, const char *what) {
    (void)bytes, (void)n, (void)what;
    return TRIT_OK;
}

void trit_dist_heartbeat(int64_t step, bool at_exchange) { (void)step, (void)at_exchange; }
void trit_dist_abort(int code) { exit(code); }

trit_ddp *trit_ddp_new(const trit_flat *f, trit_graph *g, double bucket_mb) {
    (void)f, (void)g, (void)bucket_mb;
    no_mpi();
    return NULL;
}

trit_status trit_ddp_finish(trit_ddp *d, bool poison, double *wait_ms) {
    (void)d, (void)poison;
    *wait_ms = 0;
    return no_mpi();
}

int trit_ddp_num_buckets(const trit_ddp *d) { (void)d; return 0; }
int64_t trit_ddp_bytes_per_step(const trit_ddp *d) { (void)d; return 0; }
void trit_ddp_free(trit_ddp *d) { (void)d; }

trit_zero *trit_zero_new(const trit_flat *f, trit_ddp *d, int stage, int group, const int64_t *bounds) {
    (void)f, (void)d, (void)stage, (void)group, (void)bounds;
    no_mpi();
    return NULL;
}

void trit_zero_zero_grads(trit_zero *z) { (void)z; }

trit_status trit_zero_gather_params(trit_zero *z, double *wait_ms) {
    (void)z;
    *wait_ms = 0;
    return no_mpi();
}

void trit_zero_free(trit_zero *z) { (void)z; }

trit_status trit_zero_sum_replicas(trit_zero *z, double *wait_ms) {
    (void)z;
    *wait_ms = 0;
    return no_mpi();
}

trit_status trit_zero_allreduce_group(trit_zero *z, double *v, int n) {
    (void)z, (void)v, (void)n;
    return no_mpi();
}

trit_zero3 *trit_zero3_new(trit_zero *z, const trit_flat *f, trit_graph *g, const int *group, const int64_t *bounds) {
    (void)z, (void)f, (void)g, (void)group, (void)bounds;
    no_mpi();
    return NULL;
}

void trit_zero3_give_back_early(const trit_flat *f, trit_dtype dt, int64_t lo, int64_t hi) {
    (void)f, (void)dt, (void)lo, (void)hi;
}

size_t trit_zero3_gathered_peak(const trit_zero3 *z3) { (void)z3; return 0; }
double trit_zero3_take_wait(trit_zero3 *z3) { (void)z3; return 0; }

trit_status trit_zero3_gather_root(trit_zero3 *z3, double *wait_ms) {
    (void)z3;
    *wait_ms = 0;
    return no_mpi();
}

trit_status trit_zero3_replay(trit_zero3 *z3, bool forward_too) {
    (void)z3, (void)forward_too;
    return no_mpi();
}

void trit_zero3_release(trit_zero3 *z3) { (void)z3; }
void trit_zero3_free(trit_zero3 *z3) { (void)z3; }

trit_terngrad_dist *trit_terngrad_dist_new(const trit_flat *f, trit_graph *g, const trit_terngrad_dist_config *c) {
    (void)f, (void)g, (void)c;
    no_mpi();
    return NULL;
}

void trit_terngrad_dist_begin(trit_terngrad_dist *x, int64_t step) { (void)x, (void)step; }

trit_status trit_terngrad_dist_finish(trit_terngrad_dist *x, bool poison, double *wait_ms) {
    (void)x, (void)poison;
    *wait_ms = 0;
    return no_mpi();
}

int trit_terngrad_dist_num_buckets(const trit_terngrad_dist *x) { (void)x; return 0; }
trit_terngrad_dist_bytes trit_terngrad_dist_bytes_per_step(const trit_terngrad_dist *x) {
    (void)x;
    return (trit_terngrad_dist_bytes){0};
}
void trit_terngrad_dist_free(trit_terngrad_dist *x) { (void)x; }

int trit_pipe_slots(trit_pipe_schedule sched, int stage, int stages, int64_t micro) {
    (void)sched, (void)stage, (void)stages, (void)micro;
    return 1;
}

trit_pipe *trit_pipe_new(trit_pipe_schedule sched, int64_t micro, const trit_pipe_slot *slots, int n_slots) {
    (void)sched, (void)micro, (void)slots, (void)n_slots;
    no_mpi();
    return NULL;
}

trit_status trit_pipe_run(trit_pipe *p, trit_pipe_forward_fn fn, void *ctx, trit_pipe_times *times) {
    (void)p, (void)fn, (void)ctx, (void)times;
    return no_mpi();
}

trit_status trit_pipe_sum_tied(trit_pipe *p, float *grad, int64_t n) {
    (void)p, (void)grad, (void)n;
    return no_mpi();
}

trit_status trit_pipe_share(trit_pipe *p, trit_tensor *const *tensors, const int *owner, int n) {
    (void)p, (void)tensors, (void)owner, (void)n;
    return no_mpi();
}

void trit_pipe_free(trit_pipe *p) { (void)p; }

trit_tp *trit_tp_new(int size) {
    (void)size;
    no_mpi();
    return NULL;
}

int trit_tp_rank(const trit_tp *tp) { (void)tp; return 0; }
int trit_tp_size(const trit_tp *tp) { (void)tp; return 1; }
int trit_tp_replica(const trit_tp *tp) { (void)tp; return 0; }
int trit_tp_replicas(const trit_tp *tp) { (void)tp; return 1; }

static trit_status no_sum(void *ctx, void *data, trit_dtype dtype, int64_t n) {
    (void)ctx, (void)data, (void)dtype, (void)n;
    return no_mpi();
}

trit_allreduce trit_tp_sum(trit_tp *tp) { return (trit_allreduce){.fn = no_sum, .ctx = tp}; }

void trit_tp_take_stats(trit_tp *tp, double *wait_ms, int64_t *bytes) {
    (void)tp;
    *wait_ms = 0;
    *bytes = 0;
}

trit_status trit_tp_group_sum_f64(trit_tp *tp, double *v, int n) {
    (void)tp, (void)v, (void)n;
    return no_mpi();
}

trit_status trit_tp_gather(trit_tp *tp, const void *send, void *recv, size_t bytes) {
    (void)tp, (void)send, (void)recv, (void)bytes;
    return no_mpi();
}

trit_ddp *trit_tp_ddp_new(trit_tp *tp, const trit_flat *f, trit_graph *g, double bucket_mb) {
    (void)tp, (void)f, (void)g, (void)bucket_mb;
    no_mpi();
    return NULL;
}

void trit_tp_free(trit_tp *tp) { (void)tp; }
