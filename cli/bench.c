// trit bench: timed GPT training steps on named configs, each in its own child process so its peak
// RSS is its own; the machine's FMA peak (and trit's own f32 GEMM peak beside it) is measured in
// the same run for the MFU. --peak measures the machine's limits alone. --scaling times one
// config's model at growing T with the tokens per step held fixed, with flash and with the
// straightforward attention. Steps and figures are described in include/trit/bench.h.
#define _POSIX_C_SOURCE 200809L  // strtok_r
#include "cli.h"
#include "trit/bench.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *fp) {
    fprintf(fp,
            "usage: trit bench [--config baby|small|bpe50k|all] [--steps N] [--warmup N] [--threads N]\n"
            "                  [--precision fp32|bf16|fp16] [--accum N] [--json] [--scaling]\n"
            "                  [--ternary [--ternary-matmul int8|int8-fp32-dw|int8-fp32-dx|fake]]\n"
            "       trit bench --decode [--config gpt2|baby|small|bpe50k] [--format F[,F...]] [--tokens N]\n"
            "                  [--kv-cache f32|f16] [--threads N] [--json]\n"
            "       trit bench --peak [--threads N] [--json]\n\n"
            "Times the trainer's own step (forward and backward of each micro-batch, the loss scaler and\n"
            "the skip of a non-finite step, clip 1.0, AdamW) on random tokens and prints ms/step (median\n"
            "and mean), tokens/s, model FLOP/s (6 N + 12 L T C per token), MFU against the machine's\n"
            "FMA peak measured in the same run (and, labelled, against trit's own f32 GEMM peak), the\n"
            "memory report and the peak RSS. Every report starts with a line of the machine's peaks.\n\n"
            "  --config NAME   baby (L=4 H=4 C=128 T=64 B=12 V=65), small (L=6 H=6 C=384 T=256 B=16\n"
            "                  V=65), bpe50k (L=4 H=4 C=256 T=256 B=8 V=50304) or all; default baby\n"
            "  --steps N       timed steps, 1 to 1000000 (default 20; 3 with --scaling)\n"
            "  --warmup N      untimed steps first, 0 to 1000000 (default 3; 1 with --scaling)\n"
            "  --threads N     kernel threads, 0 to 4096 (default 0: TRIT_THREADS or all cores)\n"
            "  --precision P   fp32 (default), bf16 or fp16 compute policy (fp16 with the dynamic loss\n"
            "                  scaler); the GEMM peak is measured for the same precision (16-bit\n"
            "                  operands, fp32 accumulation)\n"
            "  --accum N       micro-batches per step (gradient accumulation), 1 to 1024 (default 1)\n"
            "  --ternary       BitNet ternary QAT of the block matrices (trit train --ternary), their\n"
            "                  matmuls as --ternary-matmul says: int8 (default: integer kernels for the\n"
            "                  forward and the input gradient, bf16 products for the weight gradient on\n"
            "                  AVX512-BF16 CPUs),\n"
            "                  int8-fp32-dw, int8-fp32-dx, or fake (fp32 GEMMs over fake-quantized\n"
            "                  operands)\n"
            "  --json          one JSON object per config on stdout: config, precision, ms_per_step,\n"
            "                  tokens_per_s, model_flops_per_s, mfu, fma_peak_flops_per_s, gemm_mfu,\n"
            "                  gemm_peak_flops_per_s, peak_rss_bytes (the memory reports go to stderr)\n"
            "  --peak          the machine's limits: sustained FMA rate of register-only loops for fp32\n"
            "                  (AVX-512 zmm and AVX2 ymm), bf16 (vdpbf16ps) and int8 (vpdpbusd, or\n"
            "                  vpmaddubsw + vpmaddwd) dot products, and the read bandwidth of a streaming\n"
            "                  sum over a buffer 8x the last-level cache, on 1 and N threads (--threads,\n"
            "                  default all cores); loops the CPU lacks are named with the feature;\n"
            "                  --json: one object per figure (what, kernel, threads, ops_per_s or\n"
            "                  bytes_per_s)\n"
            "  --scaling       ms/step and peak memory of the config's model for T = 64, 256, 1024,\n"
            "                  2048 at 8192 tokens per step, flash vs straightforward attention\n"
            "  --decode        batch-1 decoding with the KV cache of a random model (default config\n"
            "                  gpt2: L=12 H=12 C=768 T=1024 V=50257): prefill and decode tokens/s\n"
            "                  (means of 3 passes after a warm-up one), the weight bytes, the bytes\n"
            "                  a decode step reads (weights, one position row, the KV cache at the\n"
            "                  timed positions) and the share of the bandwidth bound (read GB/s /\n"
            "                  bytes per token) reached;\n"
            "                  --format fp32 (default), int8, int4, int2, nf4, fp8, fp8-e5m2,\n"
            "                  ternary, ternary-b3, or BLOCKS/HEAD (ternary/int8 is the default for\n"
            "                  ternary), or a comma list of those (default groups); --tokens N\n"
            "                  prompt and generated tokens each (128); --kv-cache f32 (default)\n"
            "                  or f16 keys and values; --json: config, format, kv_cache,\n"
            "                  decode_tokens_per_s, prefill_tokens_per_s, weight_bytes,\n"
            "                  bytes_per_token, read_bytes_per_s, bandwidth_fraction, peak_rss_bytes\n"
            "                  (each format's model is made decode-only, its quantized matrices a\n"
            "                  few rows at a time, so the peak is what decoding holds), threads\n");
}

