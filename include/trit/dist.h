// Training on many processes over MPI (src/dist): the job `mpirun -np N trit train --dist ...`
// starts, collectives on small values the trainer agrees on, and data-parallel gradient exchange
// (DDP: the gradients of the flat storage all-reduced in buckets while backward runs).
// Without a launcher (no mpirun) the job is a world of one process and nothing is sent.
#ifndef TRIT_DIST_H
#define TRIT_DIST_H

#include "trit/graph.h"
#include "trit/ops.h"
#include "trit/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

// Whether this build has MPI (CMake found it).
bool trit_dist_has_mpi(void);

// Joins the job mpirun started (MPI_Init once per process, MPI_Finalize at exit), or makes a
// world of one when the process was not started by a launcher. An error in a build without MPI.
trit_status trit_dist_init(void);
int trit_dist_rank(void);  // 0 before init
int trit_dist_size(void);  // 1 before init

typedef enum trit_dist_op { TRIT_DIST_SUM = 0, TRIT_DIST_MAX, TRIT_DIST_MIN } trit_dist_op;
// v (n) reduced over every rank, the result on every rank.
trit_status trit_dist_allreduce_f64(double *v, int n, trit_dist_op op);
// Collective: s is this rank's outcome of a phase. TRIT_OK when every rank had TRIT_OK; else this
// rank's own status when it failed, or an error naming the first rank that failed.
trit_status trit_dist_agree(trit_status s, const char *phase);
// Collective: every rank must pass the same bytes (a hash of them is compared); an error naming
// the first rank whose bytes differ from rank 0's, on every rank.
trit_status trit_dist_check_same(const void *bytes, size_t n, const char *what);
// This rank started step `step` (0-based), or reached its exchange: sent to every other rank
// without waiting, so that a rank whose wait times out can name the ranks that stopped (a wait
// longer than TRIT_DIST_TIMEOUT seconds, 20 unless set, ends the job).
void trit_dist_heartbeat(int64_t step, bool at_exchange);
// Ends every process of the job (a rank that cannot go on while the others wait for it).
void trit_dist_abort(int code);

// Data-parallel gradient exchange over the gradient block of flat storage f, in buckets of
// about bucket_mb MB in f's order (the reverse of first use, so buckets fill from the end of
// backward's first layers; the tied embedding, whose gradient is final last, is in the last).
// Hooks on g's gradient-final events start each bucket's all-reduce (a sum) as soon as its last
// gradient is final in the last micro-batch of a step (trit_graph_set_micro), buckets always in
// order so every rank issues the same sequence, and test the ones in flight at every event.
typedef struct trit_ddp trit_ddp;
trit_ddp *trit_ddp_new(const trit_flat *f, trit_graph *g, double bucket_mb);
// Starts the buckets not started yet (with poison: their gradients set to NaN first, for a rank
// whose loss was not finite, so every rank sees a non-finite gradient and skips the step) and
// waits for all; *wait_ms gets the time spent waiting in this step.
trit_status trit_ddp_finish(trit_ddp *d, bool poison, double *wait_ms);
int trit_ddp_num_buckets(const trit_ddp *d);
// Gradient bytes each rank sends into the all-reduces of one step.
int64_t trit_ddp_bytes_per_step(const trit_ddp *d);
void trit_ddp_free(trit_ddp *d);


