// trit eval: the mean validation loss of a checkpoint over windows of a token shard, or for a
// run of the addition task its exact-match accuracy on held-out problems.
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit eval --ckpt DIR [options]\n\n"
            "Prints the validation loss of the model in DIR on a token shard (default DIR/val.bin),\n"
            "or for an addition-task run its exact-match accuracy on held-out problems.\n\n"
            "  --ckpt DIR         run directory or .safetensors file\n"
            "  --adapter DIR      a LoRA adapter (PEFT layout) applied unmerged on DIR's model\n"
            "  --data FILE|DIR    token shard, or a `trit prepare` directory (its val.bin)\n"
            "  --batches N        batches to average, 0 = one pass over the shard, up to 1000000 (20)\n"
            "  --batch B          sequences per batch, 1 to 1048576 (8)\n"
            "  --seq T            tokens per sequence, 0 = the model's context (0)\n"
            "  --decoder          through the decoder, a token at a time (what `trit sample` computes,\n"
            "                     with quantized kernels' int8 inputs), not the training graph\n"
            "  --task-test N      addition runs: held-out problems to score, 1 to 1000000 (1000)\n"
            "  --threads N        0 = all cores, up to 4096 (0)\n"
            "  --help             this text\n");
}

static int eval_loss(trit_gpt *m, const char *shard, int64_t batches, int64_t B, int64_t T, bool decoder) {
    double loss;
    const trit_status s = decoder ? trit_eval_decode_loss(m, shard, batches, B, T, &loss, &batches)
                                  : trit_eval_loss(m, shard, batches, B, T, &loss, &batches);
    if (s != TRIT_OK) return cli_fail("eval", CLI_FAIL);
    printf("val loss %.4f (perplexity %.2f) over %lld batches of %lld x %lld tokens from %s%s\n", loss, exp(loss),
           (long long)batches, (long long)B, (long long)T, shard, decoder ? ", through the decoder" : "");
    return CLI_OK;
}

static int eval_addition(trit_gpt *m, const char *dir, const trit_train_config *cfg, int64_t n) {
    char path[TRIT_PATH_MAX + 32];
    if (trit_path_join(path, sizeof path, dir, TRIT_CKPT_TOKENIZER) != TRIT_OK) return cli_fail("eval", CLI_FAIL);
    trit_tokenizer *tok = trit_tokenizer_load(path);
    if (!tok) return cli_fail("eval", CLI_FAIL);
    double acc = 0;
    trit_status s = trit_addition_accuracy(m, tok, cfg->digits, n, 5, stdout, &acc);
    trit_tokenizer_free(tok);
    if (s != TRIT_OK) return cli_fail("eval", CLI_FAIL);
    printf("exact match %.2f%% on %lld held-out %lld-digit problems\n", 100.0 * acc, (long long)n,
           (long long)cfg->digits);
    return CLI_OK;
}

int trit_cli_eval(int argc, char **argv) {
    static const struct option opts[] = {
        {"ckpt", required_argument, NULL, 'c'},    {"data", required_argument, NULL, 'd'},
        {"batches", required_argument, NULL, 'n'}, {"batch", required_argument, NULL, 'b'},
        {"seq", required_argument, NULL, 'T'},     {"task-test", required_argument, NULL, 'k'},
        {"threads", required_argument, NULL, 'j'}, {"decoder", no_argument, NULL, 'D'},
        {"help", no_argument, NULL, 'h'},          {"adapter", required_argument, NULL, 'A'},
        {NULL, 0, NULL, 0}};
    const char *ckpt = NULL, *data = NULL, *adapter = NULL;
    int64_t batches = 20, B = 8, T = 0, task_test = 1000, threads = 0;
    bool decoder = false;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'c': ckpt = optarg; break;
        case 'd': data = optarg; break;
        case 'n': ok = cli_int("eval", "--batches", optarg, 0, 1000000, &batches); break;
        case 'b': ok = cli_int("eval", "--batch", optarg, 1, CLI_MAX_BATCH, &B); break;
        case 'T': ok = cli_int("eval", "--seq", optarg, 0, CLI_MAX_SEQ, &T); break;
        case 'k': ok = cli_int("eval", "--task-test", optarg, 1, 1000000, &task_test); break;
        case 'j': ok = cli_int("eval", "--threads", optarg, 0, CLI_MAX_THREADS, &threads); break;
        case 'D': decoder = true; break;
        case 'A': adapter = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("eval", c, argv);
        }
        if (!ok) return CLI_USAGE;
    }
    int bad = cli_check_ckpt_args("eval", argc, argv, ckpt);
    if (bad) return bad;
    trit_threads_set((int)threads);
    trit_gpt *m = adapter   ? trit_checkpoint_load_adapted(ckpt, adapter, decoder)
                  : decoder ? trit_checkpoint_load_decoding(ckpt, NULL)
                            : trit_checkpoint_load_as_trained_codes(ckpt, NULL);
    if (!m) return cli_fail("eval", CLI_FAIL);
    int64_t ctx = trit_gpt_get_config(m)->seq_len;
    if (T == 0) T = ctx;
    int rc;
    char shard[TRIT_PATH_MAX + 32] = "";
    trit_train_config cfg;
    if (T > ctx) {
        rc = cli_error("eval", CLI_USAGE, "--seq %lld is longer than the model's context of %lld", (long long)T,
                       (long long)ctx);
    } else if (data) {
        if (cli_is_dir(data)) rc = trit_path_join(shard, sizeof shard, data, TRIT_DATA_VAL) == TRIT_OK ? CLI_OK : CLI_FAIL;
        else rc = snprintf(shard, sizeof shard, "%s", data) < (int)sizeof shard ? CLI_OK : CLI_FAIL;
        if (rc == CLI_OK) rc = eval_loss(m, shard, batches, B, T, decoder);
    } else if (cli_is_dir(ckpt) && trit_train_run_info(ckpt, &cfg, NULL) == TRIT_OK &&
               trit_train_config_task(&cfg) == TRIT_TASK_ADDITION) {
        rc = decoder ? cli_error("eval", CLI_USAGE, "--decoder computes a loss over a token shard; the addition "
                                 "task is scored by accuracy (pass --data to take a loss)")
                     : eval_addition(m, ckpt, &cfg, task_test);
    } else if (cli_is_dir(ckpt)) {
        // The run's own val.bin, or that of the `trit prepare` directory it trained on.
        bool from_data = trit_train_run_info(ckpt, &cfg, NULL) == TRIT_OK && cli_is_dir(cfg.data);
        trit_clear_error();
        struct stat st;
        if (trit_path_join(shard, sizeof shard, from_data ? cfg.data : ckpt, TRIT_DATA_VAL) == TRIT_OK &&
            stat(shard, &st) == 0)
            rc = eval_loss(m, shard, batches, B, T, decoder);
        else
            rc = cli_error("eval", CLI_USAGE, "found no %s for '%s': pass --data with a token shard", TRIT_DATA_VAL,
                           ckpt);
    } else {
        rc = cli_error("eval", CLI_USAGE, "pass --data with a token shard to evaluate '%s' on", ckpt);
    }
    trit_gpt_free(m);
    return rc;
}
