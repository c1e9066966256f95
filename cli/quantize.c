// trit quantize: post-training quantization of a run's model into a new run directory, with the
// bytes, bits per parameter and validation-loss change it causes, measured on the same windows.
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit quantize RUN --format F [options]\n\n"
            "Quantizes the 2-D weights inside the blocks of RUN's model (attention and MLP matrices)\n"
            "and writes a run directory that `trit eval` and `trit sample` load. Prints the bytes,\n"
            "bits per parameter and the validation loss before and after, on the same windows.\n\n"
            "  --format F         int8 | int4 | int2 | nf4 | fp8 (e4m3) | fp8-e5m2 | ternary (2-bit)\n"
            "                     | ternary-b3 (1.625 bits; both BitNet b1.58 absmean, per tensor)\n"
            "  --group N          values per scale: N > 0 (dividing the rows), 0 = per tensor,\n"
            "                     -1 = per output channel (default: int8/fp8 -1, int4 128, int2/nf4 64,\n"
            "                     ternary 0)\n"
            "  --affine           integer codes with a zero point (default symmetric)\n"
            "  --double-quant     scales as int8 in blocks of 256 (bitsandbytes)\n"
            "  --stochastic       stochastic rounding of the codes (--seed N, default 1)\n"
            "  --embeddings       also quantize the token embedding (the tied output head)\n"
            "  --head F           quantize the token embedding (the tied output head) to format F,\n"
            "                     with F's default group (e.g. ternary blocks with an int4 head)\n"
            "  --out DIR          output run directory (default RUN-F)\n"
            "  --data FILE|DIR    validation shard (default RUN's val.bin or its data's)\n"
            "  --batches N        validation batches, 0 = skip the loss (20)\n"
            "  --batch B          sequences per batch (8)\n"
            "  --threads N        0 = all cores (0)\n"
            "  --help             this text\n");
}

typedef struct quant_args {
    const char *run, *format, *out, *data, *head;
    trit_quant_spec spec, head_spec;
    bool embeddings;
    int64_t batches, batch;
} quant_args;

