// The training loop: for each step, accumulate gradients over the step's micro-batches (each
// backward scaled by 1/n), clip by global norm, take an AdamW step at the scheduled learning
// rate; log, validate, sample and checkpoint on their intervals. Every input of step s (its
// data, dropout masks, learning rate) is a pure function of s, so a resumed run repeats the
// uninterrupted one bit for bit.
#define _POSIX_C_SOURCE 200809L
#include "trit/train.h"
#include "train/trainer.h"
#include "trit/bench.h"
#include "trit/dist.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop_requested;

void trit_train_request_stop(void) { stop_requested = 1; }

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

// The backward passes of one step: each micro-batch's loss scaled by (loss scale) / accum. Rank
// r of N data-parallel ranks runs the step's micro-batches r * accum / N .. (r + 1) * accum / N - 1,
// the ones one process would run there, so the data and dropout masks do not depend on N (the
// ranks of a tensor-parallel group run the same ones). *loss gets the sum
// of this rank's losses; *finite is false when a loss was not finite (then *loss is that loss
// and the remaining micro-batches are not run).
static trit_status accumulate(trainer *t, double scale, double *loss, bool *finite) {
    trit_graph *g = t->gg.graph;
    const int64_t local = t->accum / t->dp_ranks;
    if (t->tgx) trit_terngrad_dist_begin(t->tgx, t->step);
    trit_graph_set_grad_scale(g, scale / (double)t->accum);
    double sum = 0;
    *finite = true;
    for (int64_t micro = 0; micro < local; micro++) {
        int64_t batch = t->step * t->accum + t->dp_rank * local + micro;
        trit_trainer_fill(t, batch, false);
        trit_graph_set_rng(g, (uint64_t)t->cfg.seed, (uint64_t)batch);
        if (t->ddp || t->tgx) trit_graph_set_micro(g, micro, local);  // the exchange starts in the last one
        trit_status s = trit_graph_forward(g);
        if (s == TRIT_ERR_NUMERIC) {
            trit_clear_error();
            *finite = false;
            *loss = trit_tensor_get_flat(t->gg.loss, 0);
            // zero3: the gathers the other ranks make in the passes this rank skips
            s = trit_trainer_zero_skip_micro(t, false);
            for (int64_t m = micro + 1; s == TRIT_OK && m < local; m++) s = trit_trainer_zero_skip_micro(t, true);
            return s;
        }
        if (s != TRIT_OK) return s;
        sum += trit_tensor_get_flat(t->gg.loss, 0);
        s = trit_graph_backward(g);
        if (s != TRIT_OK) return s;
    }
    *loss = sum;
    return TRIT_OK;
}

// --dist with more than one rank: the gradient sum finished (a rank whose loss was not finite
// sends NaN, so every rank skips the step), and the losses, the finite flags and the stop
// requests summed, so every rank takes the same decisions.
static trit_status exchange(trainer *t, double *loss, bool *finite) {
    trit_dist_heartbeat(t->step, true);
    trit_status s = t->tgx ? trit_terngrad_dist_finish(t->tgx, !*finite, &t->comm_ms)
                           : trit_ddp_finish(t->ddp, !*finite, &t->comm_ms);
    double v[3] = {*loss, *finite ? 0.0 : 1.0, stop_requested ? 1.0 : 0.0};
    if (s == TRIT_OK) s = trit_dist_allreduce_f64(v, 3, TRIT_DIST_SUM);
    *loss = v[0];
    *finite = v[1] == 0;
    t->stop_agreed = v[2] > 0;
    return s;
}

