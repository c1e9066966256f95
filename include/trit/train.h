// trit training: token-shard batches, the GPT training loop (AdamW, warmup + cosine schedule,
// clipping, gradient accumulation, validation, sampling, checkpoints that resume bit for bit),
// sampling from a trained model, metrics and their SVG plot, and the built-in addition task.
//
// Run directory layout (written by trit_train_run, read by the `trit` verbs):
//   model.safetensors  weights under the GPT-2 names, the model config as JSON in __metadata__
//   train_state.bin    everything a resume needs (see checkpoint.c): config, step, seed, data
//                      position, tokenizer checksum, weights and optimizer moments, one atomic file
//   tokenizer.bin      the tokenizer (trit_tokenizer_save format)
//   train.bin val.bin  token shards (llm.c layout) when trained from a text file
//   metrics.jsonl      one JSON object per log line: step, loss, val_loss, lr, grad_norm, ms,
//                      tokens_per_s (and accuracy for the addition task); with --tensorboard
//                      DIR the same values as scalars in DIR/events.out.tfevents.*
//   loss.svg           `trit plot`
#ifndef TRIT_TRAIN_H
#define TRIT_TRAIN_H

#include "trit/nn.h"
#include "trit/optim.h"
#include "trit/quant.h"
#include "trit/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TRIT_PATH_MAX 1024

// ---- data: (B, T+1) windows over a token shard ------------------------------------------
// Window w of a run is a pure function of (order, seed, w), so the batches of step s are known
// from s alone and a resumed run reads exactly the data the uninterrupted run would have.

typedef enum trit_data_order {
    TRIT_DATA_RANDOM = 0,     // window w starts at a Philox draw keyed by (seed, w)
    TRIT_DATA_SEQUENTIAL = 1, // back-to-back windows of T tokens, epoch after epoch
} trit_data_order;

typedef struct trit_data trit_data;

// Load a shard (trit_shard_read) for windows of T + 1 tokens; fails when it holds <= T tokens.
trit_data *trit_data_open(const char *shard_path, int64_t T);
// The same over tokens in memory (copied).
trit_data *trit_data_from_tokens(const uint16_t *tokens, int64_t n, int64_t T);
void trit_data_free(trit_data *d);
int64_t trit_data_num_tokens(const trit_data *d);
int64_t trit_data_seq_len(const trit_data *d);
// Windows of one sequential epoch: (n - 1) / T.
int64_t trit_data_epoch_windows(const trit_data *d);
// Largest token id + 1 in the data (to check it against a model's vocabulary).
int32_t trit_data_max_token(const trit_data *d);

// First token of window `w`.
int64_t trit_data_window_start(const trit_data *d, trit_data_order order, uint64_t seed, int64_t w);
// Batch `batch` = windows batch*B .. batch*B + B - 1: x gets tokens [s, s+T), y gets [s+1, s+T].
trit_status trit_data_batch(const trit_data *d, trit_data_order order, uint64_t seed, int64_t batch,
                            int64_t B, int32_t *x /* (B, T) */, int32_t *y /* (B, T) */);

// ---- command-line numbers -------------------------------------------------------------------
// Parse the whole string as a number (decimal, or 0x.. for integers; no trailing characters,
// in range, finite) and name `flag` in the error: "--steps expects an integer, got 'abc'".
trit_status trit_arg_int(const char *flag, const char *s, int64_t *out);
trit_status trit_arg_double(const char *flag, const char *s, double *out);
// Range checks naming the flag: "--layers must be in [1, 1024], got -1". A double must also be
// finite; `open` makes either end exclusive: "--dropout must be ... in [0, 1), got 1".
enum { TRIT_OPEN_LO = 1, TRIT_OPEN_HI = 2 };
trit_status trit_check_int(const char *flag, int64_t v, int64_t lo, int64_t hi);
trit_status trit_check_double(const char *flag, double v, double lo, double hi, unsigned open);
// Parse, then check the range; *out is written only when both pass.
trit_status trit_arg_int_in(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out);
trit_status trit_arg_double_in(const char *flag, const char *s, double lo, double hi, unsigned open, double *out);

// ---- preparing text ---------------------------------------------------------------------------

#define TRIT_DATA_TRAIN "train.bin"
#define TRIT_DATA_VAL "val.bin"

typedef struct trit_prepare_result {
    int32_t vocab;            // tokenizer vocabulary size
    int64_t n_train, n_val;   // tokens in each shard
} trit_prepare_result;

// Refuse what is not text: a missing or empty file, NUL bytes, or more than 1% of bytes that
// are not UTF-8. The message names the file and says what to pass instead.
trit_status trit_text_check(const char *path, const uint8_t *data, size_t len);
// Check the text at text_path, train a tokenizer on it (char, or BPE of `vocab` tokens), and
// write DIR/tokenizer.bin, DIR/train.bin and DIR/val.bin (the last val_fraction of the tokens),
// creating DIR. On failure the files it made (and DIR, if it made it) are removed.
trit_status trit_prepare_text(const char *text_path, trit_tokenizer_kind kind, int64_t vocab,
                              double val_fraction, const char *out_dir, trit_prepare_result *res);
// The same with a given tokenizer (written as DIR/tokenizer.bin): a char tokenizer fails on a
// byte outside its vocabulary, and nothing is left behind.
trit_status trit_prepare_text_with(const char *text_path, const trit_tokenizer *tok, double val_fraction,
                                   const char *out_dir, trit_prepare_result *res);
