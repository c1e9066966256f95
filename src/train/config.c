// The training configuration as a table of fields: one row per `trit train` flag gives its
// name, type, offset and whether a resume may change it. Defaults, JSON, --help text, flag
// parsing and the resume merge all walk this table, so a new flag is one row here.
#include "trit/train.h"
#include "train/train_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum { F_INT, F_DBL, F_STR, F_ENUM, F_BOOL } field_type;
// What a resume may do with a field: RUN fields may change, the others must match the checkpoint.
typedef enum { K_DATA, K_MODEL, K_OPT, K_RUN } field_kind;

typedef struct field {
    const char *name;  // flag name without the dashes, underscores as dashes
    field_type type;
    field_kind kind;
    size_t off;
    const char *const *enums;  // F_ENUM: names by value, NULL-terminated
    const char *help;
    int64_t ilo, ihi;          // F_INT: allowed values
    double dlo, dhi;           // F_DBL: allowed values (finite), ends exclusive as `open` says
    unsigned open;             // TRIT_OPEN_LO | TRIT_OPEN_HI
    const char *why;           // reason added to a range error, may be NULL
    bool is_switch;            // F_BOOL given without a value on the command line (--ternary)
    // F_STR lists (a repeatable flag): each comma-separated item of a value is appended to the
    // field's comma-separated list with this prefix ("" or "!"), instead of replacing it.
    const char *append;
    bool alias;                // another name of an earlier row's field: not in JSON, print or merge
    const char *const *synonyms;  // F_ENUM: pairs {other name, enum name}, NULL-terminated
    trit_status (*check_str)(const char *value);  // F_STR: the value's own syntax, or NULL
} field;

static trit_status check_lora(const char *value) {
    trit_adapter_config a;
    return trit_adapter_parse_lora(value, &a);
}

static const char *const tokenizer_names[] = {"none", "char", "bpe", NULL};
static const char *const norm_names[] = {"layer", "rms", NULL};
static const char *const mlp_names[] = {"gelu", "swiglu", NULL};
static const char *const pos_names[] = {"learned", "rope", NULL};
static const char *const order_names[] = {"random", "sequential", NULL};
static const char *const precision_names[] = {"fp32", "bf16", "fp16", NULL};
static const char *const off_on_names[] = {"off", "on", NULL};
static const char *const rounding_names[] = {"nearest", "stochastic", NULL};
static const char *const matmul_names[] = {"highest", "high", "medium", NULL};
static const char *const qat_names[] = {"off", "int8", "int4", "int2", "fp8", "ternary", NULL};
static const char *const recompute_names[] = {"off", "block", "attn", "mlp", "auto", NULL};
static const char *const recompute_synonyms[] = {"none", "off", NULL};
static const char *const offload_names[] = {"off", "optimizer", "optimizer+frozen", NULL};
static const char *const task_names[] = {"lm", "embed", NULL};
static const char *const pool_names[] = {"mean", "last", NULL};
static const char *const schedule_names[] = {"cosine", "two-stage", NULL};
static const char *const qat_acts_names[] = {"off", "token", NULL};
static const char *const ternary_matmul_names[] = {"fake", "int8", "int8-fp32-dx", "int8-fp32-dw", NULL};
static const char *const optimizer_names[] = {"adamw", "adamw8bit", "galore", "qgalore", NULL};
static const char *const adapter_names[] = {"off", "lora", "bottleneck", NULL};
static const char *const dist_names[] = {"off", "ddp", "zero1", "zero2", "pipeline", "zero3", "tensor", NULL};
static const char *const pipe_schedule_names[] = {"gpipe", "1f1b", NULL};
static const char *const qbase_names[] = {"off", "nf4", "int8", "int4", "ternary", "keep", NULL};
static const char *const adapter_dtype_names[] = {"f32", "bf16", NULL};

