// ZeRO stages 1 and 2 on DDP's buckets. The gradient block is cut into one contiguous shard per
// rank (in elements, each start on a 64-byte line; stage 3 gives the cuts, those of
// trit_zero3_shard_bounds). Stage 1 leaves DDP's all-reduce as it is;
// stage 2 makes each bucket a reduce-scatter (MPI_IN_PLACE: this rank's summed part arrives at
// the bucket's start and is moved to its place in the shard), and once a bucket's exchange is
// done the pages of the bucket outside the shard go back to the system (madvise DONTNEED: they
// read as zeros when backward touches them again). After the optimizer has updated the shard,
// the parameters are all-gathered bucket by bucket, the gradient block serving as the staging
// buffer (its values are spent by then): each rank packs its shard's values there in the
// parameters' own element size, one in-place MPI_Iallgatherv per bucket, then every rank copies
// the other ranks' parts into its parameters. Stage 3 exchanges gradients as stage 2 and leaves
// the parameters to zero3_mpi.c. With shard groups (hybrid sharding) the shards, the
// reduce-scatter and the gathers are those of the group's communicator, and each group's summed
// shard is then all-reduced across the replicas (the ranks at the same place in the other groups).
#define _DEFAULT_SOURCE
#include "dist/dist_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

typedef struct piece {
    char *data;       // the parameter's values
    int64_t off, n;   // its gradient's element range [off, off + n) in the block
} piece;

struct trit_zero {
    int stage, rank, size;   // rank and size within the shard group
    int replicas;            // shard groups in the job
    MPI_Comm comm;           // the shard group's ranks (the job's when replicas == 1)
    MPI_Comm across;         // the ranks at this place in every group (MPI_COMM_NULL when replicas == 1)
    trit_ddp *ddp;
    float *grads;        // (count) the gradient block
    int64_t count;
    int64_t *bounds;     // (size + 1) shard r is [bounds[r], bounds[r + 1])
    int nb;              // buckets
    int *counts, *displs;  // (nb * size) each rank's part of each bucket, elements from its start
    bool *released;      // (nb) stage 2: the bucket's pages outside the shard were given back
    int np;
    piece *p;            // trainable tensors in block order
    size_t elsize;       // bytes of a trainable parameter's element (one dtype for all)
    MPI_Datatype elem;
    MPI_Request *reqs;   // (nb)
};