typedef struct bench_args {
    char config[TRIT_BENCH_NAME_MAX];
    int64_t steps, warmup, threads, accum;
    bool json, scaling, decode, peak;
    trit_precision precision;
    char formats[128];
    int64_t tokens;
    trit_dtype kv_cache;
    bool ternary;
    trit_ternary_matmul ternary_matmul;
} bench_args;

static int parse(int argc, char **argv, bench_args *a) {
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"steps", required_argument, NULL, 's'},
        {"warmup", required_argument, NULL, 'w'}, {"threads", required_argument, NULL, 't'},
        {"json", no_argument, NULL, 'j'},         {"scaling", no_argument, NULL, 'S'},
        {"precision", required_argument, NULL, 'p'}, {"help", no_argument, NULL, 'h'},
        {"decode", no_argument, NULL, 'D'},       {"format", required_argument, NULL, 'f'},
        {"tokens", required_argument, NULL, 'T'}, {"kv-cache", required_argument, NULL, 'V'},
        {"accum", required_argument, NULL, 'a'},  {"peak", no_argument, NULL, 'P'},
        {"ternary", no_argument, NULL, 'R'},      {"ternary-matmul", required_argument, NULL, 'M'},
        {NULL, 0, NULL, 0},
    };
    memset(a, 0, sizeof *a);
    snprintf(a->formats, sizeof a->formats, "fp32");
    a->tokens = 128;
    a->kv_cache = TRIT_F32;
    a->accum = 1;
    a->ternary_matmul = TRIT_TERNARY_MATMUL_INT8;
    // Whether --steps / --warmup were given: their defaults depend on --scaling, which may come later.
    bool steps_set = false, warmup_set = false;
    cli_getopt_reset();
    int c;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            if (strlen(optarg) >= sizeof a->config)
                return cli_error("bench", CLI_USAGE, "--config expects baby, small, bpe50k or all, got '%s'", optarg);
            snprintf(a->config, sizeof a->config, "%s", optarg);
            break;
        case 's':
            if (!cli_int("bench", "--steps", optarg, 1, 1000000, &a->steps)) return CLI_USAGE;
            steps_set = true;
            break;
        case 'w':
            if (!cli_int("bench", "--warmup", optarg, 0, 1000000, &a->warmup)) return CLI_USAGE;
            warmup_set = true;
            break;
        case 't': if (!cli_int("bench", "--threads", optarg, 0, CLI_MAX_THREADS, &a->threads)) return CLI_USAGE; break;
        case 'p':
            if (trit_precision_parse(optarg, &a->precision) != TRIT_OK)
                return cli_error("bench", CLI_USAGE, "--precision expects fp32, bf16 or fp16, got '%s'", optarg);
            break;
        case 'j': a->json = true; break;
        case 'S': a->scaling = true; break;
        case 'D': a->decode = true; break;
        case 'P': a->peak = true; break;
        case 'f':
            if (strlen(optarg) >= sizeof a->formats) return cli_error("bench", CLI_USAGE, "--format list too long");
            snprintf(a->formats, sizeof a->formats, "%s", optarg);
            break;
        case 'T': if (!cli_int("bench", "--tokens", optarg, 1, 65536, &a->tokens)) return CLI_USAGE; break;
        case 'a': if (!cli_int("bench", "--accum", optarg, 1, 1024, &a->accum)) return CLI_USAGE; break;
        case 'V': if (!cli_kv_cache("bench", optarg, &a->kv_cache)) return CLI_USAGE; break;
        case 'R': a->ternary = true; break;
        case 'M':
            if (strcmp(optarg, "fake") == 0) a->ternary_matmul = TRIT_TERNARY_MATMUL_FAKE;
            else if (strcmp(optarg, "int8") == 0) a->ternary_matmul = TRIT_TERNARY_MATMUL_INT8;
            else if (strcmp(optarg, "int8-fp32-dx") == 0) a->ternary_matmul = TRIT_TERNARY_MATMUL_INT8_F32_DX;
            else if (strcmp(optarg, "int8-fp32-dw") == 0) a->ternary_matmul = TRIT_TERNARY_MATMUL_INT8_F32_DW;
            else return cli_error("bench", CLI_USAGE, "--ternary-matmul expects fake, int8, int8-fp32-dw or int8-fp32-dx, "
                                  "got '%s'", optarg);
            break;
        case 'h': usage(stdout); return -1;
        default: return cli_bad_option("bench", c, argv);
        }
    }
    if (optind < argc) return cli_error("bench", CLI_USAGE, "unexpected argument '%s' (see trit bench --help)", argv[optind]);
    if (!a->config[0]) snprintf(a->config, sizeof a->config, "%s", a->decode ? "gpt2" : "baby");
    if (a->decode + a->scaling + a->peak > 1)
        return cli_error("bench", CLI_USAGE, "--decode, --scaling and --peak are separate benchmarks: pass one");
    if (a->accum > 1 && (a->decode || a->scaling || a->peak))
        return cli_error("bench", CLI_USAGE, "--accum times training steps: leave it out with --%s",
                         a->decode ? "decode" : a->scaling ? "scaling" : "peak");
    if (!steps_set) a->steps = a->scaling ? 3 : 20;
    if (!warmup_set) a->warmup = a->scaling ? 1 : 3;
    if (a->scaling && strcmp(a->config, "all") == 0)
        return cli_error("bench", CLI_USAGE, "--scaling takes one model: pass --config baby, small or bpe50k");
    return CLI_OK;
}