// Upper bounds are where a run stops being a training run on one machine and becomes an
// overflow or an allocation that cannot succeed; the products of sizes are checked too
// (check_sizes in config_rules.c).
#define MAX_STEPS INT64_C(1000000000)
#define MAX_TOKENS TRIT_TRAIN_MAX_TOKENS
#define OFF(f) offsetof(trit_train_config, f)
#define I(lo, hi) .ilo = (lo), .ihi = (hi)
#define D(lo, hi, o) .dlo = (lo), .dhi = (hi), .open = (o)
#define NONE .ilo = 0
#define OPEN_HI TRIT_OPEN_HI
#define OPEN_LO TRIT_OPEN_LO
static const field fields[] = {
    {"data", F_STR, K_DATA, OFF(data), NULL, "text file or `trit prepare` dir (none: addition task)", NONE},
    {"tokenizer", F_ENUM, K_DATA, OFF(tokenizer), tokenizer_names, "char|bpe for a text file (char)", NONE},
    {"vocab", F_INT, K_DATA, OFF(vocab), NULL, "BPE vocabulary size (512)", I(257, TRIT_SHARD_MAX_VOCAB),
     .why = "a byte-level BPE needs more than its 256 byte tokens, and a uint16 token shard holds at most 65536"},
    {"val-fraction", F_DBL, K_DATA, OFF(val_fraction), NULL, "tail of the text held out (0.1)", D(0, 1, OPEN_LO | OPEN_HI)},
    {"order", F_ENUM, K_DATA, OFF(order), order_names, "random|sequential training windows (random)", NONE},
    {"digits", F_INT, K_DATA, OFF(digits), NULL, "addition task: digits per operand (3)", I(1, TRIT_ADDITION_MAX_DIGITS)},
    {"task-test", F_INT, K_RUN, OFF(task_test), NULL, "addition task: held-out problems scored (1000)", I(1, 1000000)},
    {"layers", F_INT, K_MODEL, OFF(layers), NULL, "transformer blocks L (4; task 2)", I(1, 1024)},
    {"heads", F_INT, K_MODEL, OFF(heads), NULL, "attention heads H (4)", I(1, 1024)},
    {"dim", F_INT, K_MODEL, OFF(dim), NULL, "width C, a multiple of heads (128)", I(1, 65536)},
    {"seq", F_INT, K_MODEL, OFF(seq), NULL, "context T in tokens (64; task 3*digits+2)", I(1, 1 << 20)},
    {"dropout", F_DBL, K_MODEL, OFF(dropout), NULL, "dropout probability (0)", D(0, 1, OPEN_HI)},
    {"bias", F_BOOL, K_MODEL, OFF(bias), NULL, "biases in linear layers and norms, 1|0 (1)", NONE},
    {"norm", F_ENUM, K_MODEL, OFF(norm), norm_names, "layer|rms (layer)", NONE},
    {"mlp", F_ENUM, K_MODEL, OFF(mlp), mlp_names, "gelu|swiglu (gelu)", NONE},
    {"pos", F_ENUM, K_MODEL, OFF(pos), pos_names, "learned|rope position encoding (learned)", NONE},
    {"subln", F_BOOL, K_MODEL, OFF(subln), NULL,
     "SubLN: normalise the input of each block's output projections (BitNet b1.58's later models); no value",
     NONE, .is_switch = true},
    {"batch", F_INT, K_OPT, OFF(batch), NULL, "sequences per micro-batch B (12; task 64)", I(1, 1 << 20)},
    {"total-batch-tokens", F_INT, K_OPT, OFF(total_batch_tokens), NULL,
     "tokens per step, a multiple of B*T; more accumulates micro-batches (B*T)", I(1, MAX_TOKENS)},
    {"steps", F_INT, K_OPT, OFF(steps), NULL, "optimizer steps (2000; task 3000)", I(1, MAX_STEPS)},
    {"warmup", F_INT, K_OPT, OFF(warmup), NULL, "linear warmup steps, at most --steps (100)", I(0, MAX_STEPS)},
    {"lr", F_DBL, K_OPT, OFF(lr), NULL, "peak learning rate (1e-3)", D(0, 10, OPEN_LO)},
    {"min-lr", F_DBL, K_OPT, OFF(min_lr), NULL, "learning rate at the end of the cosine, at most --lr (lr/10)",
     D(0, 10, 0)},
    {"beta1", F_DBL, K_OPT, OFF(beta1), NULL, "AdamW beta1 (0.9)", D(0, 1, OPEN_HI)},
    {"beta2", F_DBL, K_OPT, OFF(beta2), NULL, "AdamW beta2 (0.95; task 0.99)", D(0, 1, OPEN_HI)},
    {"eps", F_DBL, K_OPT, OFF(eps), NULL, "AdamW epsilon (1e-8)", D(1e-30, 1, 0)},
    {"weight-decay", F_DBL, K_OPT, OFF(weight_decay), NULL, "AdamW decay of >= 2-D weights (0.1)", D(0, 100, 0)},
    {"clip", F_DBL, K_OPT, OFF(clip), NULL, "gradient clipping global norm, 0 = off (1.0)", D(0, 1e6, 0)},
    {"optimizer", F_ENUM, K_OPT, OFF(optimizer), optimizer_names,
     "adamw|adamw8bit: AdamW moments in fp32, or in 8 bits (bitsandbytes' dynamic maps, blocks of 256 with an "
     "absmax each; tensors under 4096 values keep fp32) (adamw); galore|qgalore: the blocks' matrices stepped on "
     "a rank-r projection of their gradients (Q-GaLore: int4 bases, int8-grid weights, lazy refreshes)", NONE},
    {"galore-rank", F_INT, K_OPT, OFF(galore_rank), NULL, "galore|qgalore: rank r of the projection, at most the "
     "blocks' matrices' smaller side (128)", I(1, 65536)},
    {"galore-update", F_INT, K_OPT, OFF(galore_update), NULL, "galore|qgalore: steps between basis refreshes (200)",
     I(1, MAX_STEPS)},
    {"galore-scale", F_DBL, K_OPT, OFF(galore_scale), NULL, "galore|qgalore: factor of the projected-back step "
     "(0.25)", D(0, 1e6, OPEN_LO)},
    {"seed", F_INT, K_OPT, OFF(seed), NULL, "seed of init, data order and dropout (1337)", I(0, INT64_MAX)},
    {"precision", F_ENUM, K_OPT, OFF(precision), precision_names,
     "fp32|bf16|fp16: bf16/fp16 store matmul inputs in 16 bits, fp32 sums and optimizer (fp32)", NONE},
    {"master-weights", F_ENUM, K_OPT, OFF(master_weights), off_on_names,
     "on|off: fp32 master weights, or 16-bit weights updated in place (on)", NONE},
    {"rounding", F_ENUM, K_OPT, OFF(rounding), rounding_names,
     "stochastic|nearest rounding of 16-bit weight updates (stochastic)", NONE},
    {"matmul-precision", F_ENUM, K_OPT, OFF(matmul_precision), matmul_names,
     "highest|high|medium: fp32 matmul operands as fp32, bf16 hi+lo, or bf16 (highest)", NONE},
    {"loss-scale", F_DBL, K_OPT, OFF(loss_scale), NULL,
     "static loss scale, 0 = dynamic for fp16 (start 65536) and none otherwise (0)", D(0, 0x1p100, 0),
     .why = "0 is dynamic for fp16; a static scale is positive, at most 2^100"},
    {"qat", F_ENUM, K_OPT, OFF(qat), qat_names,
     "off|int8|int4|int2|fp8|ternary: train the block matrices through fake quantization (off)", NONE},
    {"ternary", F_BOOL, K_OPT, OFF(ternary), NULL,
     "BitNet b1.58 training: --qat ternary with the recipe's defaults (--lr 4e-3 --schedule two-stage "
     "--stage2-weight-decay 0); no value", NONE, .is_switch = true},
    {"terngrad", F_BOOL, K_OPT, OFF(terngrad), NULL,
     "ternary gradients (TernGrad: scale * {-1, 0, 1}, unbiased stochastic rounding); no value", NONE,
     .is_switch = true},
    {"terngrad-clip", F_DBL, K_OPT, OFF(terngrad_clip), NULL, "TernGrad clip in standard deviations, 0 = off (2.5)",
     D(0, 100, 0)},
    {"terngrad-min-size", F_INT, K_OPT, OFF(terngrad_min_size), NULL,
     "gradients with fewer values stay fp32 (1024)", I(1, INT64_C(1) << 40)},
    {"terngrad-bucket", F_INT, K_OPT, OFF(terngrad_bucket), NULL,
     "TernGrad values per scale, a multiple of 4; 0 = one scale per tensor, as in the paper (0)",
     I(0, INT64_C(1) << 30)},
    {"terngrad-between-groups", F_INT, K_RUN, OFF(terngrad_groups), NULL,
     "--dist ddp --terngrad: fp32 all-reduce inside groups of G consecutive ranks, ternary exchange between the "
     "groups; G divides the ranks (1: ternary between every rank)", I(1, INT64_C(1) << 20)},
    {"schedule", F_ENUM, K_OPT, OFF(schedule), schedule_names,
     "cosine|two-stage: warmup + cosine, or that with the lr scaled at --stage2-at (cosine)", NONE},
    {"stage2-at", F_DBL, K_OPT, OFF(stage2_at), NULL, "two-stage: where the second stage starts, a fraction of --steps (0.5)",
     D(0, 1, OPEN_LO | OPEN_HI)},
    {"stage2-lr", F_DBL, K_OPT, OFF(stage2_lr), NULL, "two-stage: lr factor of the second stage (0.5)",
     D(0, 1, OPEN_LO)},
    {"stage2-weight-decay", F_DBL, K_OPT, OFF(stage2_weight_decay), NULL,
     "two-stage: weight decay of the second stage (--weight-decay; 0 with --ternary)", D(0, 100, 0)},
    {"group", F_INT, K_OPT, OFF(group), NULL, "--qat weight group size, 0 = int8/fp8 per channel, int4 128, int2 64 (0)",
     I(0, 1 << 20)},
    {"qat-acts", F_ENUM, K_OPT, OFF(qat_acts), qat_acts_names,
     "off|token: fake-quantize matmul inputs per token, int8 (fp8 with --qat fp8) (token)", NONE},
    {"ternary-matmul", F_ENUM, K_OPT, OFF(ternary_matmul), ternary_matmul_names,
     "fake|int8|int8-fp32-dx|int8-fp32-dw: ternary QAT's block matrices as fp32 GEMMs over fake-quantized "
     "operands (fake), or on the integer kernels (int8 inputs x ternary codes packed once per step) for the "
     "forward and the input gradient (dY quantized per row to int8), the weight gradient on bf16 products on "
     "AVX512-BF16 CPUs (int8); int8-fp32-dx: integer forward only; int8-fp32-dw: fp32 weight gradient (int8)",
     NONE},
    {"eval-every", F_INT, K_RUN, OFF(eval_every), NULL, "steps between validations, 0 = at the end (250; task 500)", I(0, MAX_STEPS)},
    {"eval-batches", F_INT, K_RUN, OFF(eval_batches), NULL, "validation batches (20)", I(1, 1000000)},
    {"log-every", F_INT, K_RUN, OFF(log_every), NULL, "steps between log lines (10; task 50)", I(1, MAX_STEPS)},
    {"ckpt-every", F_INT, K_RUN, OFF(ckpt_every), NULL, "steps between checkpoints, 0 = at the end (500; task 0)", I(0, MAX_STEPS)},
    {"sample-tokens", F_INT, K_RUN, OFF(sample_tokens), NULL, "tokens sampled at each eval, 0 = none (200; task 0)", I(0, 1000000)},
    {"threads", F_INT, K_RUN, OFF(threads), NULL, "threads, 0 = all cores (0; task 1)", I(0, 4096)},
    {"recompute", F_ENUM, K_RUN, OFF(recompute), recompute_names,
     "none|attn|mlp|block|auto: hold every activation backward reads, or recompute in backward each block's "
     "attention half, MLP half or all of it but its output (the same bits, less memory); auto: the fewest "
     "whole blocks that fit --memory-budget (none; off = none)", NONE, .synonyms = recompute_synonyms},
    {"memory-budget", F_DBL, K_RUN, OFF(memory_budget), NULL,
     "MB (1e6 bytes) the memory report's total must fit in, 0 = no limit; --recompute auto chooses by it (0)",
     D(0, 1e12, 0)},
    {"offload", F_ENUM, K_RUN, OFF(offload), offload_names,
     "off|optimizer|optimizer+frozen: optimizer state in memory, or in a memory-mapped file in the run directory, "
     "streamed one parameter at a time in the update; +frozen: the frozen weights too, in a second file read one "
     "weight at a time by the steps that use them (the same bits, less resident memory) (off)", NONE},
    {"stop-after", F_INT, K_RUN, OFF(stop_after), NULL, "stop with a checkpoint after this step (0 = never)", I(0, MAX_STEPS)},
    {"max-skips", F_INT, K_RUN, OFF(max_skips), NULL,
     "end the run (with a checkpoint) after this many non-finite steps in a row (10)", I(1, 1000000)},
    {"quiet", F_BOOL, K_RUN, OFF(quiet), NULL, "no progress lines, 1|0 (0)", NONE},
    {"out", F_STR, K_RUN, OFF(out), NULL, "run directory (run; task: run-addition)", NONE},
    {"resume", F_STR, K_RUN, OFF(resume), NULL, "continue the run in this directory", NONE},
    {"init-from", F_STR, K_MODEL, OFF(init_from), NULL,
     "start a new run from this run's weights (as trained), architecture and tokenizer, with a fresh optimizer "
     "and schedule (or from a Hugging Face GPT-2 directory with its tokenizer files)", NONE},
    {"freeze", F_STR, K_OPT, OFF(freeze), NULL,
     "freeze the parameters whose GPT-2 names match this glob (h.*.attn.*; repeatable, or comma-separated): "
     "no gradient, no optimizer state", NONE, .append = ""},
    {"unfreeze", F_STR, K_OPT, OFF(freeze), NULL,
     "train again those of the frozen ones that match this glob; the flags apply in their order", NONE,
     .append = "!", .alias = true},
    {"task", F_ENUM, K_DATA, OFF(task), task_names,
     "lm|embed: language modelling, or a sentence-embedding model from --data PAIRS.jsonl (\"anchor\", "
     "\"positive\" per line), InfoNCE over pooled hidden states (lm)", NONE},
    {"pool", F_ENUM, K_MODEL, OFF(pool), pool_names, "embed: mean|last pooling of the hidden states (mean)", NONE},
    {"temperature", F_DBL, K_OPT, OFF(temperature), NULL, "embed: InfoNCE temperature tau (0.05)",
     D(1e-4, 100, 0)},
    {"tensorboard", F_STR, K_RUN, OFF(tensorboard), NULL,
     "also write the metrics.jsonl values as TensorBoard scalars into this directory (made if missing)", NONE},
    {"lora", F_STR, K_MODEL, OFF(lora), NULL,
     "train a LoRA adapter beside the frozen weights: r=8,alpha=16,dropout=0.05,targets=c_attn,attn.c_proj,c_fc,"
     "mlp.c_proj[,rslora] (PEFT's defaults: r 8, alpha 8, dropout 0, targets c_attn); with --init-from", NONE,
     .check_str = check_lora},
    {"lora-init", F_STR, K_MODEL, OFF(lora_init), NULL,
     "--lora: start A and B from the adapter in this directory (adapter_model.safetensors in PEFT's layout, e.g. "
     "peft's save_pretrained of the same base and targets) instead of from the seed", NONE},
    {"dist", F_ENUM, K_RUN, OFF(dist), dist_names,
     "off|ddp|zero1|zero2|zero3|pipeline|tensor: one process; data parallel over `mpirun -np N` (--batch a "
     "rank); DDP with optimizer state, gradients, parameters sharded (zero1/2/3); a stage of blocks a rank; the "
     "blocks' matrices split over --tp ranks (off)", NONE},
    {"bucket-mb", F_DBL, K_RUN, OFF(bucket_mb), NULL,
     "--dist ddp|zero1|zero2|zero3: MB of gradients per bucket exchanged (25)", D(0, 1e6, OPEN_LO)},
    {"shard-group", F_INT, K_RUN, OFF(shard_group), NULL, "--dist zero3: hybrid sharding, ZeRO-3 inside groups of G "
     "consecutive ranks and the groups replicas of each other (gradients all-reduced across them); G divides the "
     "ranks (0: one group of every rank)", I(0, INT64_C(1) << 20)},
    {"stages", F_INT, K_RUN, OFF(stages), NULL, "--dist pipeline: pipeline stages, one a rank (0 = the ranks of the "
     "job)", I(0, 4096)},
    {"micro-batches", F_INT, K_OPT, OFF(micro_batches), NULL, "micro-batches of --batch a step, for all ranks: "
     "another way to give --total-batch-tokens (total / (batch x seq))", I(1, MAX_TOKENS)},
    {"tp", F_INT, K_RUN, OFF(tp), NULL, "--dist tensor: ranks a tensor-parallel group, dividing the job's; the "
     "groups are data-parallel replicas (0 = all the ranks: one group)", I(0, 4096)},
    {"pipeline-schedule", F_ENUM, K_RUN, OFF(pipe_schedule), pipe_schedule_names,
     "--dist pipeline: gpipe (every forward, then every backward) or 1f1b (one forward one backward) (1f1b)", NONE},
    {"adapter-type", F_ENUM, K_MODEL, OFF(adapter_type), adapter_names,
     "off|lora|bottleneck: train an adapter beside the frozen weights: LoRA (--lora) or Houlsby bottlenecks after "
     "attention and after the MLP (--adapter-size) (lora with --lora, else off)", NONE},
    {"adapter-size", F_INT, K_MODEL, OFF(adapter_size), NULL, "--adapter-type bottleneck: its width, at most --dim",
     I(1, 65536)},
    {"adapter-dtype", F_ENUM, K_OPT, OFF(adapter_dtype), adapter_dtype_names,
     "f32|bf16: the adapter's weights in fp32, or in bf16 updated in place (--rounding; fp32 gradients and AdamW "
     "moments), with --precision bf16 (f32)", NONE},
    {"lora-dtype", F_ENUM, K_OPT, OFF(adapter_dtype), adapter_dtype_names, "the same as --adapter-dtype", NONE,
     .alias = true},
    {"quantize-base", F_ENUM, K_MODEL, OFF(quantize_base), qbase_names,
     "off|nf4|int8|int4|ternary: with --lora, keep the frozen base only as codes (QLoRA: nf4 blocks of 64, int8 per "
     "channel, int4 groups of 64, ternary per matrix; keep: the codes of an --init-from run made by `trit quantize`, "
     "which --lora takes by itself) (off)", NONE},
    {"double-quant", F_BOOL, K_MODEL, OFF(double_quant), NULL,
     "with --quantize-base: the base's scales as int8 in blocks of 256 (QLoRA's double quantization); no value",
     NONE, .is_switch = true},
};
#undef OFF
#undef I
#undef D
#undef NONE
#undef OPEN_HI
#undef OPEN_LO
enum { NUM_FIELDS = (int)(sizeof fields / sizeof fields[0]) };

