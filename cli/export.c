// trit export: a run's model in another program's format (GGUF for llama.cpp).
#include "cli.h"
#include "trit/bench.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit export RUN --format gguf [--type f32|f16|q8_0|q4_0|tq2_0|tq1_0] --out FILE\n"
            "       trit export --random CONFIG --format gguf [--type T] --out FILE\n\n"
            "Writes RUN's model and tokenizer as a GGUF v3 file of llama.cpp's gpt2 architecture\n"
            "(GPT-2 shaped models: LayerNorm, GELU, learned positions, biases). Matrices take --type\n"
            "(default f32); norms, biases and the position table stay f32.\n\n"
            "  --format gguf      the only format so far\n"
            "  --random CONFIG    instead of RUN: a randomly initialised model of a `trit bench --decode`\n"
            "                     config (gpt2, baby, small, bpe50k) with placeholder tokens, to time\n"
            "                     llama.cpp on the same shape\n"
            "  --type T           f32, f16, q8_0, q4_0, tq2_0 or tq1_0 (ggml's block formats; tq2_0\n"
            "                     (2.06 bits) and tq1_0 (1.69 bits) store a --ternary run's matrices\n"
            "                     exactly, with a q8_0 embedding and head, and need widths in 256s)\n"
            "  --out FILE         the file to write\n"
            "  --help             this text\n");
}

int trit_cli_export(int argc, char **argv) {
    static const struct option opts[] = {{"format", required_argument, NULL, 'f'}, {"type", required_argument, NULL, 't'},
                                         {"out", required_argument, NULL, 'o'},    {"help", no_argument, NULL, 'h'},
                                         {"random", required_argument, NULL, 'r'}, {NULL, 0, NULL, 0}};
    const char *format = NULL, *type = "f32", *out = NULL, *random = NULL;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'f': format = optarg; break;
        case 't': type = optarg; break;
        case 'o': out = optarg; break;
        case 'r': random = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("export", c, argv);
        }
    }
    if (optind != argc - (random ? 0 : 1))
        return cli_error("export", CLI_USAGE, "give exactly one RUN directory, or --random CONFIG (see trit export --help)");
    if (!format || strcmp(format, "gguf") != 0)
        return cli_error("export", CLI_USAGE, "--format must be gguf (got %s)", format ? format : "nothing");
    static const struct { const char *name; trit_dtype dt; } types[] = {
        {"f32", TRIT_F32}, {"f16", TRIT_F16}, {"q8_0", TRIT_Q8_0}, {"q4_0", TRIT_Q4_0}, {"tq2_0", TRIT_TQ2_0},
        {"tq1_0", TRIT_TQ1_0}};
    trit_dtype dt = TRIT_DTYPE_COUNT;
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (strcmp(type, types[i].name) == 0) dt = types[i].dt;
    if (dt == TRIT_DTYPE_COUNT)
        return cli_error("export", CLI_USAGE, "--type must be f32, f16, q8_0, q4_0, tq2_0 or tq1_0 (got %s)", type);
    if (!out) return cli_error("export", CLI_USAGE, "--out FILE is required");
    trit_gpt *m = NULL;
    trit_tokenizer *tok = NULL;
    if (random) {
        trit_gpt_config cfg;
        if (trit_bench_decode_config(random, &cfg) != TRIT_OK) return cli_fail("export", CLI_USAGE);
        m = trit_gpt_new(&cfg, 1);
    } else {
        char tok_path[TRIT_PATH_MAX + 32];
        if (trit_path_join(tok_path, sizeof tok_path, argv[optind], TRIT_CKPT_TOKENIZER) != TRIT_OK)
            return cli_fail("export", CLI_USAGE);
        // A run trained through fake quantization is exported with the values it trained with.
        m = trit_checkpoint_load_as_trained(argv[optind], NULL);
        tok = m ? trit_tokenizer_load(tok_path) : NULL;
    }
    int rc = m && (random || tok) && trit_export_gguf(m, tok, dt, out) == TRIT_OK ? CLI_OK : cli_fail("export", CLI_FAIL);
    if (rc == CLI_OK) printf("wrote %s (gguf v3, gpt2, %s)\n", out, type);
    trit_tokenizer_free(tok);
    trit_gpt_free(m);
    return rc;
}
