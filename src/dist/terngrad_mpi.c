// TernGrad's gradient exchange (Wen et al., 2017) over MPI. The gradient block is cut into
// buckets of whole tensors, as DDP's; each bucket goes through four phases, each bucket entering
// a phase only after the one before it did, so every rank issues the same collectives in the same
// order on each communicator:
//   group    with --terngrad-between-groups G: fp32 MPI_Iallreduce (sum) inside the G ranks
//   scales   each sender's scales (max |g| per tensor or per run of values, after the clip) and a
//            non-finite flag, MPI_Iallreduce(MAX): the shared scales
//   gather   the codes under the shared scales (2 bits a value) and the small gradients' fp32
//            values in one packet, MPI_Iallgather-ed among the senders
//   done     the packets decoded and summed in sender order into the gradient block
// A sender is a rank, or with groups a group (every member of a group encodes the same group sum
// with the same draws, and exchanges it with its counterparts in the other groups). The scales
// and the gathers have a communicator each, so a bucket's gather may start while the next
// bucket's scales are in flight. Phases advance at every gradient-final event (Open MPI has no
// progress thread) and in finish.
#define _POSIX_C_SOURCE 200809L
#include "dist/dist_internal.h"
#include "trit/quant.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct slot {
    int64_t off, n;       // the tensor's range of the gradient block
    int index;            // its place in the flat layout (keys its draws)
    bool ternary;         // n >= min_size: codes, else fp32 values
    int64_t scale_at;     // ternary: its first scale in the bucket's scale array
    int64_t packet_at;    // its first byte in the bucket's packet
} slot;

typedef enum { IDLE, GROUP, SCALES, GATHER, DONE } phase;

typedef struct bucket {
    int64_t begin, end;   // element range of the gradient block (padding included)
    int first, count;     // its slots
    int expect, pending;  // gradient-final events of the step's last micro-batch, still to come
    phase ph;
    int64_t nscales;      // scales of its ternary slots; scales[nscales] is the non-finite flag
    float *scales;        // (nscales + 1) this sender's, then the shared ones
    float *bounds;        // (count) each ternary slot's clip bound on this sender
    int64_t packet_bytes; // fp32 values first (4-byte aligned), then the codes
    uint8_t *packet;      // (packet_bytes)
    uint8_t *gathered;    // (senders, packet_bytes)
    MPI_Request req;      // the collective of the current phase
} bucket;

struct trit_terngrad_dist {
    trit_terngrad_dist_config c;
    float *grads;         // (count) the gradient block
    int64_t count;
    int ns, nb;
    slot *s;
    bucket *b;
    int n_graph_params;
    int *bucket_of;       // (n_graph_params) bucket of each graph parameter, -1 for none
    int64_t step;
    int sender, senders;  // this rank's sender (rank, or group), and how many there are
    MPI_Comm group_comm;  // the rank's group (MPI_COMM_NULL without groups)
    MPI_Comm scale_comm, gather_comm;  // the senders: one rank of each group
    trit_status failed;   // a failure inside a hook, reported by finish
};

int trit_terngrad_dist_num_buckets(const trit_terngrad_dist *x) { return x ? x->nb : 0; }

trit_terngrad_dist_bytes trit_terngrad_dist_bytes_per_step(const trit_terngrad_dist *x) {
    trit_terngrad_dist_bytes r = {0};
    for (int k = 0; x && k < x->nb; k++) {
        const bucket *b = &x->b[k];
        if (x->group_comm != MPI_COMM_NULL) r.group_fp32 += (b->end - b->begin) * (int64_t)sizeof(float);
        r.scales += (b->nscales + 1) * (int64_t)sizeof(float);
        for (int j = b->first; j < b->first + b->count; j++)
            if (x->s[j].ternary) r.codes += (int64_t)trit_terngrad_bytes(x->s[j].n);
            else r.fp32 += x->s[j].n * (int64_t)sizeof(float);
    }
    r.total = r.group_fp32 + r.scales + r.codes + r.fp32;
    return r;
}