// --terngrad: each gradient of at least --terngrad-min-size values goes through its wire form
// (TernGrad: 2-bit codes and a scale, as a data-parallel exchange would send it) and back, the
// draws keyed by (seed, step, parameter). Returns false on a non-finite gradient.
static bool ternarize_grads(trainer *t) {
    const trit_train_config *c = &t->cfg;
    for (int i = 0; i < t->n_params; i++) {
        trit_tensor *g = t->params[i]->grad;
        const int64_t n = g ? trit_tensor_numel(g) : 0;
        if (n < c->terngrad_min_size || g->dtype != TRIT_F32) continue;
        const uint64_t stream = TRIT_STREAM_TERNGRAD ^ ((uint64_t)t->step << 16 | (uint64_t)i);
        if (trit_terngrad_encode(g->data, n, c->terngrad_bucket, c->terngrad_clip, (uint64_t)c->seed, stream,
                                 t->tern_codes, t->tern_scales) != TRIT_OK) {
            trit_clear_error();
            return false;
        }
        memset(g->data, 0, sizeof(float) * (size_t)n);
        trit_terngrad_accumulate(t->tern_codes, t->tern_scales, n, c->terngrad_bucket, g->data);
    }
    return true;
}

// The update of a process that holds every gradient: the unscale, the optional TernGrad round
// trip (unless the exchange was ternary), the norm (clipping by it), and the optimizer step;
// *finite false skips the step.
static trit_status update(trainer *t, double lr, double scale, const trit_train_hooks *hooks, trit_train_step_info *info,
                          bool *finite_io) {
    bool finite = *finite_io;
    trit_status s = TRIT_OK;
    if (finite && hooks && hooks->on_grads) hooks->on_grads(hooks->ctx, t->step, t->params, t->n_params);
    // Without a scaler the norm below finds a non-finite gradient on its own.
    if (finite && t->use_scaler) finite = trit_grads_unscale(t->params, t->n_params, 1.0 / scale);
    if (finite && t->cfg.terngrad && !t->tgx) finite = ternarize_grads(t);  // else the exchange was ternary
    info->grad_norm = NAN;
    if (finite) {
        s = t->pipe     ? trit_trainer_pipeline_clip(t, t->cfg.clip, &info->grad_norm)
            : t->tensor ? trit_trainer_tensor_clip(t, t->cfg.clip, &info->grad_norm)
            : t->cfg.clip > 0 ? trit_optim_clip_grads(t->opt, t->cfg.clip, &info->grad_norm)
                              : trit_optim_grad_norm(t->params, t->n_params, &info->grad_norm);
        if (s == TRIT_ERR_NUMERIC) {  // finite values whose squares overflow: not usable either
            trit_clear_error();
            finite = false;
            s = TRIT_OK;
        }
    }
    if (s == TRIT_OK && finite) s = trit_optim_step(t->opt, lr);
    *finite_io = finite;
    return s;
}

// One step. A non-finite loss or gradient skips the update (weights and optimizer state stay
// as they are, the optimizer's step count too) and backs the loss scale off; the step still
// counts, so the data position stays a function of the step.
static trit_status train_step(trainer *t, double lr, const trit_train_hooks *hooks, trit_train_step_info *info) {
    info->lr = lr;
    if (t->zero) trit_trainer_zero_zero_grads(t);
    else trit_optim_zero_grad(t->opt);
    const double scale = t->use_scaler ? t->scaler.scale : 1.0;
    info->loss_scale = t->use_scaler ? scale : NAN;
    bool finite;
    double loss;
    trit_dist_heartbeat(t->step, false);
    if (t->tensor) trit_trainer_tensor_begin(t);
    trit_status s = t->pipe ? trit_trainer_pipeline_accumulate(t, scale, &loss, &finite)
                            : accumulate(t, scale, &loss, &finite);
    info->comm_ms = info->comm_bytes = info->bubble = info->bubble_ideal = NAN;
    if (s == TRIT_OK && t->tensor) {
        s = trit_trainer_tensor_exchange(t, stop_requested != 0, &loss, &finite, info);
    } else if (s == TRIT_OK && (t->ddp || t->tgx)) {
        s = exchange(t, &loss, &finite);
        info->comm_ms = t->comm_ms;
        info->comm_bytes = t->tgx ? (double)trit_terngrad_dist_bytes_per_step(t->tgx).total
                                  : (double)trit_ddp_bytes_per_step(t->ddp);
    } else if (s == TRIT_OK && t->pipe) {
        s = trit_trainer_pipeline_exchange(t, stop_requested != 0, &loss, &finite, info);
    } else {
        t->stop_agreed = stop_requested;
    }
    if (s != TRIT_OK) return s;
    info->loss = finite ? loss / (double)t->accum : loss;
    // --dist zero1|zero2: unscaling, the norm and clipping over the shards, and the update of this
    // rank's shard followed by the all-gather of the parameters (zero_train.c).
    s = t->zero ? trit_trainer_zero_update(t, lr, scale, info, &finite) : update(t, lr, scale, hooks, info, &finite);
    if (s != TRIT_OK) return s;
    if (finite) trit_gpt_ternary_weights_changed(t->model);  // ternary codes packed again once per step
    if (t->use_scaler) trit_loss_scaler_update(&t->scaler, finite);
    t->skipped += !finite;
    t->skip_streak = finite ? 0 : t->skip_streak + 1;
    info->was_skipped = !finite;
    info->skipped = t->skipped;
    t->step++;
    return TRIT_OK;
}

