// trit export: a run's model in another program's format (GGUF for llama.cpp, a transformers
// GPT-2 directory, an llm.c model file).
#include "cli.h"
#include "trit/bench.h"
#include "trit/interop.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit export RUN --format gguf [--type f32|f16|q8_0|q4_0|tq2_0|tq1_0] --out FILE\n"
            "       trit export --random CONFIG --format gguf [--type T] --out FILE\n"
            "       trit export RUN --format hf --out DIR\n"
            "       trit export RUN --format llmc [--type f32|bf16] --out FILE [--tokenizer-out F]\n\n"
            "hf: a transformers GPT-2 directory (config.json, model.safetensors in fp32) that\n"
            "GPT2LMHeadModel.from_pretrained loads; DIR must be new or empty. A run with GPT-2's\n"
            "tokenizer (--tokenizer gpt2:DIR) also gets vocab.json, merges.txt, tokenizer_config.json\n"
            "and special_tokens_map.json, which GPT2TokenizerFast.from_pretrained loads.\n"
            "llmc: llm.c's model file (version 3 fp32, or 5 with --type bf16; vocabulary padded to a\n"
            "multiple of 128 with zero rows) and with --tokenizer-out its tokenizer file (version 2;\n"
            "end-of-text id: the token <|endoftext|> if the vocabulary has it, else the last token).\n\n"
            "gguf:\n"
            "Writes RUN's model and tokenizer as a GGUF v3 file of llama.cpp's gpt2 architecture\n"
            "(GPT-2 shaped models: LayerNorm, GELU, learned positions, biases). Matrices take --type\n"
            "(default f32); norms, biases and the position table stay f32.\n\n"
            "  --format F         gguf, hf or llmc\n"
            "  --random CONFIG    instead of RUN: a randomly initialised model of a `trit bench --decode`\n"
            "                     config (gpt2, baby, small, bpe50k) with placeholder tokens, to time\n"
            "                     llama.cpp on the same shape\n"
            "  --type T           f32, f16, q8_0, q4_0, tq2_0 or tq1_0 (ggml's block formats; tq2_0\n"
            "                     (2.06 bits) and tq1_0 (1.69 bits) store a --ternary run's matrices\n"
            "                     exactly, with a q8_0 embedding and head, and need widths in 256s)\n"
            "  --out FILE|DIR     what to write\n"
            "  --tokenizer-out F  llmc: also the run's tokenizer as an llm.c tokenizer file\n"
            "  --help             this text\n");
}

// The end-of-text id of an llm.c tokenizer file: <|endoftext|> if tok has it, else the last token.
static int32_t eot_of(const trit_tokenizer *tok) {
    static const char eot[] = "<|endoftext|>";
    for (int32_t i = trit_tokenizer_vocab_size(tok) - 1; i >= 0; i--) {
        const uint8_t *b;
        size_t n;
        if (trit_tokenizer_token_bytes(tok, i, &b, &n) == TRIT_OK && n == sizeof eot - 1 && memcmp(b, eot, n) == 0) return i;
    }
    return trit_tokenizer_vocab_size(tok) - 1;
}