static int64_t *int_at(trit_train_config *c, const field *f) { return (int64_t *)((char *)c + f->off); }
static double *dbl_at(trit_train_config *c, const field *f) { return (double *)((char *)c + f->off); }
static char *str_at(trit_train_config *c, const field *f) { return (char *)c + f->off; }
static int64_t int_of(const trit_train_config *c, const field *f) {
    return *(const int64_t *)((const char *)c + f->off);
}
static double dbl_of(const trit_train_config *c, const field *f) {
    return *(const double *)((const char *)c + f->off);
}
static const char *str_of(const trit_train_config *c, const field *f) { return (const char *)c + f->off; }

// Unset is a value no flag can be given: NaN (the parser takes only finite numbers), "", or
// TRIT_TRAIN_UNSET (below every field's range), so `--seed -1` is an error, not a default.
static bool is_set(const trit_train_config *c, const field *f) {
    switch (f->type) {
    case F_DBL: return !isnan(dbl_of(c, f));
    case F_STR: return str_of(c, f)[0] != 0;
    default: return int_of(c, f) != TRIT_TRAIN_UNSET;
    }
}

static const field *find_field(const char *name) {
    for (int i = 0; i < NUM_FIELDS; i++)
        if (strcmp(fields[i].name, name) == 0) return &fields[i];
    return NULL;
}

