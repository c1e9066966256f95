// Shared inside src/dist (the MPI files): the job's communicator, waiting with a timeout, and
// the heartbeats that name a rank which stopped answering.
#ifndef TRIT_DIST_INTERNAL_H
#define TRIT_DIST_INTERNAL_H

#include <mpi.h>

#include "trit/dist.h"

MPI_Comm trit_dist_comm(void);
// An error "rank r of N: what failed: MPI's message".
trit_status trit_dist_mpi_error(int code, const char *what);
// Completes n requests, polling; a wait longer than TRIT_DIST_TIMEOUT seconds (20) ends the job
// with a message naming what was awaited and the ranks whose heartbeats are behind. The time
// waited is added to *waited_ms (may be NULL).
trit_status trit_dist_wait(MPI_Request *reqs, int n, const char *what, double *waited_ms);
// "rank 1 last reported step 4, this rank is at step 6" for the ranks behind this one, or
// "every rank reported step s" (a static buffer).
const char *trit_dist_heartbeat_report(void);
// While waiting: reads the heartbeats that came, and repeats this rank's once a second.
void trit_dist_heartbeat_tick(void);
// This process was stopped for `seconds`: the other ranks' silence in that time is not theirs.
void trit_dist_heartbeat_forgive(double seconds);
// Cancels the heartbeat receives before MPI_Finalize.
void trit_dist_heartbeat_stop(void);

// A bucket's collective other than DDP's all-reduce (zero_mpi.c: reduce-scatter), and what
// follows its completion (called once per bucket and step, from the hooks' tests or finish).
typedef int (*trit_ddp_start_fn)(void *ctx, int bucket, float *grads, int64_t begin, int64_t end, MPI_Request *req);
typedef void (*trit_ddp_done_fn)(void *ctx, int bucket, int64_t begin, int64_t end);
void trit_ddp_set_collective(trit_ddp *d, trit_ddp_start_fn start, trit_ddp_done_fn done, void *ctx);
// The communicator a DDP's buckets are summed over (the job's unless set; tensor_mpi.c: the replicas).
void trit_ddp_set_comm(trit_ddp *d, MPI_Comm comm);
// Element range of bucket k of the gradient block.
void trit_ddp_bucket_range(const trit_ddp *d, int k, int64_t *begin, int64_t *end);

// The shard group of a trit_zero (zero_mpi.c) for ZeRO-3's gathers (zero3_mpi.c): its
// communicator and this rank's place.
MPI_Comm trit_zero_comm(const trit_zero *z);
int trit_zero_group_rank(const trit_zero *z);
int trit_zero_group_size(const trit_zero *z);

#endif
