// trit: train, sample from, evaluate and inspect GPT models. This file only dispatches to the
// verbs; each lives in cli/<verb>.c.
#include "cli.h"

#include <stdio.h>
#include <string.h>

typedef struct verb {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} verb;

static const verb verbs[] = {
    {"train", trit_cli_train, "train a GPT (with no --data: the built-in addition task)"},
    {"finetune", trit_cli_finetune, "fine-tune a base run on new data (freezing, recompute, sentence embeddings)"},
    {"embed", trit_cli_embed, "print the sentence embeddings of texts from a run"},
    {"sample", trit_cli_sample, "generate text from a checkpoint"},
    {"eval", trit_cli_eval, "validation loss (or task accuracy) of a checkpoint"},
    {"info", trit_cli_info, "describe a run directory, safetensors, tokenizer or shard file"},
    {"plot", trit_cli_plot, "draw RUN/loss.svg from RUN/metrics.jsonl"},
    {"prepare", trit_cli_prepare, "tokenize a text file into train/val token shards"},
    {"tokenize", trit_cli_tokenize, "token ids of standard input (or, --decode, the text of ids)"},
    {"quantize", trit_cli_quantize, "post-training quantization of a run (int8/4/2, nf4, fp8)"},
    {"export", trit_cli_export, "write a run's model for llama.cpp (gguf), transformers (hf) or llm.c"},
    {"import", trit_cli_import, "make a run from a transformers GPT-2 directory or an llm.c model file"},
    {"merge", trit_cli_merge, "fold a LoRA adapter into a base run's weights"},
    {"merge-shards", trit_cli_merge_shards, "a --dist zero run's sharded checkpoint as a normal run directory"},
    {"bench", trit_cli_bench, "time training steps of named GPT configs against a measured GEMM peak"},
};
enum { NUM_VERBS = (int)(sizeof verbs / sizeof verbs[0]) };

static void usage(FILE *fp) {
    fprintf(fp, "usage: trit <command> [options]   (trit <command> --help for its options; trit --version)\n\n"
                "commands:\n");
    for (int i = 0; i < NUM_VERBS; i++) fprintf(fp, "  %-12s %s\n", verbs[i].name, verbs[i].help);
    fprintf(fp, "\nStart with `trit train`: it learns multi-digit addition in a few minutes.\n");
}

int main(int argc, char **argv) {
    trit_cli_default_wait_policy(argv);
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("trit %s\n", trit_version());
        return CLI_OK;
    }
    if (trit_cpu_env_check() != TRIT_OK) {  // e.g. TRIT_CPU=amx: refused rather than run as avx512
        fprintf(stderr, "trit: %s\n", trit_last_error());
        return CLI_USAGE;
    }
    char wait[160];
    trit_cli_describe_wait_policy(wait, sizeof wait);
    trit_log(TRIT_LOG_DEBUG, "OpenMP waiting: %s", wait);
    for (int i = 0; i < NUM_VERBS; i++)
        if (strcmp(argv[1], verbs[i].name) == 0) return verbs[i].run(argc - 1, argv + 1);
    fprintf(stderr, "trit: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_USAGE;
}