static int64_t enum_count(const field *f) {
    int64_t n = 0;
    while (f->enums[n]) n++;
    return n;
}

static const char *enum_name(const field *f, int64_t v) {
    return v >= 0 && v < enum_count(f) ? f->enums[v] : "(invalid)";
}

// "char|bpe": the names a flag accepts ("none" is only the unset value of --tokenizer).
static const char *enum_list(const field *f, char *buf, size_t n) {
    buf[0] = 0;
    for (int i = 0; f->enums[i]; i++) {
        if (strcmp(f->enums[i], "none") == 0) continue;
        size_t k = strlen(buf);
        snprintf(buf + k, n - k, "%s%s", k ? "|" : "", f->enums[i]);
    }
    for (int i = 0; f->synonyms && f->synonyms[i]; i += 2) {
        size_t k = strlen(buf);
        snprintf(buf + k, n - k, "|%s", f->synonyms[i]);
    }
    return buf;
}

const char *trit_train_flag_enum_name(const char *flag, int64_t v) {
    const field *f = find_field(flag);
    return f && f->type == F_ENUM ? enum_name(f, v) : "?";
}

// ---- flag values ---------------------------------------------------------------------------

static trit_status parse_bool(const char *flag, const char *s, int64_t *out) {
    static const char *yes[] = {"1", "on", "yes", "true"}, *no[] = {"0", "off", "no", "false"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, yes[i]) == 0) return *out = 1, TRIT_OK;
        if (strcmp(s, no[i]) == 0) return *out = 0, TRIT_OK;
    }
    return trit_error(TRIT_ERR_INVALID, "%s expects 1 or 0 (on/off), got '%s'", flag, s);
}

