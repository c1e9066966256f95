// Trainer setup: the config (merged with the checkpoint's on --resume), the tokenizer and data,
// the model, its training graph and the optimizer, and on resume their saved state. A fresh run
// that fails here removes the files and directory it made.
#define _POSIX_C_SOURCE 200809L
#include "trit/bench.h"
#include "trit/dist.h"
#include "trit/io.h"
#include "trit/train.h"
#include "train/trainer.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

trit_status trit_trainer_path(const trainer *t, const char *name, char *buf, size_t n) {
    return trit_path_join(buf, n, t->cfg.out, name);
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void note_made(trainer *t, const char *path) {
    if (t->n_made < 4) snprintf(t->made[t->n_made++], sizeof t->made[0], "%s", path);
}

// Temp files "<name>.tmp.<pid>" left by a run that was killed while writing: removed when
// their process is gone (a live one may still be writing).
static void remove_stale_temps(const char *dir) {
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        const char *tmp = strstr(e->d_name, ".tmp.");
        if (!tmp) continue;
        char *end = NULL;
        long pid = strtol(tmp + 5, &end, 10);
        if (*end != 0 || pid <= 0 || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char path[TRIT_PATH_MAX + 300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
}

static trit_status resume_config(const trit_train_config *cli, trit_train_config *out) {
    char path[TRIT_PATH_MAX + 32];
    trit_status s = trit_path_join(path, sizeof path, cli->resume, TRIT_CKPT_STATE);
    trit_train_state st;
    if (s == TRIT_OK && !exists(path))
        return trit_error(TRIT_ERR_IO, "cannot resume: '%s' has no %s (is it a run directory written by "
                          "`trit train --out`?)", cli->resume, TRIT_CKPT_STATE);
    if (s == TRIT_OK) s = trit_state_peek(path, &st);
    if (s != TRIT_OK) return s;
    return trit_train_config_merge(out, &st.config, cli);
}

// A fresh run must not write over another run's checkpoint.
static trit_status make_run_dir(trainer *t) {
    char path[TRIT_PATH_MAX + 32];
    trit_status s = trit_trainer_path(t, TRIT_CKPT_STATE, path, sizeof path);
    if (s == TRIT_OK && exists(path))
        return trit_error(TRIT_ERR_INVALID,
                          "'%s' already holds a training run: pass --resume %s to continue it, or "
                          "choose another --out", t->cfg.out, t->cfg.out);
    bool made = false;
    if (s == TRIT_OK) s = trit_make_dir(t->cfg.out, &made);
    t->made_dir = t->made_dir || made;
    return s;
}

static trit_status open_shards(trainer *t, const char *dir) {
    char train[TRIT_PATH_MAX + 32], val[TRIT_PATH_MAX + 32];
    trit_status s = trit_path_join(train, sizeof train, dir, TRIT_DATA_TRAIN);
    if (s == TRIT_OK) s = trit_path_join(val, sizeof val, dir, TRIT_DATA_VAL);
    if (s != TRIT_OK) return s;
    t->train = trit_data_open(train, t->T);
    if (t->train) t->val = trit_data_open(val, t->T);
    return t->train && t->val ? TRIT_OK : TRIT_ERR_INVALID;  // message from trit_data_open
}

// Text from a `trit prepare` directory: its tokenizer is copied into the run directory.
static trit_status setup_prepared(trainer *t) {
    char tok_path[TRIT_PATH_MAX + 32];
    trit_status s = trit_path_join(tok_path, sizeof tok_path, t->cfg.data, TRIT_CKPT_TOKENIZER);
    if (s != TRIT_OK) return s;
    if (!exists(tok_path))
        return trit_error(TRIT_ERR_IO, "'%s' is a directory without %s: pass a text file or a directory "
                          "made by `trit prepare`", t->cfg.data, TRIT_CKPT_TOKENIZER);
    t->tok = trit_tokenizer_load(tok_path);
    if (!t->tok) return TRIT_ERR_FORMAT;
    char what[TRIT_PATH_MAX + 48];
    snprintf(what, sizeof what, "'%s'", tok_path);
    s = trit_trainer_init_check_tokenizer(t, t->tok, what);
    if (s == TRIT_OK) s = open_shards(t, t->cfg.data);
    if (s == TRIT_OK && !t->resumed && t->rank == 0) s = make_run_dir(t);
    if (s == TRIT_OK && !t->resumed && t->rank == 0) {
        char dst[TRIT_PATH_MAX + 32];
        s = trit_trainer_path(t, TRIT_CKPT_TOKENIZER, dst, sizeof dst);
        if (s == TRIT_OK) s = trit_tokenizer_save(t->tok, dst);
        if (s == TRIT_OK) note_made(t, dst);
    }
    return s;
}

// --init-from: the text tokenized with RUN's tokenizer.
static trit_status prepare_with_run_tokenizer(trainer *t, trit_prepare_result *pr) {
    trit_status s = trit_prepare_text_with(t->cfg.data, t->init_tok, t->cfg.val_fraction, t->cfg.out, pr);
    if (s == TRIT_OK) return s;
    char why[768];
    snprintf(why, sizeof why, "%s", trit_last_error());
    return trit_error(s, "--data '%s' with the tokenizer of --init-from '%s': %s", t->cfg.data, t->cfg.init_from, why);
}

// Text from a file: a fresh run tokenizes it into the run directory; a resume reuses that.
static trit_status setup_text_file(trainer *t) {
    trit_status s = TRIT_OK;
    if (!t->resumed && t->rank == 0) {  // the other ranks read what rank 0 wrote
        char state[TRIT_PATH_MAX + 32];
        s = trit_trainer_path(t, TRIT_CKPT_STATE, state, sizeof state);
        if (s == TRIT_OK && exists(state)) return make_run_dir(t);  // the "already a run" error
        bool had_dir = is_dir(t->cfg.out);
        trit_prepare_result pr;
        if (s == TRIT_OK && t->init)
            s = prepare_with_run_tokenizer(t, &pr);
        else if (s == TRIT_OK)
            s = trit_prepare_text(t->cfg.data, (trit_tokenizer_kind)t->cfg.tokenizer, t->cfg.vocab,
                                  t->cfg.val_fraction, t->cfg.out, &pr);
        if (s != TRIT_OK) return s;
        t->made_dir = !had_dir;
        const char *names[] = {TRIT_CKPT_TOKENIZER, TRIT_DATA_TRAIN, TRIT_DATA_VAL};
        for (int i = 0; i < 3; i++) {
            char p[TRIT_PATH_MAX + 32];
            if (trit_trainer_path(t, names[i], p, sizeof p) == TRIT_OK) note_made(t, p);
        }
    }
    char tok_path[TRIT_PATH_MAX + 32];
    s = trit_trainer_path(t, TRIT_CKPT_TOKENIZER, tok_path, sizeof tok_path);
    if (s == TRIT_OK && !(t->tok = trit_tokenizer_load(tok_path))) s = TRIT_ERR_FORMAT;
    if (s == TRIT_OK) s = open_shards(t, t->cfg.out);
    return s;
}

static trit_status setup_addition(trainer *t) {
    char tok_path[TRIT_PATH_MAX + 32];
    trit_status s = trit_trainer_path(t, TRIT_CKPT_TOKENIZER, tok_path, sizeof tok_path);
    if (s != TRIT_OK) return s;
    if (t->resumed) {
        t->tok = trit_tokenizer_load(tok_path);
    } else {
        t->tok = trit_addition_tokenizer();
        if (t->tok) s = trit_trainer_init_check_tokenizer(t, t->tok, "the addition task's tokenizer");
        if (s == TRIT_OK && t->tok && t->rank == 0) s = make_run_dir(t);
        if (s == TRIT_OK && t->tok && t->rank == 0) {
            s = trit_tokenizer_save(t->tok, tok_path);
            if (s == TRIT_OK) note_made(t, tok_path);
        }
    }
    if (s == TRIT_OK && !t->tok) s = TRIT_ERR_FORMAT;
    if (s == TRIT_OK) s = trit_addition_init(&t->add, t->cfg.digits, t->tok);
    return s;
}

// --task embed: the base's tokenizer (a resume's own copy), then the pairs, read and checked
// before the run directory is made.
static trit_status setup_embed(trainer *t) {
    char tok_path[TRIT_PATH_MAX + 32];
    trit_status s = trit_trainer_path(t, TRIT_CKPT_TOKENIZER, tok_path, sizeof tok_path);
    if (s != TRIT_OK) return s;
    if (!t->resumed && !t->init)
        return trit_error(TRIT_ERR_INVALID, "--task embed fine-tunes a base model: use `trit finetune BASE --task embed "
                          "--data PAIRS.jsonl` (or pass --init-from RUN)");
    if (!t->resumed && !exists(t->cfg.data))
        return trit_error(TRIT_ERR_IO, "cannot open '%s': no such file (--task embed reads --data PAIRS.jsonl)", t->cfg.data);
    if (t->resumed) return (t->tok = trit_tokenizer_load(tok_path)) ? trit_embed_load(t, t->tok) : TRIT_ERR_FORMAT;
    s = trit_embed_load(t, t->init_tok);
    if (s == TRIT_OK && t->rank == 0) s = make_run_dir(t);
    if (s == TRIT_OK && t->rank == 0) s = trit_tokenizer_save(t->init_tok, tok_path);
    if (s == TRIT_OK && t->rank == 0) note_made(t, tok_path);
    if (s == TRIT_OK && !(t->tok = trit_tokenizer_load(tok_path))) s = TRIT_ERR_FORMAT;
    return s;
}

static trit_status setup_data(trainer *t) {
    const trit_train_config *c = &t->cfg;
    trit_status s;
    if (t->task == TRIT_TASK_EMBED) {
        t->T = c->seq;
        s = setup_embed(t);
    } else if (t->task == TRIT_TASK_ADDITION) {
        t->T = trit_addition_text_len(c->digits) - 1;
        s = setup_addition(t);
    } else {
        t->T = c->seq;
        if (!exists(c->data))
            return trit_error(TRIT_ERR_IO, "cannot open '%s': no such file or directory (--data takes a "
                              "text file or a directory made by `trit prepare`)", c->data);
        s = is_dir(c->data) ? setup_prepared(t) : setup_text_file(t);
    }
    // The run directory is on rank 0's disk: the other ranks of a new run, perhaps on other hosts,
    // get its tokenizer's CRC from rank 0 (share_tokenizer_crc).
    if (t->rank > 0 && !t->resumed) return s;
    char tok_path[TRIT_PATH_MAX + 32];
    if (s == TRIT_OK) s = trit_trainer_path(t, TRIT_CKPT_TOKENIZER, tok_path, sizeof tok_path);
    if (s == TRIT_OK) s = trit_file_crc32(tok_path, &t->tok_crc);
    return s;
}

// --precision, --master-weights, --adapter-dtype, --matmul-precision and --loss-scale: the model's
// compute policy, its parameters' storage (fp32 master weights, or 16-bit weights updated in
// place: all of them, or only the adapter's) and the loss scaler (dynamic for fp16 unless a
// static --loss-scale is given).
static trit_status apply_precision(trainer *t) {
    const trit_train_config *c = &t->cfg;
    const trit_precision p = (trit_precision)c->precision;
    const trit_compute_policy policy = trit_precision_policy(p, (trit_matmul_precision)c->matmul_precision);
    trit_status s = trit_gpt_set_policy(t->model, &policy);
    // The policy applies in trit_trainer_fit_memory, once the optimizer's state is known.
    if (s == TRIT_OK) s = trit_gpt_set_recompute(t->model, TRIT_RECOMPUTE_NONE);
    if (s == TRIT_OK && !c->master_weights) s = trit_gpt_set_param_dtype(t->model, policy.activation);
    else if (s == TRIT_OK && c->adapter_dtype == TRIT_TRAIN_ADAPTER_BF16) s = trit_gpt_set_adapter_dtype(t->model, TRIT_BF16);
    t->use_scaler = p == TRIT_PRECISION_FP16 || c->loss_scale > 0;
    if (s == TRIT_OK && t->use_scaler)
        s = trit_loss_scaler_init(&t->scaler, c->loss_scale > 0 ? c->loss_scale : 65536.0, c->loss_scale == 0);
    return s;
}

// The model a fresh run builds: the flags' architecture and the tokenizer's vocabulary.
static trit_gpt_config model_config(const trainer *t) {
    const trit_train_config *c = &t->cfg;
    trit_gpt_config g = trit_gpt_config_default();
    g.vocab_size = t->tok ? trit_tokenizer_vocab_size(t->tok) : 2;
    g.seq_len = c->seq;
    g.n_layer = c->layers;
    g.n_head = c->heads;
    g.n_embd = c->dim;
    g.dropout = c->dropout;
    g.bias = c->bias != 0;
    g.norm = (trit_norm_kind)c->norm;
    g.mlp = (trit_mlp_kind)c->mlp;
    g.pos = (trit_pos_kind)c->pos;
    g.subln = c->subln != 0;
    trit_train_config_adapter(c, &g.adapter);  // checked by check_adapter
    return g;
}

// The adapter against the architecture, before anything is written (the vocabulary does not matter).
static trit_status check_adapter(const trainer *t) {
    trit_gpt_config g = model_config(t);
    trit_status s = trit_train_config_adapter(&t->cfg, &g.adapter);
    if (s == TRIT_OK) s = trit_gpt_config_check(&g);
    return s;
}

// Whether the base (a trit_gpt) has a quantized copy of parameter `name`.
static bool base_codes(const char *name, void *base) {
    for (int i = 0; i < trit_gpt_num_tensors(base); i++)
        if (strcmp(trit_gpt_tensor(base, i)->name, name) == 0) return trit_gpt_quantized(base, i) != NULL;
    return false;
}

// The model of config g, its training graph, the optimizer and the schedule.
static trit_status setup_model(trainer *t, const trit_gpt_config *gc) {
    const trit_train_config *c = &t->cfg;
    const trit_gpt_config g = *gc;
    if (t->train && trit_data_max_token(t->train) > g.vocab_size)
        return trit_error(TRIT_ERR_FORMAT, "the training shard holds token ids up to %d but the tokenizer "
                          "has %lld tokens: shards and tokenizer.bin come from different runs of `trit "
                          "prepare`", trit_data_max_token(t->train) - 1, (long long)g.vocab_size);
    // A quantized base kept as codes (QLoRA on a quantized run or GGUF, or on a run quantized as
    // it was read): its matrices get no f32 values here, only the codes trit_trainer_init_weights
    // moves over.
    // A base's values overwrite the new model's, so it is made zeroed (an adapter's drawn as
    // trit_gpt_new draws them), laid out once and filled from the base.
    const bool keep = t->init_model && (c->quantize_base == TRIT_QBASE_KEEP || t->base_codes);
    t->model = t->init_model ? trit_gpt_new_zeroed_without(&g, (uint64_t)c->seed, keep ? base_codes : NULL, t->init_model)
                             : trit_gpt_new(&g, (uint64_t)c->seed);
    if (!t->model) return TRIT_ERR_INVALID;
    trit_status s = t->init_model ? trit_trainer_init_weights(t) : TRIT_OK;
    if (s == TRIT_OK && c->lora_init[0] && !t->resumed) s = trit_peft_read_values(t->model, c->lora_init);
    if (s == TRIT_OK) s = trit_train_quantize_base(t);
    if (s == TRIT_OK && t->init) t->peak_rss_base = trit_peak_rss_bytes();  // what taking the base cost
    if (s == TRIT_OK && t->tensor) s = trit_trainer_tensor_shard(t);  // this rank's shard trains from here on
    if (s == TRIT_OK) s = apply_precision(t);
    if (s == TRIT_OK) s = trit_train_set_qat(t->model, c);
    if (s == TRIT_OK) s = trit_train_freeze(t->model, c->freeze, &t->trainable);
    // The gradients now (the optimizer checks them); the graph once the optimizer exists
    // (trit_trainer_fit_memory: its state counts against --memory-budget).
    if (s == TRIT_OK) s = trit_gpt_attach_grads(t->model);
    if (s == TRIT_OK && c->offload == TRIT_OFFLOAD_OPTIMIZER_FROZEN) s = trit_train_offload_frozen(t);
    if (s != TRIT_OK) return s;
    int n = trit_gpt_num_tensors(t->model);
    t->params = malloc((size_t)n * sizeof *t->params);
    if (!t->params) return trit_error(TRIT_ERR_NOMEM, "cannot list %d parameters", n);
    t->n_params = 0;  // a quantized base's matrices (no f32 values, no gradient) are no optimizer's business
    for (int i = 0; i < n; i++)
        if (trit_gpt_tensor(t->model, i)->data) t->params[t->n_params++] = trit_gpt_tensor(t->model, i);
    if (c->dist == TRIT_DIST_PIPELINE && (s = trit_trainer_pipeline_own(t)) != TRIT_OK) return s;
    n = t->n_params;
    if (c->terngrad) {
        int64_t most = 1;
        for (int i = 0; i < n; i++) most = trit_tensor_numel(t->params[i]) > most ? trit_tensor_numel(t->params[i]) : most;
        t->tern_codes = malloc(trit_terngrad_bytes(most));
        t->tern_scales = malloc(sizeof(float) * (size_t)trit_terngrad_nscales(most, c->terngrad_bucket));
        if (!t->tern_codes || !t->tern_scales) return trit_error(TRIT_ERR_NOMEM, "terngrad: out of memory");
    }
    t->opt = trit_trainer_new_optim(c, t->params, n);
    if (!t->opt) return TRIT_ERR_INVALID;
    if (t->ranks > 1 && (c->dist == TRIT_DIST_ZERO1 || c->dist == TRIT_DIST_ZERO2 || c->dist == TRIT_DIST_ZERO3)) {
        trit_status zs = trit_trainer_zero_optim(t);
        if (zs != TRIT_OK) return zs;
    }
    // 16-bit weights round after each update; the bits come from their own Philox stream of the seed.
    trit_optim_set_rounding(t->opt, c->rounding == TRIT_ROUND_STOCHASTIC, (uint64_t)c->seed ^ TRIT_STREAM_ROUNDING);
    t->sched = c->schedule == TRIT_SCHEDULE_TWO_STAGE
                   ? trit_lr_two_stage(c->lr, c->min_lr, c->warmup, c->steps, (int64_t)(c->stage2_at * (double)c->steps),
                                       c->stage2_lr)
                   : trit_lr_warmup_cosine(c->lr, c->min_lr, c->warmup, c->steps);
    t->accum = trit_train_config_accum(c);
    trit_status ls = trit_lr_check(&t->sched);
    if (ls == TRIT_OK) ls = trit_trainer_fit_memory(t);
    return ls == TRIT_OK ? trit_train_offload_frozen_attach(t) : ls;
}

static trit_status restore(trainer *t) {
    char path[TRIT_PATH_MAX + 32], name[64] = TRIT_CKPT_STATE;
    trit_status s = trit_trainer_pipeline_check_resume(t);
    if (s == TRIT_OK && t->cfg.dist == TRIT_DIST_PIPELINE) s = trit_trainer_pipeline_state_name(t, name, sizeof name);
    if (s == TRIT_OK) s = trit_trainer_path(t, name, path, sizeof path);
    trit_train_state st;
    char model[TRIT_PATH_MAX + 32];
    if (s == TRIT_OK && !t->tensor) s = trit_trainer_path(t, TRIT_CKPT_MODEL, model, sizeof model);
    if (s == TRIT_OK && !t->tensor) s = trit_state_load_frozen(model, t->model);
    if (s == TRIT_OK) s = t->zero ? trit_trainer_zero_restore(t, path, &st) : trit_trainer_zero_refuse_sharded(t, path);
    if (s == TRIT_OK && t->tensor) s = trit_trainer_tensor_restore(t, path, &st);
    else if (s == TRIT_OK && !t->zero) s = trit_state_load(path, &st, t->model, t->opt);
    if (s != TRIT_OK) return s;
    if (st.tokenizer_crc != t->tok_crc)
        return trit_error(TRIT_ERR_FORMAT, "'%s/%s' differs from the one the checkpoint was trained with "
                          "(CRC-32 mismatch): restore it or start a new run", t->cfg.out, TRIT_CKPT_TOKENIZER);
    if (st.data_batches != st.step * t->accum)
        return trit_error(TRIT_ERR_FORMAT, "'%s': data position %lld does not match step %lld x %lld "
                          "micro-batches", path, (long long)st.data_batches, (long long)st.step,
                          (long long)t->accum);
    t->step = st.step;
    t->skipped = st.skipped;
    t->skip_streak = st.skip_streak;
    if (t->use_scaler && st.has_scaler) t->scaler = st.scaler;
    return TRIT_OK;
}

// --tensorboard DIR: a new event file there (the directory made if missing); a resumed run
// first marks a restart at its next step, so TensorBoard drops what the interrupted run logged
// after the checkpoint, as metrics.jsonl is cut back.
static trit_status open_tensorboard(trainer *t) {
    trit_status s = trit_make_dir(t->cfg.tensorboard, NULL);
    if (s != TRIT_OK) return s;
    double wall = trit_wall_seconds();
    t->tb = trit_tb_open(t->cfg.tensorboard, wall);
    if (!t->tb) return TRIT_ERR_IO;
    return t->resumed ? trit_tb_write_start(t->tb, wall, t->step + 1) : TRIT_OK;
}

// Everything after the configuration: data, model, graph, optimizer, the saved state on resume,
// and the outputs (rank 0's: metrics, TensorBoard).
static trit_status setup_run(trainer *t) {
    const trit_train_config *c = &t->cfg;
    trit_status s = trit_trainer_init_check_out(t);
    if (s == TRIT_OK) s = check_adapter(t);
    if (s == TRIT_OK) s = setup_data(t);
    if (s == TRIT_OK) {
        const trit_gpt_config g = model_config(t);
        s = setup_model(t, &g);
    }
    if (s == TRIT_OK && t->resumed) s = restore(t);
    if (s == TRIT_OK) trit_train_offload_frozen_drop(t);  // restore wrote the frozen weights' pages
    if (s == TRIT_OK && t->rank == 0) {
        t->metrics = trit_metrics_open(c->out, t->resumed ? t->step : -1);
        if (!t->metrics) s = TRIT_ERR_IO;
    }
    if (s == TRIT_OK && c->tensorboard[0] && t->rank == 0) s = open_tensorboard(t);
    // The run directory exists now; a resumed state moves into the file with the rest.
    if (s == TRIT_OK && c->offload != TRIT_OFFLOAD_OFF) {
        char path[TRIT_PATH_MAX + 48];
        if (t->rank == 0) snprintf(path, sizeof path, "%s/optimizer.offload", c->out);
        else snprintf(path, sizeof path, "%s/optimizer.offload.rank%d", c->out, t->rank);
        s = trit_optim_offload(t->opt, path);
    }
    return s;
}

// Bytes of this process's executable: ranks started from different builds are refused.
static trit_status read_self(uint8_t **bytes, size_t *n) {
    *bytes = NULL;
    *n = 0;
    FILE *fp = fopen("/proc/self/exe", "rb");
    if (!fp) return TRIT_OK;  // no /proc: the configurations are still compared
    size_t cap = 1 << 20;
    uint8_t *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + *n, 1, cap - *n, fp)) > 0) {
        *n += got;
        if (*n == cap) {
            uint8_t *more = realloc(b, cap *= 2);
            if (!more) free(b);
            b = more;
        }
    }
    fclose(fp);
    if (!b) return trit_error(TRIT_ERR_NOMEM, "out of memory reading /proc/self/exe");
    *bytes = b;
    return TRIT_OK;
}

