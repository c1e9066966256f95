// Sharded checkpoints of --dist zero1|zero2|zero3. Each rank writes its optimizer shard to
// RUN/optim_shard.r<R>-of-<N>.step<S>.bin (the training-state format of checkpoint_state.c):
//   "zero.shard"   f64 (8): N, rank, first and end element of the shard, elements of the gradient
//                  block, CRC-32 of the weights, step, optimizer buffers that follow
//   "zero.pieces"  f64 (2 per buffer): the buffer's first element in its parameter, the
//                  parameter's elements
//   "<param>.<key>" f32 (1-D): the shard's piece of each optimizer buffer, named as in a
//                  single-process checkpoint
// then rank 0 writes model.safetensors and train_state.bin: the weights and counters, no
// optimizer values, and "zero.shards" f64 (3): N, the weights' CRC-32, step. The state file is
// written last, once every shard is on disk, and names its step: a crash in between leaves the
// previous checkpoint whole (its shards are removed only after the new state file is in place).
// The weights' CRC ties the shards to the state file: a shard of another run, or of another
// checkpoint of this one, is refused. Under zero3 rank 0 holds the whole weights for the
// checkpoint (trit_trainer_zero_hold) and shares their CRC; with shard groups (--shard-group G)
// N is G and the first group's ranks write the shards (the other groups hold the same ones).
#define _DEFAULT_SOURCE
#include "train/zero_train.h"
#include "trit/dist.h"
#include "io/io_internal.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { META = 8, MARK = 3 };

static trit_status shard_path(const char *dir, int rank, int ranks, int64_t step, char *buf, size_t n) {
    char name[96];
    snprintf(name, sizeof name, "optim_shard.r%d-of-%d.step%lld.bin", rank, ranks, (long long)step);
    return trit_path_join(buf, n, dir, name);
}

// CRC-32 of the weights the state file holds, in the model's order.
static uint32_t weights_crc(const trit_gpt *m) {
    uint32_t crc = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        if (trit_state_holds_weight(t)) crc = trit_crc32(crc, trit_tensor_ptr(t), trit_tensor_nbytes(t));
    }
    return crc;
}

static trit_state_entry f64_entry(const char *name, double *v, int64_t n) {
    return (trit_state_entry){.name = name, .role = "zero", .dtype = TRIT_F64, .ndim = 1, .shape = {n}, .count = n,
                              .data = v};
}

// The model's weights the state file holds, then `extra` (its data set by the caller); NULL when
// out of memory.
static trit_state_entry *weight_entries(const trit_gpt *m, int extra, int *n) {
    const int nw = trit_gpt_num_tensors(m);
    trit_state_entry *e = calloc((size_t)(nw + extra) + 1, sizeof *e);
    int k = 0;
    for (int i = 0; e && i < nw; i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i);
        if (trit_state_holds_weight(t)) e[k++] = trit_state_weight_entry(t);
    }
    *n = k;
    if (!e) trit_error(TRIT_ERR_NOMEM, "cannot list the training state");
    return e;
}

// This rank's shard file: its layout, the pieces, the optimizer's buffers (data NULL: filled
// by the caller's reads or pointing at the live buffers for a write).
static trit_state_entry *shard_entries(const trainer *t, double *meta, double **pieces, int *n) {
    const trainer_zero *zs = t->zero;
    const int no = trit_optim_num_state(t->opt);
    trit_state_entry *e = calloc((size_t)no + 3, sizeof *e);
    *pieces = calloc(2 * (size_t)no + 1, sizeof **pieces);
    if (!e || !*pieces) {
        free(e);
        free(*pieces);
        trit_error(TRIT_ERR_NOMEM, "cannot list the optimizer shard");
        return NULL;
    }
    e[0] = f64_entry("zero.shard", meta, META);
    e[1] = f64_entry("zero.pieces", *pieces, 2 * (int64_t)no);
    for (int i = 0; i < no; i++) {
        trit_optim_state_buf b;
        trit_optim_get_state(t->opt, i, &b);
        int j = 0;
        while (j < zs->n && zs->views[j] != b.param) j++;
        (*pieces)[2 * i] = j < zs->n ? (double)zs->at[j] : -1;
        (*pieces)[2 * i + 1] = j < zs->n ? (double)trit_tensor_numel(zs->full[j]) : -1;
        e[2 + i] = (trit_state_entry){.name = b.name, .role = "optim", .dtype = b.dtype, .ndim = b.ndim,
                                      .count = b.count, .data = b.data, .scales = b.scales, .num_scales = b.num_scales};
        memcpy(e[2 + i].shape, b.shape, sizeof e[2 + i].shape);
    }
    *n = no + 2;
    return e;
}

