// --dist tensor: Megatron-LM's tensor parallelism (Shoeybi et al. 2019). The job's ranks form
// groups of --tp consecutive ranks; a group holds one copy of the model with each block's c_attn
// and c_fc split by columns (heads, hidden units) and its projections by the matching rows
// (nn/gpt_tp.c), so a rank keeps 1 / tp of the block matrices and their gradients and optimizer
// state, and a block costs two sums over the group in forward and two in backward
// (src/dist/tensor_mpi.c). The groups are data-parallel replicas of each other: each runs its
// share of the step's micro-batches, and the replicas of a piece sum its gradients with DDP's
// buckets. Embeddings, norms and the head are whole on every rank and see the same values, so
// their gradients agree without an exchange. World rank 0 keeps the whole model, into which the
// pieces are gathered before it samples or saves; a checkpoint is a normal run directory (whole
// weights and optimizer state), which resumes on one process or any group size.
#include "trit/dist.h"
#include "trit/io.h"
#include "trit/train.h"
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct trainer_tensor {
    trit_tp *tp;
    trit_allreduce sum;
    trit_gpt *whole;          // world rank 0's whole model, else NULL
    trit_tensor **split;      // trained parameters split across the group (their norm is summed over it)
    trit_tensor **kept;       // trained parameters whole on every rank
    int n_split, n_kept;
    double split_bytes;       // this rank's pieces of the block matrices, and the whole matrices' bytes
    double whole_split_bytes;
};

static int group_size(const trit_train_config *c, int ranks) { return c->tp > 0 ? (int)c->tp : ranks; }

trit_gpt *trit_trainer_whole_model(const trainer *t) {
    return t->tensor && t->tensor->whole ? t->tensor->whole : t->model;
}

trit_status trit_trainer_tensor_check(const trit_train_config *c, int ranks) {
    if (c->dist != TRIT_DIST_TENSOR) return TRIT_OK;
    const int T = group_size(c, ranks);
    if (ranks % T != 0)
        return trit_error(TRIT_ERR_INVALID, "--tp %d does not divide the job's %d rank%s: a tensor-parallel group has "
                          "--tp ranks and the job a whole number of groups; pass --tp a divisor of %d, or start a "
                          "multiple of %d ranks (mpirun -np %d)%s", T, ranks, ranks == 1 ? "" : "s", ranks, T, T,
                          c->resume[0] ? "; a tensor-parallel checkpoint holds the whole model, so --dist off or "
                                         "another --tp resumes it too" : "");
    trit_gpt_config g = trit_gpt_config_default();
    g.n_head = c->heads;
    g.n_embd = c->dim;
    g.mlp = (trit_mlp_kind)c->mlp;
    g.subln = c->subln != 0;
    trit_status s = trit_train_config_adapter(c, &g.adapter);
    if (s == TRIT_OK) s = trit_gpt_tp_check(&g, T);
    if (s != TRIT_OK) return s;
    if (c->optimizer != TRIT_TRAIN_ADAMW || c->terngrad || c->offload != TRIT_OFFLOAD_OFF || c->qat != TRIT_QAT_OFF ||
        !c->master_weights || trit_train_config_task(c) == TRIT_TASK_EMBED)
        return trit_error(TRIT_ERR_UNSUPPORTED, "--dist tensor trains the language model's f32 weights with AdamW, "
                          "element by element: leave out --optimizer other than adamw, --terngrad, --offload, "
                          "--qat/--ternary, --master-weights off and --task embed, or use --dist ddp");
    return TRIT_OK;
}

trit_status trit_trainer_tensor_join(trainer *t) {
    trainer_tensor *x = calloc(1, sizeof *x);
    if (!x) return trit_error(TRIT_ERR_NOMEM, "tensor parallel: out of memory");
    t->tensor = x;
    x->tp = trit_tp_new(group_size(&t->cfg, t->ranks));
    if (!x->tp) return TRIT_ERR_INVALID;
    x->sum = trit_tp_sum(x->tp);
    t->dp_rank = trit_tp_replica(x->tp);
    t->dp_ranks = trit_tp_replicas(x->tp);
    return TRIT_OK;
}

