// trit info: what a file or run directory holds. A run directory: its config and step, then its
// model. A safetensors file: metadata, each tensor's dtype and shape, parameter count and bytes.
// Also training-state, tokenizer and token-shard files, told apart by their magic numbers.
// `trit info --cpu`: the CPU level and features the kernels dispatch on.
#include "cli.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void usage(FILE *fp) {
    fprintf(fp, "usage: trit info FILE|DIR\n       trit info --cpu\n\n"
                "Describes a run directory, a .safetensors file (config, tensors with dtype and shape,\n"
                "parameter count and bytes), a train_state.bin, a tokenizer.bin or a token shard.\n"
                "--cpu: the CPU level this machine has, the one kernels run at (TRIT_CPU lowers it)\n"
                "and the features they may use.\n");
}

static int info_cpu(void) {
    static const struct { uint32_t bit; const char *name; } feats[] = {
        {TRIT_FEAT_AVX2, "avx2+fma+f16c"}, {TRIT_FEAT_AVX512, "avx512"},     {TRIT_FEAT_AVX512_BF16, "avx512_bf16"},
        {TRIT_FEAT_AVX512_VNNI, "avx512_vnni"}, {TRIT_FEAT_AMX_BF16, "amx_bf16"}, {TRIT_FEAT_AMX_INT8, "amx_int8"},
    };
    printf("detected level: %s\ndispatch level: %s\n", trit_cpu_level_name(trit_cpu_detected_level()),
           trit_cpu_level_name(trit_cpu_level()));
    const uint32_t have = trit_cpu_detected_features(), usable = trit_cpu_usable_features();
    printf("features:");
    for (size_t i = 0; i < sizeof feats / sizeof feats[0]; i++)
        if (have & feats[i].bit) printf(" %s%s", feats[i].name, usable & feats[i].bit ? "" : " (not used)");
    printf("%s\n", have ? "" : " none (the portable kernels)");
    return CLI_OK;
}