static void print_result(const trit_bench_result *r) {
    printf("  %lld steps: %.2f ms/step median (%.2f mean, %.2f min), %.0f tokens/s, %.2f GFLOP/s model, "
           "MFU %.1f%% of the FMA peak (%.1f%% of the own-GEMM peak), peak RSS %.1f MB (report %.1f MB), "
           "loss %.3f -> %.3f\n",
           (long long)r->steps, r->ms_median, r->ms_mean, r->ms_min, r->tokens_per_s, r->model_flops_per_s / 1e9,
           100.0 * r->mfu, 100.0 * r->gemm_mfu, (double)r->peak_rss_bytes / 1e6, (double)r->memory.total / 1e6,
           r->loss_first, r->loss_last);
    if (r->accum > 1) printf("  %lld micro-batches of %lld x %lld tokens per step\n", (long long)r->accum,
                             (long long)r->batch, (long long)r->seq);
    if (!isnan(r->loss_scale))
        printf("  loss scale %g after the last step, %lld steps skipped\n", r->loss_scale, (long long)r->skipped);
}

static void print_table(const trit_bench_result *rs, int n) {
    printf("\n%-8s %8s %8s %10s %12s %8s %9s %8s %10s\n", "config", "params", "ms/step", "tokens/s", "GFLOP/s", "MFU",
           "GEMM-MFU", "threads", "peak MB");
    for (int i = 0; i < n; i++) {
        const trit_bench_result *r = &rs[i];
        printf("%-8s %7.2fM %8.2f %10.0f %12.2f %7.1f%% %8.1f%% %8d %10.1f\n", r->config, (double)r->params / 1e6,
               r->ms_median, r->tokens_per_s, r->model_flops_per_s / 1e9, 100.0 * r->mfu, 100.0 * r->gemm_mfu,
               r->threads, (double)r->peak_rss_bytes / 1e6);
    }
    printf("MFU: model FLOP/s over the FMA peak above; GEMM-MFU: over trit's own f32 GEMM peak\n");
}

