// trit tokenize: standard input -> token ids (space-separated), or ids -> text with --decode.
// Also where a --tokenizer argument (gpt2:DIR, a run directory, a tokenizer file) is opened.
#define _POSIX_C_SOURCE 200809L
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void usage(FILE *fp) {
    fprintf(fp, "usage: trit tokenize --tokenizer gpt2:DIR|RUN|FILE [--decode] [options] < input\n\n"
                "Prints the token ids of standard input, space-separated on one line; with --decode,\n"
                "reads whitespace-separated ids and writes their text (the exact bytes).\n\n"
                "  --tokenizer T   gpt2:DIR (GPT-2's encoder.json + vocab.bpe, vocab.json + merges.txt or\n"
                "                  tokenizer.json in DIR), a run or `trit prepare` directory (its\n"
                "                  tokenizer.bin), or a tokenizer.bin file\n"
                "  --decode        ids in, text out\n"
                "  --ordinary      encode special tokens' text (\"<|endoftext|>\") as ordinary text\n"
                "  --stats         on standard error: bytes, tokens and encoding speed (one thread)\n"
                "  --help          this text\n");
}

trit_tokenizer *cli_open_tokenizer(const char *spec) {
    if (strncmp(spec, "gpt2:", 5) == 0) return trit_tokenizer_load_gpt2(spec + 5);
    if (!cli_is_dir(spec)) return trit_tokenizer_load(spec);
    char path[TRIT_PATH_MAX + 32];
    if (trit_path_join(path, sizeof path, spec, TRIT_CKPT_TOKENIZER) != TRIT_OK) return NULL;
    return trit_tokenizer_load(path);
}

static int read_stdin(uint8_t **data, size_t *len) {
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    for (;;) {
        if (!buf) return cli_error("tokenize", CLI_FAIL, "out of memory reading standard input");
        const size_t k = fread(buf + n, 1, cap - n, stdin);
        n += k;
        if (k == 0) break;
        if (n == cap) {
            uint8_t *grown = cap <= SIZE_MAX / 2 ? realloc(buf, cap *= 2) : NULL;
            if (!grown) free(buf);
            buf = grown;
        }
    }
    if (ferror(stdin)) {
        free(buf);
        return cli_error("tokenize", CLI_FAIL, "cannot read standard input: %s", strerror(errno));
    }
    *data = buf;
    *len = n;
    return CLI_OK;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int encode(const trit_tokenizer *tok, const uint8_t *text, size_t len, bool ordinary, bool stats) {
    int32_t *ids;
    size_t n;
    const double t0 = now_s();
    const trit_status s = ordinary ? trit_tokenizer_encode_ordinary(tok, text, len, &ids, &n)
                                   : trit_tokenizer_encode(tok, text, len, &ids, &n);
    const double dt = now_s() - t0;
    if (s != TRIT_OK) return cli_fail("tokenize", CLI_FAIL);
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", (int)ids[i]);
    printf("\n");
    free(ids);
    if (stats)
        fprintf(stderr, "trit tokenize: %zu bytes -> %zu tokens in %.2f ms: %.2f MB/s\n", len, n, 1e3 * dt,
                dt > 0 ? (double)len / dt / 1e6 : 0.0);
    return fflush(stdout) == 0 ? CLI_OK : cli_error("tokenize", CLI_FAIL, "cannot write the ids: %s", strerror(errno));
}

static int decode(const trit_tokenizer *tok, char *text) {
    size_t cap = 1024, n = 0;
    int32_t *ids = malloc(cap * sizeof *ids);
    int rc = CLI_OK;
    for (char *p = text, *tok_s; rc == CLI_OK && (tok_s = strtok_r(p, " \t\r\n", &p));) {
        int64_t id;
        if (trit_arg_int_in("token id", tok_s, 0, INT32_MAX, &id) != TRIT_OK) {
            rc = cli_error("tokenize", CLI_USAGE, "--decode expects token ids separated by spaces, found '%.40s'", tok_s);
        } else if (n == cap) {
            int32_t *grown = realloc(ids, (cap *= 2) * sizeof *ids);
            if (!grown) rc = cli_error("tokenize", CLI_FAIL, "out of memory");
            else ids = grown;
        }
        if (rc == CLI_OK && ids) ids[n++] = (int32_t)id;
        if (!ids) rc = cli_error("tokenize", CLI_FAIL, "out of memory");
    }
    uint8_t *bytes = NULL;
    size_t len = 0;
    if (rc == CLI_OK && trit_tokenizer_decode(tok, ids, n, &bytes, &len) != TRIT_OK) rc = cli_fail("tokenize", CLI_FAIL);
    if (rc == CLI_OK && (fwrite(bytes, 1, len, stdout) != len || fflush(stdout) != 0))
        rc = cli_error("tokenize", CLI_FAIL, "cannot write the text: %s", strerror(errno));
    free(bytes);
    free(ids);
    return rc;
}

int trit_cli_tokenize(int argc, char **argv) {
    static const struct option opts[] = {
        {"tokenizer", required_argument, NULL, 't'}, {"decode", no_argument, NULL, 'd'},
        {"ordinary", no_argument, NULL, 'o'},        {"stats", no_argument, NULL, 's'},
        {"help", no_argument, NULL, 'h'},            {NULL, 0, NULL, 0}};
    const char *spec = NULL;
    bool dec = false, ordinary = false, stats = false;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 't': spec = optarg; break;
        case 'd': dec = true; break;
        case 'o': ordinary = true; break;
        case 's': stats = true; break;
        case 'h': usage(stdout); return CLI_OK;
        default: return cli_bad_option("tokenize", c, argv);
        }
    }
    if (optind < argc) return cli_error("tokenize", CLI_USAGE, "unexpected argument '%s' (the input is read from standard input)", argv[optind]);
    if (!spec) return cli_error("tokenize", CLI_USAGE, "--tokenizer gpt2:DIR|RUN|FILE is required");
    trit_tokenizer *tok = cli_open_tokenizer(spec);
    if (!tok) return cli_fail("tokenize", CLI_FAIL);
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = read_stdin(&data, &len);
    if (rc == CLI_OK && dec) {
        char *text = realloc(data, len + 1);
        if (text) {
            data = (uint8_t *)text;
            text[len] = 0;
            rc = decode(tok, text);
        } else {
            rc = cli_error("tokenize", CLI_FAIL, "out of memory");
        }
    } else if (rc == CLI_OK) {
        rc = encode(tok, data, len, ordinary, stats);
    }
    free(data);
    trit_tokenizer_free(tok);
    return rc;
}
