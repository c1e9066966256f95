// The trainer's working set, shared by trainer_setup.c (data, model, resume), trainer.c (the
// loop) and trainer_eval.c (validation, samples, task score).
#ifndef TRIT_TRAINER_H
#define TRIT_TRAINER_H

#include "train/train_internal.h"

typedef struct trainer {
    trit_train_config cfg;   // resolved
    trit_train_task task;
    bool resumed;
    trit_tokenizer *tok;
    uint32_t tok_crc;        // CRC-32 of DIR/tokenizer.bin
    trit_data *train, *val;  // text task
    trit_addition add;       // addition task
    trit_gpt *model;
    trit_gpt_graph gg;
    trit_optim *opt;
    trit_tensor **params;    // the model's parameters (for the gradient norm without clipping)
    int n_params;
    trit_lr_schedule sched;
    int64_t T;               // sequence length of the training graph
    int64_t accum;           // micro-batches per step
    int64_t step;            // completed steps (taken or skipped)
    // Loss scaling and skipped steps: a step whose loss or gradient is not finite is skipped.
    bool use_scaler;         // fp16, or a static --loss-scale
    trit_loss_scaler scaler;
    int64_t skipped;         // skipped steps in the whole run
    int64_t skip_streak;     // skipped steps in a row, ending the run at --max-skips
    uint8_t *tern_codes;     // --terngrad: the wire form of the largest gradient
    float *tern_scales;      // and its scales
    void *frozen_map;        // --offload optimizer+frozen: the frozen weights' file mapping
    size_t frozen_bytes;
    // --init-from RUN (a fresh run only): RUN's model as trained and its tokenizer, held from
    // before the config is resolved until the new model has taken the weights.
    bool init;
    trit_gpt *init_model;
    trit_tokenizer *init_tok;
    int64_t init_step;       // the step RUN's weights were saved at
    bool base_codes;         // --quantize-base: init_model's block matrices were made codes as RUN was read
    bool init_deferred;      // init_model has no float values: trit_trainer_init_weights reads them from RUN
    trit_base_kind init_kind;  // what RUN is, for reading them
    size_t peak_rss_base;    // peak RSS once the base is in the model, before gradients and the graph
    FILE *metrics;
    // --recompute / --memory-budget (trainer_memory.c): blocks recomputed, and the arena and
    // memory total of the graph without recompute (0 when it was not planned).
    int64_t recompute_blocks;
    size_t arena_plain, total_plain;
    int64_t trainable;       // elements not frozen
    struct trit_embed_task *embed;  // --task embed (task_embed.c)
    trit_tb_writer *tb;      // --tensorboard DIR, else NULL
    // --dist: this process's rank among `ranks` (0 of 1 without MPI). Rank 0 writes the run
    // directory, logs and evaluates; each rank runs accum / ranks of a step's micro-batches.
    int rank, ranks;
    struct trit_ddp *ddp;    // the gradient exchange when ranks > 1
    struct trainer_zero *zero;  // --dist zero1|zero2|zero3 on more than one rank (zero_train.c), else NULL
    struct trit_terngrad_dist *tgx;  // instead of ddp, with --terngrad: the ternary exchange (terngrad_dist.c)
    bool stop_agreed;        // some rank was asked to stop (SIGINT/SIGTERM) by this step's exchange
    double comm_ms;          // this step's wait for the exchange
    struct trit_pipeline *pipe;  // --dist pipeline: this rank's stage (trainer_pipeline.c), else NULL
    struct trainer_tensor *tensor;  // --dist tensor: the group and the whole model (trainer_tensor.c), else NULL
    // The data-parallel ranks among which a step's micro-batches are shared: the job's, or under
    // --dist tensor the replicas (this rank's group's index, and the number of groups).
    int dp_rank, dp_ranks;
    // Files and directory a fresh run made before it failed in setup, removed on failure.
    bool made_dir;
    int n_made;
    char made[4][TRIT_PATH_MAX + 32];
} trainer;

trit_status trit_trainer_setup(trainer *t, const trit_train_config *cfg);
// A trainer over tokens the caller gives (`trit bench`): no run directory, tokenizer, validation
// data or metrics; the model is `model` (its seq_len must be cfg's --seq) and everything else
// comes from cfg as a run would resolve it. The trainer owns `train` from the call on, also on
// failure; free it with trit_trainer_free(t, false).
trit_status trit_trainer_setup_tokens(trainer *t, const trit_train_config *cfg, const trit_gpt_config *model,
                                      trit_data *train);
void trit_trainer_free(trainer *t, bool failed);
// Path of a file of the run directory (static buffer per call site is not used: caller's buf).
trit_status trit_trainer_path(const trainer *t, const char *name, char *buf, size_t n);

