// trit prepare: a text file -> DIR/tokenizer.bin, DIR/train.bin, DIR/val.bin (llm.c shards).
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *fp) {
    fprintf(fp, "usage: trit prepare --data FILE --out DIR [options]\n\n"
                "Trains a tokenizer on a text file and writes it with the train/val token shards\n"
                "(llm.c layout: 1024-byte header, uint16 tokens) to DIR, for `trit train --data DIR`.\n\n"
                "  --data FILE          UTF-8 text\n"
                "  --out DIR            output directory (created)\n"
                "  --tokenizer KIND     char|bpe (char)\n"
                "  --vocab N            BPE vocabulary, 257..65536 (512)\n"
                "  --val-fraction F     tail of the tokens held out for validation, in (0, 1) (0.1)\n"
                "  --help               this text\n");
}

int trit_cli_prepare(int argc, char **argv) {
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},      {"out", required_argument, NULL, 'o'},
        {"tokenizer", required_argument, NULL, 't'}, {"vocab", required_argument, NULL, 'v'},
        {"val-fraction", required_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *data = NULL, *out = NULL;
    trit_tokenizer_kind kind = TRIT_TOKENIZER_CHAR;
    int64_t vocab = 512;
    double frac = TRIT_DEFAULT_VAL_FRACTION;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'd': data = optarg; break;
        case 'o': out = optarg; break;
        case 't':
            if (strcmp(optarg, "char") == 0) kind = TRIT_TOKENIZER_CHAR;
            else if (strcmp(optarg, "bpe") == 0) kind = TRIT_TOKENIZER_BPE;
            else return cli_error("prepare", CLI_USAGE, "--tokenizer expects char|bpe, got '%s'", optarg);
            break;
        case 'v': ok = cli_int("prepare", "--vocab", optarg, 257, TRIT_SHARD_MAX_VOCAB, &vocab); break;
        case 'f': ok = cli_double("prepare", "--val-fraction", optarg, 0, 1, TRIT_OPEN_LO | TRIT_OPEN_HI, &frac); break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("prepare", c, argv);
        }
        if (!ok) return CLI_USAGE;
    }
    if (optind < argc) return cli_error("prepare", CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!data || !out) return cli_error("prepare", CLI_USAGE, "--data FILE and --out DIR are required");
    trit_prepare_result r;
    if (trit_prepare_text(data, kind, vocab, frac, out, &r) != TRIT_OK) return cli_fail("prepare", CLI_FAIL);
    printf("%s: %s tokenizer with %d tokens; %lld train and %lld val tokens in %s/{%s,%s,%s}\n", data,
           trit_tokenizer_kind_name(kind), r.vocab, (long long)r.n_train, (long long)r.n_val, out,
           TRIT_CKPT_TOKENIZER, TRIT_DATA_TRAIN, TRIT_DATA_VAL);
    return CLI_OK;
}