static trit_status parse_enum(const field *f, const char *flag, const char *s, int64_t *out) {
    for (int i = 0; f->synonyms && f->synonyms[i]; i += 2)
        if (strcmp(s, f->synonyms[i]) == 0) s = f->synonyms[i + 1];
    for (int i = 0; f->enums[i]; i++)
        if (strcmp(f->enums[i], "none") != 0 && strcmp(s, f->enums[i]) == 0) return *out = i, TRIT_OK;
    char names[128];
    if (strcmp(f->name, "tokenizer") == 0 && strncmp(s, "gpt2:", 5) == 0)  // a given tokenizer goes through prepare
        return trit_error(TRIT_ERR_INVALID, "%s expects %s for a text file; for GPT-2's tokenizer run `trit prepare "
                          "--data FILE --tokenizer %s --out DIR` and train with --data DIR", flag,
                          enum_list(f, names, sizeof names), s);
    return trit_error(TRIT_ERR_INVALID, "%s expects %s, got '%s'", flag, enum_list(f, names, sizeof names), s);
}

// Whether value iv (integer types) or dv (F_DBL) is allowed for field f.
static trit_status check_value(const field *f, int64_t iv, double dv) {
    char flag[64], names[128];
    snprintf(flag, sizeof flag, "--%s", f->name);
    trit_status s = TRIT_OK;
    switch (f->type) {
    case F_INT: s = trit_check_int(flag, iv, f->ilo, f->ihi); break;
    case F_DBL: s = trit_check_double(flag, dv, f->dlo, f->dhi, f->open); break;
    case F_BOOL: s = trit_check_int(flag, iv, 0, 1); break;
    case F_ENUM:
        if (iv < 0 || iv >= enum_count(f) || strcmp(f->enums[iv], "none") == 0)
            s = trit_error(TRIT_ERR_RANGE, "%s expects %s, got value %lld", flag, enum_list(f, names, sizeof names),
                           (long long)iv);
        break;
    case F_STR: break;
    }
    if (s != TRIT_OK && f->why) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", trit_last_error());
        trit_error(s, "%s (%s)", msg, f->why);
    }
    return s;
}

