// --dist pipeline: the model's blocks split into one stage a rank (src/dist/pipeline_mpi.c runs the
// schedule). Every rank holds the whole model but trains only its stage's parameters: its graphs
// are built over its blocks, its optimizer holds their state. The tied embedding is in the first
// stage (the token embedding) and the last (the head): both keep it, their gradients are summed
// between the two before the update, as Megatron-LM does. The step's loss comes from the last
// stage, the gradient norm is summed over the stages (the tied weight counted once), and before
// rank 0 evaluates or saves, each stage's weights are sent to every rank.
#define _POSIX_C_SOURCE 200809L
#include "trit/dist.h"
#include "trit/train.h"
#include "train/trainer.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct trit_pipeline {
    int stage, stages;
    int64_t *first;            // (stages + 1) stage s has blocks [first[s], first[s + 1])
    int64_t micro;
    trit_pipe_schedule sched;
    int n_slots;
    trit_gpt_stage *slots;     // (n_slots) one graph a micro-batch in flight
    trit_pipe *pipe;
    trit_tensor *tied;         // the token embedding when the first and the last stage both train it
    trit_tensor **counted;     // this stage's parameters in the gradient norm (the tied one on stage 0 only)
    int n_counted;
    trit_tensor **shared;      // every parameter that trains (on some stage), and the stage that trains it
    int *owner;
    int n_shared;
    double loss;               // the step's losses so far (last stage)
    bool finite;
    double t0;                 // when the step's schedule started (ms)
    double busy_ms, wait_ms;
    double *arena;             // (2 stages) each stage's activation arena (bytes, all its slots) and slots
    trit_tensor *idx, *targets;  // (B, T) i32: where a stage other than 0 reads its micro-batches
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

// Forward multiply-adds a token of a block, and of the head and loss (the embedding's lookup is
// near nothing): the costs that stages balance. Backward is about twice forward for all of them.
static void layer_costs(const trit_gpt_config *g, double *block, double *head) {
    const double C = (double)g->n_embd, T = (double)g->seq_len, hid = (double)trit_gpt_mlp_hidden(g);
    const double F = g->mlp == TRIT_MLP_SWIGLU ? 2 * hid : hid;
    *block = 4 * C * C + C * F + hid * C + T * C;  // q, k, v, projection; MLP; causal attention
    *head = C * (double)g->vocab_size + 4 * (double)g->vocab_size;
}

// Stage boundaries: contiguous runs of at least one block, the largest stage cost (the first
// with a small embedding cost, the last with the head) as small as it can be; of equal splits,
// the one with the fewest blocks on the later stages (the last has the head).
static trit_status partition(const trit_gpt_config *g, int P, int64_t *first) {
    const int64_t L = g->n_layer;
    double block, head;
    layer_costs(g, &block, &head);
    double *best = malloc(sizeof *best * (size_t)(P + 1) * (size_t)(L + 1));
    int64_t *cut = malloc(sizeof *cut * (size_t)(P + 1) * (size_t)(L + 1));
    if (!best || !cut) {
        free(best);
        free(cut);
        return trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
    }
#define AT(a, s, j) a[(size_t)(s) * (size_t)(L + 1) + (size_t)(j)]
    // best(s, j): the least largest cost of blocks [0, j) in stages 0 .. s - 1.
    for (int64_t j = 0; j <= L; j++) AT(best, 1, j) = j >= 1 ? (double)j * block + (P == 1 ? head : 0) : INFINITY;
    for (int s = 2; s <= P; s++)
        for (int64_t j = 0; j <= L; j++) {
            AT(best, s, j) = INFINITY;
            for (int64_t k = s - 1; k < j; k++) {
                const double c = (double)(j - k) * block + (s == P && j == L ? head : 0);
                const double v = AT(best, s - 1, k) > c ? AT(best, s - 1, k) : c;
                if (v <= AT(best, s, j)) {
                    AT(best, s, j) = v;
                    AT(cut, s, j) = k;
                }
            }
        }
    first[P] = L;
    for (int s = P; s >= 2; s--) first[s - 1] = AT(cut, s, first[s]);
    first[0] = 0;
#undef AT
    free(best);
    free(cut);
    return TRIT_OK;
}

static int stage_of_block(const trit_pipeline *p, int64_t b) {
    int s = 0;
    while (s + 1 < p->stages && b >= p->first[s + 1]) s++;
    return s;
}