static uint64_t stream_of(const trit_terngrad_dist *x, const slot *sl) {
    return trit_terngrad_dist_stream(x->step, x->sender, sl->index);
}

// This sender's scales of bucket k (the flag set, scales 0, when a gradient is not finite).
static void local_scales(trit_terngrad_dist *x, bucket *b) {
    const trit_terngrad_dist_config *c = &x->c;
    float flag = 0;
    for (int j = b->first; j < b->first + b->count; j++) {
        const slot *sl = &x->s[j];
        if (!sl->ternary) continue;
        float *sc = b->scales + sl->scale_at;
        if (trit_terngrad_scales(x->grads + sl->off, sl->n, c->scale_bucket, c->clip_sigma, sc,
                                 &b->bounds[j - b->first]) != TRIT_OK) {
            trit_clear_error();
            flag = 1;
        }
    }
    if (flag)
        for (int64_t q = 0; q < b->nscales; q++) b->scales[q] = 0;
    b->scales[b->nscales] = flag;
}

static trit_status encode(trit_terngrad_dist *x, bucket *b) {
    for (int j = b->first; j < b->first + b->count; j++) {
        const slot *sl = &x->s[j];
        const float *g = x->grads + sl->off;  // (n)
        if (!sl->ternary) {
            memcpy(b->packet + sl->packet_at, g, sizeof(float) * (size_t)sl->n);
            continue;
        }
        trit_status s = trit_terngrad_encode_scaled(g, sl->n, x->c.scale_bucket, b->scales + sl->scale_at,
                                                    b->bounds[j - b->first], x->c.seed, stream_of(x, sl),
                                                    b->packet + sl->packet_at);
        if (s != TRIT_OK) return s;
    }
    return TRIT_OK;
}

// The senders' packets summed in sender order: the same bits on every rank.
static trit_status decode(trit_terngrad_dist *x, bucket *b) {
    for (int j = b->first; j < b->first + b->count; j++) {
        const slot *sl = &x->s[j];
        float *out = x->grads + sl->off;  // (n)
        if (b->scales[b->nscales] > 0) {  // some sender's gradient was not finite: every rank skips the step
            for (int64_t i = 0; i < sl->n; i++) out[i] = NAN;
            continue;
        }
        memset(out, 0, sizeof(float) * (size_t)sl->n);
        for (int r = 0; r < x->senders; r++) {
            const uint8_t *p = b->gathered + (size_t)r * (size_t)b->packet_bytes + sl->packet_at;
            if (sl->ternary) {
                trit_status s = trit_terngrad_accumulate(p, b->scales + sl->scale_at, sl->n, x->c.scale_bucket, out);
                if (s != TRIT_OK) return s;
            } else {  // (n) floats, at any byte of the packet (codes before them have any length)
                for (int64_t i = 0; i < sl->n; i++) {
                    float v;
                    memcpy(&v, p + sizeof(float) * (size_t)i, sizeof v);
                    out[i] += v;
                }
            }
        }
    }
    return TRIT_OK;
}

// Bucket b enters phase `to`, starting that phase's collective (none for a phase that has none).
static trit_status enter(trit_terngrad_dist *x, bucket *b, phase to) {
    int rc = MPI_SUCCESS;
    b->req = MPI_REQUEST_NULL;
    b->ph = to;
    switch (to) {
    case GROUP:
        if (x->group_comm != MPI_COMM_NULL)
            rc = MPI_Iallreduce(MPI_IN_PLACE, x->grads + b->begin, (int)(b->end - b->begin), MPI_FLOAT, MPI_SUM,
                                x->group_comm, &b->req);
        return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "MPI_Iallreduce of a group's gradients");
    case SCALES:
        local_scales(x, b);
        rc = MPI_Iallreduce(MPI_IN_PLACE, b->scales, (int)b->nscales + 1, MPI_FLOAT, MPI_MAX, x->scale_comm, &b->req);
        return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "MPI_Iallreduce(MAX) of the TernGrad scales");
    case GATHER:
        if (b->scales[b->nscales] > 0) return TRIT_OK;  // every sender saw the flag: none sends
        trit_status s = encode(x, b);
        if (s != TRIT_OK) return s;
        rc = MPI_Iallgather(b->packet, (int)b->packet_bytes, MPI_BYTE, b->gathered, (int)b->packet_bytes, MPI_BYTE,
                            x->gather_comm, &b->req);
        return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "MPI_Iallgather of the ternary gradients");
    case DONE: return decode(x, b);
    default: return TRIT_OK;
    }
}

