// Pipeline parallelism: rank r of the job is stage r of P. A step runs M micro-batches through
// the stages: a forward receives the residual stream from the stage before and sends its own on,
// a backward receives the gradient of its output from the stage after and sends its input's
// gradient back. GPipe runs every forward, then every backward; 1F1B runs P - 1 - stage forwards,
// then one forward and one backward in turn, then the backwards left, so at most P - stage
// micro-batches are in flight on a stage. Each micro-batch in flight has a graph of its own (a
// slot: activations are held from forward to backward), micro-batch m taking slot m % slots.
// Messages go through buffers of the pipe (never a graph's arena, whose memory the next run of a
// graph reuses), by non-blocking sends and receives posted as early as their buffers are free;
// Open MPI has no progress thread, so the requests in flight are tested at every gradient-final
// event of a backward and between steps of the schedule.
#define _POSIX_C_SOURCE 200809L
#include "dist/dist_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { TAG_ACT = 0x5041, TAG_GRAD = 0x5047 };

typedef struct slot {
    trit_pipe_slot s;
    trit_tensor *dout;        // (B, T, C) the output's gradient, received from the next stage
    void *act_in, *act_out;   // (B, T, C) activations received, and sent
    void *grad_out;           // (B, T, C) the input's gradient, sent
    MPI_Request act_recv, grad_recv, act_send, grad_send;
    bool poisoned;            // the last stage's loss was not finite: no backward, NaN sent back
} slot;