// The stage that trains parameter `name` ("h.3.mlp.c_fc.weight": block 3's; the token and
// position embeddings the first; the final norm the last), and whether stage s uses it.
static int owner_of(const trit_pipeline *p, const char *name) {
    if (strncmp(name, "h.", 2) == 0) return stage_of_block(p, strtoll(name + 2, NULL, 10));
    if (strncmp(name, "wte.", 4) == 0 || strncmp(name, "wpe.", 4) == 0) return 0;
    return p->stages - 1;
}

static bool used_by(const trit_pipeline *p, const char *name, int s) {
    return owner_of(p, name) == s || (strncmp(name, "wte.", 4) == 0 && s == p->stages - 1);
}

trit_status trit_trainer_pipeline_check(const trit_train_config *c, int ranks) {
    if (c->stages != 0 && c->stages != ranks)
        return trit_error(TRIT_ERR_INVALID, "--stages %lld, but the job has %d ranks: a pipeline runs one stage a rank, "
                          "so pass --stages %d or start %lld ranks (mpirun -np %lld)", (long long)c->stages, ranks,
                          ranks, (long long)c->stages, (long long)c->stages);
    if (ranks > c->layers)
        return trit_error(TRIT_ERR_INVALID, "--dist pipeline with %d stages and --layers %lld: a stage holds at least "
                          "one block, so use at most %lld stages (mpirun -np %lld) or more layers", ranks,
                          (long long)c->layers, (long long)c->layers, (long long)c->layers);
    if (trit_train_config_task(c) == TRIT_TASK_EMBED || c->terngrad || c->offload != TRIT_OFFLOAD_OFF)
        return trit_error(TRIT_ERR_UNSUPPORTED, "--dist pipeline trains the language model without --terngrad and "
                          "--offload (and not --task embed): leave those out, or use --dist ddp");
    return TRIT_OK;
}

static trit_pipeline *pipeline_alloc(const trainer *t) {
    trit_pipeline *p = calloc(1, sizeof *p);
    if (p) p->first = calloc((size_t)t->ranks + 1, sizeof *p->first);
    if (!p || !p->first) {
        free(p);
        trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
        return NULL;
    }
    p->stage = t->rank;
    p->stages = t->ranks;
    p->micro = t->accum;
    p->sched = t->cfg.pipe_schedule == TRIT_TRAIN_PIPE_GPIPE ? TRIT_PIPE_GPIPE : TRIT_PIPE_1F1B;
    if (partition(trit_gpt_get_config(t->model), p->stages, p->first) != TRIT_OK) {
        free(p->first);
        free(p);
        return NULL;
    }
    return p;
}

trit_status trit_trainer_pipeline_own(trainer *t) {
    trit_pipeline *p = pipeline_alloc(t);
    if (!p) return TRIT_ERR_NOMEM;
    int n = 0;
    for (int i = 0; i < t->n_params; i++)
        if (used_by(p, t->params[i]->name, p->stage)) t->params[n++] = t->params[i];
    t->n_params = n;
    free(p->first);
    free(p);
    return TRIT_OK;
}

// The slots' graphs: blocks [first, end) of this stage for micro-batches of B x T.
static trit_status build_slots(trainer *t, trit_pipeline *p) {
    p->n_slots = trit_pipe_slots(p->sched, p->stage, p->stages, p->micro);
    p->slots = calloc((size_t)p->n_slots, sizeof *p->slots);
    trit_pipe_slot *ps = calloc((size_t)p->n_slots, sizeof *ps);
    trit_status s = p->slots && ps ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
    for (int k = 0; s == TRIT_OK && k < p->n_slots; k++) {
        s = trit_gpt_build_stage(t->model, t->cfg.batch, t->T, p->first[p->stage], p->first[p->stage + 1], &p->slots[k]);
        ps[k] = (trit_pipe_slot){p->slots[k].graph, p->slots[k].input, p->slots[k].output};
    }
    // The graph must train exactly what the optimizer holds.
    for (int i = 0; s == TRIT_OK && i < trit_graph_num_params(p->slots[0].graph); i++) {
        const trit_tensor *w = trit_graph_param(p->slots[0].graph, i);
        if (w->grad && !(w->flags & TRIT_FLAG_FROZEN) && !used_by(p, w->name, p->stage))
            s = trit_error(TRIT_ERR_STATE, "pipeline: stage %d reads '%s', which stage %d trains", p->stage, w->name,
                           owner_of(p, w->name));
    }
    if (s == TRIT_OK && !(p->pipe = trit_pipe_new(p->sched, p->micro, ps, p->n_slots))) s = TRIT_ERR_INVALID;
    free(ps);
    return s;
}