trit_status trit_trainer_tensor_shard(trainer *t) {
    trainer_tensor *x = t->tensor;
    trit_gpt *s = trit_gpt_tp_shard(t->model, trit_tp_rank(x->tp), trit_tp_size(x->tp), &x->sum);
    if (!s) return TRIT_ERR_INVALID;
    if (t->rank == 0) x->whole = t->model;
    else trit_gpt_free(t->model);
    t->model = s;
    return TRIT_OK;
}

trit_status trit_trainer_tensor_start(trainer *t) {
    trainer_tensor *x = t->tensor;
    x->split = malloc(sizeof *x->split * ((size_t)t->n_params + 1));
    x->kept = malloc(sizeof *x->kept * ((size_t)t->n_params + 1));
    if (!x->split || !x->kept) return trit_error(TRIT_ERR_NOMEM, "tensor parallel: out of memory");
    for (int i = 0; i < t->n_params; i++) {
        trit_tensor *w = t->params[i];
        const bool split = trit_gpt_tp_split_of(w->name).dim >= 0;
        if (split) {
            x->split_bytes += (double)trit_tensor_nbytes(w);
            x->whole_split_bytes += (double)trit_tensor_nbytes(w) * trit_tp_size(x->tp);
        }
        if (!w->grad || (w->flags & TRIT_FLAG_FROZEN)) continue;
        if (split) x->split[x->n_split++] = w;
        else x->kept[x->n_kept++] = w;
    }
    if (trit_tp_replicas(x->tp) > 1 &&
        !(t->ddp = trit_tp_ddp_new(x->tp, trit_gpt_flat(t->model), t->gg.graph, t->cfg.bucket_mb)))
        return TRIT_ERR_INVALID;
    return TRIT_OK;
}

void trit_trainer_tensor_free(trainer *t) {
    trainer_tensor *x = t->tensor;
    if (!x) return;
    trit_tp_free(x->tp);
    trit_gpt_free(x->whole);
    free(x->split);
    free(x->kept);
    free(x);
    t->tensor = NULL;
}

void trit_trainer_tensor_print(const trainer *t, FILE *fp) {
    const trainer_tensor *x = t->tensor;
    const trit_gpt_config *g = trit_gpt_get_config(t->model);
    const int T = trit_tp_size(x->tp), D = trit_tp_replicas(x->tp);
    char rep[64] = "";
    if (D > 1) snprintf(rep, sizeof rep, " x %d data-parallel replicas", D);
    fprintf(fp, "tensor: groups of %d rank%s%s; a rank computes %lld of %lld heads and %lld of %lld MLP units and "
            "holds %.2f MB of the block matrices' %.2f MB; %lld sums of (B, T, C) a micro-batch forward and %lld "
            "backward\n", T,
            T == 1 ? "" : "s", rep, (long long)(g->n_head / T), (long long)g->n_head,
            (long long)(trit_gpt_mlp_hidden(g) / T), (long long)trit_gpt_mlp_hidden(g), x->split_bytes / 1e6,
            x->whole_split_bytes / 1e6, (long long)(2 * g->n_layer), (long long)(2 * g->n_layer));
}

void trit_trainer_tensor_begin(trainer *t) {
    double ms;
    int64_t bytes;
    trit_tp_take_stats(t->tensor->tp, &ms, &bytes);  // the evaluation's sums are not the step's
}

trit_status trit_trainer_tensor_exchange(trainer *t, bool stop, double *loss, bool *finite,
                                         trit_train_step_info *info) {
    trainer_tensor *x = t->tensor;
    trit_dist_heartbeat(t->step, true);
    double wait = 0, tp_ms = 0;
    int64_t tp_bytes = 0;
    trit_status s = t->ddp ? trit_ddp_finish(t->ddp, !*finite, &wait) : TRIT_OK;
    trit_tp_take_stats(x->tp, &tp_ms, &tp_bytes);
    // A loss scaler skips a step on its own rank's gradients (trit_grads_unscale), but a split
    // gradient can overflow on one rank of a group only: the ranks agree on it first.
    bool grads_finite = true;
    double norm = 0;
    if (s == TRIT_OK && *finite && t->use_scaler) {
        grads_finite = trit_optim_grad_norm(t->params, t->n_params, &norm) == TRIT_OK;
        if (!grads_finite) trit_clear_error();
    }
    // Every rank of a group has the same loss: one of them counts it.
    double v[4] = {trit_tp_rank(x->tp) == 0 ? *loss : 0.0, *finite ? 0.0 : 1.0, stop ? 1.0 : 0.0,
                   grads_finite ? 0.0 : 1.0};
    if (s == TRIT_OK) s = trit_dist_allreduce_f64(v, 4, TRIT_DIST_SUM);
    *loss = v[0];
    *finite = v[1] == 0 && v[3] == 0;
    t->stop_agreed = v[2] > 0;
    t->comm_ms = wait + tp_ms;
    info->comm_ms = t->comm_ms;
    info->comm_bytes = (double)(trit_ddp_bytes_per_step(t->ddp) + tp_bytes);
    return s;
}