static int64_t overlap(int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t lo = a > c ? a : c, hi = b < d ? b : d;
    return hi > lo ? hi - lo : 0;
}

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Gives back the whole pages of grads[a, b): they read as zeros afterwards (or are zeroed here
// where the system declines).
static void release(float *grads, int64_t a, int64_t b) {
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t pg = ps > 0 ? (uintptr_t)ps : 4096;
    const uintptr_t lo = ((uintptr_t)(grads + a) + pg - 1) / pg * pg, hi = (uintptr_t)(grads + b) / pg * pg;
    if (hi > lo && madvise((void *)lo, hi - lo, MADV_DONTNEED) != 0) memset((void *)lo, 0, hi - lo);
}

// Stage 2: bucket k's pages outside this rank's shard go back.
static void release_outside(trit_zero *z, int k, int64_t begin, int64_t end) {
    const int64_t lo = z->bounds[z->rank], hi = z->bounds[z->rank + 1];
    if (begin < min64(end, lo)) release(z->grads, begin, min64(end, lo));
    if (max64(begin, hi) < end) release(z->grads, max64(begin, hi), end);
    z->released[k] = true;
}

// Stage 2's bucket collective: a reduce-scatter whose parts are the ranks' shards within it.
static int start_reduce_scatter(void *ctx, int k, float *grads, int64_t begin, int64_t end, MPI_Request *req) {
    trit_zero *z = ctx;
    (void)end;
    return MPI_Ireduce_scatter(MPI_IN_PLACE, grads + begin, z->counts + (size_t)k * (size_t)z->size, MPI_FLOAT,
                               MPI_SUM, z->comm, req);
}

static void bucket_done(void *ctx, int k, int64_t begin, int64_t end) {
    trit_zero *z = ctx;
    const int64_t lo = z->bounds[z->rank], hi = z->bounds[z->rank + 1];
    const int64_t mine = overlap(begin, end, lo, hi);
    if (mine > 0 && lo > begin) memmove(z->grads + lo, z->grads + begin, (size_t)mine * sizeof(float));
    release_outside(z, k, begin, end);
}

static trit_status plan(trit_zero *z, const trit_flat *f, const int64_t *bounds) {
    const int n = trit_flat_count(f);
    z->p = calloc((size_t)n + 1, sizeof *z->p);
    z->bounds = calloc((size_t)z->size + 1, sizeof *z->bounds);
    z->counts = calloc((size_t)z->nb * (size_t)z->size + 1, sizeof *z->counts);
    z->displs = calloc((size_t)z->nb * (size_t)z->size + 1, sizeof *z->displs);
    z->released = calloc((size_t)z->nb + 1, sizeof *z->released);
    z->reqs = calloc((size_t)z->nb + 1, sizeof *z->reqs);
    if (!z->p || !z->bounds || !z->counts || !z->displs || !z->released || !z->reqs)
        return trit_error(TRIT_ERR_NOMEM, "zero: out of memory");
    for (int r = 0; r < z->size; r++) trit_zero_shard_range(z->count, z->size, r, &z->bounds[r], &z->bounds[r + 1]);
    for (int r = 0; bounds && r <= z->size; r++) {
        if (bounds[r] < (r ? bounds[r - 1] : 0) || (r == 0 && bounds[r] != 0) || (r == z->size && bounds[r] != z->count))
            return trit_error(TRIT_ERR_INVALID, "zero: shard bound %d is %lld: the bounds rise from 0 to the %lld "
                              "gradient values", r, (long long)bounds[r], (long long)z->count);
        z->bounds[r] = bounds[r];
    }
    for (int i = 0; i < n; i++) {
        const trit_tensor *t = trit_flat_tensor(f, i);
        const int64_t off = trit_flat_grad_offset(f, i);
        if (off < 0) continue;
        const size_t es = trit_dtype_size(t->dtype);
        if (z->elsize && es != z->elsize)
            return trit_error(TRIT_ERR_UNSUPPORTED, "zero: the trained parameters mix element sizes (%zu and %zu bytes, "
                              "'%s'): --dist zero gathers one size; train with fp32 master weights", z->elsize, es,
                              t->name);
        if (trit_dtype_block(t->dtype) != 1 || es > sizeof(float))
            return trit_error(TRIT_ERR_UNSUPPORTED, "zero: parameter '%s' is %s: --dist zero shards f32, bf16 or f16 "
                              "parameters", t->name, trit_dtype_name(t->dtype));
        z->elsize = es;
        z->p[z->np++] = (piece){.data = trit_tensor_ptr(t), .off = off, .n = trit_tensor_numel(t)};
    }
    for (int k = 0; k < z->nb; k++) {
        int64_t begin, end;
        trit_ddp_bucket_range(z->ddp, k, &begin, &end);
        for (int r = 0; r < z->size; r++) {
            const size_t at = (size_t)k * (size_t)z->size + (size_t)r;
            z->counts[at] = (int)overlap(begin, end, z->bounds[r], z->bounds[r + 1]);
            z->displs[at] = (int)(max64(begin, z->bounds[r]) - begin);
            if (z->counts[at] == 0) z->displs[at] = 0;
        }
    }
    if (!z->elsize) return trit_error(TRIT_ERR_STATE, "zero: the model has no trained parameters");
    int rc = MPI_Type_contiguous((int)z->elsize, MPI_BYTE, &z->elem);
    if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&z->elem);
    return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "MPI_Type_commit");
}

