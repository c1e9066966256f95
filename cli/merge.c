// trit merge: a base run with a LoRA adapter folded into its weights, as a plain run.
#include "cli.h"

#include <stdio.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit merge BASE --adapter DIR --out RUN\n\n"
            "Writes RUN: BASE's model with the LoRA adapter in DIR (adapter_model.safetensors and\n"
            "adapter_config.json in PEFT's layout, as `trit train --lora` leaves in its run directory\n"
            "or peft's save_pretrained writes) merged into its weights (W + scale B A), in f32, and\n"
            "BASE's tokenizer. The adapter must have been made for BASE's shapes.\n\n"
            "  --adapter DIR   the adapter\n"
            "  --out RUN       the directory to write (must not hold a model)\n"
            "  --help          this text\n");
}

int trit_cli_merge(int argc, char **argv) {
    static const struct option opts[] = {{"adapter", required_argument, NULL, 'a'}, {"out", required_argument, NULL, 'o'},
                                         {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    const char *adapter = NULL, *out = NULL;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'a': adapter = optarg; break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("merge", c, argv);
        }
    }
    if (optind != argc - 1) return cli_error("merge", CLI_USAGE, "give exactly one BASE run (see trit merge --help)");
    if (!adapter) return cli_error("merge", CLI_USAGE, "--adapter DIR is required");
    if (!out) return cli_error("merge", CLI_USAGE, "--out RUN is required");
    if (trit_merge_adapter_run(argv[optind], adapter, out) != TRIT_OK) return cli_fail("merge", CLI_FAIL);
    printf("wrote %s: %s with the adapter in %s merged\n", out, argv[optind], adapter);
    return CLI_OK;
}