// The machine's peaks on 1 and `threads` threads, as one line on fp (in a child process when
// `isolated`: a parent that forks later must not have started OpenMP threads).
static int print_peaks(FILE *fp, int threads, bool isolated, trit_peaks *p) {
    if ((isolated ? trit_bench_peaks_isolated(threads, p) : trit_bench_peaks(threads, p)) != TRIT_OK)
        return cli_fail("bench", CLI_FAIL);
    char line[512];
    trit_bench_peaks_line(p, line, sizeof line);
    fprintf(fp, "%s\n", line);
    fflush(fp);
    return CLI_OK;
}

static int run_configs(const bench_args *a) {
    trit_bench_config list[8];
    int n = 0;
    for (int i = 0; i < trit_bench_num_configs() && n < 8; i++) {
        const trit_bench_config *c = trit_bench_config_at(i);
        if (strcmp(a->config, "all") == 0 || strcmp(a->config, c->name) == 0) list[n++] = *c;
    }
    if (n == 0) {
        trit_bench_config unused;
        trit_bench_config_find(a->config, &unused);
        return cli_fail("bench", CLI_USAGE);
    }
    FILE *log = a->json ? stderr : stdout;
    trit_peaks peaks;
    if (print_peaks(log, (int)a->threads, true, &peaks) != CLI_OK) return CLI_FAIL;
    const double fma = trit_bench_peak_for(&peaks, a->precision);
    fprintf(log, "MFU is against %.1f GFLOP/s (%s, %d threads)\n", fma / 1e9,
            a->precision == TRIT_PRECISION_BF16 && fma > peaks.ops_per_s[TRIT_PEAK_FP32][1] ? peaks.kernel[TRIT_PEAK_BF16]
                                                                                            : peaks.kernel[TRIT_PEAK_FP32],
            peaks.threads);
    double peak = 0;
    if (trit_bench_gemm_peak_isolated(a->precision, (int)a->threads, 5, &peak) != TRIT_OK)
        return cli_fail("bench", CLI_FAIL);
    fprintf(log, "%s GEMM peak: %.1f GFLOP/s (best of 5 runs at n = 1024 and 2048)\n",
            a->precision == TRIT_PRECISION_FP32 ? "f32" : a->precision == TRIT_PRECISION_BF16 ? "bf16" : "f16",
            peak / 1e9);
    trit_bench_result rs[8];
    trit_bench_options o = {.steps = a->steps, .warmup = a->warmup, .accum = a->accum, .threads = (int)a->threads,
                            .seed = 1, .log = log, .precision = a->precision, .ternary = a->ternary,
                            .ternary_matmul = a->ternary_matmul};
    if (a->ternary)
        fprintf(log, "ternary QAT (BitNet b1.58), block matmuls: %s\n",
                a->ternary_matmul == TRIT_TERNARY_MATMUL_FAKE ? "fp32 over fake-quantized operands"
                : a->ternary_matmul == TRIT_TERNARY_MATMUL_INT8 ? "integer kernels, forward and input gradient"
                                                                : "integer kernels, forward; fp32 input gradient");
    for (int i = 0; i < n; i++) {
        if (trit_bench_run_isolated(&list[i], &o, &rs[i]) != TRIT_OK) return cli_fail("bench", CLI_FAIL);
        trit_bench_set_peak(&rs[i], peak);
        trit_bench_set_fma_peak(&rs[i], fma);
        if (a->json) {
            char line[1024];
            trit_bench_json(&rs[i], line, sizeof line);
            printf("%s\n", line);
        } else {
            print_result(&rs[i]);
        }
        fflush(stdout);
    }
    if (!a->json) print_table(rs, n);
    return CLI_OK;
}

