// trit plot RUN: RUN/metrics.jsonl -> RUN/loss.svg (train and val loss against step).
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static void usage(FILE *fp) {
    fprintf(fp, "usage: trit plot RUN [--out FILE]\n\n"
                "Draws train and validation loss against step from RUN/metrics.jsonl into RUN/loss.svg\n"
                "(or FILE), an SVG any browser shows.\n");
}

int trit_cli_plot(int argc, char **argv) {
    static const struct option opts[] = {
        {"out", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    const char *out = NULL;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'o') out = optarg;
        else if (c == 'h') {
            usage(stdout);
            return CLI_OK;
        } else return cli_bad_option("plot", c, argv);
    }
    if (optind + 1 != argc) return cli_error("plot", CLI_USAGE, "expects one RUN directory (see trit plot --help)");
    const char *run = argv[optind];
    struct stat st;
    if (stat(run, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_error("plot", CLI_FAIL, "'%s' is not a directory: pass a run directory of `trit train`", run);
    char metrics[TRIT_PATH_MAX + 32], svg[TRIT_PATH_MAX + 32];
    if (trit_path_join(metrics, sizeof metrics, run, TRIT_CKPT_METRICS) != TRIT_OK ||
        (!out && trit_path_join(svg, sizeof svg, run, "loss.svg") != TRIT_OK))
        return cli_fail("plot", CLI_FAIL);
    trit_metric_row *rows = NULL;
    int64_t n = 0;
    if (trit_metrics_read(metrics, &rows, &n) != TRIT_OK) return cli_fail("plot", CLI_FAIL);
    trit_status s = trit_plot_svg(rows, n, run, out ? out : svg);
    free(rows);
    if (s != TRIT_OK) return cli_fail("plot", CLI_FAIL);
    printf("wrote %s (%lld points)\n", out ? out : svg, (long long)n);
    return CLI_OK;
}