// The lists the step walks: the norm's parameters, the tied one, and every parameter's owner.
static trit_status make_lists(trainer *t, trit_pipeline *p) {
    const int n = trit_gpt_num_tensors(t->model);
    p->counted = malloc(sizeof *p->counted * (size_t)(t->n_params + 1));
    p->shared = malloc(sizeof *p->shared * (size_t)(n + 1));
    p->owner = malloc(sizeof *p->owner * (size_t)(n + 1));
    if (!p->counted || !p->shared || !p->owner) return trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
    for (int i = 0; i < t->n_params; i++) {
        trit_tensor *w = t->params[i];
        const bool tied = strncmp(w->name, "wte.", 4) == 0 && p->stages > 1 && w->grad && !(w->flags & TRIT_FLAG_FROZEN);
        if (tied) p->tied = w;
        if (!tied || p->stage == 0) p->counted[p->n_counted++] = w;
    }
    for (int i = 0; i < n; i++) {
        trit_tensor *w = trit_gpt_tensor(t->model, i);
        // Frozen weights (and a quantized base's codes) are alike on every rank already.
        if (!w->data || (w->flags & TRIT_FLAG_FROZEN)) continue;
        p->shared[p->n_shared] = w;
        p->owner[p->n_shared++] = owner_of(p, w->name);
    }
    return TRIT_OK;
}

// A rank other than 0 never evaluates: the whole model's training graph gives way to the
// stage's graphs, its two inputs to plain tensors the micro-batches are read into.
static trit_status drop_whole_graph(trainer *t, trit_pipeline *p) {
    const int64_t bt[2] = {t->cfg.batch, t->T};
    p->idx = trit_tensor_new(TRIT_I32, 2, bt);
    p->targets = trit_tensor_new(TRIT_I32, 2, bt);
    if (!p->idx || !p->targets) return trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
    trit_gpt_graph_free(&t->gg);
    t->gg.idx = p->idx;
    t->gg.targets = p->targets;
    return TRIT_OK;
}

trit_status trit_trainer_pipeline_new(trainer *t) {
    trit_pipeline *p = pipeline_alloc(t);
    if (!p) return TRIT_ERR_NOMEM;
    t->pipe = p;
    trit_status s = p->stage > 0 && t->task != TRIT_TASK_EMBED ? drop_whole_graph(t, p) : TRIT_OK;
    if (s == TRIT_OK) s = build_slots(t, p);
    if (s == TRIT_OK) s = make_lists(t, p);
    // Every stage's activation memory, for rank 0's header.
    if (s == TRIT_OK && !(p->arena = calloc(2 * (size_t)p->stages, sizeof *p->arena)))
        s = trit_error(TRIT_ERR_NOMEM, "pipeline: out of memory");
    for (int k = 0; s == TRIT_OK && k < p->n_slots; k++) {
        trit_graph_memory mem;
        s = trit_graph_memory_report(p->slots[k].graph, &mem);
        p->arena[2 * p->stage] += (double)mem.arena_bytes;
    }
    if (s == TRIT_OK) p->arena[2 * p->stage + 1] = p->n_slots;
    if (s == TRIT_OK) s = trit_dist_allreduce_f64(p->arena, 2 * p->stages, TRIT_DIST_SUM);
    // A resumed job: every stage's state must be of the step rank 0's is.
    double st[2] = {(double)t->step, -(double)t->step};
    if (s == TRIT_OK) s = trit_dist_allreduce_f64(st, 2, TRIT_DIST_MIN);
    if (s == TRIT_OK && st[0] != -st[1])
        s = trit_error(TRIT_ERR_FORMAT, "'%s': the stages' saved states are of steps %.0f to %.0f (a checkpoint "
                       "interrupted while written): start a new run, or resume from a copy", t->cfg.out, st[0], -st[1]);
    return s;
}

void trit_trainer_pipeline_free(trit_pipeline *p) {
    if (!p) return;
    trit_pipe_free(p->pipe);
    for (int k = 0; p->slots && k < p->n_slots; k++) trit_gpt_stage_free(&p->slots[k]);
    free(p->slots);
    free(p->first);
    free(p->counted);
    free(p->shared);
    free(p->owner);
    free(p->arena);
    trit_tensor_free(p->idx);
    trit_tensor_free(p->targets);
    free(p);
}

