// trit train: every field of trit_train_config is a flag of the same name (see --help); with
// no --data the built-in addition task runs. SIGINT/SIGTERM checkpoint and exit 0.
#include "cli.h"
#include "trit/dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit train [--data FILE|DIR] [options]\n\n"
            "Trains a GPT. --data takes a text file (tokenized into --out) or a directory made by\n"
            "`trit prepare`; without it, trit generates multi-digit addition problems\n"
            "(\"123+456=9750\": the sum's digits least significant first), trains on them and reports\n"
            "exact-match accuracy on held-out problems.\n\noptions (defaults in parentheses):\n");
    for (const trit_train_flag *f = trit_train_flags(); f->name; f++)
        fprintf(fp, "  --%-20s %s\n", f->name, f->help);
    fprintf(fp, "  --%-20s %s\n", "help", "this text");
    fprintf(fp, "\nThe run directory gets model.safetensors, train_state.bin, tokenizer.bin and\n"
                "metrics.jsonl; `trit train --resume DIR` continues a run exactly.\n");
}

int trit_cli_train_parse_as(const char *verb, void (*usage_fn)(FILE *), int argc, char **argv, trit_train_config *cfg,
                            const char **positional) {
    const trit_train_flag *flags = trit_train_flags();
    int n = 0;
    while (flags[n].name) n++;
    struct option *opts = calloc((size_t)n + 2, sizeof *opts);
    if (!opts) return cli_error(verb, CLI_FAIL, "out of memory");
    for (int i = 0; i < n; i++)
        opts[i] = (struct option){flags[i].name, flags[i].is_switch ? no_argument : required_argument, NULL, 1000 + i};
    opts[n] = (struct option){"help", no_argument, NULL, 'h'};
    trit_train_config_init(cfg);
    cli_getopt_reset();
    int c, rc = -1;
    while (rc < 0 && (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage_fn(stdout);
            rc = CLI_OK;
        } else if (c >= 1000 && c < 1000 + n) {
            const trit_train_flag *f = &flags[c - 1000];
            if (trit_train_config_set(cfg, f->name, f->is_switch ? "1" : optarg) != TRIT_OK) rc = cli_fail(verb, CLI_USAGE);
        } else {
            rc = cli_bad_option(verb, c, argv);
        }
    }
    free(opts);
    if (rc >= 0) return rc;
    if (positional && optind < argc) *positional = argv[optind++];
    if (optind < argc)
        return cli_error(verb, CLI_USAGE, "unexpected argument '%s' (did you mean --data %s?)", argv[optind],
                         argv[optind]);
    return -1;
}

int trit_cli_train_parse(int argc, char **argv, trit_train_config *cfg) {
    return trit_cli_train_parse_as("train", usage, argc, argv, cfg, NULL);
}

int trit_cli_train_run(const char *verb, const trit_train_config *cfg) {
    trit_train_result r;
    if (trit_train_run(cfg, NULL, &r) != TRIT_OK) return cli_fail(verb, CLI_FAIL);
    if (trit_dist_rank() > 0) {  // rank 0 reports for an MPI job; each rank's memory is its own
        if (r.peak_rss_steps)
            printf("peak RSS of rank %d: %.1f MB in the steps, %.1f MB in setup\n", trit_dist_rank(),
                   (double)r.peak_rss_steps / 1e6, (double)r.peak_rss_setup / 1e6);
        return CLI_OK;
    }
    char took[32];
    trit_format_duration(r.seconds, took, sizeof took);
    printf("%s at step %lld: loss %.4f", r.interrupted ? "stopped" : "done", (long long)r.step, r.loss);
    if (!isnan(r.val_loss)) printf(", val loss %.4f", r.val_loss);
    if (!isnan(r.accuracy)) printf(", held-out exact match %.2f%%", 100.0 * r.accuracy);
    printf(", %s; weights in %s/%s\n", took, r.out, TRIT_CKPT_MODEL);
    if (r.peak_rss_steps && r.peak_rss_base)
        printf("peak RSS: %.1f MB in the steps, %.1f MB in setup (%.1f MB with the base loaded, before the graph)\n",
               (double)r.peak_rss_steps / 1e6, (double)r.peak_rss_setup / 1e6, (double)r.peak_rss_base / 1e6);
    else if (r.peak_rss_steps)
        printf("peak RSS: %.1f MB in the steps, %.1f MB in setup\n", (double)r.peak_rss_steps / 1e6,
               (double)r.peak_rss_setup / 1e6);
    return CLI_OK;
}

int trit_cli_train(int argc, char **argv) {
    trit_train_config cfg;
    const int rc = trit_cli_train_parse(argc, argv, &cfg);
    if (rc >= 0) return rc;
    return trit_cli_train_run("train", &cfg);
}
