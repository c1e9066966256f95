// Shared inside src/train: Philox streams, the training-state file, metrics output, the
// addition task's batches and scoring, and the trainer's working set.
#ifndef TRIT_TRAIN_INTERNAL_H
#define TRIT_TRAIN_INTERNAL_H

#include <stdio.h>

#include "trit/io.h"
#include "trit/train.h"

// Philox streams of the training code: each use of randomness has its own stream, so adding
// one never shifts the numbers of another.
enum {
    TRIT_STREAM_DATA = 0x7da7a,       // window starts of random-order batches
    TRIT_STREAM_SAMPLE = 0x5a3b1e,    // multinomial draws of the sampler
    TRIT_STREAM_TASK = 0x7a5c,        // addition problems for training
    TRIT_STREAM_TASK_TEST = 0x7e57,   // held-out addition problems
    TRIT_STREAM_HOLDOUT = 0x401d,     // which operand pairs are held out
    TRIT_STREAM_ROUNDING = 0x5272,    // stochastic rounding of 16-bit weights (mixed into the seed)
    TRIT_STREAM_BENCH = 0x6265,       // `trit bench`'s random tokens
};
// TernGrad draws: this xor (step << 16 | parameter index).
#define TRIT_STREAM_TERNGRAD (UINT64_C(0x7e4a) << 48)

// ---- training-state file (checkpoint.c) ------------------------------------------------------

typedef struct trit_train_state {
    trit_train_config config;  // as saved (resolved)
    int64_t step;              // completed training steps (taken or skipped)
    int64_t data_batches;      // micro-batches consumed (batch index of the next one)
    uint32_t tokenizer_crc;    // CRC-32 of tokenizer.bin
    // Loss scaling and skipped steps (absent in older files: no scaler state, none skipped).
    bool has_scaler;
    trit_loss_scaler scaler;
    int64_t skipped, skip_streak;
} trit_train_state;

// One buffer of the file: a weight or an optimizer state, of any dtype of the table (a blocked
// one as its blocks), with f32 block scales when it has them.
typedef struct trit_state_entry {
    const char *name;
    const char *role;        // "weight" or "optim"
    trit_dtype dtype;
    int ndim;
    int64_t shape[TRIT_MAX_DIMS];
    int64_t count;           // elements
    void *data;              // nbytes(dtype, count) bytes; filled by trit_state_read
    float *scales;           // (num_scales), or NULL
    int64_t num_scales;
    const trit_optim *offloaded;  // the optimizer whose mapped file holds data: dropped after writing
    const trit_tensor *weight;    // the weight data belongs to (its mapped pages dropped after writing), or NULL
} trit_state_entry;

// Whether a state file holds parameter t's values: every parameter with values but the frozen
// ones, which no step changes and which model.safetensors beside the state file holds (a LoRA
// checkpoint's state is its adapters and their moments, not a second copy of the base). A
// tensor-parallel checkpoint's state holds them too (trainer_tensor.c writes the whole model),
// and its resume of one that does not takes them from model.safetensors.
bool trit_state_holds_weight(const trit_tensor *t);
// The state file's entry for weight t's values (role "weight", its dtype, shape and data).
trit_state_entry trit_state_weight_entry(const trit_tensor *t);
// On resume, before the state: the frozen parameters' values from the run's model.safetensors
// at model_path (nothing to do without frozen parameters that have values).
trit_status trit_state_load_frozen(const char *model_path, trit_gpt *m);
// Frozen weight `name` in the run's model file, opening *f (NULL at first; the caller closes
// it) on first use: *info, or an error that names the file and what is missing.
trit_status trit_state_frozen_find(trit_safetensors **f, const char *model_path, const char *name,
                                   const trit_safetensors_info **info);

// The file of the given buffers (trit_state_save lists the model's and the optimizer's), and
// reading them back into buffers of the same names, dtypes, shapes and scale counts.
trit_status trit_state_write(const char *path, const trit_train_state *st, const trit_state_entry *entries, int n,
                             const char *optim_kind, int64_t optim_step);
