// trit sample: text from a checkpoint through the KV cache, with temperature, top-k, top-p and
// a seeded multinomial draw.
#include "cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit sample --ckpt DIR [options]\n\n"
            "Generates text from the model in DIR (model.safetensors + tokenizer.bin).\n\n"
            "  --ckpt DIR            run directory (or a .safetensors file with --tokenizer-file)\n"
            "  --tokenizer-file F    tokenizer (default DIR/tokenizer.bin)\n"
            "  --adapter DIR         a LoRA adapter (PEFT layout) applied unmerged on DIR's model\n"
            "  --prompt S            text to continue (default: a newline)\n"
            "  --temperature X       0 = greedy, up to 100 (0.8)\n"
            "  --top-k K             keep the K most likely tokens, 0 = all, up to 65536 (0)\n"
            "  --top-p P             keep the smallest set of tokens with mass P, in (0, 1] (1)\n"
            "  --seed N              seed of the draws, >= 0 (1)\n"
            "  --max-tokens N        tokens to generate, up to 100000000 (256)\n"
            "  --threads N           0 = all cores, up to 4096 (0)\n"
            "  --kv-cache f32|f16    how keys and values are cached: f16 halves the cache and what\n"
            "                        attention reads per token, rounding each key and value (f32)\n"
            "  --help                this text\n");
}

static void emit(void *ctx, int32_t token) {
    const uint8_t *b;
    size_t n;
    if (trit_tokenizer_token_bytes(ctx, token, &b, &n) == TRIT_OK) fwrite(b, 1, n, stdout);
    fflush(stdout);
}

static trit_tokenizer *load_tokenizer(const char *ckpt, const char *file) {
    char path[TRIT_PATH_MAX + 32];
    if (!file) {
        if (!cli_is_dir(ckpt)) {
            trit_error(TRIT_ERR_INVALID, "'%s' is not a run directory: pass --tokenizer-file too", ckpt);
            return NULL;
        }
        if (trit_path_join(path, sizeof path, ckpt, TRIT_CKPT_TOKENIZER) != TRIT_OK) return NULL;
        file = path;
    }
    return trit_tokenizer_load(file);
}

int trit_cli_sample(int argc, char **argv) {
    static const struct option opts[] = {
        {"ckpt", required_argument, NULL, 'c'},        {"tokenizer-file", required_argument, NULL, 'k'},
        {"prompt", required_argument, NULL, 'p'},      {"temperature", required_argument, NULL, 't'},
        {"top-k", required_argument, NULL, 'K'},       {"top-p", required_argument, NULL, 'P'},
        {"seed", required_argument, NULL, 's'},        {"max-tokens", required_argument, NULL, 'n'},
        {"threads", required_argument, NULL, 'j'},     {"help", no_argument, NULL, 'h'},
        {"kv-cache", required_argument, NULL, 'V'},    {"adapter", required_argument, NULL, 'A'},
        {NULL, 0, NULL, 0}};
    const char *ckpt = NULL, *tok_file = NULL, *prompt = NULL, *adapter = NULL;
    trit_sample_config sc = trit_sample_config_default();
    int64_t seed = (int64_t)sc.seed, threads = 0;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'c': ckpt = optarg; break;
        case 'k': tok_file = optarg; break;
        case 'p': prompt = optarg; break;
        case 't': ok = cli_double("sample", "--temperature", optarg, 0, 100, 0, &sc.temperature); break;
        case 'K': ok = cli_int("sample", "--top-k", optarg, 0, TRIT_SHARD_MAX_VOCAB, &sc.top_k); break;
        case 'P': ok = cli_double("sample", "--top-p", optarg, 0, 1, TRIT_OPEN_LO, &sc.top_p); break;
        case 's': ok = cli_int("sample", "--seed", optarg, 0, INT64_MAX, &seed); break;
        case 'n': ok = cli_int("sample", "--max-tokens", optarg, 0, 100000000, &sc.max_tokens); break;
        case 'j': ok = cli_int("sample", "--threads", optarg, 0, CLI_MAX_THREADS, &threads); break;
        case 'V': ok = cli_kv_cache("sample", optarg, &sc.kv_cache); break;
        case 'A': adapter = optarg; break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("sample", c, argv);
        }
        if (!ok) return CLI_USAGE;
    }
    int bad = cli_check_ckpt_args("sample", argc, argv, ckpt);
    if (bad) return bad;
    if (trit_sample_config_check(&sc) != TRIT_OK) return cli_fail("sample", CLI_USAGE);
    sc.seed = (uint64_t)seed;
    trit_threads_set((int)threads);
    trit_gpt *m = adapter ? trit_checkpoint_load_adapted(ckpt, adapter, true) : trit_checkpoint_load_decoding(ckpt, NULL);
    if (!m) return cli_fail("sample", CLI_FAIL);
    trit_tokenizer *tok = load_tokenizer(ckpt, tok_file);
    int rc = CLI_OK;
    int32_t *ids = NULL, *out = NULL, start = 0;
    size_t n = 0;
    const bool has_prompt = prompt && *prompt;
    if (!tok) {
        rc = cli_fail("sample", CLI_FAIL);
    } else if (trit_tokenizer_vocab_size(tok) != trit_gpt_get_config(m)->vocab_size) {
        rc = cli_error("sample", CLI_FAIL, "the tokenizer has %d tokens but the model %lld: they are from "
                       "different runs", trit_tokenizer_vocab_size(tok), (long long)trit_gpt_get_config(m)->vocab_size);
    } else if (has_prompt && trit_tokenizer_encode(tok, prompt, strlen(prompt), &ids, &n) != TRIT_OK) {
        rc = cli_fail("sample", CLI_USAGE);
    } else if (!(out = malloc((size_t)(sc.max_tokens > 0 ? sc.max_tokens : 1) * sizeof *out))) {
        rc = cli_error("sample", CLI_FAIL, "out of memory");
    } else {
        if (!has_prompt) {
            // No prompt: start from a newline if the vocabulary has one, else from token 0.
            int32_t *nl = NULL;
            size_t k = 0;
            if (trit_tokenizer_encode(tok, "\n", 1, &nl, &k) == TRIT_OK && k == 1) start = nl[0];
            free(nl);
        }
        const int32_t *p_ids = n > 0 ? ids : &start;
        if (has_prompt) fputs(prompt, stdout);
        if (trit_generate(m, p_ids, n > 0 ? (int64_t)n : 1, &sc, out, NULL, emit, tok) != TRIT_OK)
            rc = cli_fail("sample", CLI_FAIL);
        else fputc('\n', stdout);
    }
    free(out);
    free(ids);
    trit_tokenizer_free(tok);
    trit_gpt_free(m);
    return rc;
}