trit_status trit_trainer_tensor_clip(trainer *t, double max_norm, double *norm) {
    trainer_tensor *x = t->tensor;
    double ns = 0, nk = 0;
    trit_status s = trit_optim_grad_norm(x->split, x->n_split, &ns);
    if (s == TRIT_ERR_NUMERIC) trit_clear_error();
    double sum = s == TRIT_OK ? ns * ns : INFINITY;
    s = trit_tp_group_sum_f64(x->tp, &sum, 1);
    if (s != TRIT_OK) return s;
    s = trit_optim_grad_norm(x->kept, x->n_kept, &nk);
    if (s == TRIT_ERR_NUMERIC) return s;
    *norm = sqrt(sum + nk * nk);
    if (!isfinite(*norm))
        return trit_error(TRIT_ERR_NUMERIC, "tensor parallel: the gradient norm over the group is %g", *norm);
    // As trit_optim_clip_grad_norm: the factor in fp32 from the norm, applied when below 1.
    const float coef = (float)max_norm / ((float)*norm + 1e-6f);
    if (max_norm > 0 && coef < 1.0f) trit_grads_unscale(t->params, t->n_params, (double)coef);
    return TRIT_OK;
}

// ---- the whole model on rank 0 -------------------------------------------------------------------

// One split buffer (a parameter's piece, or its optimizer state's) gathered over the group into
// `whole` (shaped as the whole parameter; read on rank 0 only). Collective over the group.
static trit_status gather(trainer_tensor *x, const trit_tensor *whole_param, const void *piece, size_t piece_bytes,
                          size_t elem, void *whole) {
    const int T = trit_tp_size(x->tp), r = trit_tp_rank(x->tp);
    uint8_t *all = r == 0 ? malloc(piece_bytes * (size_t)T + 1) : NULL;
    if (r == 0 && !all) return trit_error(TRIT_ERR_NOMEM, "tensor parallel: out of memory gathering '%s'",
                                          whole_param->name);
    trit_status s = trit_tp_gather(x->tp, piece, all, piece_bytes);
    for (int k = 0; s == TRIT_OK && r == 0 && k < T; k++)
        trit_gpt_tp_copy_piece(trit_gpt_tp_split_of(whole_param->name), whole_param->ndim, whole_param->shape, elem,
                               whole, all + (size_t)k * piece_bytes, k, T, true);
    free(all);
    return s;
}

// The group's weights into rank 0's whole model (the first group's: the replicas hold the same).
static trit_status gather_weights(trainer *t) {
    trainer_tensor *x = t->tensor;
    trit_status s = TRIT_OK;
    for (int i = 0; s == TRIT_OK && i < trit_gpt_num_tensors(t->model); i++) {
        const trit_tensor *p = trit_gpt_tensor(t->model, i);
        trit_tensor *w = x->whole ? trit_gpt_tensor(x->whole, i) : NULL;
        const size_t elem = trit_dtype_size(p->dtype);
        if (trit_gpt_tp_split_of(p->name).dim >= 0)
            s = gather(x, w ? w : p, trit_tensor_ptr(p), trit_tensor_nbytes(p), elem, w ? trit_tensor_ptr(w) : NULL);
        else if (w)
            memcpy(trit_tensor_ptr(w), trit_tensor_ptr(p), trit_tensor_nbytes(p));
    }
    return s;
}

trit_status trit_trainer_tensor_sync(trainer *t) {
    trit_status s = trit_tp_replica(t->tensor->tp) == 0 ? gather_weights(t) : TRIT_OK;
    return trit_dist_agree(s, "gathering the weights on rank 0");
}