// JSON Lines (one object per line, the text in its string field `field`) with a tokenizer that
// has <|endoftext|> (GPT-2's): each document is <|endoftext|> then its text encoded as ordinary
// text, as llm.c's shards are; written like trit_prepare_text_with.
trit_status trit_prepare_jsonl(const char *jsonl_path, const char *field, const trit_tokenizer *tok,
                               double val_fraction, const char *out_dir, trit_prepare_result *res);
// mkdir -p; *created (may be NULL) says whether the directory itself was made by this call.
trit_status trit_make_dir(const char *path, bool *created);

// ---- training configuration --------------------------------------------------------------
// Every field is a `trit train` flag of the same name (underscores as dashes). Fields start
// unset after trit_train_config_init (TRIT_TRAIN_UNSET for integers, NaN for numbers, "" for
// strings: values no flag can be given), so a resume can tell the flags the user gave from the
// defaults; trit_train_config_resolve fills the unset ones. Every number has an allowed range
// (see --help): trit_train_config_set, the JSON reader and resolve all refuse a value outside
// it with a message naming the flag and the range.
#define TRIT_TRAIN_UNSET INT64_MIN

typedef enum trit_train_task {
    TRIT_TASK_TEXT = 0,      // language modelling on --data
    TRIT_TASK_ADDITION = 1,  // the built-in addition problems (no --data)
    TRIT_TASK_EMBED = 2,     // --task embed: sentence embeddings from (anchor, positive) pairs
} trit_train_task;

typedef struct trit_train_config {
    // data
    char data[TRIT_PATH_MAX];    // text file or `trit prepare` directory; "" = addition task
    int64_t tokenizer;           // trit_tokenizer_kind for a text file (char or bpe)
    int64_t vocab;               // BPE vocabulary size
    double val_fraction;         // tail of a text file held out for validation
    int64_t order;               // trit_data_order of training windows
    int64_t digits;              // addition task: digits per operand
    int64_t task_test;           // addition task: held-out problems scored
    // model
    int64_t layers, heads, dim, seq;
    double dropout;
    int64_t bias;                // 1 = biases in linear layers and norms
    int64_t norm;                // trit_norm_kind
    int64_t mlp;                 // trit_mlp_kind
    int64_t pos;                 // trit_pos_kind
    int64_t subln;               // 1 = SubLN: a norm on the input of each block's output projections
    // optimisation
    int64_t batch;               // B: sequences per micro-batch
    int64_t total_batch_tokens;  // tokens per optimizer step, a multiple of B*T (accumulation)
    int64_t steps;
    int64_t warmup;
    double lr, min_lr;
    double beta1, beta2, eps, weight_decay, clip;
    int64_t optimizer;           // trit_train_optimizer
    int64_t galore_rank, galore_update;  // GaLore / Q-GaLore: rank r and refresh gap T
    double galore_scale;                 // and the projected-back step's factor
    int64_t seed;
    // precision
    int64_t precision;           // trit_precision (fp32, bf16, fp16)
    int64_t master_weights;      // 1 = fp32 master weights; 0 = 16-bit weights updated in place
    int64_t rounding;            // trit_train_rounding of 16-bit weight updates
    int64_t matmul_precision;    // trit_matmul_precision of fp32 matmul operands
    double loss_scale;           // 0 = dynamic for fp16 (none otherwise); > 0 = static scale
    // quantization-aware training
    int64_t qat;                 // trit_train_qat: off, or the codes block matrices train through
    int64_t group;               // QAT weight group size; 0 = the format's default
    int64_t qat_acts;            // 1 = fake-quantize the inputs of those matmuls per token
    int64_t ternary;             // 1 = BitNet b1.58 recipe (qat ternary and its defaults)
    int64_t ternary_matmul;      // trit_ternary_matmul of ternary QAT's block matrices (int8 kernels)
    int64_t schedule;            // trit_train_schedule
    double stage2_at;            // two-stage: start of the second stage, fraction of steps
    double stage2_lr;            // two-stage: lr factor of the second stage
    double stage2_weight_decay;  // two-stage: weight decay of the second stage
    int64_t terngrad;            // 1 = gradients through TernGrad's ternary wire form
    double terngrad_clip;        // clip at this many standard deviations first (0 = off)
    int64_t terngrad_min_size;   // smaller gradients stay fp32
    int64_t terngrad_bucket;     // values per scale, a multiple of 4; 0 = one scale per tensor
    int64_t terngrad_groups;     // --dist ddp: ranks per fp32 group, ternary between the groups (1)
    int64_t shard_group;         // --dist zero3: ranks per shard group, replicas across groups (0: the job)
    // running (may change on resume)
    int64_t eval_every, eval_batches, log_every, ckpt_every, sample_tokens;
    int64_t threads;             // 0 = all cores
    int64_t recompute;           // trit_recompute_policy of the training graph
    int64_t offload;             // trit_train_offload
    int64_t stop_after;          // stop (with a checkpoint) after this step; 0 = run to --steps
    int64_t max_skips;           // end the run after this many skipped steps in a row
    int64_t quiet;               // 1 = no progress lines on stdout
    char out[TRIT_PATH_MAX];     // run directory
    char resume[TRIT_PATH_MAX];  // run directory to continue
    char init_from[TRIT_PATH_MAX];  // run whose weights, architecture and tokenizer a new run takes
    // fine-tuning (src/train/freeze.c, src/train/task_embed.c)
    double memory_budget;        // MB the memory report's total must fit in (0 = none); --recompute auto
    char freeze[TRIT_PATH_MAX];  // --freeze/--unfreeze globs in flag order, comma-separated, "!" = unfreeze
    int64_t task;                // trit_train_objective
    int64_t pool;                // trit_train_pool of --task embed
    double temperature;          // --task embed: InfoNCE tau
    char tensorboard[TRIT_PATH_MAX];  // also write the metrics as TensorBoard event files here
    char lora[TRIT_PATH_MAX];       // LoRA spec (trit_adapter_parse_lora), "" for none: the base frozen
    char lora_init[TRIT_PATH_MAX];  // PEFT adapter directory whose A and B a new LoRA run starts from ("": the seed's)
    int64_t quantize_base;          // trit_train_qbase: QLoRA's base as codes
    int64_t double_quant;           // 1: the quantized base's scales double-quantized (blocks of 256)
    int64_t adapter_type;           // trit_train_adapter: which adapter trains (off: the whole model)
    int64_t adapter_size;           // --adapter-type bottleneck: its width (0: not given)
    int64_t adapter_dtype;          // trit_train_adapter_dtype: the adapter's weights in f32 or bf16
    // many processes (src/dist; may change on resume)
    int64_t dist;                   // trit_train_dist: off, or how the ranks of an MPI job share the work
    double bucket_mb;               // DDP: MB of gradients per all-reduce
    int64_t stages;                 // pipeline: stages (0: one a rank of the job)
    int64_t micro_batches;          // micro-batches a step for all ranks: total_batch_tokens / (batch x seq)
    int64_t pipe_schedule;          // trit_train_pipe_schedule
    int64_t tp;                     // tensor: ranks a tensor-parallel group (0: the job's ranks)
} trit_train_config;