enum { SCALING_TOKENS = 8192, SCALING_ROWS = 4 };

static int run_scaling(const bench_args *a) {
    trit_bench_config base;
    if (trit_bench_config_find(a->config, &base) != TRIT_OK) return cli_fail("bench", CLI_USAGE);
    static const int64_t Ts[SCALING_ROWS] = {64, 256, 1024, 2048};
    trit_peaks peaks;
    if (print_peaks(stdout, (int)a->threads, true, &peaks) != CLI_OK) return CLI_FAIL;
    printf("scaling: %s model (L=%lld H=%lld C=%lld V=%lld), %d tokens per step, %lld timed steps\n", base.name,
           (long long)base.model.n_layer, (long long)base.model.n_head, (long long)base.model.n_embd,
           (long long)base.model.vocab_size, SCALING_TOKENS, (long long)a->steps);
    printf("%6s %5s | %14s %9s %9s | %14s %9s %9s\n", "T", "B", "flash ms/step", "peak MB", "arena MB",
           "naive ms/step", "peak MB", "arena MB");
    trit_bench_options o = {.steps = a->steps, .warmup = a->warmup, .threads = (int)a->threads, .seed = 1,
                            .precision = a->precision};
    for (int i = 0; i < SCALING_ROWS; i++) {
        trit_bench_config c = base;
        c.model.seq_len = Ts[i];
        c.batch = SCALING_TOKENS / Ts[i];
        snprintf(c.name, sizeof c.name, "T%lld", (long long)Ts[i]);
        trit_bench_result r[2];
        for (int naive = 0; naive < 2; naive++) {
            c.model.naive_attention = naive != 0;
            if (trit_bench_run_isolated(&c, &o, &r[naive]) != TRIT_OK) return cli_fail("bench", CLI_FAIL);
        }
        printf("%6lld %5lld | %14.2f %9.1f %9.1f | %14.2f %9.1f %9.1f\n", (long long)Ts[i], (long long)c.batch,
               r[0].ms_median, (double)r[0].peak_rss_bytes / 1e6, (double)r[0].memory.arena / 1e6, r[1].ms_median,
               (double)r[1].peak_rss_bytes / 1e6, (double)r[1].memory.arena / 1e6);
        fflush(stdout);
    }
    return CLI_OK;
}