// The shard group's communicator and the replicas' (MPI_Comm_split by group, and by place in it).
static trit_status split(trit_zero *z, int group) {
    const int world = trit_dist_rank();
    z->replicas = trit_dist_size() / group;
    z->rank = world % group, z->size = group;
    if (z->replicas == 1) {
        z->comm = trit_dist_comm();
        return TRIT_OK;
    }
    int rc = MPI_Comm_split(trit_dist_comm(), world / group, world, &z->comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(trit_dist_comm(), world % group, world, &z->across);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(z->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(z->across, MPI_ERRORS_RETURN);
    return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "MPI_Comm_split into shard groups");
}

trit_zero *trit_zero_new(const trit_flat *f, trit_ddp *d, int stage, int group, const int64_t *bounds) {
    const int n = trit_dist_size();
    if (!f || !d || stage < 1 || stage > 3 || group < 1 || n % group != 0 || (group < n && stage != 3)) {
        trit_error(TRIT_ERR_INVALID, "trit_zero_new: flat storage, its DDP buckets, stage 1, 2 or 3, and a shard group "
                   "size dividing the job's %d ranks (smaller than the job for stage 3 only), not %d", n, group);
        return NULL;
    }
    trit_zero *z = calloc(1, sizeof *z);
    if (!z) {
        trit_error(TRIT_ERR_NOMEM, "zero: out of memory");
        return NULL;
    }
    z->stage = stage, z->ddp = d, z->elem = MPI_DATATYPE_NULL;
    z->comm = z->across = MPI_COMM_NULL;
    z->grads = trit_flat_grads(f, &z->count);
    z->nb = trit_ddp_num_buckets(d);
    trit_status s = split(z, group);
    if (s == TRIT_OK) s = z->grads ? plan(z, f, bounds) : trit_error(TRIT_ERR_STATE, "zero: the model has no gradients");
    if (s != TRIT_OK) {
        trit_zero_free(z);
        return NULL;
    }
    if (stage >= 2) trit_ddp_set_collective(d, start_reduce_scatter, bucket_done, z);
    return z;
}

MPI_Comm trit_zero_comm(const trit_zero *z) { return z->comm; }
int trit_zero_group_rank(const trit_zero *z) { return z->rank; }
int trit_zero_group_size(const trit_zero *z) { return z->size; }

trit_status trit_zero_sum_replicas(trit_zero *z, double *wait_ms) {
    *wait_ms = 0;
    if (z->replicas == 1) return TRIT_OK;
    const int64_t lo = z->bounds[z->rank], hi = z->bounds[z->rank + 1];
    if (hi - lo > INT_MAX)
        return trit_error(TRIT_ERR_UNSUPPORTED, "zero: a shard of %lld values is more than one MPI call takes "
                          "(2^31 - 1): use a larger --shard-group", (long long)(hi - lo));
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, z->grads + lo, (int)(hi - lo), MPI_FLOAT, MPI_SUM, z->across, &req);
    if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "MPI_Iallreduce of the shard across the replicas");
    return trit_dist_wait(&req, 1, "the all-reduce of the shard across the replicas", wait_ms);
}

trit_status trit_zero_allreduce_group(trit_zero *z, double *v, int n) {
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, z->comm, &req);
    if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "MPI_Iallreduce inside the shard group");
    return trit_dist_wait(&req, 1, "the all-reduce inside the shard group", NULL);
}