// --dist: one process, or data parallel over the ranks of an MPI job (`mpirun -np N trit train
// --dist ddp`): each rank runs accumulation / N of the step's micro-batches, gradients summed.
// zero1|zero2: DDP with the optimizer state (and zero2: the gradients) sharded (src/dist/zero_mpi.c);
// pipeline: the layers split into one stage a rank, the step's micro-batches through them;
// zero3 also shards the parameters; tensor: each block's matrices split across the --tp ranks of
// a group (Megatron-LM), the groups data-parallel replicas of each other.
typedef enum {
    TRIT_DIST_OFF = 0, TRIT_DIST_DDP, TRIT_DIST_ZERO1, TRIT_DIST_ZERO2, TRIT_DIST_PIPELINE, TRIT_DIST_ZERO3,
    TRIT_DIST_TENSOR
} trit_train_dist;
typedef enum { TRIT_TRAIN_PIPE_GPIPE = 0, TRIT_TRAIN_PIPE_1F1B } trit_train_pipe_schedule;

// --task: what the model is trained to do with --data.
typedef enum { TRIT_OBJECTIVE_LM = 0, TRIT_OBJECTIVE_EMBED = 1 } trit_train_objective;
typedef enum { TRIT_POOL_MEAN = 0, TRIT_POOL_LAST = 1 } trit_train_pool;
// --recompute auto: the trainer recomputes the fewest whole blocks that fit --memory-budget (the
// other values are trit_recompute_policy's).
enum { TRIT_RECOMPUTE_AUTO = 4 };

// --adapter-type: LoRA (--lora's spec) or a Houlsby bottleneck of --adapter-size.
typedef enum { TRIT_TRAIN_ADAPTER_OFF = 0, TRIT_TRAIN_ADAPTER_LORA, TRIT_TRAIN_ADAPTER_BOTTLENECK } trit_train_adapter;
// --adapter-dtype: the adapter's weights in f32, or in bf16 without an fp32 master copy (updated in
// place with --rounding, as --master-weights off does for every weight; needs --precision bf16).
typedef enum { TRIT_TRAIN_ADAPTER_F32 = 0, TRIT_TRAIN_ADAPTER_BF16 } trit_train_adapter_dtype;
// The adapter config c asks for (kind NONE for none); TRIT_ERR_INVALID for a bad --lora spec.
trit_status trit_train_config_adapter(const trit_train_config *c, trit_adapter_config *out);

// --quantize-base: the frozen base of a LoRA run kept only as codes (QLoRA).
// KEEP: an --init-from run that is quantized already (`trit quantize`) keeps its own codes.
typedef enum {
    TRIT_QBASE_OFF = 0, TRIT_QBASE_NF4, TRIT_QBASE_INT8, TRIT_QBASE_INT4, TRIT_QBASE_TERNARY, TRIT_QBASE_KEEP
} trit_train_qbase;

// --qat: the codes of quantization-aware training.
typedef enum { TRIT_QAT_OFF = 0, TRIT_QAT_INT8, TRIT_QAT_INT4, TRIT_QAT_INT2, TRIT_QAT_FP8, TRIT_QAT_TERNARY } trit_train_qat;
typedef enum { TRIT_SCHEDULE_COSINE = 0, TRIT_SCHEDULE_TWO_STAGE } trit_train_schedule;
// --optimizer: AdamW with fp32 moments, or with 8-bit moments (TRIT_OPTIM_ADAMW8BIT); GaLore and
// Q-GaLore on the blocks' matrices (TRIT_OPTIM_GALORE, TRIT_OPTIM_QGALORE).
typedef enum {
    TRIT_TRAIN_ADAMW = 0, TRIT_TRAIN_ADAMW8BIT = 1, TRIT_TRAIN_GALORE = 2, TRIT_TRAIN_QGALORE = 3
} trit_train_optimizer;