static void fill_meta(const trainer *t, uint32_t crc, double *meta) {
    const trainer_zero *zs = t->zero;
    const double v[META] = {zs->shards, zs->shard, (double)zs->lo, (double)zs->hi, (double)zs->count, crc, (double)t->step,
                            trit_optim_num_state(t->opt)};
    memcpy(meta, v, sizeof v);
}

static trit_train_state state_of(const trainer *t) {
    trit_train_state st = {.config = t->cfg, .step = t->step, .data_batches = t->step * t->accum,
                           .tokenizer_crc = t->tok_crc, .has_scaler = t->use_scaler, .scaler = t->scaler,
                           .skipped = t->skipped, .skip_streak = t->skip_streak};
    st.config.resume[0] = 0;
    st.config.stop_after = TRIT_TRAIN_UNSET;
    return st;
}

static trit_status write_shard(const trainer *t, const trit_train_state *st, uint32_t crc) {
    char path[TRIT_PATH_MAX + 128];
    double meta[META], *pieces = NULL;
    int n = 0;
    if (t->rank >= t->zero->shards) return TRIT_OK;  // another group's copy of the first group's shards
    trit_status s = shard_path(t->cfg.out, t->zero->shard, t->zero->shards, t->step, path, sizeof path);
    fill_meta(t, crc, meta);
    trit_state_entry *e = s == TRIT_OK ? shard_entries(t, meta, &pieces, &n) : NULL;
    if (!e) return s == TRIT_OK ? TRIT_ERR_NOMEM : s;
    s = trit_state_write(path, st, e, n, trit_optim_kind_name(trit_optim_get_config(t->opt)->kind),
                         trit_optim_get_step(t->opt));
    free(e);
    free(pieces);
    return s;
}

static trit_status write_state(const trainer *t, const trit_train_state *st, uint32_t crc) {
    char model[TRIT_PATH_MAX + 32], state[TRIT_PATH_MAX + 32];
    trit_status s = trit_trainer_path(t, TRIT_CKPT_MODEL, model, sizeof model);
    if (s == TRIT_OK) s = trit_trainer_path(t, TRIT_CKPT_STATE, state, sizeof state);
    if (s == TRIT_OK) s = trit_checkpoint_save_model(t->model, model, t->step);
    if (s == TRIT_OK && trit_gpt_get_config(t->model)->adapter.kind != TRIT_ADAPTER_NONE)
        s = trit_peft_save(t->model, t->cfg.out, t->cfg.init_from);
    int n = 0;
    trit_state_entry *e = s == TRIT_OK ? weight_entries(t->model, 1, &n) : NULL;
    if (!e) return s == TRIT_OK ? TRIT_ERR_NOMEM : s;
    double mark[MARK] = {t->zero->shards, crc, (double)t->step};
    e[n++] = f64_entry("zero.shards", mark, MARK);
    s = trit_state_write(state, st, e, n, trit_optim_kind_name(trit_optim_get_config(t->opt)->kind),
                         trit_optim_get_step(t->opt));
    free(e);
    return s;
}