// Moves every bucket as far as it can go: its last micro-batch's gradients final, its collective
// complete, and the bucket before it already in the phase it enters.
static trit_status advance(trit_terngrad_dist *x) {
    for (int k = 0; k < x->nb; k++) {
        bucket *b = &x->b[k];
        while (b->ph != DONE) {
            const phase to = b->ph + 1;
            if (k > 0 && x->b[k - 1].ph < to) break;
            if (b->ph == IDLE && b->pending > 0) break;
            int done = 1;
            if (b->req != MPI_REQUEST_NULL) {
                int rc = MPI_Test(&b->req, &done, MPI_STATUS_IGNORE);
                if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "MPI_Test of the ternary gradient exchange");
            }
            if (!done) break;
            trit_status s = enter(x, b, to);
            if (s != TRIT_OK) return s;
        }
    }
    return TRIT_OK;
}

static trit_status on_grad_final(void *ctx, const trit_graph_event *e) {
    trit_terngrad_dist *x = ctx;
    if (e->micro != e->num_micro - 1 || e->param < 0 || e->param >= x->n_graph_params) return TRIT_OK;
    const int k = x->bucket_of[e->param];
    if (k >= 0 && x->b[k].pending > 0) x->b[k].pending--;
    trit_status s = x->failed == TRIT_OK ? advance(x) : TRIT_OK;
    if (s != TRIT_OK) x->failed = s;
    return TRIT_OK;  // a failure is reported by finish, where every rank can agree on it
}

// The slots (tensors with gradients, in layout order) and buckets of about bucket_bytes of fp32
// gradients; a tensor is never split.
static trit_status make_slots(trit_terngrad_dist *x, const trit_flat *f) {
    const int n = trit_flat_count(f);
    x->s = calloc((size_t)n + 1, sizeof *x->s);
    x->b = calloc((size_t)n + 1, sizeof *x->b);
    if (!x->s || !x->b) return trit_error(TRIT_ERR_NOMEM, "terngrad exchange: out of memory");
    const size_t bucket_bytes = (size_t)(x->c.bucket_mb * 1e6);
    bucket *b = NULL;
    for (int i = 0; i < n; i++) {
        const int64_t off = trit_flat_grad_offset(f, i);
        if (off < 0) continue;
        if (!b) {
            b = &x->b[x->nb++];
            *b = (bucket){.begin = off, .first = x->ns, .req = MPI_REQUEST_NULL};
        }
        const int64_t len = trit_tensor_numel(trit_flat_tensor(f, i));
        x->s[x->ns++] = (slot){.off = off, .n = len, .index = i, .ternary = len >= x->c.min_size};
        b->count++;
        int64_t next = x->count;
        for (int j = i + 1; j < n && next == x->count; j++)
            if (trit_flat_grad_offset(f, j) >= 0) next = trit_flat_grad_offset(f, j);
        b->end = next;
        if ((size_t)(next - b->begin) * sizeof(float) >= bucket_bytes || next == x->count) b = NULL;
    }
    return TRIT_OK;
}

