// trit prepare: a text file (or JSON Lines) -> DIR/tokenizer.bin, DIR/train.bin, DIR/val.bin
// (llm.c shards), with a tokenizer trained on the text or given (GPT-2's files, another run's).
#include "cli.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *fp) {
    fprintf(fp, "usage: trit prepare --data FILE --out DIR [options]\n\n"
                "Trains a tokenizer on a text file (or takes one) and writes it with the train/val token\n"
                "shards (llm.c layout: 1024-byte header, uint16 tokens) to DIR, for `trit train --data DIR`.\n\n"
                "  --data FILE          UTF-8 text, or JSON Lines (a name ending in .jsonl, or --field)\n"
                "  --out DIR            output directory (created)\n"
                "  --tokenizer T        char|bpe (trained on the text; char), or gpt2:DIR (GPT-2's files:\n"
                "                       encoder.json + vocab.bpe, vocab.json + merges.txt or tokenizer.json),\n"
                "                       or a run / prepared directory or tokenizer.bin whose tokenizer to use\n"
                "  --field NAME         JSON Lines: the string field with each document's text (text);\n"
                "                       each document becomes <|endoftext|> + its tokens, as in llm.c\n"
                "  --vocab N            BPE vocabulary, 257..65536 (512)\n"
                "  --val-fraction F     tail of the tokens held out for validation, in (0, 1) (0.1)\n"
                "  --help               this text\n");
}

int trit_cli_prepare(int argc, char **argv) {
    static const struct option opts[] = {
        {"data", required_argument, NULL, 'd'},      {"out", required_argument, NULL, 'o'},
        {"tokenizer", required_argument, NULL, 't'}, {"vocab", required_argument, NULL, 'v'},
        {"val-fraction", required_argument, NULL, 'f'}, {"field", required_argument, NULL, 'F'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};
    const char *data = NULL, *out = NULL, *spec = NULL, *field = NULL;
    trit_tokenizer_kind kind = TRIT_TOKENIZER_CHAR;
    int64_t vocab = 512;
    bool vocab_given = false;
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
            else spec = optarg;
            break;
        case 'F': field = optarg; break;
        case 'v':
            ok = cli_int("prepare", "--vocab", optarg, 257, TRIT_SHARD_MAX_VOCAB, &vocab);
            vocab_given = true;
            break;
        case 'f': ok = cli_double("prepare", "--val-fraction", optarg, 0, 1, TRIT_OPEN_LO | TRIT_OPEN_HI, &frac); break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("prepare", c, argv);
        }
        if (!ok) return CLI_USAGE;
    }
    if (optind < argc) return cli_error("prepare", CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!data || !out) return cli_error("prepare", CLI_USAGE, "--data FILE and --out DIR are required");
    const size_t dl = strlen(data);
    const bool jsonl = field || (dl > 6 && strcmp(data + dl - 6, ".jsonl") == 0);
    if (spec && vocab_given)
        return cli_error("prepare", CLI_USAGE, "--vocab sizes a tokenizer trained on the text; '%s' is given whole",
                         spec);
    if (jsonl && !spec)
        return cli_error("prepare", CLI_USAGE, "JSON Lines needs a given tokenizer with <|endoftext|>: pass "
                         "--tokenizer gpt2:DIR");
    trit_prepare_result r;
    trit_tokenizer *tok = spec ? cli_open_tokenizer(spec) : NULL;
    if (spec && !tok) return cli_fail("prepare", CLI_FAIL);
    if (tok) kind = trit_tokenizer_get_kind(tok);
    const trit_status s = jsonl ? trit_prepare_jsonl(data, field ? field : "text", tok, frac, out, &r)
                          : tok ? trit_prepare_text_with(data, tok, frac, out, &r)
                                : trit_prepare_text(data, kind, vocab, frac, out, &r);
    trit_tokenizer_free(tok);
    if (s != TRIT_OK) return cli_fail("prepare", CLI_FAIL);
    printf("%s: %s tokenizer with %d tokens; %lld train and %lld val tokens in %s/{%s,%s,%s}\n", data,
           trit_tokenizer_kind_name(kind), r.vocab, (long long)r.n_train, (long long)r.n_val, out,
           TRIT_CKPT_TOKENIZER, TRIT_DATA_TRAIN, TRIT_DATA_VAL);
    return CLI_OK;
}