void trit_trainer_pipeline_print(const trainer *t, FILE *fp) {
    const trit_pipeline *p = t->pipe;
    const int64_t P = p->stages, M = p->micro, L = p->first[P];
    fprintf(fp, "pipeline: %lld stages, %s, %lld micro-batches a step; bubble (P - 1) / (M + P - 1) = %.1f%%\n",
            (long long)P, p->sched == TRIT_PIPE_GPIPE ? "GPipe" : "1F1B", (long long)M,
            100.0 * (double)(P - 1) / (double)(M + P - 1));
    for (int s = 0; s < p->stages; s++) {
        char blocks[64];
        if (p->first[s + 1] - p->first[s] == 1) snprintf(blocks, sizeof blocks, "block %lld", (long long)p->first[s]);
        else snprintf(blocks, sizeof blocks, "blocks %lld-%lld", (long long)p->first[s], (long long)p->first[s + 1] - 1);
        fprintf(fp, "  stage %d: %s%s%s; activations %.2f MB in %.0f graph%s (micro-batches in flight)\n", s,
                s == 0 ? "embedding, " : "", blocks, p->first[s + 1] == L ? ", final norm, head and loss" : "",
                p->arena[2 * s] / 1e6, p->arena[2 * s + 1], p->arena[2 * s + 1] == 1 ? "" : "s");
    }
}

// Micro-batch `micro` of the step forward in slot k: the first stage takes its tokens and the
// last its targets (the data of one process's micro-batch of that index), the dropout masks
// come from the same (seed, micro-batch) as in one process.
static trit_status slot_forward(void *ctx, int64_t micro, int k) {
    trainer *t = ctx;
    trit_pipeline *p = t->pipe;
    trit_gpt_stage *st = &p->slots[k];
    const int64_t batch = t->step * t->accum + micro;
    if (st->idx || st->targets) {
        trit_trainer_fill(t, batch, false);
        const trit_tensor *x = t->gg.idx, *y = t->gg.targets;  // (B, T) i32 each
        if (st->idx) memcpy(trit_tensor_ptr(st->idx), trit_tensor_ptr(x), trit_tensor_nbytes(st->idx));
        if (st->targets) memcpy(trit_tensor_ptr(st->targets), trit_tensor_ptr(y), trit_tensor_nbytes(st->targets));
    }
    trit_graph_set_rng(st->graph, (uint64_t)t->cfg.seed, (uint64_t)batch);
    trit_status s = trit_graph_forward(st->graph);
    if (!st->loss || (s != TRIT_OK && s != TRIT_ERR_NUMERIC)) return s;
    const double loss = trit_tensor_get_flat(st->loss, 0);
    if (s == TRIT_ERR_NUMERIC) {
        trit_clear_error();
        if (p->finite) p->loss = loss;  // the first loss that was not finite is the one reported
        p->finite = false;
    } else if (p->finite) {
        p->loss += loss;
    }
    return s;
}

trit_status trit_trainer_pipeline_accumulate(trainer *t, double scale, double *loss, bool *finite) {
    trit_pipeline *p = t->pipe;
    // The stages start together (the previous step's updates took them different times), so a
    // wait below is the schedule's.
    double sync = 0;
    trit_status s = trit_dist_allreduce_f64(&sync, 1, TRIT_DIST_SUM);
    p->t0 = now_ms();
    p->loss = 0;
    p->finite = true;
    for (int k = 0; k < p->n_slots; k++) trit_graph_set_grad_scale(p->slots[k].graph, scale / (double)t->accum);
    trit_pipe_times times = {0};
    if (s == TRIT_OK) s = trit_pipe_run(p->pipe, slot_forward, t, &times);
    p->busy_ms = times.busy_ms;
    p->wait_ms = times.wait_ms;
    *loss = p->loss;
    *finite = p->finite;
    return s;
}