struct trit_pipe {
    trit_pipe_schedule sched;
    int stage, stages;
    int64_t micro;
    int n;
    slot *slots;
    size_t bytes;             // of one activation (B x T x C values)
    int count;                // the same, in MPI_BYTE units
    double wait_ms;           // of the step so far
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

int trit_pipe_slots(trit_pipe_schedule sched, int stage, int stages, int64_t micro) {
    const int64_t n = sched == TRIT_PIPE_GPIPE ? micro : (int64_t)(stages - stage) < micro ? stages - stage : micro;
    return n < 1 ? 1 : n > INT_MAX ? INT_MAX : (int)n;
}

// Tests every request in flight: what moves a message on when no call waits for it.
static void progress(trit_pipe *p) {
    for (int k = 0; k < p->n; k++) {
        MPI_Request *r[4] = {&p->slots[k].act_recv, &p->slots[k].grad_recv, &p->slots[k].act_send, &p->slots[k].grad_send};
        for (int j = 0; j < 4; j++) {
            int done;
            if (*r[j] != MPI_REQUEST_NULL) MPI_Test(r[j], &done, MPI_STATUS_IGNORE);
        }
    }
}

static trit_status on_grad_final(void *ctx, const trit_graph_event *e) {
    (void)e;
    progress(ctx);
    return TRIT_OK;
}

static trit_status wait_one(trit_pipe *p, MPI_Request *r, const char *what) {
    if (*r == MPI_REQUEST_NULL) return TRIT_OK;
    return trit_dist_wait(r, 1, what, &p->wait_ms);
}

static trit_status check_slot(const trit_pipe *p, const trit_pipe_slot *s, int k) {
    const bool first = p->stage == 0, last = p->stage == p->stages - 1;
    if (!s->graph || trit_graph_num_steps(s->graph) == 0)
        return trit_error(TRIT_ERR_INVALID, "pipeline: slot %d has no compiled graph", k);
    if (first != !s->input || last != !s->output)
        return trit_error(TRIT_ERR_INVALID, "pipeline: stage %d of %d needs %s input and %s output", p->stage,
                          p->stages, first ? "no" : "an", last ? "no" : "an");
    const trit_tensor *t = s->input ? s->input : s->output;
    if (!t) return TRIT_OK;  // one stage alone: nothing crosses
    if (t->dtype != TRIT_F32 || (s->input && s->output && !trit_tensor_same_shape(s->input, s->output)))
        return trit_error(TRIT_ERR_DTYPE, "pipeline: stages exchange f32 activations of one shape");
    return TRIT_OK;
}

static trit_status make_slot(trit_pipe *p, slot *sl, const trit_pipe_slot *s) {
    sl->s = *s;
    sl->act_recv = sl->grad_recv = sl->act_send = sl->grad_send = MPI_REQUEST_NULL;
    const trit_tensor *t = s->input ? s->input : s->output;
    if (!t) return TRIT_OK;
    if (s->output && !(sl->dout = trit_tensor_new(TRIT_F32, s->output->ndim, s->output->shape)))
        return TRIT_ERR_NOMEM;
    sl->act_in = s->input ? malloc(p->bytes) : NULL;
    sl->grad_out = s->input ? malloc(p->bytes) : NULL;
    sl->act_out = s->output ? malloc(p->bytes) : NULL;
    if ((s->input && (!sl->act_in || !sl->grad_out)) || (s->output && !sl->act_out))
        return trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory for the message buffers");
    return trit_graph_add_hook(s->graph, TRIT_EVENT_GRAD_FINAL, on_grad_final, p);
}

trit_pipe *trit_pipe_new(trit_pipe_schedule sched, int64_t micro, const trit_pipe_slot *slots, int n_slots) {
    trit_pipe *p = calloc(1, sizeof *p);
    if (!p) {
        trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
        return NULL;
    }
    p->sched = sched;
    p->stage = trit_dist_rank();
    p->stages = trit_dist_size();
    p->micro = micro;
    p->n = n_slots;
    trit_status s = TRIT_OK;
    if (micro < 1 || !slots || n_slots != trit_pipe_slots(sched, p->stage, p->stages, micro))
        s = trit_error(TRIT_ERR_INVALID, "pipeline: stage %d of %d with %lld micro-batches needs %d slots, got %d",
                       p->stage, p->stages, (long long)micro, trit_pipe_slots(sched, p->stage, p->stages, micro), n_slots);
    for (int k = 0; s == TRIT_OK && k < n_slots; k++) s = check_slot(p, &slots[k], k);
    const trit_tensor *t = s == TRIT_OK ? (slots[0].input ? slots[0].input : slots[0].output) : NULL;
    p->bytes = t ? trit_tensor_nbytes(t) : 0;
    if (s == TRIT_OK && p->bytes > INT_MAX)
        s = trit_error(TRIT_ERR_UNSUPPORTED, "pipeline: an activation of %zu bytes is more than one MPI message takes "
                       "(2^31 - 1): lower --batch", p->bytes);
    p->count = (int)p->bytes;
    if (s == TRIT_OK && !(p->slots = calloc((size_t)n_slots, sizeof *p->slots)))
        s = trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
    for (int k = 0; s == TRIT_OK && k < n_slots; k++) s = make_slot(p, &p->slots[k], &slots[k]);
    if (s != TRIT_OK) {
        trit_pipe_free(p);
        return NULL;
    }
    return p;
}

// The activation of micro-batch m from the previous stage, into its slot's receive buffer.
static trit_status post_act_recv(trit_pipe *p, int64_t m) {
    if (p->stage == 0 || m >= p->micro) return TRIT_OK;
    slot *sl = &p->slots[m % p->n];
    int rc = MPI_Irecv(sl->act_in, p->count, MPI_BYTE, p->stage - 1, TAG_ACT, trit_dist_comm(), &sl->act_recv);
    return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "MPI_Irecv of an activation");
}

static trit_status forward(trit_pipe *p, int64_t m, trit_pipe_forward_fn fn, void *ctx, double *busy) {
    slot *sl = &p->slots[m % p->n];
    // The slot's last messages are out before its buffers are written again.
    trit_status s = wait_one(p, &sl->act_send, "an activation sent to the next stage");
    if (s == TRIT_OK) s = wait_one(p, &sl->grad_send, "a gradient sent to the previous stage");
    if (s == TRIT_OK && p->stage > 0) s = wait_one(p, &sl->act_recv, "the activation of the previous stage");
    if (s != TRIT_OK) return s;
    const double t0 = now_ms();
    if (sl->s.input) memcpy(trit_tensor_ptr(sl->s.input), sl->act_in, p->bytes);
    s = fn(ctx, m, (int)(m % p->n));
    sl->poisoned = s == TRIT_ERR_NUMERIC && !sl->s.output;
    if (sl->poisoned) s = TRIT_OK;
    if (s == TRIT_OK && sl->s.output) memcpy(sl->act_out, trit_tensor_ptr(sl->s.output), p->bytes);
    *busy += now_ms() - t0;
    if (s != TRIT_OK || !sl->s.output) return s;
    int rc = MPI_Isend(sl->act_out, p->count, MPI_BYTE, p->stage + 1, TAG_ACT, trit_dist_comm(), &sl->act_send);
    if (rc == MPI_SUCCESS)
        rc = MPI_Irecv(trit_tensor_ptr(sl->dout), p->count, MPI_BYTE, p->stage + 1, TAG_GRAD, trit_dist_comm(),
                       &sl->grad_recv);
    return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "sending an activation");
}