// --dist: the job (a world of one without mpirun), the micro-batches split among its ranks, and
// every rank started with the same configuration and binary. Collective from the first check on,
// so that a failure on one rank stops every rank with a message.
static trit_status join_job(trainer *t, trit_status s) {
    const trit_train_config *c = &t->cfg;
    s = trit_dist_agree(s, "reading the configuration");
    if (s != TRIT_OK) return s;
    t->rank = trit_dist_rank();
    t->ranks = trit_dist_size();
    t->dp_rank = t->rank;
    t->dp_ranks = t->ranks;
    const int64_t accum = trit_train_config_accum(c);
    // A tensor-parallel group shares the layers: the groups, not the ranks, share the batch.
    const int dp = c->dist == TRIT_DIST_TENSOR ? t->ranks / (c->tp > 0 && c->tp <= t->ranks ? (int)c->tp : t->ranks)
                                               : t->ranks;
    if (c->dist == TRIT_DIST_PIPELINE)
        s = trit_trainer_pipeline_check(c, t->ranks);
    else if (c->dist == TRIT_DIST_TENSOR)
        s = trit_trainer_tensor_check(c, t->ranks);
    if (s == TRIT_OK && c->dist != TRIT_DIST_PIPELINE && accum % dp != 0)
        s = trit_error(TRIT_ERR_INVALID, "--total-batch-tokens %lld is %lld micro-batches of --batch %lld x --seq %lld, "
                       "which %d %s cannot share: pass a multiple of batch x seq x ranks = %lld", (long long)
                       c->total_batch_tokens, (long long)accum, (long long)c->batch, (long long)c->seq, dp,
                       c->dist == TRIT_DIST_TENSOR ? "data-parallel replicas" : "ranks",
                       (long long)(c->batch * c->seq * dp));
    if (s == TRIT_OK) s = trit_trainer_zero_check(c, t->ranks);
    s = trit_dist_agree(s, "checking the configuration");
    // The groups are made by every rank together, before any sets up alone.
    if (s == TRIT_OK && c->dist == TRIT_DIST_TENSOR)
        s = trit_dist_agree(trit_trainer_tensor_join(t), "making the groups");
    if (s == TRIT_OK) s = trit_dist_check_same(c, sizeof *c, "configuration (flags, or the run resumed)");
    uint8_t *self = NULL;
    size_t n = 0;
    if (s == TRIT_OK) s = trit_dist_agree(read_self(&self, &n), "reading its own binary");
    if (s == TRIT_OK) s = trit_dist_check_same(self, n, "trit binary");
    free(self);
    return s;
}