static int run_decode(const bench_args *a) {
    char list[sizeof a->formats], *save = NULL;
    snprintf(list, sizeof list, "%s", a->formats);
    trit_gpt_config cfg;
    if (trit_bench_decode_config(a->config, &cfg) != TRIT_OK) return cli_fail("bench", CLI_USAGE);
    trit_peaks peaks;
    if (print_peaks(a->json ? stderr : stdout, (int)a->threads, false, &peaks) != CLI_OK) return CLI_FAIL;
    if (!a->json)
        printf("decode: %s (L=%lld H=%lld C=%lld T=%lld V=%lld), batch 1, %s KV cache; bound = read %.1f GB/s "
               "(%d threads) / MB per token\n%-9s %12s %12s %10s %9s %9s %8s %8s\n",
               a->config, (long long)cfg.n_layer, (long long)cfg.n_head, (long long)cfg.n_embd, (long long)cfg.seq_len,
               (long long)cfg.vocab_size, trit_dtype_name(a->kv_cache), peaks.read_bytes_per_s[1] / 1e9, peaks.threads,
               "format", "prefill t/s", "decode t/s", "weight MB", "MB/token", "of bound", "peak MB", "threads");
    for (char *f = strtok_r(list, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        trit_decode_result r;
        if (trit_bench_decode(a->config, f, a->kv_cache, a->tokens, (int)a->threads, &r) != TRIT_OK)
            return cli_fail("bench", CLI_FAIL);
        trit_bench_decode_set_bandwidth(&r, peaks.read_bytes_per_s[1]);
        if (a->json) {
            char line[640];
            trit_bench_decode_json(&r, line, sizeof line);
            printf("%s\n", line);
        } else {
            printf("%-9s %12.1f %12.1f %10.1f %9.2f %8.1f%% %8.1f %8d\n", r.format, r.prefill_tokens_per_s,
                   r.decode_tokens_per_s, (double)r.weight_bytes / 1e6, r.bytes_per_token / 1e6,
                   100.0 * r.bandwidth_fraction, (double)r.peak_rss_bytes / 1e6, r.threads);
        }
        fflush(stdout);
    }
    return CLI_OK;
}

static void peak_figure(const bench_args *a, const char *what, const char *kernel, int threads, double rate,
                        bool bytes) {
    if (a->json)
        printf("{\"what\":\"%s\",\"kernel\":\"%s\",\"threads\":%d,\"%s\":%.6g}\n", what, kernel, threads,
               bytes ? "bytes_per_s" : "ops_per_s", rate);
    else
        printf("  %-28s %2d thread%s %9.1f %s\n", what, threads, threads == 1 ? " " : "s", rate / 1e9,
               bytes ? "GB/s" : strstr(what, "int8") ? "GOP/s" : "GFLOP/s");
    fflush(stdout);
}

// Every loop of the table the CPU has, on 1 and N threads, then the read bandwidth: the SIMD
// loops, and the portable one of a kind only where it is the kind's peak (no SIMD loop usable).
static int run_peak(const bench_args *a) {
    const int threads = a->threads > 0 ? (int)a->threads : trit_threads_get();
    const int counts[2] = {1, threads}, n_counts = threads > 1 ? 2 : 1;
    trit_peak_loop loops[TRIT_PEAK_MAX_LOOPS];
    const int n = trit_bench_peak_loops(loops, TRIT_PEAK_MAX_LOOPS);
    if (!a->json)
        printf("peak: register-only loops (12 accumulator chains; 2 operations per product) and a streaming read, "
               "cpu level %s\n", trit_cpu_level_name(trit_cpu_level()));
    for (int i = 0; i < n; i++) {
        if (!loops[i].simd && !loops[i].picked) continue;
        if (!loops[i].usable) {
            if (!a->json) printf("  %-28s skipped: needs %s\n", loops[i].label, loops[i].missing);
            continue;
        }
        for (int k = 0; k < n_counts; k++) {
            double rate;
            if (trit_bench_peak_measure(i, counts[k], &rate) != TRIT_OK) return cli_fail("bench", CLI_FAIL);
            peak_figure(a, loops[i].label, loops[i].kernel, counts[k], rate, false);
        }
    }
    for (int k = 0; k < n_counts; k++) {
        double rate;
        if (trit_bench_read_bandwidth(counts[k], &rate) != TRIT_OK) return cli_fail("bench", CLI_FAIL);
        peak_figure(a, "read (streaming sum)", "read", counts[k], rate, true);
    }
    return CLI_OK;
}

int trit_cli_bench(int argc, char **argv) {
    bench_args a;
    int rc = parse(argc, argv, &a);
    if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
    return a.peak ? run_peak(&a) : a.decode ? run_decode(&a) : a.scaling ? run_scaling(&a) : run_configs(&a);
}