// --offload: the optimizer state in memory, or in a memory-mapped file in the run directory
// streamed parameter by parameter (trit_optim_offload); with +frozen the frozen weights too, in a
// second file whose pages the graph drops after each read (trit_graph_set_streamed).
typedef enum { TRIT_OFFLOAD_OFF = 0, TRIT_OFFLOAD_OPTIMIZER = 1, TRIT_OFFLOAD_OPTIMIZER_FROZEN = 2 } trit_train_offload;

// How 16-bit weights (--master-weights off) round after an update.
typedef enum { TRIT_ROUND_NEAREST = 0, TRIT_ROUND_STOCHASTIC = 1 } trit_train_rounding;

void trit_train_config_init(trit_train_config *c);             // everything unset
// A config on the heap, everything unset (for bindings that cannot size the struct); NULL
// with a message when out of memory. Free with trit_train_config_free (NULL does nothing).
trit_train_config *trit_train_config_new(void);
void trit_train_config_free(trit_train_config *c);
trit_status trit_train_config_resolve(trit_train_config *c);   // defaults, then range checks
trit_train_task trit_train_config_task(const trit_train_config *c);
int64_t trit_train_config_accum(const trit_train_config *c);   // micro-batches per step
// The training config as JSON (malloc'ed) and back (unset fields stay unset).
char *trit_train_config_to_json(const trit_train_config *c);
trit_status trit_train_config_from_json(trit_train_config *c, const char *json);
// For --resume: start from `saved`, take the running fields the user set in `cli`, and fail
// with a hint naming the flag when `cli` sets a model or optimisation field to another value.
trit_status trit_train_config_merge(trit_train_config *out, const trit_train_config *saved,
                                    const trit_train_config *cli);
// Print "name = value" lines of the resolved config.
void trit_train_config_print(const trit_train_config *c, void *file /* FILE* */);

// Flag descriptions for --help, in order: name, meaning. Ends with {NULL, NULL}.
typedef struct trit_train_flag {
    const char *name;
    const char *help;
    bool is_switch;  // given without a value; set with "1"
} trit_train_flag;
const trit_train_flag *trit_train_flags(void);
// Set the field of flag `name` from the text `value` (full-string numeric check, enum names
// like "char", "bpe", "rms", "swiglu", "rope", "random", "sequential").
trit_status trit_train_config_set(trit_train_config *c, const char *name, const char *value);

// ---- bases: what a fine-tune starts from (src/train/base.c) ----------------------------------

typedef enum trit_base_kind {
    TRIT_BASE_RUN = 0,   // a trit run directory: model.safetensors + tokenizer.bin
    TRIT_BASE_HF = 1,    // a Hugging Face GPT-2 directory (config.json) with GPT-2 tokenizer files
    TRIT_BASE_GGUF = 2,  // a GGUF file: recognised, no reader yet
} trit_base_kind;

typedef struct trit_base {
    trit_base_kind kind;
    trit_gpt *model;     // as trained; quantized matrices as codes only (no f32 values)
    trit_tokenizer *tok;
    int64_t step;        // the step its weights were saved at (0 when unknown)
    bool quantized_on_load;  // trit_base_load_quantizing made its block matrices codes as it read them
    bool values_deferred;    // trit_base_load_layout read no float values: trit_base_read_values reads them
} trit_base;

const char *trit_base_kind_name(trit_base_kind k);
// What kind of base `path` is, from its files (nothing is loaded); a missing path, a plain file
// or a directory without a model is an error that says what to pass.
trit_status trit_base_probe(const char *path, trit_base_kind *kind);
// The base's model and tokenizer (b's fields NULL on failure, with a message).
trit_status trit_base_load(const char *path, trit_base *b);
// The same, with the float block matrices of a run directory, a Hugging Face directory or a GGUF
// quantized with spec as they are read, one f32 matrix at a time (trit_checkpoint_load_base,
// trit_import_hf_gpt2_quantizing, trit_import_gguf_quantizing; b->quantized_on_load tells): a
// QLoRA base without an f32 copy. A quantized run, a GGUF with quantized matrices and a --qat
// run load as trit_base_load loads them.
trit_status trit_base_load_quantizing(const char *path, const trit_quant_spec *spec, trit_base *b);
// For a caller that copies the base into a model of its own (a fine-tune): as
// trit_base_load_quantizing, but the float tensors of a run directory (not a --qat run's), a
// Hugging Face directory or a GGUF get no values (b->values_deferred; their shapes are checked) and
// trit_base_read_values reads them straight into that model, so the base is never held twice.
trit_status trit_base_load_layout(const char *path, const trit_quant_spec *spec, trit_base *b);
// dst's tensors that have values where b's model (its tensors dst's first ones, by name) has
// neither values nor codes, read from the base at path; nothing unless b->values_deferred.
trit_status trit_base_read_values(const char *path, const trit_base *b, trit_gpt *dst);
void trit_base_free(trit_base *b);

