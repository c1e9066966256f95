// DDP: the gradient block of flat storage all-reduced (summed) in buckets while backward runs.
// A bucket is a run of whole tensors' gradients in the block's order; it is ready when the last
// of its gradients is final in the step's last micro-batch, and buckets start strictly in order
// (bucket k only after k - 1), so every rank issues the same sequence of collectives whatever
// the order its events came in. Each event also tests the buckets in flight: Open MPI has no
// progress thread, and a test is what moves a non-blocking collective on.
#define _POSIX_C_SOURCE 200809L
#include "dist/dist_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct bucket {
    int64_t begin, end;  // element range of the gradient block
    int expect;          // gradient-final events of the step's last micro-batch
    int pending;         // of those, still to come this step
    bool done;           // its exchange completed this step
    MPI_Request req;
} bucket;

struct trit_ddp {
    float *grads;            // (count) the gradient block
    int64_t count;
    int nb;
    bucket *b;
    int next;                // the first bucket not started
    int n_graph_params;
    int *bucket_of;          // (n_graph_params) bucket of each graph parameter, -1 for none
    trit_status failed;      // a failure inside a hook, reported by finish
    trit_ddp_start_fn start; // another collective than the all-reduce (ZeRO), or NULL
    trit_ddp_done_fn done;
    void *hook_ctx;
    MPI_Comm comm;           // the ranks that sum: the job, or a tensor-parallel job's replicas
};

void trit_ddp_set_comm(trit_ddp *d, MPI_Comm comm) { d->comm = comm; }

void trit_ddp_set_collective(trit_ddp *d, trit_ddp_start_fn start, trit_ddp_done_fn done, void *ctx) {
    d->start = start, d->done = done, d->hook_ctx = ctx;
}

void trit_ddp_bucket_range(const trit_ddp *d, int k, int64_t *begin, int64_t *end) {
    *begin = d->b[k].begin, *end = d->b[k].end;
}

int trit_ddp_num_buckets(const trit_ddp *d) { return d ? d->nb : 0; }
int64_t trit_ddp_bytes_per_step(const trit_ddp *d) { return d ? d->count * (int64_t)sizeof(float) : 0; }

static trit_status start_ready(trit_ddp *d) {
    while (d->next < d->nb && d->b[d->next].pending == 0) {
        bucket *b = &d->b[d->next];
        int rc = d->start ? d->start(d->hook_ctx, d->next, d->grads, b->begin, b->end, &b->req)
                          : MPI_Iallreduce(MPI_IN_PLACE, d->grads + b->begin, (int)(b->end - b->begin), MPI_FLOAT,
                                           MPI_SUM, d->comm, &b->req);
        if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "MPI_Iallreduce of a gradient bucket");
        d->next++;
    }
    return TRIT_OK;
}

static void completed(trit_ddp *d, int k) {
    if (d->b[k].done) return;
    d->b[k].done = true;
    if (d->done) d->done(d->hook_ctx, k, d->b[k].begin, d->b[k].end);
}

static void progress(trit_ddp *d) {
    for (int k = 0; k < d->next; k++) {
        int done = 0;
        if (d->b[k].req != MPI_REQUEST_NULL) MPI_Test(&d->b[k].req, &done, MPI_STATUS_IGNORE);
        if (done) completed(d, k);
    }
}

static trit_status on_grad_final(void *ctx, const trit_graph_event *e) {
    trit_ddp *d = ctx;
    if (e->micro != e->num_micro - 1 || e->param < 0 || e->param >= d->n_graph_params) return TRIT_OK;
    const int k = d->bucket_of[e->param];
    if (k >= 0 && d->b[k].pending > 0) d->b[k].pending--;
    trit_status s = start_ready(d);
    if (s != TRIT_OK && d->failed == TRIT_OK) d->failed = s;
    progress(d);
    return TRIT_OK;  // a failure is reported by finish, where every rank can agree on it
}

// The buckets over f's gradients, each closed once it holds bucket_bytes; a tensor is never split.
static trit_status make_buckets(trit_ddp *d, const trit_flat *f, size_t bucket_bytes) {
    const int n = trit_flat_count(f);
    d->b = calloc((size_t)n + 1, sizeof *d->b);
    if (!d->b) return trit_error(TRIT_ERR_NOMEM, "ddp: out of memory");
    int64_t begin = -1;
    for (int i = 0; i < n; i++) {
        const int64_t off = trit_flat_grad_offset(f, i);
        if (off < 0) continue;
        if (begin < 0) begin = off;
        // The bucket runs to the next gradient's offset (or the block's end): padding included.
        int64_t next = d->count;
        for (int j = i + 1; j < n && next == d->count; j++)
            if (trit_flat_grad_offset(f, j) >= 0) next = trit_flat_grad_offset(f, j);
        if ((size_t)(next - begin) * sizeof(float) >= bucket_bytes || next == d->count) {
            if (next - begin > INT_MAX)
                return trit_error(TRIT_ERR_UNSUPPORTED, "ddp: a bucket of %lld values is more than one MPI call takes "
                                  "(2^31 - 1): lower --bucket-mb", (long long)(next - begin));
            d->b[d->nb++] = (bucket){.begin = begin, .end = next, .req = MPI_REQUEST_NULL};
            begin = -1;
        }
    }
    return TRIT_OK;
}