trit_status trit_trainer_step(trainer *t, const trit_train_hooks *hooks, trit_train_step_info *info) {
    const trit_train_config *c = &t->cfg;
    // Two stages: the groups of >= 2-D weights (all but the last) take the second stage's weight decay.
    for (int g = 0; t->sched.kind == TRIT_LR_TWO_STAGE && g < trit_optim_num_groups(t->opt) - 1; g++) {
        trit_status s = trit_optim_set_group(t->opt, g, 1.0,
                                             t->step >= t->sched.stage2_at ? c->stage2_weight_decay : c->weight_decay);
        if (s != TRIT_OK) return s;
    }
    return train_step(t, trit_lr_at(&t->sched, t->step), hooks, info);
}

static trit_status too_many_skips(const trainer *t) {
    return trit_error(TRIT_ERR_NUMERIC, "%lld steps in a row had a non-finite loss or gradient (the last at step "
                      "%lld; %lld skipped in all), so the run stopped with a checkpoint in %s: lower --lr "
                      "(now %g), check the data, or train in --precision bf16 or fp32; --max-skips sets the "
                      "limit", (long long)t->skip_streak, (long long)t->step, (long long)t->skipped, t->cfg.out,
                      t->cfg.lr);
}

// Bytes the parameters hold as stored: their dtype's size (16-bit weights without master copies
// take 2 a parameter), with the scales and zero points of a quantized one.
static size_t param_bytes(const trainer *t) {
    size_t b = 0;
    for (int i = 0; i < t->n_params; i++) {
        const trit_tensor *p = t->params[i];
        b += trit_tensor_nbytes(p) + (p->quant ? trit_quant_info_bytes(p->quant) : 0);
    }
    return b;
}