trit_status trit_state_read(const char *path, trit_train_state *st, const trit_state_entry *entries, int n,
                            int64_t *optim_step);
trit_status trit_state_save(const char *path, const trit_train_state *st, const trit_gpt *m,
                            const trit_optim *o);
// Header only: config, step, positions (no tensors), for resume planning and `trit info`.
trit_status trit_state_peek(const char *path, trit_train_state *st);
// Everything: fills the model's weights and the optimizer's moments and step counter.
trit_status trit_state_load(const char *path, trit_train_state *st, trit_gpt *m, trit_optim *o);
// Every buffer of a state file in its order, the values copied out (any roles, e.g. the shard
// files of --dist zero; trit merge-shards); free with trit_state_list_free.
typedef struct trit_state_list {
    trit_train_state state;
    char optim_kind[32];
    int64_t optim_step;
    int n;
    trit_state_entry *entries;  // (n) name, role, data and scales owned by the list
} trit_state_list;
trit_status trit_state_list_read(const char *path, trit_state_list *l);
void trit_state_list_free(trit_state_list *l);
// CRC-32 of a whole file.
trit_status trit_file_crc32(const char *path, uint32_t *crc);

// ---- metrics (metrics.c) -----------------------------------------------------------------------

// Open DIR/metrics.jsonl for appending; with keep_until >= 0 first drop lines whose step is
// greater (a resumed run rewrites what came after its checkpoint), else start it empty.
FILE *trit_metrics_open(const char *dir, int64_t keep_until);
// One JSON line (val_loss / accuracy only when not NaN), flushed.
void trit_metrics_write(FILE *fp, const trit_train_step_info *info, double tokens_per_s);
// The same numbers (those metrics.jsonl does not write as null) as one event of TensorBoard
// scalars tagged with their metrics.jsonl keys, each the value printed there. w NULL: nothing.
trit_status trit_metrics_tb_write(trit_tb_writer *w, double wall_time, const trit_train_step_info *info,
                                  double tokens_per_s);
// Seconds since the epoch (CLOCK_REALTIME): an event's wall_time.
double trit_wall_seconds(void);
// The progress line on stdout.
void trit_progress_print(const trit_train_step_info *info, double val_loss_known,
                         double tokens_per_s, double eta_seconds);

// ---- the addition task (task_addition.c) ---------------------------------------------------

typedef struct trit_addition {
    int64_t digits;
    int32_t id_of[256];  // byte -> token id (-1 if not in the alphabet)
    uint8_t byte_of[16]; // token id -> byte
} trit_addition;

// The task's alphabet "+0123456789=" as a character tokenizer.
trit_tokenizer *trit_addition_tokenizer(void);
trit_status trit_addition_init(trit_addition *t, int64_t digits, const trit_tokenizer *tok);
// Training batch `batch` (problems batch*B ..): x, y (B, T) with T = text_len - 1, targets -1
// outside the answer. held_out selects the test problems (for validation loss) instead.
void trit_addition_batch(const trit_addition *t, uint64_t seed, int64_t batch, int64_t B,
                         bool held_out, int32_t *x, int32_t *y);
// Held-out problem i: operands a, b.
void trit_addition_test_problem(const trit_addition *t, int64_t i, uint64_t *a, uint64_t *b);
// Greedy-decode the answers of n held-out problems; *correct gets the exact matches.
// print (may be 0) problems are written to fp with the model's answers.
trit_status trit_addition_score(const trit_addition *t, const trit_gpt *m, int64_t n, int64_t *correct,
                                int64_t print, FILE *fp);

// The most tokens a step (and a micro-batch's widest activation) may count.
#define TRIT_TRAIN_MAX_TOKENS (INT64_C(1) << 40)
// The configuration's defaults and its rules between fields (config_rules.c), applied by
// trit_train_config_resolve; the name of an enum flag's value (config.c's table, "?" if none).
void trit_train_config_apply_defaults(trit_train_config *c);
trit_status trit_train_config_check_relations(const trit_train_config *c);
const char *trit_train_flag_enum_name(const char *flag, int64_t v);

#endif