static int bucket_at(const trit_ddp *d, int64_t off) {
    for (int k = 0; k < d->nb; k++)
        if (off >= d->b[k].begin && off < d->b[k].end) return k;
    return -1;
}

// Which bucket each graph parameter's gradient is in, and how many gradient-final events each
// bucket gets in a backward pass (from the compiled step list).
static trit_status map_params(trit_ddp *d, const trit_flat *f, const trit_graph *g) {
    d->n_graph_params = trit_graph_num_params(g);
    d->bucket_of = malloc(sizeof *d->bucket_of * ((size_t)d->n_graph_params + 1));
    if (!d->bucket_of) return trit_error(TRIT_ERR_NOMEM, "ddp: out of memory");
    for (int p = 0; p < d->n_graph_params; p++) {
        const trit_tensor *t = trit_graph_param(g, p);
        d->bucket_of[p] = -1;
        for (int i = 0; i < trit_flat_count(f); i++)
            if (trit_flat_tensor(f, i) == t && trit_flat_grad_offset(f, i) >= 0)
                d->bucket_of[p] = bucket_at(d, trit_flat_grad_offset(f, i));
    }
    const int steps = trit_graph_num_steps(g);
    if (steps == 0) return trit_error(TRIT_ERR_STATE, "ddp: the graph is not compiled");
    for (int i = 0; i < steps; i++) {
        trit_graph_step_info st;
        if (trit_graph_step_at(g, i, &st) != TRIT_OK) return TRIT_ERR_STATE;
        if (st.kind == TRIT_STEP_EVENT && st.event == TRIT_EVENT_GRAD_FINAL && st.param >= 0 &&
            st.param < d->n_graph_params && d->bucket_of[st.param] >= 0)
            d->b[d->bucket_of[st.param]].expect++;
    }
    for (int k = 0; k < d->nb; k++) d->b[k].pending = d->b[k].expect;
    return TRIT_OK;
}

trit_ddp *trit_ddp_new(const trit_flat *f, trit_graph *g, double bucket_mb) {
    if (!f || !g || !(bucket_mb > 0)) {
        trit_error(TRIT_ERR_INVALID, "trit_ddp_new: flat storage, a compiled graph and a positive bucket size");
        return NULL;
    }
    trit_ddp *d = calloc(1, sizeof *d);
    if (!d) {
        trit_error(TRIT_ERR_NOMEM, "ddp: out of memory");
        return NULL;
    }
    d->comm = trit_dist_comm();
    d->grads = trit_flat_grads(f, &d->count);
    trit_status s = d->grads ? TRIT_OK : trit_error(TRIT_ERR_STATE, "ddp: the model has no gradients");
    if (s == TRIT_OK) s = make_buckets(d, f, (size_t)(bucket_mb * 1e6));
    if (s == TRIT_OK) s = map_params(d, f, g);
    if (s == TRIT_OK) s = trit_graph_add_hook(g, TRIT_EVENT_GRAD_FINAL, on_grad_final, d);
    if (s != TRIT_OK) {
        trit_ddp_free(d);
        return NULL;
    }
    return d;
}

trit_status trit_ddp_finish(trit_ddp *d, bool poison, double *wait_ms) {
    *wait_ms = 0;
    for (int k = d->next; poison && k < d->nb; k++)
        for (int64_t i = d->b[k].begin; i < d->b[k].end; i++) d->grads[i] = NAN;
    for (int k = d->next; k < d->nb; k++) d->b[k].pending = 0;
    trit_status s = d->failed != TRIT_OK ? d->failed : start_ready(d);
    MPI_Request *reqs = malloc(sizeof *reqs * ((size_t)d->nb + 1));
    if (!reqs && s == TRIT_OK) s = trit_error(TRIT_ERR_NOMEM, "ddp: out of memory");
    for (int k = 0; reqs && k < d->next; k++) reqs[k] = d->b[k].req;
    if (s == TRIT_OK) s = trit_dist_wait(reqs, d->next, "the gradient all-reduce", wait_ms);
    free(reqs);
    for (int k = 0; s == TRIT_OK && k < d->nb; k++) completed(d, k);
    for (int k = 0; k < d->nb; k++) {
        d->b[k].pending = d->b[k].expect;
        d->b[k].req = MPI_REQUEST_NULL;
        d->b[k].done = false;
    }
    d->next = 0;
    d->failed = TRIT_OK;
    return s;
}

void trit_ddp_free(trit_ddp *d) {
    if (!d) return;
    free(d->b);
    free(d->bucket_of);
    free(d);
}
