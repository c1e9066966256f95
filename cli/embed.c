// trit embed RUN --text S [--text S ...]: one line of the sentence embedding of each text, its C
// numbers separated by spaces, in the order given. The pooling is the run's --pool (mean when
// the run was not trained with --task embed).
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit embed RUN --text S [--text S ...] [options]\n\n"
            "Prints the sentence embedding of each text, one line each: the hidden states of the model in RUN\n"
            "(trained with `trit finetune BASE --task embed`) pooled as it was trained (mean or last token).\n\n"
            "  --text S              a text to embed (repeatable; cut to the model's context)\n"
            "  --normalize           divide each vector by its L2 norm (cosine similarity = dot product)\n"
            "  --threads N           0 = all cores, up to 4096 (0)\n"
            "  --help                this text\n");
}

static int embed_all(const char *run, const char *const *texts, int n, bool normalize) {
    char tok_path[TRIT_PATH_MAX + 32];
    if (!cli_is_dir(run)) return cli_error("embed", CLI_FAIL, "'%s' is not a run directory (pass one written by `trit "
                                           "finetune --task embed` or `trit train`)", run);
    if (trit_path_join(tok_path, sizeof tok_path, run, TRIT_CKPT_TOKENIZER) != TRIT_OK) return cli_fail("embed", CLI_FAIL);
    trit_train_config saved;
    int64_t pool = TRIT_POOL_MEAN;
    if (trit_train_run_info(run, &saved, NULL) == TRIT_OK && saved.pool != TRIT_TRAIN_UNSET) pool = saved.pool;
    trit_clear_error();
    trit_tokenizer *tok = trit_tokenizer_load(tok_path);
    trit_gpt *m = tok ? trit_checkpoint_load_as_trained(run, NULL) : NULL;
    if (!m) {
        trit_tokenizer_free(tok);
        return cli_fail("embed", CLI_FAIL);
    }
    const int64_t C = trit_gpt_get_config(m)->n_embd;
    float *v = malloc(sizeof *v * (size_t)C);
    int rc = v ? CLI_OK : cli_error("embed", CLI_FAIL, "out of memory");
    for (int i = 0; i < n && rc == CLI_OK; i++) {
        bool cut = false;
        if (trit_embed_text(m, tok, pool, texts[i], v, &cut) != TRIT_OK) {
            rc = cli_error("embed", CLI_FAIL, "--text %d: %s", i + 1, trit_last_error());
            break;
        }
        if (cut) fprintf(stderr, "trit embed: --text %d is longer than the model's context of %lld tokens; its start "
                         "was embedded\n", i + 1, (long long)trit_gpt_get_config(m)->seq_len);
        double norm = 0;
        for (int64_t j = 0; j < C; j++) norm += (double)v[j] * v[j];
        const double scale = normalize && norm > 0 ? 1.0 / sqrt(norm) : 1.0;
        for (int64_t j = 0; j < C; j++) printf("%s%.9g", j ? " " : "", (double)v[j] * scale);
        printf("\n");
    }
    free(v);
    trit_gpt_free(m);
    trit_tokenizer_free(tok);
    return rc;
}

int trit_cli_embed(int argc, char **argv) {
    static const struct option opts[] = {{"text", required_argument, NULL, 't'}, {"normalize", no_argument, NULL, 'n'},
                                         {"threads", required_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char **texts = calloc((size_t)argc + 1, sizeof *texts);
    if (!texts) return cli_error("embed", CLI_FAIL, "out of memory");
    int n = 0, c, rc = -1;
    int64_t threads = 0;
    bool normalize = false;
    cli_getopt_reset();
    while (rc < 0 && (c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 't': texts[n++] = optarg; break;
        case 'n': normalize = true; break;
        case 'j': rc = cli_int("embed", "--threads", optarg, 0, CLI_MAX_THREADS, &threads) ? -1 : CLI_USAGE; break;
        case 'h': usage(stdout); rc = CLI_OK; break;
        default: rc = cli_bad_option("embed", c, argv);
        }
    }
    const char *run = optind < argc ? argv[optind] : NULL;
    if (rc < 0 && !run) rc = cli_error("embed", CLI_USAGE, "no RUN given: `trit embed RUN --text \"...\"`");
    if (rc < 0 && optind + 1 < argc)
        rc = cli_error("embed", CLI_USAGE, "unexpected argument '%s' (did you mean --text '%s'?)", argv[optind + 1],
                       argv[optind + 1]);
    if (rc < 0 && n == 0) rc = cli_error("embed", CLI_USAGE, "no --text given: pass one or more texts to embed");
    if (rc < 0) {
        trit_threads_set((int)threads);
        rc = embed_all(run, texts, n, normalize);
    }
    free(texts);
    return rc;
}