static trit_status check_field(const trit_train_config *c, const field *f) {
    if (f->type == F_STR) return TRIT_OK;
    return check_value(f, f->type == F_DBL ? 0 : int_of(c, f), f->type == F_DBL ? dbl_of(c, f) : 0);
}

// A list field: each comma-separated item of value, prefixed, appended to list.
static trit_status append_items(char *list, const char *prefix, const char *flag, const char *value) {
    char buf[TRIT_PATH_MAX] = {0};  // copied whole: ranks compare the config byte for byte
    snprintf(buf, sizeof buf, "%s", list);
    for (const char *p = value; *p;) {
        const size_t n = strcspn(p, ",");
        if (n == 0) return trit_error(TRIT_ERR_INVALID, "%s: empty item in '%s'", flag, value);
        const size_t k = strlen(buf);
        if (k + 1 + strlen(prefix) + n >= sizeof buf)
            return trit_error(TRIT_ERR_RANGE, "%s: the list grows past %d bytes", flag, TRIT_PATH_MAX - 1);
        snprintf(buf + k, sizeof buf - k, "%s%s%.*s", k ? "," : "", prefix, (int)n, p);
        p += n + (p[n] == ',');
    }
    memcpy(list, buf, TRIT_PATH_MAX);
    return TRIT_OK;
}