// The other ranks of a new run use the run directory rank 0 made: ZeRO's and the pipeline's
// checkpoints and --offload's files are written there by every rank, and a text file or an
// embedding task's tokenizer is read from there. A rank that does not see it (another host with no
// shared file system) stops the job now rather than at its first checkpoint.
static trit_status check_run_dir_seen(const trainer *t) {
    const trit_train_config *c = &t->cfg;
    const char *why = NULL;
    if (c->dist == TRIT_DIST_ZERO1 || c->dist == TRIT_DIST_ZERO2 || c->dist == TRIT_DIST_ZERO3 ||
        c->dist == TRIT_DIST_PIPELINE ||
        c->offload != TRIT_OFFLOAD_OFF)
        why = "ZeRO, pipeline and --offload runs write files of every rank there";
    else if (t->task == TRIT_TASK_TEXT && !is_dir(c->data))
        why = "the other ranks read the text rank 0 tokenized there (or pass --data a directory made by `trit "
              "prepare`, at the same path on every host)";
    else if (t->task == TRIT_TASK_EMBED)
        why = "the other ranks read the tokenizer rank 0 copied there";
    if (!why || is_dir(c->out)) return TRIT_OK;
    return trit_error(TRIT_ERR_IO, "rank %d does not see the run directory '%s' that rank 0 made: %s; put --out on "
                      "a file system every host shares", t->rank, c->out, why);
}