// Rank 0's entries of the state file: the whole weights, then each optimizer buffer, whole (the
// split ones gathered into bufs[i], owned by the caller).
static trit_status gather_state(trainer *t, trit_state_entry *e, int *n, void **bufs) {
    trainer_tensor *x = t->tensor;
    const bool root = t->rank == 0;
    int k = 0;
    for (int i = 0; root && i < trit_gpt_num_tensors(x->whole); i++) e[k++] = trit_state_weight_entry(trit_gpt_tensor(x->whole, i));
    trit_status s = TRIT_OK;
    for (int i = 0; s == TRIT_OK && i < trit_optim_num_state(t->opt); i++) {
        trit_optim_state_buf b;
        s = trit_optim_get_state(t->opt, i, &b);
        if (s != TRIT_OK) break;
        const trit_tensor *wp = x->whole ? trit_gpt_find(x->whole, b.param->name) : b.param;
        if (!wp) return TRIT_ERR_STATE;
        if (b.dtype != TRIT_F32 || b.scales || b.count != trit_tensor_numel(b.param))
            return trit_error(TRIT_ERR_UNSUPPORTED, "tensor parallel: optimizer buffer '%s' is not f32 values shaped "
                              "like its parameter", b.name);
        void *data = b.data;
        if (trit_gpt_tp_split_of(b.param->name).dim >= 0) {
            if (root && !(bufs[i] = malloc(sizeof(float) * (size_t)trit_tensor_numel(wp) + 1)))
                return trit_error(TRIT_ERR_NOMEM, "tensor parallel: out of memory gathering '%s'", b.name);
            s = gather(x, wp, b.data, sizeof(float) * (size_t)b.count, sizeof(float), bufs[i]);
            data = bufs[i];
        }
        if (!root) continue;
        e[k] = (trit_state_entry){.name = b.name, .role = "optim", .dtype = TRIT_F32, .ndim = wp->ndim,
                                  .count = trit_tensor_numel(wp), .data = data};
        memcpy(e[k].shape, wp->shape, sizeof e[k].shape);
        k++;
    }
    *n = k;
    return s;
}

static trit_status save(trainer *t) {
    const int nw = trit_gpt_num_tensors(t->model), no = trit_optim_num_state(t->opt);
    trit_state_entry *e = calloc((size_t)(nw + no) + 1, sizeof *e);
    void **bufs = calloc((size_t)no + 1, sizeof *bufs);
    trit_status s = e && bufs ? gather_weights(t) : trit_error(TRIT_ERR_NOMEM, "tensor parallel: out of memory");
    int n = 0;
    if (s == TRIT_OK) s = gather_state(t, e, &n, bufs);
    char model[TRIT_PATH_MAX + 32], state[TRIT_PATH_MAX + 32];
    if (s == TRIT_OK && t->rank == 0) s = trit_trainer_path(t, TRIT_CKPT_MODEL, model, sizeof model);
    if (s == TRIT_OK && t->rank == 0) s = trit_trainer_path(t, TRIT_CKPT_STATE, state, sizeof state);
    // The weights file first, the state file (what a resume trusts) last.
    if (s == TRIT_OK && t->rank == 0) s = trit_checkpoint_save_model(t->tensor->whole, model, t->step);
    trit_train_state st = {.config = t->cfg, .step = t->step, .data_batches = t->step * t->accum,
                           .tokenizer_crc = t->tok_crc, .has_scaler = t->use_scaler, .scaler = t->scaler,
                           .skipped = t->skipped, .skip_streak = t->skip_streak};
    st.config.resume[0] = 0;
    st.config.stop_after = TRIT_TRAIN_UNSET;
    if (s == TRIT_OK && t->rank == 0)
        s = trit_state_write(state, &st, e, n, trit_optim_kind_name(trit_optim_get_config(t->opt)->kind),
                             trit_optim_get_step(t->opt));
    for (int i = 0; bufs && i < no; i++) free(bufs[i]);
    free(bufs);
    free(e);
    return s;
}

trit_status trit_trainer_tensor_checkpoint(trainer *t) {
    trit_status s = trit_tp_replica(t->tensor->tp) == 0 ? save(t) : TRIT_OK;
    return trit_dist_agree(s, "writing the checkpoint");
}

// ---- resume -----------------------------------------------------------------------------------

static const trit_state_entry *entry_named(const trit_state_list *l, const char *name, const char *role) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->entries[i].name, name) == 0 && strcmp(l->entries[i].role, role) == 0) return &l->entries[i];
    return NULL;
}