static trit_status backward(trit_pipe *p, int64_t m, double *busy) {
    slot *sl = &p->slots[m % p->n];
    trit_status s = sl->s.output ? wait_one(p, &sl->grad_recv, "the gradient of the next stage") : TRIT_OK;
    if (s != TRIT_OK) return s;
    const double t0 = now_ms();
    const trit_tensor *dx = NULL;
    if (sl->poisoned) {
        for (size_t i = 0; sl->grad_out && i < p->bytes / sizeof(float); i++) ((float *)sl->grad_out)[i] = NAN;
    } else {
        s = sl->s.output ? trit_graph_backward_seed(sl->s.graph, sl->dout) : trit_graph_backward(sl->s.graph);
        dx = s == TRIT_OK && sl->s.input ? trit_graph_grad(sl->s.graph, sl->s.input) : NULL;
        if (s == TRIT_OK && sl->s.input && !dx) s = TRIT_ERR_STATE;  // message from trit_graph_grad
        if (dx) memcpy(sl->grad_out, trit_tensor_ptr(dx), p->bytes);
    }
    *busy += now_ms() - t0;
    if (s != TRIT_OK) return s;
    if (sl->s.input) {
        int rc = MPI_Isend(sl->grad_out, p->count, MPI_BYTE, p->stage - 1, TAG_GRAD, trit_dist_comm(), &sl->grad_send);
        if (rc != MPI_SUCCESS) return trit_dist_mpi_error(rc, "sending a gradient");
    }
    return post_act_recv(p, m + p->n);  // the slot is free for the micro-batch after its turn
}

// Action i of the stage's schedule: micro-batch *m, forward or backward.
static bool action(const trit_pipe *p, int64_t i, int64_t *m) {
    const int64_t M = p->micro;
    if (p->sched == TRIT_PIPE_GPIPE) {
        *m = i < M ? i : i - M;
        return i < M;
    }
    const int64_t warm = p->stages - 1 - p->stage < M ? p->stages - 1 - p->stage : M;
    if (i < warm) {
        *m = i;
        return true;
    }
    const int64_t j = i - warm;  // in turn: forward warm + j / 2, backward j / 2; then the backwards left
    if (j < 2 * (M - warm)) {
        *m = j % 2 == 0 ? warm + j / 2 : j / 2;
        return j % 2 == 0;
    }
    *m = M - warm + (j - 2 * (M - warm));
    return false;
}

trit_status trit_pipe_run(trit_pipe *p, trit_pipe_forward_fn fn, void *ctx, trit_pipe_times *times) {
    const double t0 = now_ms();
    double busy = 0;
    p->wait_ms = 0;
    const bool trace = trit_log_get_level() <= TRIT_LOG_DEBUG;
    trit_status s = TRIT_OK;
    for (int64_t m = 0; s == TRIT_OK && m < p->n; m++) s = post_act_recv(p, m);
    for (int64_t i = 0; s == TRIT_OK && i < 2 * p->micro; i++) {
        int64_t m;
        const double b0 = busy, w0 = p->wait_ms;
        const bool fwd = action(p, i, &m);
        s = fwd ? forward(p, m, fn, ctx, &busy) : backward(p, m, &busy);
        // Each action's compute and wait (TRIT_LOG=debug): bench/pipeline_replay.py replays a step's
        // measured durations through the schedule to tell the messages' cost from the stages'.
        if (trace)
            trit_log(TRIT_LOG_DEBUG, "pipeline: stage %d %c%lld busy %.3f wait %.3f ms", p->stage, fwd ? 'F' : 'B',
                     (long long)m, busy - b0, p->wait_ms - w0);
        progress(p);
    }
    for (int k = 0; s == TRIT_OK && k < p->n; k++) {
        s = wait_one(p, &p->slots[k].act_send, "an activation sent to the next stage");
        if (s == TRIT_OK) s = wait_one(p, &p->slots[k].grad_send, "a gradient sent to the previous stage");
    }
    times->busy_ms = busy;
    times->wait_ms = p->wait_ms;
    times->span_ms = now_ms() - t0;
    if (trace) trit_log(TRIT_LOG_DEBUG, "pipeline: stage %d span %.3f ms", p->stage, times->span_ms);
    return s;
}

