// trit merge-shards: a --dist zero1|zero2|zero3 run's sharded checkpoint as a normal run directory.
#include "cli.h"

#include <stdio.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit merge-shards RUN --out DIR\n\n"
            "Writes DIR: the run directory RUN, trained with `mpirun -np N trit train --dist zero1|zero2|zero3`,\n"
            "whose checkpoint keeps the optimizer state in one shard file per rank, as a normal run: its\n"
            "train_state.bin holds the whole optimizer state as one process writes it, and RUN's other\n"
            "files are copied. DIR resumes in one process (`trit train --resume DIR`) or on any number of\n"
            "ranks (`mpirun -np M trit train --resume DIR --dist ddp|zero1|zero2|zero3`).\n\n"
            "  --out DIR   the directory to write (must not hold a run)\n"
            "  --help      this text\n");
}

int trit_cli_merge_shards(int argc, char **argv) {
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'}, {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("merge-shards", c, argv);
        }
    }
    if (optind != argc - 1) return cli_error("merge-shards", CLI_USAGE, "give exactly one RUN (see trit merge-shards --help)");
    if (!out) return cli_error("merge-shards", CLI_USAGE, "--out DIR is required");
    int ranks = 0;
    if (trit_train_merge_shards(argv[optind], out, &ranks) != TRIT_OK) return cli_fail("merge-shards", CLI_FAIL);
    printf("wrote %s: %s with the optimizer shards of its %d ranks merged\n", out, argv[optind], ranks);
    return CLI_OK;
}
