// Defaults and the rules between fields of the training configuration (`trit train`'s flags):
// what trit_train_config_resolve applies after each set field was checked against its own range
// in the flag table (config.c).
#include "trit/train.h"
#include "train/train_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

trit_train_task trit_train_config_task(const trit_train_config *c) {
    if (c->task == TRIT_OBJECTIVE_EMBED) return TRIT_TASK_EMBED;
    return c->data[0] ? TRIT_TASK_TEXT : TRIT_TASK_ADDITION;
}

int64_t trit_train_config_accum(const trit_train_config *c) {
    int64_t micro = 0;
    if (!trit_mul_i64(c->batch, c->seq, &micro) || micro <= 0) return 1;
    return c->total_batch_tokens / micro;
}

#define DEF_I(field, v) \
    if (c->field == TRIT_TRAIN_UNSET) c->field = (v)
#define DEF_D(field, v) \
    if (isnan(c->field)) c->field = (v)

// Runs after the set fields were checked, so the products below are in range.
void trit_train_config_apply_defaults(trit_train_config *c) {
    bool task = trit_train_config_task(c) == TRIT_TASK_ADDITION;
    DEF_I(tokenizer, TRIT_TOKENIZER_CHAR);
    DEF_I(vocab, 512);
    DEF_D(val_fraction, TRIT_DEFAULT_VAL_FRACTION);
    DEF_I(order, TRIT_DATA_RANDOM);
    DEF_I(digits, 3);
    DEF_I(task_test, 1000);
    DEF_I(layers, task ? 2 : 4);
    DEF_I(heads, 4);
    DEF_I(dim, 128);
    DEF_I(seq, task ? trit_addition_text_len(c->digits) - 1 : 64);
    DEF_D(dropout, 0.0);
    DEF_I(bias, 1);
    DEF_I(norm, TRIT_NORM_LAYER);
    DEF_I(mlp, TRIT_MLP_GELU);
    DEF_I(pos, TRIT_POS_LEARNED);
    DEF_I(subln, 0);
    DEF_I(batch, task ? 64 : 12);
    int64_t from_micro = 0;  // an overflow leaves it to check_sizes
    if (c->micro_batches != TRIT_TRAIN_UNSET && !trit_mul_i64(c->micro_batches, c->batch * c->seq, &from_micro))
        from_micro = INT64_MAX;
    if (c->micro_batches != TRIT_TRAIN_UNSET) DEF_I(total_batch_tokens, from_micro);
    DEF_I(total_batch_tokens, c->batch * c->seq);
    DEF_I(micro_batches, c->total_batch_tokens / (c->batch * c->seq));
    DEF_I(steps, task ? 3000 : 2000);
    DEF_I(warmup, c->steps < 100 ? c->steps : 100);
    // --ternary is BitNet's recipe: ternary QAT, a higher lr, two stages, no decay in the second.
    if (c->ternary == 1) DEF_I(qat, TRIT_QAT_TERNARY);
    const bool bitnet = c->qat == TRIT_QAT_TERNARY;
    DEF_D(lr, bitnet ? 4e-3 : 1e-3);
    DEF_D(min_lr, c->lr * 0.1);
    DEF_D(beta1, 0.9);
    DEF_D(beta2, task ? 0.99 : 0.95);
    DEF_D(eps, 1e-8);
    DEF_D(weight_decay, 0.1);
    DEF_I(schedule, bitnet ? TRIT_SCHEDULE_TWO_STAGE : TRIT_SCHEDULE_COSINE);
    DEF_D(stage2_at, 0.5);
    DEF_D(stage2_lr, 0.5);
    DEF_D(stage2_weight_decay, bitnet ? 0.0 : c->weight_decay);
    DEF_D(clip, 1.0);
    DEF_I(optimizer, TRIT_TRAIN_ADAMW);
    DEF_I(galore_rank, 128);
    DEF_I(galore_update, 200);
    DEF_D(galore_scale, 0.25);
    DEF_I(seed, 1337);
    DEF_I(precision, TRIT_PRECISION_FP32);
    DEF_I(master_weights, 1);
    DEF_I(rounding, TRIT_ROUND_STOCHASTIC);
    DEF_I(matmul_precision, TRIT_MATMUL_HIGHEST);
    DEF_D(loss_scale, 0.0);
    DEF_I(qat, TRIT_QAT_OFF);
    DEF_I(ternary, 0);
    DEF_I(terngrad, 0);
    DEF_D(terngrad_clip, 2.5);
    DEF_I(terngrad_min_size, 1024);
    DEF_I(terngrad_bucket, 0);
    DEF_I(terngrad_groups, 1);
    DEF_I(shard_group, 0);
    DEF_I(group, 0);
    DEF_I(qat_acts, 1);
    DEF_I(ternary_matmul, TRIT_TERNARY_MATMUL_INT8);
    DEF_I(eval_every, task ? 500 : 250);
    DEF_I(eval_batches, 20);
    DEF_I(log_every, task ? 50 : 10);
    DEF_I(ckpt_every, task ? 0 : 500);
    DEF_I(sample_tokens, task ? 0 : 200);
    DEF_I(threads, task ? 1 : 0);  // the task's model is too small to gain from more threads
    DEF_I(recompute, TRIT_RECOMPUTE_NONE);
    DEF_D(memory_budget, 0.0);
    DEF_I(task, TRIT_OBJECTIVE_LM);
    DEF_I(pool, TRIT_POOL_MEAN);
    DEF_D(temperature, 0.05);
    DEF_I(offload, TRIT_OFFLOAD_OFF);
    DEF_I(stop_after, 0);
    DEF_I(max_skips, 10);
    DEF_I(quiet, 0);
    DEF_I(quantize_base, TRIT_QBASE_OFF);
    DEF_I(double_quant, 0);
    DEF_I(dist, TRIT_DIST_OFF);
    DEF_D(bucket_mb, 25.0);
    DEF_I(stages, 0);
    DEF_I(tp, 0);
    DEF_I(pipe_schedule, TRIT_TRAIN_PIPE_1F1B);
    DEF_I(adapter_type, c->lora[0] ? TRIT_TRAIN_ADAPTER_LORA : TRIT_TRAIN_ADAPTER_OFF);
    DEF_I(adapter_dtype, TRIT_TRAIN_ADAPTER_F32);
    if (!c->out[0]) snprintf(c->out, sizeof c->out, "%s", c->resume[0] ? c->resume : task ? "run-addition" : "run");
}
#undef DEF_I
#undef DEF_D