// Rank 0's tokenizer CRC (kept in checkpoints, checked on resume) to every rank of a new run. A
// CRC-32 is exact in a double.
static trit_status share_tokenizer_crc(trainer *t) {
    double crc = t->rank == 0 ? (double)t->tok_crc : 0.0;
    trit_status s = trit_dist_allreduce_f64(&crc, 1, TRIT_DIST_MAX);
    if (s == TRIT_OK) t->tok_crc = (uint32_t)crc;
    return trit_dist_agree(s, "sharing the tokenizer's CRC");
}

trit_status trit_trainer_setup(trainer *t, const trit_train_config *cli) {
    memset(t, 0, sizeof *t);
    t->ranks = t->dp_ranks = 1;
    trit_train_config cfg = *cli;
    trit_status s = TRIT_OK;
    // Every rank joins the job first, so that what fails below fails on all of them together.
    const bool dist = cli->dist != TRIT_TRAIN_UNSET && cli->dist != TRIT_DIST_OFF;
    if (dist && (s = trit_dist_init()) != TRIT_OK) return s;
    t->resumed = cli->resume[0] != 0;
    if (t->resumed && cli->init_from[0])
        s = trit_error(TRIT_ERR_INVALID, "--init-from starts a new run from another run's weights and --resume "
                       "continues a run: pass one of them");
    if (s == TRIT_OK && t->resumed) s = resume_config(cli, &cfg);
    if (s == TRIT_OK && t->resumed && trit_dist_rank() == 0) remove_stale_temps(cli->resume);
    // A resumed run's saved --init-from is history: its weights come from its own checkpoint.
    if (s == TRIT_OK && !t->resumed && cfg.init_from[0]) s = trit_trainer_init_load(t, &cfg);
    if (s == TRIT_OK) s = trit_train_config_resolve(&cfg);
    if (!dist && (s != TRIT_OK || cfg.dist == TRIT_DIST_OFF)) {
        if (s != TRIT_OK) return s;
    } else {
        if (s == TRIT_OK && !dist) s = trit_dist_init();  // --dist from the resumed run
        t->cfg = cfg;
        s = join_job(t, s);
        if (s != TRIT_OK) return s;
    }
    t->cfg = cfg;
    t->task = trit_train_config_task(&cfg);
    trit_threads_set((int)cfg.threads);
    if (t->ranks == 1 && cfg.terngrad_groups > 1)  // with more ranks, the exchange's setup says so
        return trit_error(TRIT_ERR_INVALID, "--terngrad-between-groups %lld does not divide the job's 1 rank into "
                          "groups: start the job with mpirun -np N, N a multiple of %lld, or drop the flag",
                          (long long)cfg.terngrad_groups, (long long)cfg.terngrad_groups);
    if (t->ranks == 1) {
        s = setup_run(t);
        return s == TRIT_OK && t->tensor ? trit_trainer_tensor_start(t) : s;
    }
    // Rank 0 writes the run directory (tokenized data, tokenizer); then the others read it.
    // A resumed run writes nothing first: every rank sets up at once and reports its own error.
    s = t->rank == 0 || t->resumed ? setup_run(t) : TRIT_OK;
    s = trit_dist_agree(s, t->resumed ? "setting up the resumed run" : "setting up the run on rank 0");
    if (s == TRIT_OK && t->rank > 0 && !t->resumed) s = check_run_dir_seen(t);
    if (s == TRIT_OK && t->rank > 0 && !t->resumed) s = setup_run(t);
    s = trit_dist_agree(s, "setting up the run");
    if (s == TRIT_OK && !t->resumed) s = share_tokenizer_crc(t);
    if (s == TRIT_OK && cfg.dist == TRIT_DIST_DDP && cfg.terngrad) {
        s = trit_trainer_setup_terngrad_dist(t);
    } else if (s == TRIT_OK && (cfg.dist == TRIT_DIST_DDP || t->zero)) {
        t->ddp = trit_ddp_new(trit_gpt_flat(t->model), t->gg.graph, cfg.bucket_mb);
        s = trit_dist_agree(t->ddp ? TRIT_OK : TRIT_ERR_INVALID, "making the gradient buckets");
    }
    if (s == TRIT_OK && t->zero) s = trit_dist_agree(trit_trainer_zero_start(t), "sharding the gradients");
    if (s == TRIT_OK && cfg.dist == TRIT_DIST_PIPELINE)
        s = trit_dist_agree(trit_trainer_pipeline_new(t), "building the pipeline stages");
    if (s == TRIT_OK && t->tensor) s = trit_dist_agree(trit_trainer_tensor_start(t), "setting up tensor parallelism");
    if (t->rank > 0) t->cfg.quiet = 1;  // rank 0 speaks for the job
    return s;
}