trit_status trit_trainer_zero_checkpoint(trainer *t) {
    trainer_zero *zs = t->zero;
    const trit_train_state st = state_of(t);
    uint32_t crc = weights_crc(t->model);
    trit_status s = TRIT_OK;
    if (zs->stage == 3) {  // only rank 0 holds the whole weights
        double c = t->rank == 0 ? (double)crc : 0;
        s = trit_dist_allreduce_f64(&c, 1, TRIT_DIST_MAX);
        crc = (uint32_t)c;
    }
    if (s == TRIT_OK) s = trit_dist_agree(write_shard(t, &st, crc), "writing the optimizer shards");
    if (s == TRIT_OK) s = trit_dist_agree(t->rank == 0 ? write_state(t, &st, crc) : TRIT_OK, "writing the checkpoint");
    if (s != TRIT_OK) return s;
    if (zs->prev_ckpt >= 0 && zs->prev_ckpt != t->step && t->rank < zs->shards) {
        char old[TRIT_PATH_MAX + 128];
        if (shard_path(t->cfg.out, t->rank, zs->shards, zs->prev_ckpt, old, sizeof old) == TRIT_OK) unlink(old);
    }
    zs->prev_ckpt = t->step;
    return TRIT_OK;
}

// ---- resuming ---------------------------------------------------------------------------------

// The state file's "zero.shards" (N, weights' CRC, step): false when it has none (a checkpoint
// that is not sharded).
static bool read_mark(const char *path, double mark[MARK]) {
    trit_train_state st;
    int64_t ostep;
    const trit_state_entry e = f64_entry("zero.shards", mark, MARK);
    if (trit_state_read(path, &st, &e, 1, &ostep) == TRIT_OK) return true;
    trit_clear_error();
    return false;
}

static trit_status refuse_ranks(const char *dir, int saved, int ranks) {
    return trit_error(TRIT_ERR_INVALID, "'%s' holds a checkpoint whose optimizer state is sharded over %d ranks "
                      "(--dist zero1|zero2|zero3), and this job has %d: resume it with `mpirun -np %d trit train --resume %s` "
                      "(zero3: or --shard-group %d on a multiple of %d ranks), or merge the shards with `trit merge-shards %s --out DIR` and resume DIR on any number of "
                      "ranks", dir, saved, ranks, saved, dir, saved, saved, dir);
}

trit_status trit_trainer_zero_refuse_sharded(const trainer *t, const char *path) {
    // Cheap first: a sharded run directory has shard files.
    DIR *d = opendir(t->cfg.out);
    bool any = false;
    for (struct dirent *e; d && !any && (e = readdir(d)) != NULL;) any = strncmp(e->d_name, "optim_shard.", 12) == 0;
    if (d) closedir(d);
    double mark[MARK];
    if (!any || !read_mark(path, mark)) return TRIT_OK;
    return refuse_ranks(t->cfg.out, (int)mark[0], t->ranks);
}

// A checkpoint that is not sharded (a merged one, or one of DDP or a single process): the whole
// optimizer state is read once into a full optimizer, and this rank keeps its pieces.
static trit_status restore_unsharded(trainer *t, const char *path, trit_train_state *st) {
    trit_optim *full = trit_trainer_new_optim(&t->cfg, t->params, t->n_params);
    if (!full) return TRIT_ERR_INVALID;
    trit_status s = trit_state_load(path, st, t->model, full);
    for (int i = 0; s == TRIT_OK && i < trit_optim_num_state(t->opt); i++) {
        trit_optim_state_buf b, fb;
        trit_optim_get_state(t->opt, i, &b);
        int j = 0, k = 0;
        while (j < t->zero->n && t->zero->views[j] != b.param) j++;
        while (k < trit_optim_num_state(full) && (trit_optim_get_state(full, k, &fb) != TRIT_OK || strcmp(fb.name, b.name) != 0))
            k++;
        if (j == t->zero->n || k == trit_optim_num_state(full) || fb.dtype != TRIT_F32 || b.dtype != TRIT_F32)
            s = trit_error(TRIT_ERR_FORMAT, "'%s': no whole optimizer buffer '%s' to take this rank's piece from", path,
                           b.name);
        else
            memcpy(b.data, (float *)fb.data + t->zero->at[j], sizeof(float) * (size_t)b.count);
    }
    if (s == TRIT_OK) s = trit_optim_set_step(t->opt, trit_optim_get_step(full));
    trit_optim_free(full);
    return s;
}