#define NEED(cond, ...) \
    if (!(cond)) return trit_error(TRIT_ERR_INVALID, __VA_ARGS__)

// Products of sizes that index memory: B*T tokens per micro-batch and B*T*4C activations of
// the widest layer (the MLP hidden) must fit well inside int64_t byte counts.
static trit_status check_sizes(const trit_train_config *c) {
    int64_t micro = 0, act = 0;
    if (!trit_mul_i64(c->batch, c->seq, &micro) || micro > TRIT_TRAIN_MAX_TOKENS)
        return trit_error(TRIT_ERR_RANGE, "--batch %lld x --seq %lld tokens per micro-batch exceed 2^40: lower --batch "
                          "or --seq", (long long)c->batch, (long long)c->seq);
    if (!trit_mul_i64(micro, 4 * c->dim, &act) || act > TRIT_TRAIN_MAX_TOKENS)
        return trit_error(TRIT_ERR_RANGE, "--batch %lld x --seq %lld x 4 --dim %lld = more than 2^40 activations in "
                          "one layer (over 4 TiB in fp32): lower --batch, --seq or --dim",
                          (long long)c->batch, (long long)c->seq, (long long)c->dim);
    NEED(c->total_batch_tokens >= micro && c->total_batch_tokens % micro == 0,
         "--total-batch-tokens %lld must be a multiple of batch * seq = %lld",
         (long long)c->total_batch_tokens, (long long)micro);
    NEED(c->micro_batches == c->total_batch_tokens / micro,
         "--micro-batches %lld and --total-batch-tokens %lld (%lld micro-batches of --batch %lld x --seq %lld) disagree: "
         "pass one of the two", (long long)c->micro_batches, (long long)c->total_batch_tokens,
         (long long)(c->total_batch_tokens / micro), (long long)c->batch, (long long)c->seq);
    return TRIT_OK;
}