// Parse `value` for field f (flag is its name as the message shows it), check it and store it.
static trit_status set_field(trit_train_config *c, const field *f, const char *flag, const char *value) {
    int64_t iv = 0;
    double dv = 0;
    trit_status s = TRIT_OK;
    switch (f->type) {
    case F_INT: s = trit_arg_int(flag, value, &iv); break;
    case F_DBL: s = trit_arg_double(flag, value, &dv); break;
    case F_BOOL: s = parse_bool(flag, value, &iv); break;
    case F_ENUM: s = parse_enum(f, flag, value, &iv); break;
    case F_STR:
        if (!*value) return trit_error(TRIT_ERR_INVALID, "%s needs a non-empty value", flag);
        if (f->append) return append_items(str_at(c, f), f->append, flag, value);
        if (strlen(value) >= TRIT_PATH_MAX)
            return trit_error(TRIT_ERR_RANGE, "%s: path longer than %d bytes", flag, TRIT_PATH_MAX - 1);
        if (f->check_str && (s = f->check_str(value)) != TRIT_OK) return s;
        snprintf(str_at(c, f), TRIT_PATH_MAX, "%s", value);
        return TRIT_OK;
    }
    if (s == TRIT_OK) s = check_value(f, iv, dv);
    if (s != TRIT_OK) return s;
    if (f->type == F_DBL) *dbl_at(c, f) = dv;
    else *int_at(c, f) = iv;
    return TRIT_OK;
}

trit_status trit_train_config_set(trit_train_config *c, const char *name, const char *value) {
    const field *f = find_field(name);
    if (!f) return trit_error(TRIT_ERR_INVALID, "unknown training option '--%s'", name);
    char flag[64];
    snprintf(flag, sizeof flag, "--%s", name);
    if (!value) return trit_error(TRIT_ERR_INVALID, "%s needs a value", flag);
    return set_field(c, f, flag, value);
}

// ---- defaults and checks -------------------------------------------------------------------

void trit_train_config_init(trit_train_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < NUM_FIELDS; i++) {
        const field *f = &fields[i];
        if (f->type == F_DBL) *dbl_at(c, f) = NAN;
        else if (f->type != F_STR) *int_at(c, f) = TRIT_TRAIN_UNSET;
    }
}

// Every field that is set against its own range.
static trit_status check_fields(const trit_train_config *c) {
    for (int i = 0; i < NUM_FIELDS; i++) {
        if (!is_set(c, &fields[i])) continue;
        trit_status s = check_field(c, &fields[i]);
        if (s != TRIT_OK) return s;
    }
    return TRIT_OK;
}

trit_status trit_train_config_resolve(trit_train_config *c) {
    // The set fields first: the defaults are computed from them (total-batch-tokens = B*T).
    trit_status s = check_fields(c);
    if (s != TRIT_OK) return s;
    trit_train_config_apply_defaults(c);
    s = check_fields(c);
    return s == TRIT_OK ? trit_train_config_check_relations(c) : s;
}

// ---- JSON -------------------------------------------------------------------------------------