static void print_header(const trainer *t) {
    const trit_train_config *c = &t->cfg;
    const trit_gpt_config *g = trit_gpt_get_config(t->model);
    int64_t np = trit_gpt_num_params(trit_trainer_whole_model(t));
    printf("model: %lld layers, %lld heads, dim %lld, context %lld, vocab %lld: %lld parameters (%.2f MB)\n",
           (long long)g->n_layer, (long long)g->n_head, (long long)g->n_embd, (long long)g->seq_len,
           (long long)g->vocab_size, (long long)np, (double)param_bytes(t) / 1e6);
    if (t->task == TRIT_TASK_ADDITION)
        printf("data: %lld-digit addition problems, e.g. \"123+456=9750\" (answer digits reversed)\n",
               (long long)c->digits);
    else if (t->task == TRIT_TASK_EMBED)
        printf("data: %lld train pairs, %lld held out (sentence embeddings: %s pooling, InfoNCE at temperature %g)\n",
               (long long)trit_embed_num_pairs(t, false), (long long)trit_embed_num_pairs(t, true),
               c->pool == TRIT_POOL_LAST ? "last-token" : "mean", c->temperature);
    else
        printf("data: %lld train tokens, %lld val tokens (%s order)\n",
               (long long)trit_data_num_tokens(t->train), (long long)trit_data_num_tokens(t->val),
               c->order == TRIT_DATA_SEQUENTIAL ? "sequential" : "random");
    char ranks[48] = "";
    const int dp = t->pipe ? 1 : t->dp_ranks;  // a pipeline's (a tensor group's) ranks share the layers, not the batch
    if (dp > 1) snprintf(ranks, sizeof ranks, " x %d ranks", dp);
    printf("batch: %lld x %lld tokens x %lld accumulation%s = %lld tokens/step; %lld steps, lr %g -> %g, "
           "warmup %lld; threads %d\n", (long long)c->batch, (long long)t->T, (long long)(t->accum / dp), ranks,
           (long long)(c->batch * t->T * t->accum), (long long)c->steps, c->lr, c->min_lr,
           (long long)c->warmup, trit_threads_get());
    if (t->ddp)
        printf("ddp: %d ranks, gradients %s in %d bucket%s of up to %g MB during backward (%.2f MB a step)\n",
               t->dp_ranks, c->dist == TRIT_DIST_ZERO2 || c->dist == TRIT_DIST_ZERO3 ? "reduce-scattered" : "all-reduced",
               trit_ddp_num_buckets(t->ddp), trit_ddp_num_buckets(t->ddp) == 1 ? "" : "s", c->bucket_mb,
               (double)trit_ddp_bytes_per_step(t->ddp) / 1e6);
    if (t->tgx) trit_trainer_print_terngrad_dist(t, stdout);
    if (t->pipe) trit_trainer_pipeline_print(t, stdout);
    if (t->tensor) trit_trainer_tensor_print(t, stdout);
    if (g->adapter.kind == TRIT_ADAPTER_LORA)
        printf("lora: r %lld, alpha %g (scale %g), dropout %g, targets %s: %lld trainable parameters (%.2f%%), the "
               "rest frozen\n", (long long)g->adapter.r, g->adapter.alpha, trit_adapter_scale(&g->adapter),
               g->adapter.dropout, g->adapter.targets, (long long)trit_gpt_num_trainable(t->model),
               100.0 * (double)trit_gpt_num_trainable(t->model) / (double)np);
    else if (g->adapter.kind == TRIT_ADAPTER_BOTTLENECK)
        printf("bottleneck adapters: width %lld after attention and after the MLP: %lld trainable parameters (%.2f%%), "
               "the rest frozen\n", (long long)g->adapter.r, (long long)trit_gpt_num_trainable(t->model),
               100.0 * (double)trit_gpt_num_trainable(t->model) / (double)np);
    trit_memory_report mem;
    const bool have_mem = trit_memory_report_make(t->gg.graph, t->opt, 0, &mem) == TRIT_OK;
    if (have_mem && t->zero) trit_trainer_zero_memory(t, &mem);
    if (have_mem) trit_memory_report_print(&mem, "memory: ", stdout);
    if (t->zero) trit_trainer_zero_print(t, stdout);
    if (c->freeze[0] && have_mem) {
        // What the frozen values would hold if they trained: an f32 gradient each, and the
        // optimizer's state at its bytes per trainable value.
        char rules[2 * TRIT_PATH_MAX];
        trit_train_freeze_describe(c->freeze, rules, sizeof rules);
        const double frozen = (double)(np - t->trainable);
        printf("frozen: %s: %lld of %lld parameters train (%.2f%%); the frozen ones hold no gradients (%.2f MB "
               "saved) and no optimizer state (%.2f MB saved)\n", rules, (long long)t->trainable, (long long)np,
               100.0 * (double)t->trainable / (double)np, 4.0 * frozen / 1e6,
               (double)mem.optimizer / (double)t->trainable * frozen / 1e6);
    }
    trit_trainer_print_recompute(t, stdout);
    if (t->init && t->init_step > 0)
        printf("initialised from %s (its weights at step %lld), with a fresh optimizer and schedule\n", c->init_from,
               (long long)t->init_step);
    else if (t->init)  // `trit quantize` saves no step
        printf("initialised from %s, with a fresh optimizer and schedule\n", c->init_from);
    if (t->resumed) printf("resuming %s at step %lld\n", c->out, (long long)t->step);
    fflush(stdout);
}

typedef struct loop_clock {
    double interval_ms;  // step time since the last log line
    int64_t interval_n;
    double run_ms;       // step time of this run
    int64_t run_n;
} loop_clock;