static int parse(int argc, char **argv, quant_args *a) {
    static const struct option opts[] = {
        {"format", required_argument, NULL, 'f'}, {"group", required_argument, NULL, 'g'},
        {"affine", no_argument, NULL, 'a'},       {"double-quant", no_argument, NULL, 'q'},
        {"stochastic", no_argument, NULL, 's'},   {"seed", required_argument, NULL, 'S'},
        {"embeddings", no_argument, NULL, 'e'},   {"head", required_argument, NULL, 'H'},
        {"out", required_argument, NULL, 'o'},
        {"data", required_argument, NULL, 'd'},   {"batches", required_argument, NULL, 'n'},
        {"batch", required_argument, NULL, 'b'},  {"threads", required_argument, NULL, 'j'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    int64_t group = INT64_MIN, seed = 1, threads = 0;
    bool affine = false, dq = false, sr = false;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        bool ok = true;
        switch (c) {
        case 'f': a->format = optarg; break;
        case 'g': ok = cli_int("quantize", "--group", optarg, -1, 1 << 24, &group); break;
        case 'a': affine = true; break;
        case 'q': dq = true; break;
        case 's': sr = true; break;
        case 'S': ok = cli_int("quantize", "--seed", optarg, 0, INT64_MAX, &seed); break;
        case 'e': a->embeddings = true; break;
        case 'H': a->head = optarg; break;
        case 'o': a->out = optarg; break;
        case 'd': a->data = optarg; break;
        case 'n': ok = cli_int("quantize", "--batches", optarg, 0, 1000000, &a->batches); break;
        case 'b': ok = cli_int("quantize", "--batch", optarg, 1, CLI_MAX_BATCH, &a->batch); break;
        case 'j': ok = cli_int("quantize", "--threads", optarg, 0, CLI_MAX_THREADS, &threads); break;
        case 'h': usage(stdout); return -1;
        default: return cli_bad_option("quantize", c, argv);
        }
        if (!ok) return CLI_USAGE;
    }
    if (optind != argc - 1) return cli_error("quantize", CLI_USAGE, "give exactly one RUN directory (see trit quantize --help)");
    a->run = argv[optind];
    const trit_dtype dt = trit_quant_format_dtype(a->format);
    if (dt == TRIT_DTYPE_COUNT)
        return cli_error("quantize", CLI_USAGE,
                         "--format must be int8, int4, int2, nf4, fp8, fp8-e5m2, ternary or ternary-b3 (got %s)",
                         a->format ? a->format : "nothing");
    const trit_dtype ht = a->head ? trit_quant_format_dtype(a->head) : TRIT_DTYPE_COUNT;
    if (a->head && ht == TRIT_DTYPE_COUNT)
        return cli_error("quantize", CLI_USAGE, "--head must be int8, int4, int2, nf4, fp8, fp8-e5m2, ternary or "
                         "ternary-b3 (got %s)", a->head);
    if (a->head && a->embeddings)
        return cli_error("quantize", CLI_USAGE, "give --embeddings (the blocks' format) or --head F, not both");
    if (a->head) a->head_spec = trit_quant_spec_default(ht);
    a->spec = trit_quant_spec_default(dt);
    if (group != INT64_MIN) a->spec.group_size = group;
    a->spec.scheme = affine ? TRIT_QSCHEME_AFFINE : TRIT_QSCHEME_SYMMETRIC;
    a->spec.double_quant_block = dq ? 256 : 0;
    a->spec.stochastic = sr;
    a->spec.seed = (uint64_t)seed;
    trit_threads_set((int)threads);
    return CLI_OK;
}

// The validation shard: --data (a file or a prepared directory), else RUN's val.bin, else that of
// the data directory RUN trained on. Empty when there is none.
static void find_val(const quant_args *a, char *buf, size_t n) {
    struct stat st;
    trit_train_config cfg;
    buf[0] = 0;
    if (a->data && !cli_is_dir(a->data)) snprintf(buf, n, "%s", a->data);
    else if (a->data) trit_path_join(buf, n, a->data, TRIT_DATA_VAL);
    else if (trit_path_join(buf, n, a->run, TRIT_DATA_VAL) == TRIT_OK && stat(buf, &st) == 0) return;
    else if (trit_train_run_info(a->run, &cfg, NULL) == TRIT_OK && cli_is_dir(cfg.data))
        trit_path_join(buf, n, cfg.data, TRIT_DATA_VAL);
    if (buf[0] && stat(buf, &st) != 0) buf[0] = 0;
    trit_clear_error();
}

// Writes DIR/model.safetensors and copies RUN's tokenizer and the validation shard beside it.
// On failure the files this call wrote (each written atomically) and a directory it made are
// removed, so no half-made run directory is left.
static trit_status write_run(const quant_args *a, const char *out, const trit_gpt *m, const char *val) {
    static const char *const names[3] = {TRIT_CKPT_MODEL, TRIT_CKPT_TOKENIZER, TRIT_DATA_VAL};
    char path[3][TRIT_PATH_MAX + 32], src[TRIT_PATH_MAX + 32];
    bool made_dir = false, wrote[3] = {false, false, false};
    trit_status s = trit_make_dir(out, &made_dir);
    for (int i = 0; i < 3 && s == TRIT_OK; i++) s = trit_path_join(path[i], sizeof path[i], out, names[i]);
    if (s == TRIT_OK) wrote[0] = (s = trit_checkpoint_save_model(m, path[0], 0)) == TRIT_OK;
    struct stat st;
    if (s == TRIT_OK && trit_path_join(src, sizeof src, a->run, TRIT_CKPT_TOKENIZER) == TRIT_OK && stat(src, &st) == 0)
        wrote[1] = (s = trit_file_copy(src, path[1])) == TRIT_OK;
    if (s == TRIT_OK && val[0]) wrote[2] = (s = trit_file_copy(val, path[2])) == TRIT_OK;
    if (s != TRIT_OK) {
        for (int i = 0; i < 3; i++)
            if (wrote[i]) unlink(path[i]);
        if (made_dir) rmdir(out);
    }
    return s;
}

static void report(const quant_args *a, const trit_quantize_report *r) {
    const double mb = 1e6, fp32 = 4.0 * (double)r->params_total;
    printf("quantized %lld tensors, %lld of %lld parameters, to %s (group %lld, %s%s%s)\n", (long long)r->tensors,
           (long long)r->params_quantized, (long long)r->params_total, a->format, (long long)a->spec.group_size,
           a->spec.scheme == TRIT_QSCHEME_AFFINE ? "affine" : "symmetric", a->spec.double_quant_block ? ", double quant" : "",
           a->spec.stochastic ? ", stochastic" : "");
    if (a->head) printf("  token embedding (tied head) to %s (group %lld)\n", a->head, (long long)a->head_spec.group_size);
    printf("  quantized tensors: %.2f MB, %.3f bits/param (codes + scales)\n", (double)r->bytes_quantized / mb,
           8.0 * (double)r->bytes_quantized / (double)(r->params_quantized ? r->params_quantized : 1));
    printf("  whole model:       %.2f MB -> %.2f MB (%.3f bits/param)\n", fp32 / mb, (double)r->bytes_total / mb,
           8.0 * (double)r->bytes_total / (double)r->params_total);
}

// The blocks in --format (and the embedding with --embeddings), then the embedding in --head's
// format: one report over both calls.
static trit_status quantize(const quant_args *a, trit_gpt *m, trit_quantize_report *r) {
    const unsigned which = TRIT_QUANTIZE_BLOCKS | (a->embeddings ? TRIT_QUANTIZE_EMBEDDING : 0);
    trit_status s = trit_gpt_quantize(m, &a->spec, which, r);
    if (s != TRIT_OK || !a->head) return s;
    trit_quantize_report h;
    if ((s = trit_gpt_quantize(m, &a->head_spec, TRIT_QUANTIZE_EMBEDDING, &h)) != TRIT_OK) return s;
    r->tensors += h.tensors;
    r->params_quantized += h.params_quantized;
    r->bytes_quantized += h.bytes_quantized;
    r->bytes_total = h.bytes_total;  // the second call counts the blocks as the first left them
    return TRIT_OK;
}

int trit_cli_quantize(int argc, char **argv) {
    quant_args a = {.batches = 20, .batch = 8};
    int rc = parse(argc, argv, &a);
    if (rc) return rc < 0 ? CLI_OK : rc;
    char out[TRIT_PATH_MAX], val[TRIT_PATH_MAX + 32];
    const char *sep = a.head ? "-" : "", *head = a.head ? a.head : "";
    if (snprintf(out, sizeof out, "%s", a.out ? a.out : "") >= (int)sizeof out ||
        (!a.out && snprintf(out, sizeof out, "%s-%s%s%s", a.run, a.format, sep, head) >= (int)sizeof out))
        return cli_error("quantize", CLI_USAGE, "output path too long");
    trit_gpt *m = trit_checkpoint_load_model(a.run, NULL);
    if (!m) return cli_fail("quantize", CLI_FAIL);
    find_val(&a, val, sizeof val);
    const int64_t T = trit_gpt_get_config(m)->seq_len;
    double before = NAN, after = NAN;
    trit_quantize_report r;
    rc = CLI_OK;
    // "Before" is RUN as `trit eval` sees it. A QAT run is quantized as trained, on a second copy:
    // quantizing starts from the latent weights, which a frozen copy no longer holds.
    if (a.batches > 0 && val[0]) {
        trit_train_config qc;
        const bool qat = cli_is_dir(a.run) && trit_train_run_info(a.run, &qc, NULL) == TRIT_OK && qc.qat != TRIT_QAT_OFF;
        trit_clear_error();
        trit_gpt *trained = qat ? trit_checkpoint_load_as_trained(a.run, NULL) : m;
        if (!trained || trit_eval_loss(trained, val, a.batches, a.batch, T, &before, NULL) != TRIT_OK)
            rc = cli_fail("quantize", CLI_FAIL);
        if (trained != m) trit_gpt_free(trained);
    }
    if (rc == CLI_OK && quantize(&a, m, &r) != TRIT_OK) rc = cli_fail("quantize", CLI_FAIL);
    if (rc == CLI_OK && a.batches > 0 && val[0] && trit_eval_loss(m, val, a.batches, a.batch, T, &after, NULL) != TRIT_OK)
        rc = cli_fail("quantize", CLI_FAIL);
    if (rc == CLI_OK && write_run(&a, out, m, val) != TRIT_OK) rc = cli_fail("quantize", CLI_FAIL);
    if (rc == CLI_OK) {
        report(&a, &r);
        if (isfinite(before))
            printf("  val loss:          before %.4f -> %s%s%s %.4f (%+.2f%%) over %lld batches of %lld x %lld from %s\n",
                   before, a.format, a.head ? "/" : "", head, after, 100.0 * (after - before) / before,
                   (long long)a.batches, (long long)a.batch, (long long)T, val);
        else
            printf("  val loss:          not measured (%s)\n", a.batches ? "no validation shard found: pass --data" : "--batches 0");
        printf("wrote %s\n", out);
    }
    trit_gpt_free(m);
    return rc;
}