trit_status trit_trainer_pipeline_exchange(trainer *t, bool stop, double *loss, bool *finite,
                                           trit_train_step_info *info) {
    trit_pipeline *p = t->pipe;
    const double w0 = now_ms();
    trit_status s = p->tied ? trit_pipe_sum_tied(p->pipe, trit_tensor_ptr(p->tied->grad), trit_tensor_numel(p->tied))
                            : TRIT_OK;
    // Gradients that are not finite on any stage skip the step on all of them: the global norm
    // finds them (trit_trainer_pipeline_clip), but a loss scaler checks each stage's own first.
    double norm = 0;
    bool grads_finite = true;
    if (s == TRIT_OK && *finite && t->use_scaler) {
        grads_finite = trit_optim_grad_norm(p->counted, p->n_counted, &norm) == TRIT_OK;
        if (!grads_finite) trit_clear_error();
    }
    double v[4] = {*loss, *finite ? 0.0 : 1.0, stop ? 1.0 : 0.0, grads_finite ? 0.0 : 1.0};
    if (s == TRIT_OK) s = trit_dist_allreduce_f64(v, 4, TRIT_DIST_SUM);
    const double span = now_ms() - p->t0;
    *loss = v[0];
    *finite = v[1] == 0 && v[3] == 0;
    t->stop_agreed = v[2] > 0;
    // The bubble: the stages' idle share of the schedule (from its common start to the last
    // stage's end), their mean.
    double idle = span > 0 ? 1.0 - p->busy_ms / span : 0;
    if (s == TRIT_OK) s = trit_dist_allreduce_f64(&idle, 1, TRIT_DIST_SUM);
    info->bubble = idle / (double)p->stages;
    info->bubble_ideal = (double)(p->stages - 1) / (double)(p->micro + p->stages - 1);
    info->comm_ms = p->wait_ms + (now_ms() - w0);
    return s;
}

trit_status trit_trainer_pipeline_clip(trainer *t, double max_norm, double *norm) {
    trit_pipeline *p = t->pipe;
    double local = 0;
    trit_status s = trit_optim_grad_norm(p->counted, p->n_counted, &local);
    if (s == TRIT_ERR_NUMERIC) trit_clear_error();
    double sum = s == TRIT_OK ? local * local : INFINITY;
    s = trit_dist_allreduce_f64(&sum, 1, TRIT_DIST_SUM);
    if (s != TRIT_OK) return s;
    *norm = sqrt(sum);
    if (!isfinite(*norm))
        return trit_error(TRIT_ERR_NUMERIC, "pipeline: the gradient norm over the stages is %g", *norm);
    // As trit_optim_clip_grad_norm: the factor in fp32 from the norm, applied when below 1.
    const float coef = (float)max_norm / ((float)*norm + 1e-6f);
    if (max_norm > 0 && coef < 1.0f) trit_grads_unscale(t->params, t->n_params, (double)coef);
    return TRIT_OK;
}

trit_status trit_trainer_pipeline_sync(trainer *t, bool eval, bool checkpoint) {
    trit_pipeline *p = t->pipe;
    if (!eval && !checkpoint) return TRIT_OK;
    trit_status s = trit_pipe_share(p->pipe, p->shared, p->owner, p->n_shared);
    // The other stages' optimizer states beside rank 0's checkpoint, written before it: the
    // state file rank 0 writes last is what a resume trusts.
    if (s == TRIT_OK && checkpoint && p->stage > 0) s = trit_trainer_checkpoint(t);
    return trit_dist_agree(s, "saving the stages' states");
}

trit_status trit_trainer_pipeline_state_name(const trainer *t, char *buf, size_t n) {
    if (!t->pipe && t->cfg.dist != TRIT_DIST_PIPELINE) return trit_error(TRIT_ERR_STATE, "not a pipeline run");
    if (t->rank == 0) return (size_t)snprintf(buf, n, "%s", TRIT_CKPT_STATE) < n ? TRIT_OK : TRIT_ERR_RANGE;
    return (size_t)snprintf(buf, n, "train_state.stage%dof%d.bin", t->rank, t->ranks) < n ? TRIT_OK : TRIT_ERR_RANGE;
}

trit_status trit_trainer_pipeline_check_resume(const trainer *t) {
    DIR *d = opendir(t->cfg.out);
    struct dirent *e;
    int saved = 0;
    while (d && (e = readdir(d)) != NULL && !saved)
        if (sscanf(e->d_name, "train_state.stage1of%d.bin", &saved) != 1) saved = 0;
    if (d) closedir(d);
    const int now = t->cfg.dist == TRIT_DIST_PIPELINE ? t->ranks : 1;
    if (saved == 0 || saved == now) return TRIT_OK;
    return trit_error(TRIT_ERR_INVALID, "'%s' was saved by a pipeline of %d stages (each with its own optimizer state, "
                      "train_state.stage*of%d.bin): resume it as one, mpirun -np %d trit train --dist pipeline "
                      "--resume %s", t->cfg.out, saved, saved, saved, t->cfg.out);
}