static void log_step(trainer *t, trit_train_step_info *info, loop_clock *clk, double last_val) {
    double ms = clk->interval_ms / (double)clk->interval_n;
    double tps = (double)(t->cfg.batch * t->T * t->accum) / (ms / 1e3);
    double eta = (double)(t->cfg.steps - t->step) * (clk->run_ms / (double)clk->run_n) / 1e3;
    trit_train_step_info shown = *info;
    shown.ms = ms;
    if (!t->cfg.quiet) trit_progress_print(&shown, last_val, tps, eta);
    trit_metrics_write(t->metrics, &shown, tps);
    if (trit_metrics_tb_write(t->tb, trit_wall_seconds(), &shown, tps) != TRIT_OK) {
        // Losing the TensorBoard copy is not worth the run: say so once and go on without it.
        fprintf(stderr, "trit train: %s; TensorBoard output stops here\n", trit_last_error());
        trit_tb_close(t->tb);
        t->tb = NULL;
    }
    clk->interval_ms = 0;
    clk->interval_n = 0;
}

static trit_status run_loop(trainer *t, const trit_train_hooks *hooks, trit_train_result *r) {
    const trit_train_config *c = &t->cfg;
    int64_t end = c->stop_after > 0 && c->stop_after < c->steps ? c->stop_after : c->steps;
    loop_clock clk = {0};
    double last_val = NAN;
    trit_status s = TRIT_OK;
    while (s == TRIT_OK && t->step < end) {
        double t0 = now_ms();
        trit_train_step_info info = {.steps = c->steps, .val_loss = NAN, .accuracy = NAN};
        s = trit_trainer_step(t, hooks, &info);
        if (s != TRIT_OK) break;
        double ms = now_ms() - t0;
        clk.interval_ms += ms;
        clk.run_ms += ms;
        clk.interval_n++;
        clk.run_n++;
        info.step = t->step;
        info.ms = ms;
        const bool give_up = t->skip_streak >= c->max_skips;
        bool last = t->step == c->steps;
        if (t->pipe)  // every stage's weights to rank 0 before it evaluates or saves (collective)
            s = trit_trainer_pipeline_sync(t, !give_up && (last || (c->eval_every > 0 && t->step % c->eval_every == 0)),
                                           t->stop_agreed || t->step == end || give_up ||
                                               (c->ckpt_every > 0 && t->step % c->ckpt_every == 0));
        if (s != TRIT_OK) break;
        const bool eval_due = !give_up && (last || (c->eval_every > 0 && t->step % c->eval_every == 0));
        // zero3: rank 0 gathers the whole weights before it evaluates or saves (every rank takes part).
        if (t->ranks > 1 && (s = trit_trainer_zero_hold(t, eval_due || t->stop_agreed || t->step == end || give_up ||
                                                               (c->ckpt_every > 0 && t->step % c->ckpt_every == 0))) != TRIT_OK)
            break;
        // Rank 0 evaluates and writes for the job; the others go on to the next step's exchange.
        // A tensor-parallel group evaluates together, rank 0 then samples from the whole model.
        bool eval = eval_due && (t->rank == 0 || t->tensor);
        if (eval && t->tensor) s = trit_trainer_tensor_sync(t);
        if (eval && s == TRIT_OK) {
            s = trit_trainer_val_loss(t, &info.val_loss);
            last_val = info.val_loss;
            if (s == TRIT_OK && t->task == TRIT_TASK_ADDITION && t->rank == 0)
                s = trit_trainer_show(t, c->task_test, 0, &info.accuracy);
        }
        if (s != TRIT_OK) break;
        if (eval || give_up || t->step % c->log_every == 0 || t->step == 1) log_step(t, &info, &clk, last_val);
        if (eval && t->task == TRIT_TASK_TEXT && t->rank == 0) {
            double unused;
            s = trit_trainer_show(t, 0, 0, &unused);
        }
        r->step = t->step;
        r->loss = info.loss;
        if (eval) r->val_loss = info.val_loss;
        if (!isnan(info.accuracy)) r->accuracy = info.accuracy;
        if (hooks && hooks->on_step) hooks->on_step(hooks->ctx, &info);
        // One process stops at once (a hook above may have asked); a job at the step where every
        // rank learnt of the request, in the step's exchange.
        const bool asked = t->ranks > 1 ? t->stop_agreed : stop_requested != 0;
        bool stop = asked || t->step == end || give_up;
        // Under --dist zero every rank writes its optimizer shard; a tensor-parallel group gathers.
        const bool ckpt = stop || (c->ckpt_every > 0 && t->step % c->ckpt_every == 0);
        if (s == TRIT_OK && (t->rank == 0 || t->zero || t->tensor) && ckpt) {
            s = trit_trainer_checkpoint(t);
            if (s == TRIT_OK && !c->quiet && (asked || !last))
                printf("checkpoint: %s at step %lld\n", c->out, (long long)t->step);
        }
        if (s == TRIT_OK && !stop) s = trit_trainer_zero_hold(t, false);  // at the end rank 0 keeps them
        if (s == TRIT_OK && give_up) {
            s = too_many_skips(t);
            break;
        }
        if (asked) {
            r->interrupted = true;
            if (!c->quiet) printf("stopped at step %lld: resume with --resume %s\n", (long long)t->step, c->out);
            break;
        }
    }
    return s;
}