// ---- freezing (src/train/freeze.c) --------------------------------------------------------------
// rules: globs (fnmatch) over the GPT-2 parameter names, comma-separated, applied in order; one
// that starts with '!' unfreezes what it matches (as --freeze/--unfreeze build it). Sets or
// clears TRIT_FLAG_FROZEN on m's parameters (call before graphs and the optimizer: frozen ones
// get no gradient and no optimizer state). A glob that matches nothing, or rules that leave
// nothing trainable, is an error naming the flag and some of the names. *trainable (may be
// NULL) receives the trainable elements.
trit_status trit_train_freeze(trit_gpt *m, const char *rules, int64_t *trainable);
// The rules as the flags that give them: "--freeze 'h.*.attn.*' --unfreeze 'h.0.attn.*'".
void trit_train_freeze_describe(const char *rules, char *buf, size_t n);

// ---- sentence embeddings (src/train/embed_text.c) ----------------------------------------------
// The embedding of text by m (a --task embed run, or any GPT): its tokens, cut to the context
// (*cut, may be NULL, says whether they were), through the model in eval mode, the final norm's
// hidden states pooled by `pool` (trit_train_pool). out: (C). An empty text is an error.
trit_status trit_embed_text(trit_gpt *m, const trit_tokenizer *tok, int64_t pool, const char *text,
                            float *out /* (C) */, bool *cut);

// ---- the training loop -------------------------------------------------------------------

typedef struct trit_train_step_info {
    int64_t step;        // completed optimizer steps (1-based)
    int64_t steps;
    double loss;         // mean over the step's micro-batches
    double val_loss;     // NaN unless evaluated at this step
    double accuracy;     // addition task exact match when evaluated, else NaN
    double lr, grad_norm;
    double ms;           // wall time of this step
    double loss_scale;   // the loss scale this step used; NaN when no scaler is active
    int64_t skipped;     // steps skipped so far in the run (non-finite loss or gradient)
    bool was_skipped;    // this step was skipped: weights and optimizer state are as before it
    double comm_ms;      // --dist: time this rank waited for the gradient exchange; NaN otherwise
    double comm_bytes;   // --dist: bytes this rank passed into the step's gradient collectives; NaN otherwise
    // --dist pipeline: the step's idle share of the stages' time (mean over stages), and the
    // schedule's (P - 1) / (M + P - 1); NaN otherwise
    double bubble, bubble_ideal;
} trit_train_step_info;

typedef struct trit_train_hooks {
    void (*on_step)(void *ctx, const trit_train_step_info *info);  // after every step
    void *ctx;
    // After the backward passes of step `step` (0-based), before the finite check and the
    // update: lets tests poison a gradient. May be NULL.
    void (*on_grads)(void *ctx, int64_t step, trit_tensor *const *params, int num_params);
} trit_train_hooks;

typedef struct trit_train_result {
    int64_t step;            // last completed step
    double loss, val_loss;   // last train loss and last val loss (NaN if never evaluated)
    double accuracy;         // addition task: final exact-match accuracy on held-out problems
    double seconds;          // wall time of this run
    bool interrupted;        // stopped by a signal or trit_train_request_stop
    int64_t num_params;
    size_t peak_rss_setup;   // the process's peak RSS once set up (loading a base peaks here), bytes
    size_t peak_rss_base;    // its peak once an --init-from base is in the model, before the graph (0: no base)
    size_t peak_rss_steps;   // its peak over the steps and evaluations alone (0 where unmeasurable)
    char out[TRIT_PATH_MAX]; // the run directory
} trit_train_result;

// Train as configured (resolving a copy of `cfg`); hooks and result may be NULL. SIGINT and
// SIGTERM are caught while it runs: the current step finishes, a checkpoint is written and the
// call returns TRIT_OK with result->interrupted set.
trit_status trit_train_run(const trit_train_config *cfg, const trit_train_hooks *hooks,
                           trit_train_result *result);
// Ask a running trit_train_run to stop after its current step (async-signal-safe).
void trit_train_request_stop(void);
// The saved config and step of a run directory or its train_state.bin (reads the header).
trit_status trit_train_run_info(const char *path_or_dir, trit_train_config *cfg, int64_t *step);
// The saved config of run directory dir from its training-state header alone, without reading
// (or checking the CRC of) the saved tensors: how a base's reader learns how the run trained.
trit_status trit_train_run_config(const char *dir, trit_train_config *cfg);

// ---- checkpoints ----------------------------------------------------------------------------

#define TRIT_CKPT_MODEL "model.safetensors"
#define TRIT_CKPT_STATE "train_state.bin"
#define TRIT_CKPT_TOKENIZER "tokenizer.bin"
#define TRIT_CKPT_METRICS "metrics.jsonl"

// Weights under the GPT-2 names with metadata format="trit-gpt", config=<JSON>, step=<k>; a
// parameter with an attached quantized copy (trit_gpt_attach_quantized) is saved as that copy,
// with the quantization map (loading decodes it into the parameter and attaches it again).
trit_status trit_checkpoint_save_model(const trit_gpt *m, const char *path, int64_t step);
// The mean loss of m over `batches` batches of B x T windows read in order from the start of a
// token shard (0 = one pass); *used (may be NULL) receives the batch count.
trit_status trit_eval_loss(trit_gpt *m, const char *shard, int64_t batches, int64_t B, int64_t T, double *loss,
                           int64_t *used);
// The same windows' mean loss through the decoder (trit_gpt_decode, one token at a time from an
// empty cache per window, teacher-forced): what `trit sample` computes, with the quantized
// kernels' per-token int8 inputs where they apply, which the graph does not round.
trit_status trit_eval_decode_loss(const trit_gpt *m, const char *shard, int64_t batches, int64_t B, int64_t T,
                                  double *loss, int64_t *used);
