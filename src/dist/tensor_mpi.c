// Tensor parallelism over MPI: the job's ranks in groups of `size` consecutive ones (a group
// holds one copy of the model, split) and replicas (the ranks at one position of every group,
// which hold the same split and take different micro-batches). The group's sums are what the
// graphs' tp_copy and tp_reduce call: a blocking sum, since the op's result is needed at once,
// polled with the job's timeout so a rank that stops is named as in every other wait.
#define _POSIX_C_SOURCE 200809L
#include "dist/dist_internal.h"

#include <stdlib.h>
#include <string.h>

struct trit_tp {
    MPI_Comm group, replicas;
    int rank, size, replica, replicas_n;
    double wait_ms;
    int64_t bytes;
};

int trit_tp_rank(const trit_tp *tp) { return tp->rank; }
int trit_tp_size(const trit_tp *tp) { return tp->size; }
int trit_tp_replica(const trit_tp *tp) { return tp->replica; }
int trit_tp_replicas(const trit_tp *tp) { return tp->replicas_n; }

trit_tp *trit_tp_new(int size) {
    const int n = trit_dist_size(), r = trit_dist_rank();
    if (size < 1 || n % size != 0) {
        trit_error(TRIT_ERR_INVALID, "tensor parallel: groups of %d ranks do not divide the job's %d", size, n);
        return NULL;
    }
    trit_tp *tp = calloc(1, sizeof *tp);
    if (!tp) {
        trit_error(TRIT_ERR_NOMEM, "tensor parallel: out of memory");
        return NULL;
    }
    tp->group = tp->replicas = MPI_COMM_NULL;
    tp->size = size;
    tp->rank = r % size;
    tp->replica = r / size;
    tp->replicas_n = n / size;
    if (n == 1) return tp;  // a world of one (maybe without MPI): nothing to sum or gather
    int rc = MPI_Comm_split(trit_dist_comm(), tp->replica, tp->rank, &tp->group);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_split(trit_dist_comm(), tp->rank, tp->replica, &tp->replicas);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(tp->group, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(tp->replicas, MPI_ERRORS_RETURN);
    if (rc != MPI_SUCCESS) {
        trit_dist_mpi_error(rc, "MPI_Comm_split into tensor-parallel groups");
        trit_tp_free(tp);
        return NULL;
    }
    return tp;
}

static trit_status group_sum(void *ctx, void *data, trit_dtype dtype, int64_t n) {
    trit_tp *tp = ctx;
    if (dtype != TRIT_F32 && dtype != TRIT_F64)
        return trit_error(TRIT_ERR_DTYPE, "tensor parallel: sums f32 or f64 values, not %s", trit_dtype_name(dtype));
    if (n > INT32_MAX)
        return trit_error(TRIT_ERR_UNSUPPORTED, "tensor parallel: %lld values are more than one MPI call takes "
                          "(2^31 - 1): lower --batch", (long long)n);
    if (tp->size == 1) return TRIT_OK;
    MPI_Request req;
    const MPI_Datatype type = dtype == TRIT_F32 ? MPI_FLOAT : MPI_DOUBLE;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, data, (int)n, type, MPI_SUM, tp->group, &req);
    if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "MPI_Iallreduce of a tensor-parallel sum");
    tp->bytes += n * (dtype == TRIT_F32 ? 4 : 8);
    return trit_dist_wait(&req, 1, "a tensor-parallel sum of activations or their gradients", &tp->wait_ms);
}

trit_allreduce trit_tp_sum(trit_tp *tp) { return (trit_allreduce){.fn = group_sum, .ctx = tp}; }

void trit_tp_take_stats(trit_tp *tp, double *wait_ms, int64_t *bytes) {
    *wait_ms = tp->wait_ms;
    *bytes = tp->bytes;
    tp->wait_ms = 0;
    tp->bytes = 0;
}

trit_status trit_tp_group_sum_f64(trit_tp *tp, double *v, int n) {
    if (tp->size == 1) return TRIT_OK;
    MPI_Request req;
    int rc = MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, tp->group, &req);
    if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "MPI_Iallreduce over the tensor-parallel group");
    return trit_dist_wait(&req, 1, "a sum over the tensor-parallel group", NULL);
}

trit_status trit_tp_gather(trit_tp *tp, const void *send, void *recv, size_t bytes) {
    if (tp->size == 1) {
        memcpy(recv, send, bytes);
        return TRIT_OK;
    }
    if (bytes > INT32_MAX)
        return trit_error(TRIT_ERR_UNSUPPORTED, "tensor parallel: a piece of %zu bytes is more than one MPI call takes",
                          bytes);
    MPI_Request req;
    int rc = MPI_Igather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, 0, tp->group, &req);
    if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "MPI_Igather of a tensor-parallel piece");
    return trit_dist_wait(&req, 1, "the pieces of a split parameter", NULL);
}

trit_ddp *trit_tp_ddp_new(trit_tp *tp, const trit_flat *f, trit_graph *g, double bucket_mb) {
    trit_ddp *d = trit_ddp_new(f, g, bucket_mb);
    if (d) trit_ddp_set_comm(d, tp->replicas);
    return d;
}

void trit_tp_free(trit_tp *tp) {
    if (!tp) return;
    if (tp->group != MPI_COMM_NULL) MPI_Comm_free(&tp->group);
    if (tp->replicas != MPI_COMM_NULL) MPI_Comm_free(&tp->replicas);
    free(tp);
}