trit_status trit_trainer_setup_tokens(trainer *t, const trit_train_config *cfg, const trit_gpt_config *model,
                                      trit_data *train) {
    memset(t, 0, sizeof *t);
    t->ranks = t->dp_ranks = 1;
    t->train = train;
    if (!cfg || !model || !train) return trit_error(TRIT_ERR_INVALID, "trit_trainer_setup_tokens: NULL argument");
    trit_train_config c = *cfg;
    // The tokens are the caller's: data only names them (and makes this a text run, not the task).
    if (!c.data[0]) snprintf(c.data, sizeof c.data, "(tokens in memory)");
    trit_status s = trit_train_config_resolve(&c);
    if (s != TRIT_OK) return s;
    if (c.seq != model->seq_len || trit_data_seq_len(train) != c.seq)
        return trit_error(TRIT_ERR_INVALID, "trit_trainer_setup_tokens: --seq %lld, the model's context %lld and the "
                          "data's windows of %lld tokens must agree", (long long)c.seq, (long long)model->seq_len,
                          (long long)trit_data_seq_len(train));
    t->cfg = c;
    t->task = TRIT_TASK_TEXT;
    t->T = c.seq;
    trit_threads_set((int)c.threads);
    return setup_model(t, model);
}

void trit_trainer_free(trainer *t, bool failed) {
    if (t->metrics) fclose(t->metrics);
    trit_trainer_zero_free(t);
    trit_ddp_free(t->ddp);
    trit_terngrad_dist_free(t->tgx);
    trit_trainer_pipeline_free(t->pipe);
    trit_trainer_tensor_free(t);
    trit_tb_close(t->tb);
    trit_optim_free(t->opt);
    free(t->params);
    free(t->tern_codes);
    free(t->tern_scales);
    if (t->gg.graph) trit_gpt_graph_free(&t->gg);
    trit_gpt_free(t->model);
    trit_train_offload_frozen_close(t);  // after the model: its frozen weights point into the mapping
    trit_data_free(t->train);
    trit_data_free(t->val);
    trit_tokenizer_free(t->tok);
    trit_gpt_free(t->init_model);
    trit_tokenizer_free(t->init_tok);
    trit_embed_free(t->embed);
    if (failed && !t->resumed) {
        for (int i = 0; i < t->n_made; i++) unlink(t->made[i]);
        if (t->made_dir) {
            char m[TRIT_PATH_MAX + 32];
            if (trit_trainer_path(t, TRIT_CKPT_METRICS, m, sizeof m) == TRIT_OK) unlink(m);
            rmdir(t->cfg.out);
        }
    }
    memset(t, 0, sizeof *t);
}