// A model from a run directory or a .safetensors file; the config comes from the metadata and
// every tensor's dtype and shape is checked. *step (may be NULL) receives the saved step.
trit_gpt *trit_checkpoint_load_model(const char *path, int64_t *step);
// The same model to decode only (trit_gpt_make_decode_only): a quantized tensor is read as its
// codes and never widened to f32, so a quantized run decodes in about the memory of its codes.
trit_gpt *trit_checkpoint_load_decoder(const char *path, int64_t *step);
// The model with its quantized tensors as codes only (attached, no f32 values) and not decode-
// only: a fine-tune's base, whose codes the new model takes (QLoRA) or decodes (full training).
trit_gpt *trit_checkpoint_load_codes(const char *path, int64_t *step);
// Paged base loading (QLoRA): the model with the 2-D block matrices the file stores as floats
// quantized with spec as they are read, one matrix in f32 at a time, and attached as codes only
// (no f32 values; the codes trit_gpt_quantize gives over the same values), the rest loaded as
// trit_checkpoint_load_model loads it; *made (may be NULL) is set. A quantized checkpoint (`trit
// quantize`) loads as trit_checkpoint_load_codes loads it, *made false. A Hugging Face directory
// is imported in f32 (*made false).
trit_gpt *trit_checkpoint_load_quantizing(const char *path, int64_t *step, const trit_quant_spec *spec, bool *made);
// The same, but the float tensors get no values at all (their presence and shapes checked,
// nothing read; quantized tensors as codes, spec's matrices quantized as read, spec may be NULL):
// the layout of a base whose values trit_checkpoint_read_values reads straight into the model
// that trains, so the base is never held twice. A Hugging Face directory: trit_import_hf_gpt2_layout.
trit_gpt *trit_checkpoint_load_layout(const char *path, int64_t *step, const trit_quant_spec *spec, bool *made);
// dst's tensors that have values where layout (trit_checkpoint_load_layout of path; dst's first
// tensors are its, by name) has neither values nor codes, read from path's weights.
trit_status trit_checkpoint_read_values(const char *path, trit_gpt *dst, const trit_gpt *layout);
// The GPT config as JSON (malloc'ed) and back.
char *trit_checkpoint_config_to_json(const trit_gpt_config *c);
trit_status trit_checkpoint_config_from_json(trit_gpt_config *c, const char *json);
// "<dir>/<name>" into buf (fails when it does not fit).
trit_status trit_path_join(char *buf, size_t n, const char *dir, const char *name);

// sizeof of the struct a binding mirrors, by its C name ("trit_train_result", ...; "trit_tensor
// head": trit_tensor up to its name), 0 for a name not known (src/train/abi_sizes.c).
size_t trit_abi_struct_size(const char *name);

// ---- sampling -----------------------------------------------------------------------------------

typedef struct trit_sample_config {
    double temperature;  // 0 = greedy (argmax)
    int64_t top_k;       // 0 = all tokens
    double top_p;        // 1 = all tokens (nucleus sampling below 1)
    uint64_t seed;
    int64_t max_tokens;
    trit_dtype kv_cache; // TRIT_F32 or TRIT_F16: how the decoder stores keys and values
} trit_sample_config;

trit_sample_config trit_sample_config_default(void);  // T 0.8, top-k 0, top-p 1, seed 1, 256 tokens, f32 cache
// Temperature >= 0, top-k >= 0, top-p in (0, 1]; the message names the bad value.
trit_status trit_sample_config_check(const trit_sample_config *c);

typedef struct trit_sampler trit_sampler;
trit_sampler *trit_sampler_new(int64_t V, const trit_sample_config *c);
void trit_sampler_free(trit_sampler *s);
// Pick a token from logits (V): temperature, then top-k, then top-p, then a multinomial draw
// with the Philox uniform number `draw` of (seed, sampling stream). Greedy ties go to the
// lowest id.
int32_t trit_sampler_pick(trit_sampler *s, const float *logits /* (V) */, uint64_t draw);

// The decode loop of every generator (trit_generate, the addition task's score, `trit bench
// --decode`): resets `cache` (one of m's), feeds the prompt with trit_gpt_prefill, then makes n
// tokens into out, each chosen from the logits by fns->pick(ctx, logits, i) (NULL fns or pick:
// greedy, the highest logit, ties to the lowest id) and, unless it is the last, fed back with
// trit_gpt_decode. When the context is full the cache restarts from the last seq_len/2 tokens;
// a prompt longer than the context is fed as the window such restarts would leave. on_token
// (may be NULL) sees each token as it is made. logits: (V) scratch, ending with the logits the
// last token was chosen from.
typedef struct trit_decode_fns {
    int32_t (*pick)(void *ctx, const float *logits /* (V) */, int64_t i);
    void (*on_token)(void *ctx, int64_t i, int32_t token);
    void *ctx;
} trit_decode_fns;
trit_status trit_decode_tokens(const trit_gpt *m, trit_gpt_cache *cache, const int32_t *prompt /* (n_prompt) */,
                               int64_t n_prompt, int64_t n, const trit_decode_fns *fns, int32_t *out /* (n) */,
                               float *logits /* (V) */);
// Greedy decoding: trit_decode_tokens without fns.
trit_status trit_greedy_decode(const trit_gpt *m, trit_gpt_cache *cache, const int32_t *prompt /* (n_prompt) */,
                               int64_t n_prompt, int64_t n, int32_t *out /* (n) */, float *logits /* (V) */);