// This rank's piece of the whole buffer e into piece (count values of param p's split).
static trit_status take(const trainer *t, const char *path, const trit_state_entry *e, const trit_tensor *p,
                        void *piece, int64_t count, const char *what) {
    const int T = trit_tp_size(t->tensor->tp);
    const trit_gpt_tp_split sp = trit_gpt_tp_split_of(p->name);
    if (!e) return trit_error(TRIT_ERR_FORMAT, "'%s' has no %s '%s' to resume from", path, what, p->name);
    if (e->dtype != TRIT_F32 || e->ndim != p->ndim || e->count != count * (sp.dim >= 0 ? T : 1))
        return trit_error(TRIT_ERR_FORMAT, "'%s': %s '%s' is %lld %s values, this rank's piece of it %lld f32 (of %d)",
                          path, what, e->name, (long long)e->count, trit_dtype_name(e->dtype), (long long)count,
                          sp.dim >= 0 ? T : 1);
    trit_gpt_tp_copy_piece(sp, e->ndim, e->shape, sizeof(float), e->data, piece, trit_tp_rank(t->tensor->tp), T, false);
    return TRIT_OK;
}

// A frozen weight that a one-process checkpoint's state leaves to model.safetensors
// (trit_state_holds_weight): its whole values read from there into *held (the caller frees
// it), as the entry take() cuts this rank's piece from.
static trit_status frozen_entry(trainer *t, trit_safetensors **f, const trit_tensor *p, trit_tensor **held,
                                trit_state_entry *e) {
    char model[TRIT_PATH_MAX + 32];
    const trit_safetensors_info *info = NULL;
    trit_status s = trit_trainer_path(t, TRIT_CKPT_MODEL, model, sizeof model);
    if (s == TRIT_OK) s = trit_state_frozen_find(f, model, p->name, &info);
    if (s == TRIT_OK && !(*held = trit_tensor_new(TRIT_F32, info->ndim, info->shape))) s = TRIT_ERR_NOMEM;
    if (s == TRIT_OK) s = trit_safetensors_load(*f, p->name, *held);
    if (s == TRIT_OK) *e = trit_state_weight_entry(*held);
    return s;
}

trit_status trit_trainer_tensor_restore(trainer *t, const char *path, trit_train_state *st) {
    trit_state_list l;
    trit_status s = trit_state_list_read(path, &l);
    if (s != TRIT_OK) return s;
    const char *kind = trit_optim_kind_name(trit_optim_get_config(t->opt)->kind);
    if (strcmp(l.optim_kind, kind) != 0)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' holds the state of optimizer %s, this run trains with %s", path,
                       l.optim_kind, kind);
    trit_safetensors *model = NULL;
    for (int i = 0; s == TRIT_OK && i < trit_gpt_num_tensors(t->model); i++) {
        trit_tensor *p = trit_gpt_tensor(t->model, i), *held = NULL;
        const trit_state_entry *e = entry_named(&l, p->name, "weight");
        trit_state_entry fe;
        if (!e && p->data && (p->flags & TRIT_FLAG_FROZEN) && (s = frozen_entry(t, &model, p, &held, &fe)) == TRIT_OK)
            e = &fe;
        if (s == TRIT_OK) s = take(t, path, e, p, trit_tensor_ptr(p), trit_tensor_numel(p), "weight");
        trit_tensor *w = t->tensor->whole ? trit_gpt_tensor(t->tensor->whole, i) : NULL;
        if (s == TRIT_OK && w) memcpy(trit_tensor_ptr(w), e->data, trit_tensor_nbytes(w));
        trit_tensor_free(held);
    }
    trit_safetensors_close(model);
    for (int i = 0; s == TRIT_OK && i < trit_optim_num_state(t->opt); i++) {
        trit_optim_state_buf b;
        s = trit_optim_get_state(t->opt, i, &b);
        if (s == TRIT_OK && b.dtype != TRIT_F32)
            s = trit_error(TRIT_ERR_UNSUPPORTED, "tensor parallel: optimizer buffer '%s' is not f32", b.name);
        if (s == TRIT_OK)
            s = take(t, path, entry_named(&l, b.name, "optim"), b.param, b.data, b.count, "optimizer buffer");
    }
    if (s == TRIT_OK) s = trit_optim_set_step(t->opt, l.optim_step);
    if (s == TRIT_OK) *st = l.state;
    trit_state_list_free(&l);
    return s;
}