// Each bucket's scale and packet layout, and its buffers.
static trit_status lay_out(trit_terngrad_dist *x) {
    for (int k = 0; k < x->nb; k++) {
        bucket *b = &x->b[k];
        int64_t at = 0;
        for (int pass = 0; pass < 2; pass++)  // fp32 values first, so they stay 4-byte aligned
            for (int j = b->first; j < b->first + b->count; j++) {
                slot *sl = &x->s[j];
                if (sl->ternary != (pass == 1)) continue;
                sl->packet_at = at;
                at += sl->ternary ? (int64_t)trit_terngrad_bytes(sl->n) : sl->n * (int64_t)sizeof(float);
                if (sl->ternary) {
                    sl->scale_at = b->nscales;
                    b->nscales += trit_terngrad_nscales(sl->n, x->c.scale_bucket);
                }
            }
        b->packet_bytes = at;
        if (b->end - b->begin > INT_MAX || at > INT_MAX / x->senders || b->nscales >= INT_MAX)
            return trit_error(TRIT_ERR_UNSUPPORTED, "terngrad exchange: a bucket of %lld values is more than one MPI "
                              "call takes (2^31 - 1): lower --bucket-mb", (long long)(b->end - b->begin));
        b->scales = malloc(sizeof(float) * (size_t)(b->nscales + 1));
        b->bounds = calloc((size_t)b->count, sizeof(float));
        b->packet = malloc((size_t)at + 1);
        b->gathered = malloc((size_t)at * (size_t)x->senders + 1);
        if (!b->scales || !b->bounds || !b->packet || !b->gathered)
            return trit_error(TRIT_ERR_NOMEM, "terngrad exchange: out of memory");
    }
    return TRIT_OK;
}

// Which bucket each graph parameter's gradient is in, and how many gradient-final events each
// bucket gets in a backward pass (from the compiled step list).
static trit_status map_params(trit_terngrad_dist *x, const trit_flat *f, const trit_graph *g) {
    x->n_graph_params = trit_graph_num_params(g);
    x->bucket_of = malloc(sizeof *x->bucket_of * ((size_t)x->n_graph_params + 1));
    if (!x->bucket_of) return trit_error(TRIT_ERR_NOMEM, "terngrad exchange: out of memory");
    for (int p = 0; p < x->n_graph_params; p++) {
        const trit_tensor *t = trit_graph_param(g, p);
        x->bucket_of[p] = -1;
        for (int j = 0; j < x->ns; j++)
            if (trit_flat_tensor(f, x->s[j].index) == t)
                for (int k = 0; k < x->nb; k++)
                    if (j >= x->b[k].first && j < x->b[k].first + x->b[k].count) x->bucket_of[p] = k;
    }
    const int steps = trit_graph_num_steps(g);
    if (steps == 0) return trit_error(TRIT_ERR_STATE, "terngrad exchange: the graph is not compiled");
    for (int i = 0; i < steps; i++) {
        trit_graph_step_info st;
        if (trit_graph_step_at(g, i, &st) != TRIT_OK) return TRIT_ERR_STATE;
        if (st.kind == TRIT_STEP_EVENT && st.event == TRIT_EVENT_GRAD_FINAL && st.param >= 0 &&
            st.param < x->n_graph_params && x->bucket_of[st.param] >= 0)
            x->b[x->bucket_of[st.param]].expect++;
    }
    for (int k = 0; k < x->nb; k++) x->b[k].pending = x->b[k].expect;
    return TRIT_OK;
}