// --init-from (trainer_init.c). Before the config is resolved: loads RUN's model as trained and
// its tokenizer, and sets cfg's architecture from RUN (a flag given with another value is an
// error naming both). Nothing is written.
trit_status trit_trainer_init_load(trainer *t, trit_train_config *cfg);
// The run's tokenizer `tok` (the data's, or the task's) must be RUN's; `what` names it.
trit_status trit_trainer_init_check_tokenizer(const trainer *t, const trit_tokenizer *tok, const char *what);
// The new run's --out must not be RUN itself (checked once the config is resolved).
trit_status trit_trainer_init_check_out(const trainer *t);
// Copies RUN's weights into t->model (built from the resolved config) and drops RUN's model.
trit_status trit_trainer_init_weights(trainer *t);
// --offload optimizer+frozen (offload_frozen.c): moves the frozen weights into a file mapping
// in the run directory (before the graph is built: views take their storage at compile); after
// it is built, attach makes the graph drop their pages after each step that read one; drop
// drops them all (after a reader outside the graph: a restore, the decoder); close unmaps.
trit_status trit_train_offload_frozen(trainer *t);
trit_status trit_train_offload_frozen_attach(trainer *t);
void trit_train_offload_frozen_drop(void *trainer_ptr);
void trit_train_offload_frozen_close(trainer *t);
// --quantize-base (qlora.c): the model's frozen base quantized and kept only as codes.
trit_status trit_train_quantize_base(trainer *t);

// --recompute and --memory-budget: builds t->gg under the policy, for auto recomputing the
// fewest whole blocks that fit the budget; an error when the run does not fit. Needs the
// optimizer (its state counts).
trit_status trit_trainer_fit_memory(trainer *t);
// "recompute: block: arena .. MB, .. MB without recompute (saves ..)" when a policy is on.
void trit_trainer_print_recompute(const trainer *t, FILE *fp);

// --task embed (task_embed.c): the pairs of --data tokenized with tok (t->T set), the graph
// (t->gg.graph and t->gg.loss; no idx or targets), batch filling, and freeing.
trit_status trit_embed_load(trainer *t, const trit_tokenizer *tok);
int64_t trit_embed_num_pairs(const trainer *t, bool validation);
trit_status trit_embed_build(trainer *t, bool plan_only);
void trit_embed_fill(trainer *t, int64_t batch, bool validation);
void trit_embed_free(struct trit_embed_task *e);
// The training graph of t's task (t->gg, freed first when built): the GPT's, or --task embed's;
// plan_only: planned, not allocated (trit_graph_set_plan_only).
trit_status trit_trainer_build_graph(trainer *t, bool plan_only);

// The optimizer of --optimizer over the model's parameters (optimizer_groups.c): AdamW's two
// groups by the GPT-2 decay rule; GaLore's the blocks' matrices (low-rank), the other matrices,
// the vectors. NULL with trit_last_error set on failure.
trit_optim *trit_trainer_new_optim(const trit_train_config *c, trit_tensor *const *params, int n);

// --dist ddp --terngrad (terngrad_dist.c): the ternary exchange made (when ranks > 1), and its
// line of the run's header: ranks, groups, bytes a step against fp32 DDP's.
trit_status trit_trainer_setup_terngrad_dist(trainer *t);
void trit_trainer_print_terngrad_dist(const trainer *t, FILE *fp);

// One optimizer step, the one every run takes: --total-batch-tokens / (B T) micro-batches of
// forward and backward (the loss scaled when a scaler is on), the skip of a non-finite step,
// clipping or the gradient norm, AdamW at the scheduled learning rate (and the two-stage weight
// decay). Fills loss, lr, grad_norm, loss_scale, skipped and was_skipped of *info; t->step
// advances by one, also for a skipped step.
trit_status trit_trainer_step(trainer *t, const trit_train_hooks *hooks, trit_train_step_info *info);

// Fill the graph inputs with micro-batch `batch` (training data, or validation batch `batch`).
void trit_trainer_fill(trainer *t, int64_t batch, bool validation);
// Mean validation loss over eval_batches batches (eval mode, no gradients).
trit_status trit_trainer_val_loss(trainer *t, double *loss);
// Print a sample (text) or a few scored problems (addition); sets *accuracy for addition.
trit_status trit_trainer_show(trainer *t, int64_t n_test, int64_t print, double *accuracy);
trit_status trit_trainer_checkpoint(trainer *t);