// --format hf and llmc: RUN's model as trained (fake quantization applied).
static int export_other(const char *run, bool hf, const char *type, const char *out, const char *tok_out) {
    const int version = strcmp(type, "f32") == 0 ? 3 : strcmp(type, "bf16") == 0 && !hf ? 5 : 0;
    if (!version)
        return cli_error("export", CLI_USAGE, "--type for --format %s must be f32%s (got %s)", hf ? "hf" : "llmc",
                         hf ? "" : " or bf16", type);
    if (tok_out && hf) return cli_error("export", CLI_USAGE, "--tokenizer-out goes with --format llmc");
    trit_gpt *m = trit_checkpoint_load_as_trained(run, NULL);
    trit_tokenizer *tok = NULL;
    char tok_path[TRIT_PATH_MAX + 32];
    trit_status s = m ? TRIT_OK : TRIT_ERR_FORMAT;
    if (s == TRIT_OK && (tok_out || hf)) s = trit_path_join(tok_path, sizeof tok_path, run, TRIT_CKPT_TOKENIZER);
    // An imported run may have no tokenizer: hf then writes the model alone.
    const bool want_tok = tok_out || (hf && s == TRIT_OK && access(tok_path, F_OK) == 0);
    if (s == TRIT_OK && want_tok && !(tok = trit_tokenizer_load(tok_path))) s = TRIT_ERR_FORMAT;
    // hf: GPT-2's tokenizer goes beside the model; trit's own kinds have no Hugging Face layout.
    const bool hf_tok = hf && tok && trit_tokenizer_get_kind(tok) == TRIT_TOKENIZER_GPT2;
    if (s == TRIT_OK && (tok_out || hf_tok) && trit_tokenizer_vocab_size(tok) != trit_gpt_get_config(m)->vocab_size)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' has %d tokens, the model %lld", tok_path, (int)trit_tokenizer_vocab_size(tok),
                       (long long)trit_gpt_get_config(m)->vocab_size);
    if (s == TRIT_OK) s = hf ? trit_export_hf_gpt2_with(m, hf_tok ? tok : NULL, out) : trit_export_llmc(m, version, out);
    if (s == TRIT_OK && tok_out) s = trit_llmc_vocab_write(tok, eot_of(tok), tok_out);
    int rc = s == TRIT_OK ? CLI_OK : cli_fail("export", CLI_FAIL);
    if (rc == CLI_OK && hf)
        printf("wrote %s (transformers GPT-2, fp32; %s)\n", out, hf_tok ? "GPT-2's tokenizer files beside it" :
               tok ? "no tokenizer files: the run's tokenizer is not GPT-2's" : "no tokenizer files: the run has no tokenizer");
    else if (rc == CLI_OK)
        printf("wrote %s (%s)%s%s\n", out, version == 3 ? "llm.c, fp32" : "llm.c, bf16", tok_out ? " and " : "",
               tok_out ? tok_out : "");
    trit_tokenizer_free(tok);
    trit_gpt_free(m);
    return rc;
}

int trit_cli_export(int argc, char **argv) {
    static const struct option opts[] = {{"format", required_argument, NULL, 'f'}, {"type", required_argument, NULL, 't'},
                                         {"out", required_argument, NULL, 'o'},    {"help", no_argument, NULL, 'h'},
                                         {"random", required_argument, NULL, 'r'},
                                         {"tokenizer-out", required_argument, NULL, 'k'}, {NULL, 0, NULL, 0}};
    const char *format = NULL, *type = "f32", *out = NULL, *random = NULL, *tok_out = NULL;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'f': format = optarg; break;
        case 't': type = optarg; break;
        case 'o': out = optarg; break;
        case 'r': random = optarg; break;
        case 'k': tok_out = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("export", c, argv);
        }
    }
    if (optind != argc - (random ? 0 : 1))
        return cli_error("export", CLI_USAGE, "give exactly one RUN directory, or --random CONFIG (see trit export --help)");
    if (!format || (strcmp(format, "gguf") != 0 && strcmp(format, "hf") != 0 && strcmp(format, "llmc") != 0))
        return cli_error("export", CLI_USAGE, "--format must be gguf, hf or llmc (got %s)", format ? format : "nothing");
    if (!out) return cli_error("export", CLI_USAGE, "--out is required");
    if (strcmp(format, "gguf") != 0) {
        if (random) return cli_error("export", CLI_USAGE, "--random goes with --format gguf");
        return export_other(argv[optind], strcmp(format, "hf") == 0, type, out, tok_out);
    }
    if (tok_out) return cli_error("export", CLI_USAGE, "--tokenizer-out goes with --format llmc");
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