static int info_safetensors(const char *path) {
    trit_safetensors *f = trit_safetensors_open(path);
    if (!f) return cli_fail("info", CLI_FAIL);
    int64_t n = trit_safetensors_count(f), params = 0, bytes = 0;
    for (int64_t i = 0; i < n; i++) {
        const trit_safetensors_info *t = trit_safetensors_at(f, i);
        int64_t numel = 1;
        for (int d = 0; d < t->ndim; d++) numel *= t->shape[d];
        params += numel;
        bytes += t->end - t->begin;
    }
    printf("%s: safetensors, %lld tensors, %lld parameters, %lld bytes of data (%.2f MB)\n", path, (long long)n,
           (long long)params, (long long)bytes, (double)bytes / 1e6);
    int64_t nm = trit_safetensors_meta_count(f);
    if (nm > 0) printf("metadata:\n");
    for (int64_t i = 0; i < nm; i++) {
        const char *k, *v;
        if (trit_safetensors_meta_at(f, i, &k, &v) == TRIT_OK) printf("  %s: %s\n", k, v);
    }
    printf("tensors:\n  %-36s %-5s %s\n", "name", "dtype", "shape");
    for (int64_t i = 0; i < n; i++) {
        const trit_safetensors_info *t = trit_safetensors_at(f, i);
        char shape[160] = "(";
        for (int d = 0; d < t->ndim; d++) {
            size_t k = strlen(shape);
            snprintf(shape + k, sizeof shape - k, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
        }
        strncat(shape, ")", sizeof shape - strlen(shape) - 1);
        printf("  %-36s %-5s %s\n", t->name, t->dtype_name, shape);
    }
    trit_safetensors_close(f);
    return CLI_OK;
}

static int info_state(const char *path) {
    trit_train_config cfg;
    int64_t step = 0;
    if (trit_train_run_info(path, &cfg, &step) != TRIT_OK) return cli_fail("info", CLI_FAIL);
    const trit_train_task task = trit_train_config_task(&cfg);
    printf("%s: training state at step %lld of %lld (%s)\nconfig:\n", path, (long long)step, (long long)cfg.steps,
           task == TRIT_TASK_ADDITION ? "addition task" : task == TRIT_TASK_EMBED ? "sentence embeddings" : "text");
    trit_train_config_print(&cfg, stdout);
    return CLI_OK;
}

static int info_tokenizer(const char *path) {
    trit_tokenizer *tok = trit_tokenizer_load(path);
    if (!tok) return cli_fail("info", CLI_FAIL);
    printf("%s: %s tokenizer, %d tokens", path, trit_tokenizer_kind_name(trit_tokenizer_get_kind(tok)),
           trit_tokenizer_vocab_size(tok));
    if (trit_tokenizer_get_kind(tok) == TRIT_TOKENIZER_BPE) printf(" (%d merges)", trit_tokenizer_num_merges(tok));
    printf("\n");
    trit_tokenizer_free(tok);
    return CLI_OK;
}

static int info_shard(const char *path) {
    int64_t n = 0;
    if (trit_shard_read_count(path, &n) != TRIT_OK) return cli_fail("info", CLI_FAIL);
    printf("%s: token shard (llm.c layout, version %d), %lld tokens\n", path, TRIT_SHARD_VERSION, (long long)n);
    return CLI_OK;
}

static int info_dir(const char *dir) {
    char p[TRIT_PATH_MAX + 32];
    struct stat st;
    int rc = CLI_OK, found = 0;
    if (trit_path_join(p, sizeof p, dir, TRIT_CKPT_STATE) == TRIT_OK && stat(p, &st) == 0) {
        found++;
        rc = info_state(p);
    }
    const char *others[] = {TRIT_CKPT_TOKENIZER, TRIT_CKPT_MODEL};
    for (int i = 0; i < 2 && rc == CLI_OK; i++) {
        if (trit_path_join(p, sizeof p, dir, others[i]) != TRIT_OK || stat(p, &st) != 0) continue;
        found++;
        rc = i == 0 ? info_tokenizer(p) : info_safetensors(p);
    }
    if (!found)
        return cli_error("info", CLI_FAIL, "'%s' holds no %s, %s or %s: it is not a run directory", dir,
                         TRIT_CKPT_STATE, TRIT_CKPT_MODEL, TRIT_CKPT_TOKENIZER);
    return rc;
}

int trit_cli_info(int argc, char **argv) {
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {"cpu", no_argument, NULL, 'c'},
                                         {NULL, 0, NULL, 0}};
    cli_getopt_reset();
    int c;
    bool cpu = false;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == 'h') {
            usage(stdout);
            return CLI_OK;
        }
        if (c == 'c') {
            cpu = true;
            continue;
        }
        return cli_bad_option("info", c, argv);
    }
    if (cpu && optind == argc) return info_cpu();
    if (cpu) return cli_error("info", CLI_USAGE, "--cpu takes no FILE or DIR");
    if (optind + 1 != argc) return cli_error("info", CLI_USAGE, "expects one FILE or DIR (see trit info --help)");
    const char *path = argv[optind];
    struct stat st;
    if (stat(path, &st) != 0) return cli_error("info", CLI_FAIL, "cannot open '%s': no such file or directory", path);
    if (S_ISDIR(st.st_mode)) return info_dir(path);
    uint8_t head[8] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp) return cli_error("info", CLI_FAIL, "cannot open '%s'", path);
    size_t got = fread(head, 1, sizeof head, fp);
    fclose(fp);
    if (got >= 8 && memcmp(head, "TRITSTAT", 8) == 0) return info_state(path);
    if (got >= 4 && memcmp(head, "TTOK", 4) == 0) return info_tokenizer(path);
    uint32_t magic = (uint32_t)head[0] | (uint32_t)head[1] << 8 | (uint32_t)head[2] << 16 | (uint32_t)head[3] << 24;
    if (got >= 4 && magic == TRIT_SHARD_MAGIC) return info_shard(path);
    return info_safetensors(path);
}