// Rules between fields (each field's own range is checked by check_fields).
trit_status trit_train_config_check_relations(const trit_train_config *c) {
    NEED(c->tokenizer == TRIT_TOKENIZER_CHAR || c->tokenizer == TRIT_TOKENIZER_BPE,
         "--tokenizer must be char or bpe");
    NEED(c->dim % c->heads == 0, "--dim %lld must be a positive multiple of --heads %lld",
         (long long)c->dim, (long long)c->heads);
    if (trit_train_config_task(c) == TRIT_TASK_ADDITION)
        NEED(c->seq >= trit_addition_text_len(c->digits) - 1,
             "--seq %lld is too short for %lld-digit problems: pass --seq %lld or more",
             (long long)c->seq, (long long)c->digits, (long long)trit_addition_text_len(c->digits) - 1);
    trit_status s = check_sizes(c);
    if (s != TRIT_OK) return s;
    NEED(c->warmup <= c->steps, "--warmup must be in [0, --steps %lld], got %lld", (long long)c->steps,
         (long long)c->warmup);
    NEED(c->min_lr <= c->lr, "--min-lr must be in [0, --lr %g], got %g", c->lr, c->min_lr);
    NEED(c->master_weights || c->precision != TRIT_PRECISION_FP32,
         "--master-weights off needs --precision bf16 or fp16 (fp32 weights are their own master copy)");
    NEED(c->task != TRIT_OBJECTIVE_EMBED || c->data[0], "--task embed needs --data PAIRS.jsonl (JSON Lines with "
         "\"anchor\" and \"positive\" text fields)");
    NEED(c->recompute != TRIT_RECOMPUTE_AUTO || c->memory_budget > 0, "--recompute auto chooses the blocks to "
         "recompute by --memory-budget MB: pass one, or choose none|attn|mlp|block");
    NEED(c->adapter_type != TRIT_TRAIN_ADAPTER_BOTTLENECK || c->adapter_size != TRIT_TRAIN_UNSET,
         "--adapter-type bottleneck needs --adapter-size N (its width)");
    NEED(c->adapter_type == TRIT_TRAIN_ADAPTER_BOTTLENECK || c->adapter_size == TRIT_TRAIN_UNSET,
         "--adapter-size applies to --adapter-type bottleneck");
    NEED(!c->lora_init[0] || c->lora[0], "--lora-init gives a LoRA adapter its first values: it needs --lora");
    NEED(c->adapter_type == TRIT_TRAIN_ADAPTER_LORA || !c->lora[0],
         "--lora trains a LoRA adapter: drop --adapter-type %s or --lora", trit_train_flag_enum_name("adapter-type", c->adapter_type));
    NEED(c->adapter_size == TRIT_TRAIN_UNSET || c->adapter_size <= c->dim,
         "--adapter-size %lld is larger than --dim %lld: a bottleneck narrows the width", (long long)c->adapter_size,
         (long long)c->dim);
    NEED(c->quantize_base == TRIT_QBASE_OFF || c->adapter_type != TRIT_TRAIN_ADAPTER_OFF,
         "--quantize-base keeps a frozen base as codes: it needs --lora or --adapter-type (the adapter is what trains)");
    NEED(c->quantize_base == TRIT_QBASE_OFF || (c->qat == TRIT_QAT_OFF && c->master_weights),
         "--quantize-base does not combine with --qat/--ternary or --master-weights off");
    NEED(c->adapter_dtype == TRIT_TRAIN_ADAPTER_F32 || c->adapter_type != TRIT_TRAIN_ADAPTER_OFF,
         "--adapter-dtype bf16 stores an adapter's weights: it needs --lora or --adapter-type");
    NEED(c->adapter_dtype == TRIT_TRAIN_ADAPTER_F32 || c->precision == TRIT_PRECISION_BF16,
         "--adapter-dtype bf16 keeps the adapter in bf16 for bf16 compute: add --precision bf16 (the %s run's matmuls "
         "would widen it again)", trit_train_flag_enum_name("precision", c->precision));
    NEED(!c->double_quant || (c->quantize_base != TRIT_QBASE_OFF && c->quantize_base != TRIT_QBASE_KEEP),
         "--double-quant applies to --quantize-base nf4|int8|int4|ternary");
    NEED(c->quantize_base != TRIT_QBASE_KEEP || c->init_from[0],
         "--quantize-base keep takes the codes of the --init-from run: pass --init-from");
    NEED(c->dist == TRIT_DIST_PIPELINE || c->stages == 0, "--stages applies to --dist pipeline");
    NEED(c->dist == TRIT_DIST_ZERO3 || c->shard_group == 0,
         "--shard-group applies to --dist zero3 (hybrid sharding): add --dist zero3, or drop it");
    NEED(c->dist == TRIT_DIST_TENSOR || c->tp == 0, "--tp applies to --dist tensor: add --dist tensor, or drop --tp");
    NEED(c->terngrad_bucket % 4 == 0, "--terngrad-bucket must be 0 or a multiple of 4 (whole bytes of codes), got %lld",
         (long long)c->terngrad_bucket);
    NEED(c->terngrad_groups == 1 || (c->terngrad && c->dist == TRIT_DIST_DDP),
         "--terngrad-between-groups applies to --dist ddp --terngrad: add both, or drop it");
    return TRIT_OK;
}
#undef NEED

trit_status trit_train_config_adapter(const trit_train_config *c, trit_adapter_config *out) {
    *out = (trit_adapter_config){.kind = TRIT_ADAPTER_NONE};
    if (c->adapter_type == TRIT_TRAIN_ADAPTER_BOTTLENECK) *out = trit_adapter_bottleneck(c->adapter_size);
    else if (c->adapter_type == TRIT_TRAIN_ADAPTER_LORA || c->lora[0]) return trit_adapter_parse_lora(c->lora, out);
    return TRIT_OK;
}