// The group and sender communicators (collective over the job).
static trit_status split_job(trit_terngrad_dist *x) {
    const int rank = trit_dist_rank(), size = trit_dist_size(), G = x->c.group;
    if (G < 1 || size % G != 0)
        return trit_error(TRIT_ERR_INVALID, "--terngrad-between-groups %d does not divide the job's %d ranks into "
                          "groups: pass a divisor of %d (groups of consecutive ranks), or 1 for ternary between every "
                          "rank", G, size, size);
    x->sender = rank / G;
    x->senders = size / G;
    MPI_Comm senders = MPI_COMM_NULL;
    int rc = MPI_Comm_split(trit_dist_comm(), rank % G, rank, &senders);
    if (rc == MPI_SUCCESS && G > 1) rc = MPI_Comm_split(trit_dist_comm(), rank / G, rank, &x->group_comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(senders, &x->scale_comm);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_dup(senders, &x->gather_comm);
    if (senders != MPI_COMM_NULL) MPI_Comm_free(&senders);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(x->scale_comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(x->gather_comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS && x->group_comm != MPI_COMM_NULL)
        rc = MPI_Comm_set_errhandler(x->group_comm, MPI_ERRORS_RETURN);
    return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "splitting the job into TernGrad's groups");
}

trit_terngrad_dist *trit_terngrad_dist_new(const trit_flat *f, trit_graph *g, const trit_terngrad_dist_config *c) {
    if (!f || !c || !(c->bucket_mb > 0) || c->min_size < 1 || c->scale_bucket < 0 || c->scale_bucket % 4 ||
        !(c->clip_sigma >= 0)) {
        trit_error(TRIT_ERR_INVALID, "trit_terngrad_dist_new: flat storage, a positive bucket size, "
                   "min_size >= 1, a scale bucket of 0 or a multiple of 4 and clip_sigma >= 0");
        return NULL;
    }
    trit_terngrad_dist *x = calloc(1, sizeof *x);
    if (!x) {
        trit_error(TRIT_ERR_NOMEM, "terngrad exchange: out of memory");
        return NULL;
    }
    x->c = *c;
    x->group_comm = x->scale_comm = x->gather_comm = MPI_COMM_NULL;
    x->grads = trit_flat_grads(f, &x->count);
    trit_status s = x->grads ? TRIT_OK : trit_error(TRIT_ERR_STATE, "terngrad exchange: the model has no gradients");
    if (s == TRIT_OK) s = split_job(x);
    if (s == TRIT_OK) s = make_slots(x, f);
    if (s == TRIT_OK) s = lay_out(x);
    if (s == TRIT_OK && g) s = map_params(x, f, g);
    if (s == TRIT_OK && g) s = trit_graph_add_hook(g, TRIT_EVENT_GRAD_FINAL, on_grad_final, x);
    if (s != TRIT_OK) {
        trit_terngrad_dist_free(x);
        return NULL;
    }
    return x;
}

void trit_terngrad_dist_begin(trit_terngrad_dist *x, int64_t step) { x->step = step; }

trit_status trit_terngrad_dist_finish(trit_terngrad_dist *x, bool poison, double *wait_ms) {
    *wait_ms = 0;
    for (int k = 0; k < x->nb; k++) {
        bucket *b = &x->b[k];
        for (int64_t i = b->begin; poison && b->ph == IDLE && i < b->end; i++) x->grads[i] = NAN;
        b->pending = 0;
    }
    trit_status s = x->failed;
    // Bucket by bucket through its phases, waiting for each collective; the ones before it are done.
    for (int k = 0; s == TRIT_OK && k < x->nb; k++) {
        bucket *b = &x->b[k];
        while (s == TRIT_OK && b->ph != DONE) {
            if (b->req != MPI_REQUEST_NULL) s = trit_dist_wait(&b->req, 1, "the ternary gradient exchange", wait_ms);
            if (s == TRIT_OK) s = advance(x);
        }
    }
    for (int k = 0; k < x->nb; k++) {
        x->b[k].pending = x->b[k].expect;
        x->b[k].ph = IDLE;
        x->b[k].req = MPI_REQUEST_NULL;
    }
    x->failed = TRIT_OK;
    return s;
}

void trit_terngrad_dist_free(trit_terngrad_dist *x) {
    if (!x) return;
    for (int k = 0; x->b && k < x->nb; k++) {
        free(x->b[k].scales);
        free(x->b[k].bounds);
        free(x->b[k].packet);
        free(x->b[k].gathered);
    }
    int finalized = 0;
    MPI_Finalized(&finalized);
    MPI_Comm *comms[] = {&x->group_comm, &x->scale_comm, &x->gather_comm};
    for (int i = 0; i < 3 && !finalized; i++)
        if (*comms[i] != MPI_COMM_NULL) MPI_Comm_free(comms[i]);
    free(x->s);
    free(x->b);
    free(x->bucket_of);
    free(x);
}