trit_status trit_train_run(const trit_train_config *cfg, const trit_train_hooks *hooks,
                           trit_train_result *result) {
    trit_train_result r = {.val_loss = NAN, .accuracy = NAN, .loss = NAN};
    double t0 = now_ms();
    trainer t;
    trit_status s = trit_trainer_setup(&t, cfg);
    if (s != TRIT_OK) {
        trit_trainer_free(&t, true);
        if (result) *result = r;
        return s;
    }
    r.step = t.step;
    snprintf(r.out, sizeof r.out, "%s", t.cfg.out);
    r.num_params = trit_gpt_num_params(trit_trainer_whole_model(&t));
    if (!t.cfg.quiet) print_header(&t);
    // What loading took and what training holds are two figures: a fine-tune's base loads with
    // copies the steps no longer have.
    r.peak_rss_setup = trit_peak_rss_bytes();
    r.peak_rss_base = t.peak_rss_base;
    const bool steps_peak = trit_peak_rss_reset();
    // SIGUSR1 too: mpirun forwards it to every rank (Open MPI refuses to forward SIGINT and
    // SIGTERM, which make it abort the job and exit 1), so `kill -USR1 <mpirun>` stops a job
    // with a checkpoint and exit 0.
    struct sigaction sa, old_int, old_term, old_usr1;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND;  // a second Ctrl-C ends the process (writes are atomic)
    sigemptyset(&sa.sa_mask);
    stop_requested = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGUSR1, &sa, &old_usr1);
    if (t.step >= t.cfg.steps && !t.cfg.quiet)
        printf("the run in %s is complete (step %lld of %lld)\n", t.cfg.out, (long long)t.step,
               (long long)t.cfg.steps);
    s = run_loop(&t, hooks, &r);
    // A job stops at the step where any rank asked, and mpirun forwards SIGUSR1 to one rank after
    // another: a rank can leave training before its own copy arrives. Where that copy would then
    // end the process (the default action), SIGUSR1 is left ignored instead of restored.
    if (t.ranks > 1 && r.interrupted && !(old_usr1.sa_flags & SA_SIGINFO) && old_usr1.sa_handler == SIG_DFL)
        old_usr1.sa_handler = SIG_IGN;
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGUSR1, &old_usr1, NULL);
    if (s == TRIT_OK && t.task == TRIT_TASK_ADDITION && !r.interrupted && t.step == t.cfg.steps && t.rank == 0) {
        // A few problems shown; the score comes from the last evaluation.
        double acc = NAN;
        if (!t.cfg.quiet) printf("held-out problems:\n");
        s = trit_trainer_show(&t, isnan(r.accuracy) ? t.cfg.task_test : 5, 5, &acc);
        if (isnan(r.accuracy)) r.accuracy = acc;
    }
    r.seconds = (now_ms() - t0) / 1e3;
    r.peak_rss_steps = steps_peak ? trit_peak_rss_bytes() : 0;
    trit_trainer_free(&t, false);
    if (result) *result = r;
    return s;
}