// ZeRO (Rajbhandari et al. 2020) over DDP's buckets: the gradient block of flat storage cut
// into one contiguous shard per rank; each rank keeps the optimizer state of, and updates, only
// its shard. Stage 1 all-reduces the buckets as DDP does; stage 2 reduce-scatters them, so a
// rank keeps only its shard's summed gradient (the rest of each bucket's pages are given back
// to the system once its exchange completes). After the update, the updated parameters are
// all-gathered bucket by bucket through the gradient block (free between the step and the next
// backward). Shards start on 64-byte boundaries; the last rank takes the remainder. Stage 3
// exchanges gradients as stage 2 and shards the parameters too (trit_zero3 below). Hybrid
// sharding: the shards are those of a group of `group` consecutive ranks, the groups replicas
// of each other.
void trit_zero_shard_range(int64_t count, int ranks, int rank, int64_t *lo, int64_t *hi);
// ZeRO-3's shards: the block of f that holds the trained parameters (*dt, their one dtype), frozen
// values of that dtype included, cut into `ranks` runs of 64-byte lines that balance each rank's
// bytes (a frozen element costs its size, a trained one 12 bytes more: its f32 gradient and
// AdamW's two f32 moments), param (ranks + 1) in elements of that block; and the gradient block's
// shards, grad (ranks + 1): the trained values inside each run, so a rank updates only values it
// keeps. With every value of the block trained (f32), both are trit_zero_shard_range's.
trit_status trit_zero3_shard_bounds(const trit_flat *f, int ranks, trit_dtype *dt, int64_t *param, int64_t *grad);
typedef struct trit_zero trit_zero;
// Stage 1, 2 or 3, over the gradient block of f and the buckets of d (made over the same f);
// group: ranks a shard group holds (the job's size, or for stage 3 a divisor of it); bounds
// (group + 1): the shards of the gradient block (rising, from 0 to its count), or NULL for
// trit_zero_shard_range's.
trit_zero *trit_zero_new(const trit_flat *f, trit_ddp *d, int stage, int group, const int64_t *bounds);
// Collective, after the exchange: with shard groups, each rank's summed shard all-reduced across
// the replicas, so it holds the sum over the job (nothing without groups).
trit_status trit_zero_sum_replicas(trit_zero *z, double *wait_ms);
// v (n) summed over the ranks of this rank's shard group, the result on each.
trit_status trit_zero_allreduce_group(trit_zero *z, double *v, int n);
// Zeroes the gradients for the next step (stage 2: the pages given back are zero already).
void trit_zero_zero_grads(trit_zero *z);
// Collective: every rank's updated shard of the parameters to every rank; *wait_ms gets the
// time spent waiting.
trit_status trit_zero_gather_params(trit_zero *z, double *wait_ms);
void trit_zero_free(trit_zero *z);

// ZeRO-3's parameters: each rank keeps only its shard of the parameter block resident (the block
// of the trained parameters' dtype, frozen values of that dtype included; its shards `bounds`
// (group size + 1) from trit_zero3_shard_bounds); the other pages are given back to the system.
// Tensors of other dtypes (a QLoRA base's codes) stay whole. Parameters come in groups (a
// transformer block's, `group` (trit_flat_count(f)) for each tensor of f in layout order, each
// group one run of the layout): on the graph's
// "parameters needed" event the group is all-gathered in place (MPI_Iallgatherv inside the shard
// group) and the next group of the phase's order started, so its exchange runs while this one
// computes; on "parameters done" its pages outside the shard go back, except the group the
// backward phase needs first, kept from forward's end. Hooks are added to g.
typedef struct trit_zero3 trit_zero3;
trit_zero3 *trit_zero3_new(trit_zero *z, const trit_flat *f, trit_graph *g, const int *group, const int64_t *bounds);
// Before trit_zero3_new (which needs the compiled graph, whose arena is then allocated): gives
// back this rank's pages of the block of dt outside its part, elements [lo, hi), so the arena is
// not added to the whole weights. Nothing may read those values until the hooks gather them.
void trit_zero3_give_back_early(const trit_flat *f, trit_dtype dt, int64_t lo, int64_t hi);
// Bytes outside the shard held at once at most over a micro-batch's forward and backward (the
// gathered groups; from the step list).
size_t trit_zero3_gathered_peak(const trit_zero3 *z3);
// Milliseconds the hooks waited for gathers since the last call (and resets the count).
double trit_zero3_take_wait(trit_zero3 *z3);
// Collective: the whole parameters on the first rank of each shard group (rank 0 evaluates and
// saves with them); the hooks do nothing until trit_zero3_release. *wait_ms gets the wait.
trit_status trit_zero3_gather_root(trit_zero3 *z3, double *wait_ms);
// Collective: a rank that does not run a pass its peers run (a loss that was not finite skips the
// rest of its micro-batches) issues the gathers and releases of its events all the same: those
// of the backward phase, or with forward_too those of a whole micro-batch.
trit_status trit_zero3_replay(trit_zero3 *z3, bool forward_too);
// Everything outside the shard given back; the hooks gather again.
void trit_zero3_release(trit_zero3 *z3);
void trit_zero3_free(trit_zero3 *z3);