// Feed `prompt` through the KV cache and generate up to max_tokens tokens into out (n_out
// written) with trit_decode_tokens and a sampler of c. on_token (may be NULL) sees each new
// token as it is made.
trit_status trit_generate(const trit_gpt *m, const int32_t *prompt, int64_t n_prompt,
                          const trit_sample_config *c, int32_t *out, int64_t *n_out,
                          void (*on_token)(void *ctx, int32_t token), void *ctx);

// ---- metrics and plot ----------------------------------------------------------------------

typedef struct trit_metric_row {
    int64_t step;
    double loss, val_loss;  // NaN when absent
} trit_metric_row;

// "12.3s", "4m05s", "1h02m".
void trit_format_duration(double seconds, char *buf, size_t n);
// Read step, loss and val_loss of each line of a metrics.jsonl (malloc'ed rows).
trit_status trit_metrics_read(const char *path, trit_metric_row **rows, int64_t *n);
// Write an SVG of train and val loss against step to svg_path (atomically).
trit_status trit_plot_svg(const trit_metric_row *rows, int64_t n, const char *title,
                          const char *svg_path);
// Several runs in one SVG (1 to 6), one colour each: train loss thin, val loss with markers.
typedef struct trit_plot_run {
    const char *name;  // legend label
    const trit_metric_row *rows;
    int64_t n;
} trit_plot_run;
trit_status trit_plot_svg_runs(const trit_plot_run *runs, int n_runs, const char *title, const char *svg_path);

// ---- the built-in addition task -----------------------------------------------------------
// Problem text: both operands zero-padded to D digits, then the sum's D + 1 digits written
// least significant first, e.g. D = 3: 123 + 456 = 579 is "123+456=9750". Writing the answer
// reversed lets the model produce each digit from the carry it has just seen. The loss covers
// the answer digits only. About 1 in 10 operand pairs is held out of training and used for the
// exact-match test.

#define TRIT_ADDITION_MAX_DIGITS 9
int64_t trit_addition_text_len(int64_t digits);  // 3D + 3
// Writes the problem text (text_len bytes + NUL) into buf.
trit_status trit_addition_format(int64_t digits, uint64_t a, uint64_t b, char *buf, size_t n);
bool trit_addition_held_out(int64_t digits, uint64_t a, uint64_t b);
// Exact-match accuracy of greedy decoding on the first n held-out problems; `show` of them are
// printed to `file` (a FILE*, may be NULL) with the model's answers.
trit_status trit_addition_accuracy(const trit_gpt *m, const trit_tokenizer *tok, int64_t digits,
                                   int64_t n, int64_t show, void *file, double *accuracy);

// ---- post-training quantization ----------------------------------------------------------

typedef struct trit_quantize_report {
    int64_t tensors;           // tensors quantized
    int64_t params_quantized;  // their elements
    int64_t params_total;      // all model elements
    size_t bytes_quantized;    // codes + scales + zero points of the quantized tensors
    size_t bytes_total;        // the whole model's tensor bytes after quantization
} trit_quantize_report;

// Which matrices trit_gpt_quantize takes: the 2-D weights inside the blocks, the token
// embedding (which is also the tied output head), or both.
enum { TRIT_QUANTIZE_BLOCKS = 1u, TRIT_QUANTIZE_EMBEDDING = 2u };
// Quantizes the matrices of m that `which` names with spec, attaches each quantized copy to m (trit_gpt_attach_quantized: the
// decoder multiplies with it, trit_checkpoint_save_model stores it) and writes its decoded
// values into the f32 parameter, so graphs compute what the quantized model computes.
trit_status trit_gpt_quantize(trit_gpt *m, const trit_quant_spec *spec, unsigned which, trit_quantize_report *r);
// Whether a 2-D parameter of this name is a block matrix TRIT_QUANTIZE_BLOCKS takes (h.N...,
// not an adapter's, which trains in f32 or bf16).
bool trit_quantize_takes_block_matrix(const char *name);
// Paged base loading: parameter i of m, made without values, becomes codes as it is read.
// read(ctx, x) fills x (an f32 tensor of the parameter's shape and name, the only f32 copy of
// it, freed after), which is quantized with spec and attached (trit_gpt_attach_quantized): the
// codes of trit_gpt_quantize over the same values, with one matrix in f32 at a time. A reader's
// failure is returned as it said it; from names the file for a quantizer's.
trit_status trit_gpt_quantize_read(trit_gpt *m, int i, const trit_quant_spec *spec,
                                   trit_status (*read)(void *ctx, trit_tensor *x), void *ctx, const char *from);
// Bytes of m's tensors as a checkpoint stores them: attached quantized copies (codes, scales,
// zero points) in place of their parameters.
size_t trit_gpt_stored_bytes(const trit_gpt *m);
// The model trit_gpt_new(c, seed) gives, with its block matrices quantized with `blocks` and its
// token embedding (the tied head) with `head` (either NULL: f32), decode-only
// (trit_gpt_make_decode_only): each quantized matrix is made a run of whole rows at a time, so
// its f32 values never exist whole (unless its scale spans rows: one per matrix, or double
// quantization). NULL with a message on failure.
trit_gpt *trit_gpt_new_quantized(const trit_gpt_config *c, uint64_t seed, const trit_quant_spec *blocks,
                                 const trit_quant_spec *head);

