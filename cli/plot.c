// trit plot RUN: RUN/metrics.jsonl -> RUN/loss.svg (train and val loss against step).
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static void usage(FILE *fp) {
    fprintf(fp, "usage: trit plot RUN [RUN ...] [--out FILE]\n\n"
                "Draws train and validation loss against step from RUN/metrics.jsonl into RUN/loss.svg\n"
                "(or FILE), an SVG any browser shows. Several runs (up to 6) go into one plot, one\n"
                "colour each (e.g. fp32 against bf16); then --out is required.\n");
}

enum { MAX_RUNS = 6 };

static int read_run(const char *run, trit_metric_row **rows, int64_t *n) {
    struct stat st;
    if (stat(run, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_error("plot", CLI_FAIL, "'%s' is not a directory: pass a run directory of `trit train`", run);
    char metrics[TRIT_PATH_MAX + 32];
    if (trit_path_join(metrics, sizeof metrics, run, TRIT_CKPT_METRICS) != TRIT_OK ||
        trit_metrics_read(metrics, rows, n) != TRIT_OK)
        return cli_fail("plot", CLI_FAIL);
    return CLI_OK;
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
    const int n_runs = argc - optind;
    if (n_runs < 1 || n_runs > MAX_RUNS)
        return cli_error("plot", CLI_USAGE, "expects 1 to %d RUN directories, got %d (see trit plot --help)", MAX_RUNS,
                         n_runs);
    if (n_runs > 1 && !out) return cli_error("plot", CLI_USAGE, "several runs need --out FILE for the combined plot");
    char svg[TRIT_PATH_MAX + 32];
    if (!out && trit_path_join(svg, sizeof svg, argv[optind], "loss.svg") != TRIT_OK) return cli_fail("plot", CLI_FAIL);
    trit_plot_run runs[MAX_RUNS] = {{0}};
    int rc = CLI_OK;
    int64_t points = 0;
    for (int k = 0; k < n_runs && rc == CLI_OK; k++) {
        trit_metric_row *rows = NULL;
        rc = read_run(argv[optind + k], &rows, &runs[k].n);
        runs[k].rows = rows;
        runs[k].name = argv[optind + k];
        points += runs[k].n;
    }
    if (rc == CLI_OK && trit_plot_svg_runs(runs, n_runs, n_runs == 1 ? argv[optind] : "runs compared",
                                           out ? out : svg) != TRIT_OK)
        rc = cli_fail("plot", CLI_FAIL);
    for (int k = 0; k < n_runs; k++) free((void *)runs[k].rows);
    if (rc == CLI_OK) printf("wrote %s (%lld points)\n", out ? out : svg, (long long)points);
    return rc;
}