// TernGrad's exchange (Wen et al., 2017) over the same buckets as DDP: each bucket's gradients
// of at least min_size values ternarized under scales shared as the max over the senders (a
// small MPI_Iallreduce(MAX) of the scales first), packed 2 bits a value, MPI_Iallgather-ed and
// decoded-summed in sender order, so every rank gets the same bits; smaller gradients travel as
// fp32 in the same packet. group > 1: the ranks in groups of `group` consecutive ones sum in
// fp32 first (MPI_Iallreduce inside the group), and the senders are the groups. A sender's draws
// are keyed by (seed, step, sender, tensor). Started from the gradient-final events of the
// step's last micro-batch like DDP's buckets, progressed at every event; without a graph (g NULL)
// every bucket starts in finish.
typedef struct trit_terngrad_dist_config {
    double bucket_mb;     // MB of fp32 gradients per bucket
    int64_t min_size;     // gradients with fewer values go as fp32
    int64_t scale_bucket; // values per scale (a multiple of 4), 0 = one scale per tensor
    double clip_sigma;    // clip at this many standard deviations first, 0 = off
    uint64_t seed;
    int group;            // ranks per fp32 group (divides the job's size); 1 = ternary between all
} trit_terngrad_dist_config;
typedef struct trit_terngrad_dist trit_terngrad_dist;
trit_terngrad_dist *trit_terngrad_dist_new(const trit_flat *f, trit_graph *g, const trit_terngrad_dist_config *c);
// The Philox stream of sender's draws for tensor (its index in f's layout) at step.
uint64_t trit_terngrad_dist_stream(int64_t step, int sender, int tensor);
// The step whose gradients the next backward passes produce (keys the draws).
void trit_terngrad_dist_begin(trit_terngrad_dist *x, int64_t step);
// Like trit_ddp_finish: the rest started (poison: NaN gradients), all waited for and decoded;
// a bucket with a non-finite gradient on any rank comes out NaN on every rank.
trit_status trit_terngrad_dist_finish(trit_terngrad_dist *x, bool poison, double *wait_ms);
int trit_terngrad_dist_num_buckets(const trit_terngrad_dist *x);
// Bytes this rank passes into the collectives of one step: the fp32 all-reduce inside its group
// (0 without groups), the scales' all-reduce, and its packet to the all-gather (codes and the
// fp32 gradients).
typedef struct trit_terngrad_dist_bytes { int64_t group_fp32, scales, codes, fp32, total; } trit_terngrad_dist_bytes;
trit_terngrad_dist_bytes trit_terngrad_dist_bytes_per_step(const trit_terngrad_dist *x);
void trit_terngrad_dist_free(trit_terngrad_dist *x);

// ---- pipeline parallelism (pipeline_mpi.c) ----------------------------------------------------
// Rank r of the job is stage r of P (the job's size). A step runs M micro-batches through the
// stages: GPipe every forward, then every backward; 1F1B P - 1 - stage forwards, then one forward
// and one backward in turn, then the backwards left. Activations (the residual stream, f32) go to
// the next stage after a forward and their gradients back after a backward, by non-blocking
// sends and receives.
typedef enum trit_pipe_schedule { TRIT_PIPE_GPIPE = 0, TRIT_PIPE_1F1B } trit_pipe_schedule;
// The micro-batches a stage holds in flight at once, each in a graph (a slot) of its own: M for
// GPipe, min(P - stage, M) for 1F1B.
int trit_pipe_slots(trit_pipe_schedule sched, int stage, int stages, int64_t micro);

