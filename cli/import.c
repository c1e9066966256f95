// trit import: another program's GPT-2 as a trit run directory.
#include "cli.h"
#include "trit/interop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit import hf DIR --out RUN [--tokenizer-file F]\n"
            "       trit import llmc FILE --out RUN [--tokenizer-file F]\n"
            "       trit import gguf FILE --out RUN [--tokenizer-file F]\n\n"
            "Makes the run directory RUN (new, or empty) with the model of:\n"
            "  hf DIR      a Hugging Face transformers GPT-2 directory: config.json and model.safetensors\n"
            "              or model-0000N-of-0000M.safetensors shards with model.safetensors.index.json\n"
            "              (F32, F16 or BF16). pytorch_model.bin is refused: convert it to safetensors.\n"
            "  llmc FILE   an llm.c model file (gpt2_124M.bin: version 3 fp32 or 5 bf16)\n"
            "  gguf FILE   a GGUF of llama.cpp's gpt2 architecture (f32, f16, q8_0, q4_0, tq1_0, tq2_0\n"
            "              tensors); its tokenizer.ggml.* keys give the run's tokenizer. Quantized\n"
            "              matrices stay quantized (q8_0, q4_0: int8, int4 in groups of 32; tq2_0,\n"
            "              tq1_0: ternary in groups of 256), codes and scales as in the file\n\n"
            "  --out RUN           the run directory to make; nothing is written unless the import succeeds\n"
            "  --tokenizer-file F  the run's tokenizer: a trit tokenizer.bin, or an llm.c tokenizer file of a\n"
            "                      character-level vocabulary; its size must be the model's. hf: without it,\n"
            "                      GPT-2's tokenizer files in DIR (vocab.json + merges.txt or tokenizer.json)\n"
            "  --help              this text\n");
}

// F as a trit tokenizer: trit's own file, or an llm.c tokenizer file trit can encode with.
static trit_tokenizer *load_tokenizer(const char *path) {
    trit_llmc_vocab v;
    uint8_t *d = NULL;
    size_t n = 0;
    if (trit_file_read_all(path, &d, &n) != TRIT_OK) return NULL;
    const bool llmc = n >= 4 && d[0] == (TRIT_LLMC_TOKENIZER_MAGIC & 0xff) && d[1] == (TRIT_LLMC_TOKENIZER_MAGIC >> 8 & 0xff) &&
                      d[2] == (TRIT_LLMC_TOKENIZER_MAGIC >> 16 & 0xff) && d[3] == (TRIT_LLMC_TOKENIZER_MAGIC >> 24);
    free(d);
    if (!llmc) return trit_tokenizer_load(path);
    if (trit_llmc_vocab_read(path, &v) != TRIT_OK) return NULL;
    trit_tokenizer *tok = trit_tokenizer_from_llmc(&v);
    trit_llmc_vocab_free(&v);
    return tok;
}

// A transformers directory that carries GPT-2's tokenizer files gives the run that tokenizer.
static bool has_gpt2_files(const char *dir) {
    char path[TRIT_PATH_MAX + 32];
    for (const char *const *f = (const char *const[]){"vocab.json", "merges.txt", "tokenizer.json", NULL}; *f; f++)
        if (trit_path_join(path, sizeof path, dir, *f) == TRIT_OK && access(path, F_OK) == 0) return true;
    return false;
}

static trit_status write_run(const trit_gpt *m, const trit_tokenizer *tok, const char *out) {
    char stage[TRIT_PATH_MAX + 64], path[TRIT_PATH_MAX + 96];
    trit_status s = trit_stage_open(out, stage, sizeof stage);
    if (s != TRIT_OK) return s;
    s = trit_path_join(path, sizeof path, stage, TRIT_CKPT_MODEL);
    if (s == TRIT_OK) s = trit_checkpoint_save_model(m, path, 0);
    if (s == TRIT_OK && tok) s = trit_path_join(path, sizeof path, stage, TRIT_CKPT_TOKENIZER);
    if (s == TRIT_OK && tok) s = trit_tokenizer_save(tok, path);
    if (s == TRIT_OK) return trit_stage_commit(stage, out);
    trit_stage_abort(stage);
    return s;
}

int trit_cli_import(int argc, char **argv) {
    static const struct option opts[] = {{"out", required_argument, NULL, 'o'},
                                         {"tokenizer-file", required_argument, NULL, 'k'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *out = NULL, *tok_file = NULL;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'k': tok_file = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("import", c, argv);
        }
    }
    if (optind + 2 != argc)
        return cli_error("import", CLI_USAGE, "give a format (hf, llmc or gguf) and its source (see trit import --help)");
    const char *format = argv[optind], *src = argv[optind + 1];
    const bool hf = strcmp(format, "hf") == 0, gguf = strcmp(format, "gguf") == 0;
    if (!hf && !gguf && strcmp(format, "llmc") != 0)
        return cli_error("import", CLI_USAGE, "format must be hf, llmc or gguf (got %s)", format);
    if (!out) return cli_error("import", CLI_USAGE, "--out RUN is required");
    trit_tokenizer *tok = NULL;
    trit_gpt *m = hf ? trit_import_hf_gpt2(src) : gguf ? trit_import_gguf(src, tok_file ? NULL : &tok) : trit_import_llmc(src);
    if (!m) return cli_fail("import", CLI_FAIL);
    if (hf && !tok_file && has_gpt2_files(src)) tok_file = src;
    if (tok_file) tok = tok_file == src ? trit_tokenizer_load_gpt2(src) : load_tokenizer(tok_file);
    const int64_t V = trit_gpt_get_config(m)->vocab_size;
    int rc = CLI_OK;
    if (tok_file && !tok)
        rc = cli_fail("import", CLI_FAIL);
    else if (tok && trit_tokenizer_vocab_size(tok) != V)
        rc = cli_error("import", CLI_FAIL, "'%s' has %d tokens, the model %lld: pass the model's own tokenizer", tok_file,
                       (int)trit_tokenizer_vocab_size(tok), (long long)V);
    else if (write_run(m, tok, out) != TRIT_OK)
        rc = cli_fail("import", CLI_FAIL);
    if (rc == CLI_OK) {
        const trit_gpt_config *g = trit_gpt_get_config(m);
        int codes = 0;  // matrices a GGUF held in a block type, kept as codes
        for (int i = 0; i < trit_gpt_num_tensors(m); i++) codes += trit_gpt_quantized(m, i) != NULL;
        char kept[64] = "";
        if (codes) snprintf(kept, sizeof kept, ", %d matrices kept quantized", codes);
        printf("wrote %s (%s: %lld parameters, L %lld, H %lld, C %lld, V %lld, T %lld%s%s)\n", out, format,
               (long long)trit_gpt_num_params(m), (long long)g->n_layer, (long long)g->n_head, (long long)g->n_embd,
               (long long)V, (long long)g->seq_len, tok ? ", with tokenizer" : ", no tokenizer", kept);
    }
    trit_tokenizer_free(tok);
    trit_gpt_free(m);
    return rc;
}