// This rank's shard file against the state file's mark and this job's layout.
static trit_status check_meta(const trainer *t, const char *path, const double *meta, const double *mark) {
    const trainer_zero *zs = t->zero;
    if ((uint32_t)meta[5] != (uint32_t)mark[1] || meta[6] != mark[2])
        return trit_error(TRIT_ERR_FORMAT, "'%s' is the optimizer shard of another run, or of another checkpoint of "
                          "this one (saved at step %.0f with weights of CRC-32 %08x; the state file is at step %.0f "
                          "with weights of CRC-32 %08x): put back this run's own shard files, or start a new run",
                          path, meta[6], (uint32_t)meta[5], mark[2], (uint32_t)mark[1]);
    if (meta[0] != zs->shards || meta[1] != zs->shard || meta[2] != (double)zs->lo || meta[3] != (double)zs->hi ||
        meta[4] != (double)zs->count || meta[7] != trit_optim_num_state(t->opt))
        return trit_error(TRIT_ERR_FORMAT, "'%s' holds elements [%.0f, %.0f) of %.0f (rank %.0f of %.0f, %.0f buffers); "
                          "this rank needs [%lld, %lld) of %lld (%d buffers): the shard is from another model or "
                          "config", path, meta[2], meta[3], meta[4], meta[1], meta[0], meta[7], (long long)zs->lo,
                          (long long)zs->hi, (long long)zs->count, trit_optim_num_state(t->opt));
    return TRIT_OK;
}

static trit_status restore_shard(trainer *t, const char *path, trit_train_state *st, const double *mark) {
    int n = 0;
    int64_t ostep = 0;
    trit_state_entry *w = weight_entries(t->model, 0, &n);
    if (!w) return TRIT_ERR_NOMEM;
    trit_status s = trit_state_read(path, st, w, n, &ostep);
    free(w);
    if (s != TRIT_OK) return s;
    if (weights_crc(t->model) != (uint32_t)mark[1])
        return trit_error(TRIT_ERR_FORMAT, "'%s': the weights do not match the CRC-32 the checkpoint recorded: the "
                          "file was changed after it was written", path);
    char shard[TRIT_PATH_MAX + 128];
    if ((s = shard_path(t->cfg.out, t->zero->shard, t->zero->shards, st->step, shard, sizeof shard)) != TRIT_OK) return s;
    if (access(shard, R_OK) != 0)
        return trit_error(TRIT_ERR_IO, "cannot resume: '%s' is missing (%s): the checkpoint at step %lld is sharded "
                          "over %d ranks and needs every rank's shard file", shard, strerror(errno),
                          (long long)st->step, t->zero->shards);
    double meta[META] = {0}, *pieces = NULL;
    trit_state_entry *e = shard_entries(t, meta, &pieces, &n);
    if (!e) return TRIT_ERR_NOMEM;
    // The meta first: a shard of another layout has other buffer sizes, and that message is the clearer.
    trit_train_state sst;
    s = trit_state_read(shard, &sst, e, 1, &ostep);
    if (s == TRIT_OK) s = check_meta(t, shard, meta, mark);
    if (s == TRIT_OK) s = trit_state_read(shard, &sst, e, n, &ostep);
    for (int i = 0; s == TRIT_OK && i < n - 2; i++)
        if (pieces[2 * i] < 0) s = trit_error(TRIT_ERR_FORMAT, "'%s': buffer %d belongs to no parameter", shard, i);
    free(e);
    free(pieces);
    if (s == TRIT_OK) s = trit_optim_set_step(t->opt, ostep);
    return s;
}

trit_status trit_trainer_zero_restore(trainer *t, const char *path, trit_train_state *st) {
    double mark[MARK];
    trit_status s = trit_state_peek(path, st);
    if (s != TRIT_OK) return s;
    if (!read_mark(path, mark)) return restore_unsharded(t, path, st);
    if ((int)mark[0] != t->zero->shards) return refuse_ranks(t->cfg.out, (int)mark[0], t->zero->shards);
    s = restore_shard(t, path, st, mark);
    if (s == TRIT_OK) t->zero->prev_ckpt = st->step;
    return s;
}