typedef struct trit_pipe_slot {
    trit_graph *graph;    // compiled: with its loss on the last stage, else for a seeded output
    trit_tensor *input;   // (B, T, C) from the previous stage, its gradient asked for; NULL on the first
    trit_tensor *output;  // (B, T, C) to the next stage; NULL on the last
} trit_pipe_slot;

typedef struct trit_pipe trit_pipe;
// The pipe over this stage's slots (trit_pipe_slots of them). It adds a hook to each graph.
trit_pipe *trit_pipe_new(trit_pipe_schedule sched, int64_t micro, const trit_pipe_slot *slots, int n_slots);
// Runs micro-batch `micro` (0-based in the step) forward in graph `slot`, its input already filled
// (the caller fills tokens and targets and keeps the loss). Backward is the pipe's: the last
// stage's from its loss (the graph's grad_scale applies), the others' from the gradient received.
// TRIT_ERR_NUMERIC from the last stage (a loss that is not finite) skips that micro-batch's
// backward there and sends NaN gradients back, so every stage sees the step as not finite.
typedef trit_status (*trit_pipe_forward_fn)(void *ctx, int64_t micro, int slot);
typedef struct trit_pipe_times {
    double busy_ms;  // in forward and backward passes
    double wait_ms;  // waiting for messages
    double span_ms;  // the whole schedule, from its start to its last send
} trit_pipe_times;
trit_status trit_pipe_run(trit_pipe *p, trit_pipe_forward_fn fn, void *ctx, trit_pipe_times *times);
// The tied embedding: the first and the last stage each add the other's gradient (n values) to
// their own, so both hold the sum; other stages do nothing.
trit_status trit_pipe_sum_tied(trit_pipe *p, float *grad, int64_t n);
// Collective: each tensor's values sent from the stage owner[i] to every other.
trit_status trit_pipe_share(trit_pipe *p, trit_tensor *const *tensors, const int *owner, int n);
void trit_pipe_free(trit_pipe *p);

// ---- tensor parallelism (tensor_mpi.c) --------------------------------------------------------
// The job cut into tensor-parallel groups of `size` consecutive ranks (rank r in group r / size at
// position r % size) and data-parallel replicas: the ranks of one position in every group
// (MPI_Comm_split both ways). The group sums the graphs' tp_copy and tp_reduce values; the
// replicas sum gradients as DDP does.
typedef struct trit_tp trit_tp;
trit_tp *trit_tp_new(int size);
int trit_tp_rank(const trit_tp *tp);      // position in the group
int trit_tp_size(const trit_tp *tp);
int trit_tp_replica(const trit_tp *tp);   // the group's index: the data-parallel rank
int trit_tp_replicas(const trit_tp *tp);
// The group's sum for trit_tp_copy / trit_tp_reduce (an MPI_Iallreduce, waited for with the
// job's timeout); its waits and bytes are counted for trit_tp_take_stats.
trit_allreduce trit_tp_sum(trit_tp *tp);
// Time waited in the group's sums and bytes passed into them since the last call.
void trit_tp_take_stats(trit_tp *tp, double *wait_ms, int64_t *bytes);
// Collective over the group: v (n) summed (double), on every rank of the group.
trit_status trit_tp_group_sum_f64(trit_tp *tp, double *v, int n);
// Collective over the group: each rank's `bytes` bytes to the group's rank 0, in rank order
// into recv (size x bytes; only read on position 0).
trit_status trit_tp_gather(trit_tp *tp, const void *send, void *recv, size_t bytes);
// DDP's buckets (trit_ddp_new) summed over this rank's replicas instead of the job.
trit_ddp *trit_tp_ddp_new(trit_tp *tp, const trit_flat *f, trit_graph *g, double bucket_mb);
void trit_tp_free(trit_tp *tp);

#ifdef __cplusplus
}
#endif
#endif