trit_status trit_pipe_sum_tied(trit_pipe *p, float *grad, int64_t n) {
    const int last = p->stages - 1;
    if (p->stages == 1 || (p->stage != 0 && p->stage != last)) return TRIT_OK;
    if (n > INT_MAX) return trit_error(TRIT_ERR_UNSUPPORTED, "pipeline: a tied gradient of %lld values is more than one "
                                       "MPI message takes", (long long)n);
    float *other = malloc(sizeof *other * (size_t)(n > 0 ? n : 1));
    if (!other) return trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
    const int peer = p->stage == 0 ? last : 0;
    MPI_Request r[2];
    int rc = MPI_Irecv(other, (int)n, MPI_FLOAT, peer, TAG_GRAD + 1, trit_dist_comm(), &r[0]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(grad, (int)n, MPI_FLOAT, peer, TAG_GRAD + 1, trit_dist_comm(), &r[1]);
    trit_status s = rc == MPI_SUCCESS ? trit_dist_wait(r, 2, "the tied embedding's gradient of the other end",
                                                       &p->wait_ms)
                                      : trit_dist_mpi_error(rc, "exchanging the tied embedding's gradient");
    // Both ends add the same two numbers (addition commutes exactly), so their weights stay equal.
    for (int64_t i = 0; s == TRIT_OK && i < n; i++) grad[i] += other[i];
    free(other);
    return s;
}

trit_status trit_pipe_share(trit_pipe *p, trit_tensor *const *tensors, const int *owner, int n) {
    (void)p;
    MPI_Request *r = malloc(sizeof *r * (size_t)(n > 0 ? n : 1));
    if (!r) return trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
    trit_status s = TRIT_OK;
    int started = 0;
    for (int i = 0; s == TRIT_OK && i < n; i++) {
        const size_t bytes = trit_tensor_nbytes(tensors[i]);
        if (bytes > INT_MAX) {
            s = trit_error(TRIT_ERR_UNSUPPORTED, "pipeline: '%s' (%zu bytes) is more than one MPI message takes",
                           tensors[i]->name, bytes);
            break;
        }
        int rc = MPI_Ibcast(trit_tensor_ptr(tensors[i]), (int)bytes, MPI_BYTE, owner[i], trit_dist_comm(), &r[i]);
        if (rc != MPI_SUCCESS) s = trit_dist_mpi_error(rc, "MPI_Ibcast of a stage's weights");
        else started++;
    }
    trit_status w = started ? trit_dist_wait(r, started, "the weights of the other stages", NULL) : TRIT_OK;
    free(r);
    return s != TRIT_OK ? s : w;
}

void trit_pipe_free(trit_pipe *p) {
    if (!p) return;
    for (int k = 0; p->slots && k < p->n; k++) {
        slot *sl = &p->slots[k];
        MPI_Request *r[4] = {&sl->act_recv, &sl->grad_recv, &sl->act_send, &sl->grad_send};
        for (int j = 0; j < 4; j++) {
            if (*r[j] == MPI_REQUEST_NULL) continue;
            if (j < 2) MPI_Cancel(r[j]);
            MPI_Request_free(r[j]);
        }
        trit_tensor_free(sl->dout);
        free(sl->act_in);
        free(sl->act_out);
        free(sl->grad_out);
    }
    free(p->slots);
    free(p);
}