char *trit_train_config_to_json(const trit_train_config *c) {
    cJSON *o = cJSON_CreateObject();
    if (!o) return NULL;
    for (int i = 0; i < NUM_FIELDS; i++) {
        const field *f = &fields[i];
        if (!is_set(c, f) || f->alias) continue;
        cJSON *v = NULL;
        switch (f->type) {
        case F_DBL: {
            // "%.17g" round-trips every double; cJSON's own printing may drop the last bit,
            // and a resumed run needs the exact learning rates.
            char buf[40];
            snprintf(buf, sizeof buf, "%.17g", dbl_of(c, f));
            v = cJSON_CreateString(buf);
            break;
        }
        case F_STR: v = cJSON_CreateString(str_of(c, f)); break;
        case F_ENUM: v = cJSON_CreateString(enum_name(f, int_of(c, f))); break;
        default: {
            // cJSON numbers are doubles: integers beyond 2^53 go as strings to stay exact.
            char buf[32];
            snprintf(buf, sizeof buf, "%lld", (long long)int_of(c, f));
            v = cJSON_CreateString(buf);
        }
        }
        if (!v || !cJSON_AddItemToObject(o, f->name, v)) {
            cJSON_Delete(v);
            cJSON_Delete(o);
            return NULL;
        }
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

// One field of a saved config, through the same parsing and range checks as its flag; the
// message names the field and says the file is at fault.
static trit_status json_field(trit_train_config *c, const field *f, const cJSON *it) {
    trit_status s;
    if (f->type == F_DBL && cJSON_IsNumber(it)) {
        s = check_value(f, 0, it->valuedouble);
        if (s == TRIT_OK) *dbl_at(c, f) = it->valuedouble;
    } else if (!cJSON_IsString(it)) {
        return trit_error(TRIT_ERR_FORMAT, "config field '%s' is not a string", f->name);
    } else {
        s = set_field(c, f, f->name, it->valuestring);
    }
    if (s == TRIT_OK) return s;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", trit_last_error());
    return trit_error(TRIT_ERR_FORMAT, "saved training config: %s (the file was changed or is damaged)", msg);
}

trit_status trit_train_config_from_json(trit_train_config *c, const char *json) {
    trit_train_config_init(c);
    cJSON *o = cJSON_Parse(json);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return trit_error(TRIT_ERR_FORMAT, "training config is not a JSON object");
    }
    trit_status s = TRIT_OK;
    for (cJSON *it = o->child; it && s == TRIT_OK; it = it->next) {
        const field *f = find_field(it->string);
        if (f) s = json_field(c, f, it);  // no field: written by a newer trit, ignore it
    }
    cJSON_Delete(o);
    return s;
}

// ---- resume --------------------------------------------------------------------------------

static void value_str(const trit_train_config *c, const field *f, char *buf, size_t n) {
    switch (f->type) {
    case F_DBL: snprintf(buf, n, "%.9g", dbl_of(c, f)); break;
    case F_STR: snprintf(buf, n, "%s", str_of(c, f)); break;
    case F_ENUM: snprintf(buf, n, "%s", enum_name(f, int_of(c, f))); break;
    default: snprintf(buf, n, "%lld", (long long)int_of(c, f)); break;
    }
}

static bool same_value(const trit_train_config *a, const trit_train_config *b, const field *f) {
    switch (f->type) {
    case F_DBL: return dbl_of(a, f) == dbl_of(b, f);
    case F_STR: return strcmp(str_of(a, f), str_of(b, f)) == 0;
    default: return int_of(a, f) == int_of(b, f);
    }
}

trit_status trit_train_config_merge(trit_train_config *out, const trit_train_config *saved,
                                    const trit_train_config *cli) {
    trit_train_config m = *saved;
    // A field the saving trit did not know (absent from its JSON) had today's default then.
    trit_train_config known = *saved;
    if (trit_train_config_resolve(&known) != TRIT_OK) known = *saved;
    if (cli->out[0] && strcmp(cli->out, cli->resume) != 0)
        return trit_error(TRIT_ERR_INVALID,
                          "--out '%s' and --resume '%s' differ: a resumed run continues in its own "
                          "directory, so pass only --resume", cli->out, cli->resume);
    for (int i = 0; i < NUM_FIELDS; i++) {
        const field *f = &fields[i];
        if (!is_set(cli, f) || f->alias || strcmp(f->name, "resume") == 0) continue;
        if (f->kind == K_RUN) {
            memcpy((char *)&m + f->off, (const char *)cli + f->off,
                   f->type == F_STR ? TRIT_PATH_MAX : f->type == F_DBL ? sizeof(double) : sizeof(int64_t));
            continue;
        }
        const trit_train_config *was = is_set(saved, f) ? saved : &known;
        if (same_value(was, cli, f)) continue;
        char have[TRIT_PATH_MAX + 8], want[TRIT_PATH_MAX + 8];
        value_str(was, f, have, sizeof have);
        value_str(cli, f, want, sizeof want);
        return trit_error(TRIT_ERR_INVALID,
                          "the checkpoint in '%s' was trained with --%s %s, but --%s %s was given: "
                          "pass --%s %s (or leave it out) to resume, or start a new run with another --out",
                          cli->resume, f->name, have, f->name, want, f->name, have);
    }
    // A tensor-parallel run resumed otherwise: its saved group size no longer applies.
    if (m.dist != TRIT_DIST_TENSOR && !is_set(cli, find_field("tp"))) m.tp = 0;
    snprintf(m.resume, sizeof m.resume, "%s", cli->resume);
    snprintf(m.out, sizeof m.out, "%s", cli->resume);
    *out = m;
    return TRIT_OK;
}

void trit_train_config_print(const trit_train_config *c, void *file) {
    FILE *fp = file;
    for (int i = 0; i < NUM_FIELDS; i++) {
        if (!is_set(c, &fields[i]) || fields[i].alias) continue;
        char v[TRIT_PATH_MAX + 8];
        value_str(c, &fields[i], v, sizeof v);
        fprintf(fp, "  %-20s %s\n", fields[i].name, v);
    }
}

// The help text of each flag with its allowed range: "transformer blocks L (4; task 2) [1, 1024]".
const trit_train_flag *trit_train_flags(void) {
    static trit_train_flag flags[NUM_FIELDS + 1];
    static char help[NUM_FIELDS][512];
    if (flags[0].name) return flags;
    for (int i = 0; i < NUM_FIELDS; i++) {
        const field *f = &fields[i];
        if (f->type == F_INT)
            snprintf(help[i], sizeof help[i], "%s [%lld, %lld]", f->help, (long long)f->ilo, (long long)f->ihi);
        else if (f->type == F_DBL)
            snprintf(help[i], sizeof help[i], "%s %c%g, %g%c", f->help, (f->open & TRIT_OPEN_LO) ? '(' : '[', f->dlo,
                     f->dhi, (f->open & TRIT_OPEN_HI) ? ')' : ']');
        else
            snprintf(help[i], sizeof help[i], "%s", f->help);
        flags[i] = (trit_train_flag){f->name, help[i], f->is_switch};
    }
    return flags;
}

trit_train_config *trit_train_config_new(void) {
    trit_train_config *c = malloc(sizeof *c);
    if (!c) {
        trit_error(TRIT_ERR_NOMEM, "cannot allocate a training config (%zu bytes)", sizeof *c);
        return NULL;
    }
    trit_train_config_init(c);
    return c;
}

void trit_train_config_free(trit_train_config *c) { free(c); }