void trit_zero_zero_grads(trit_zero *z) {
    const int64_t lo = z->bounds[z->rank], hi = z->bounds[z->rank + 1];
    for (int k = 0; k < z->nb; k++) {
        int64_t begin, end;
        trit_ddp_bucket_range(z->ddp, k, &begin, &end);
        if (!z->released[k]) {
            memset(z->grads + begin, 0, sizeof(float) * (size_t)(end - begin));
            continue;
        }
        // The shard, and the partial pages at the ends of the parts given back.
        const long ps = sysconf(_SC_PAGESIZE);
        const int64_t page = (ps > 0 ? ps : 4096) / (int64_t)sizeof(float);
        const int64_t a = max64(begin, lo), b = min64(end, hi);
        const int64_t zlo = a < b ? max64(begin, a - page) : begin, zhi = a < b ? min64(end, b + page) : begin;
        memset(z->grads + begin, 0, sizeof(float) * (size_t)min64(page, end - begin));
        memset(z->grads + max64(begin, end - page), 0, sizeof(float) * (size_t)min64(page, end - begin));
        if (zhi > zlo) memset(z->grads + zlo, 0, sizeof(float) * (size_t)(zhi - zlo));
        z->released[k] = false;
    }
}

// Copies between the parameters' values and the staging layout of bucket [begin, end): element
// j of the block at byte (j - begin) * elsize from the bucket's start. pack: this rank's shard
// in; else: everything outside the shard out.
static void copy_bucket(trit_zero *z, int64_t begin, int64_t end, bool pack) {
    char *stage = (char *)(z->grads + begin);
    const int64_t lo = z->bounds[z->rank], hi = z->bounds[z->rank + 1];
    const size_t es = z->elsize;
    for (int i = 0; i < z->np; i++) {
        const piece *p = &z->p[i];
        const int64_t a = max64(p->off, begin), b = min64(p->off + p->n, end);
        if (a >= b) continue;
        if (pack) {
            const int64_t ma = max64(a, lo), mb = min64(b, hi);
            if (ma < mb) memcpy(stage + (size_t)(ma - begin) * es, p->data + (size_t)(ma - p->off) * es, (size_t)(mb - ma) * es);
            continue;
        }
        // Out: [a, lo) and [hi, b), the parts other ranks updated.
        const int64_t ends[2][2] = {{a, min64(b, lo)}, {max64(a, hi), b}};
        for (int h = 0; h < 2; h++)
            if (ends[h][0] < ends[h][1])
                memcpy(p->data + (size_t)(ends[h][0] - p->off) * es, stage + (size_t)(ends[h][0] - begin) * es,
                       (size_t)(ends[h][1] - ends[h][0]) * es);
    }
}

trit_status trit_zero_gather_params(trit_zero *z, double *wait_ms) {
    *wait_ms = 0;
    trit_status s = TRIT_OK;
    int started = 0;
    // Packing writes over the spent gradients; the exchanges then run together.
    for (int k = 0; k < z->nb && s == TRIT_OK; k++, started++) {
        int64_t begin, end;
        trit_ddp_bucket_range(z->ddp, k, &begin, &end);
        copy_bucket(z, begin, end, true);
        const size_t at = (size_t)k * (size_t)z->size;
        int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, z->grads + begin, z->counts + at, z->displs + at,
                                 z->elem, z->comm, &z->reqs[k]);
        if (rc != MPI_SUCCESS) s = trit_dist_mpi_error(rc, "MPI_Iallgatherv of the updated parameters");
    }
    if (s == TRIT_OK) s = trit_dist_wait(z->reqs, started, "the all-gather of the updated parameters", wait_ms);
    for (int k = 0; s == TRIT_OK && k < z->nb; k++) {
        int64_t begin, end;
        trit_ddp_bucket_range(z->ddp, k, &begin, &end);
        copy_bucket(z, begin, end, false);
        if (z->stage >= 2) release_outside(z, k, begin, end);  // the staging pages go back again
    }
    return s;
}

void trit_zero_free(trit_zero *z) {
    if (!z) return;
    if (z->elem != MPI_DATATYPE_NULL) MPI_Type_free(&z->elem);
    if (z->replicas > 1 && z->comm != MPI_COMM_NULL) MPI_Comm_free(&z->comm);
    if (z->across != MPI_COMM_NULL) MPI_Comm_free(&z->across);
    free(z->p);
    free(z->bounds);
    free(z->counts);
    free(z->displs);
    free(z->released);
    free(z->reqs);
    free(z);
}