// --dist zero1|zero2 on more than one rank (zero_train.c). optim: t->opt (made over every
// parameter, no state written yet) replaced by the optimizer of this rank's shard; start: the
// sharded exchange on t->ddp. zero_grads, update: a step's ends (update unscales, takes the norm
// across shards, clips, steps the shard and all-gathers the parameters; *finite false skips).
trit_status trit_trainer_zero_optim(trainer *t);
// What --dist zero1|zero2 cannot shard (on every rank before setup): an error naming it.
trit_status trit_trainer_zero_check(const trit_train_config *c, int ranks);
trit_status trit_trainer_zero_start(trainer *t);
// zero3 (collective; nothing for zero1|zero2): hold gathers the whole weights on rank 0 (to
// evaluate or save), !hold gives them back; skip_micro issues the gathers of a pass this rank
// does not run (its loss was not finite): the backward phase's, or with forward_too a whole one.
trit_status trit_trainer_zero_hold(trainer *t, bool hold);
trit_status trit_trainer_zero_skip_micro(trainer *t, bool forward_too);
void trit_trainer_zero_zero_grads(trainer *t);
trit_status trit_trainer_zero_update(trainer *t, double lr, double scale, trit_train_step_info *info, bool *finite);
void trit_trainer_zero_print(const trainer *t, FILE *fp);
struct trit_memory_report;
// The memory report of this rank: zero2 holds only its shard's gradients between steps.
void trit_trainer_zero_memory(const trainer *t, struct trit_memory_report *mem);
void trit_trainer_zero_free(trainer *t);
// Collective: every rank writes its optimizer shard, then rank 0 the model and the state file
// (without optimizer values; it names the shards' count); each rank then drops its previous
// shard. restore: the state file's weights and counters and this rank's shard (or the shard of
// a merged, unsharded checkpoint); a shard set of another rank count or run is refused.
trit_status trit_trainer_zero_checkpoint(trainer *t);
trit_status trit_trainer_zero_restore(trainer *t, const char *path, trit_train_state *st);
// A run that is not sharded resuming a sharded checkpoint: the error that says what to do.
trit_status trit_trainer_zero_refuse_sharded(const trainer *t, const char *path);
// --dist pipeline (trainer_pipeline.c). check: the job and the flags can run as a pipeline;
// own: t->params cut to the stage's (before the optimizer is made); new: the stage's graphs and
// the schedule (after setup); accumulate and exchange: a step's micro-batches through the stages,
// then the tied gradient summed and the outcome agreed (*info's bubble, comm_ms); clip: the
// gradient norm over the stages (clipped when max_norm > 0); sync: before rank 0 evaluates or
// saves, every stage's weights sent to every rank (and the other stages' states saved);
// state_name: the training-state file of this rank's stage.
typedef struct trit_pipeline trit_pipeline;
trit_status trit_trainer_pipeline_check(const trit_train_config *c, int ranks);
trit_status trit_trainer_pipeline_own(trainer *t);
trit_status trit_trainer_pipeline_new(trainer *t);
void trit_trainer_pipeline_free(trit_pipeline *p);
void trit_trainer_pipeline_print(const trainer *t, FILE *fp);
trit_status trit_trainer_pipeline_accumulate(trainer *t, double scale, double *loss, bool *finite);
trit_status trit_trainer_pipeline_exchange(trainer *t, bool stop, double *loss, bool *finite,
                                           trit_train_step_info *info);
trit_status trit_trainer_pipeline_clip(trainer *t, double max_norm, double *norm);
trit_status trit_trainer_pipeline_sync(trainer *t, bool eval, bool checkpoint);
trit_status trit_trainer_pipeline_state_name(const trainer *t, char *buf, size_t n);
// A resume of a run a pipeline of another number of stages saved (or a pipeline's resumed
// otherwise): an error saying how to resume it.
trit_status trit_trainer_pipeline_check_resume(const trainer *t);

// --dist tensor (trainer_tensor.c). check: the job and the flags can run tensor parallel (on
// every rank before setup); join: the groups (collective, before setup); shard: t->model, once
// made, becomes this rank's shard (world rank 0 keeps the whole for samples and checkpoints);
// start: DDP over the replicas (after setup); begin: a step starts (its counts of sums); exchange: the step's losses, flags and stop
// requests agreed (and the replicas' gradients summed); clip: the gradient norm over the group;
// sync: the shards' weights into rank 0's whole model (collective); checkpoint: a normal run
// directory, the split weights and optimizer state gathered (collective); restore: this rank's
// pieces of a normal checkpoint (any layout's).
typedef struct trainer_tensor trainer_tensor;
trit_status trit_trainer_tensor_check(const trit_train_config *c, int ranks);
trit_status trit_trainer_tensor_join(trainer *t);
trit_status trit_trainer_tensor_shard(trainer *t);
trit_status trit_trainer_tensor_start(trainer *t);
void trit_trainer_tensor_begin(trainer *t);
trit_status trit_trainer_tensor_exchange(trainer *t, bool stop, double *loss, bool *finite, trit_train_step_info *info);
trit_status trit_trainer_tensor_clip(trainer *t, double max_norm, double *norm);
trit_status trit_trainer_tensor_sync(trainer *t);
trit_status trit_trainer_tensor_checkpoint(trainer *t);
trit_status trit_trainer_tensor_restore(trainer *t, const char *path, trit_train_state *st);
void trit_trainer_tensor_print(const trainer *t, FILE *fp);
void trit_trainer_tensor_free(trainer *t);
// The model that decodes, samples and is counted: the whole one (rank 0 under --dist tensor).
trit_gpt *trit_trainer_whole_model(const trainer *t);

#endif