// ---- quantization-aware training ----------------------------------------------------------

// Puts the fake quantization of c's --qat / --group / --qat-acts on m's graphs (nothing when
// --qat is off).
trit_status trit_train_set_qat(trit_gpt *m, const trit_train_config *c);
// A model trained under c's QAT, for inference: its block matrices quantized with the rule
// training used (attached packed copies, decoded values in the parameters) and, with
// --qat-acts token, its graphs' matmul inputs still fake-quantized per token. `trit eval` and
// `trit sample` do this for a run directory trained with --qat or --ternary.
trit_status trit_train_freeze_qat(trit_gpt *m, const trit_train_config *c);
// The model of a checkpoint (run directory or .safetensors file) as it was trained: a run
// directory whose train_state.bin says --qat or --ternary gets trit_train_freeze_qat; a
// quantized checkpoint (`trit quantize`) loads its decoded values with the quantized copies
// attached. What `trit eval`, `trit sample` and `trit train --init-from` start from. *step
// (may be NULL) receives the saved step.
trit_gpt *trit_checkpoint_load_as_trained(const char *path, int64_t *step);
// The same model with a quantized checkpoint's codes as codes only (trit_checkpoint_load_codes:
// graphs take them as operands, no f32 copy is made); a --qat/--ternary run as above. What `trit
// eval` and a fine-tune's base (trit_base_load) start from.
trit_gpt *trit_checkpoint_load_as_trained_codes(const char *path, int64_t *step);
// The same, with spec (may be NULL) quantizing the block matrices as they are read
// (trit_checkpoint_load_quantizing, *made set) unless the run trained with --qat/--ternary.
trit_gpt *trit_checkpoint_load_base(const char *path, int64_t *step, const trit_quant_spec *spec, bool *made);
// The same model to decode only (trit_gpt_make_decode_only): a quantized checkpoint's codes are
// read as codes (trit_checkpoint_load_decoder), a --qat/--ternary run's latent weights are frozen
// and then dropped. What `trit sample`, `trit eval --decoder` and `trit bench --decode` decode with.
trit_gpt *trit_checkpoint_load_decoding(const char *path, int64_t *step);

// ---- adapters in PEFT's layout (train/peft.c) -------------------------------------------------
#define TRIT_PEFT_WEIGHTS "adapter_model.safetensors"
#define TRIT_PEFT_CONFIG "adapter_config.json"
// Writes m's LoRA adapter into dir (which exists) as peft's save_pretrained does for a GPT-2:
// TRIT_PEFT_WEIGHTS with base_model.model.transformer.h.<i>.<module>.lora_A.weight (r, in) and
// lora_B.weight (out, r) in the adapter's own dtype (F32, or BF16: exactly the bits trained), and
// TRIT_PEFT_CONFIG (base_name: its base_model_name_or_path). Each file is written atomically.
trit_status trit_peft_save(const trit_gpt *m, const char *dir, const char *base_name);
// Gives m (a plain model) the LoRA adapter in dir: its config checked against m (every target
// matches a block matrix, the rank fits), every tensor present with the shape m needs, in a
// float dtype (F32, BF16, F16, F64: widened exactly into m's f32 adapter), and nothing else in
// the file. On failure m is left with a partial adapter: free it.
trit_status trit_peft_load(trit_gpt *m, const char *dir);
// The values of m's adapter (made by its config, e.g. --lora) from the adapter file in dir: every
// adapter tensor of m present there with its shape, nothing else (a LoRA run's --lora-init); each
// converted to the dtype m's adapter has (F32 into a bf16 adapter rounds to nearest even).
trit_status trit_peft_read_values(trit_gpt *m, const char *dir);
// The model of checkpoint `base` as trained, with the PEFT adapter in adapter_dir, unmerged;
// made decode-only when decoding (the base's quantized kernels plus the low-rank products).
trit_gpt *trit_checkpoint_load_adapted(const char *base, const char *adapter_dir, bool decoding);
// The quantization spec of --quantize-base / --double-quant (train/qlora.c).
trit_quant_spec trit_train_qbase_spec(const trit_train_config *c);
// `trit merge`: base (a run directory or .safetensors file) with the adapter in adapter_dir
// merged into its weights, written as a plain f32 run in out (model.safetensors and base's
// tokenizer.bin when it has one). out must not hold a model; on failure nothing is left there.
trit_status trit_merge_adapter_run(const char *base, const char *adapter_dir, const char *out);
// `trit merge-shards`: the sharded checkpoint of a --dist zero1|zero2 run directory (one optimizer
// shard file per rank) as a normal run directory `out`, its train_state.bin what one process
// would have written (the shards' pieces put together), the run's other files copied; *ranks
// (may be NULL) gets the number of shards.
trit_status trit_train_merge_shards(const char *run, const char *out, int *ranks);

// ---- export ---------------------------------------------------------------------------------

// Writes m and its tokenizer as a GGUF v3 file of llama.cpp's gpt2 architecture, 2-D matrices
// in dt (TRIT_F32, TRIT_F16, TRIT_Q8_0 or TRIT_Q4_0), the rest f32. The model must be GPT-2
// shaped (LayerNorm, GELU, learned positions, biases). tok NULL (a random model for benchmarks)
// writes the 256 byte tokens and numbered placeholders.
trit_status trit_export_gguf(const trit_gpt *m, const trit_tokenizer *tok, trit_dtype dt, const char *path);

#ifdef __cplusplus
}
#endif
#endif
