// GEMM speed at one CPU level: GFLOP/s of trit_kernel_gemm_f32, and its share of the machine's
// fp32 FMA peak at that level (the register-only loop of `trit bench --peak`, same threads), for
// square sizes and for the matmuls a GPT's training runs per linear layer (in, out): the forward
// X @ W^T (NT: M = B*T, N = out, K = in), the input gradient dY @ W (NN: N = in, K = out) and the
// weight gradient dY^T @ X (TN: M = out, N = in, K = B*T), for the "small" config's layers
// (C = 384, B*T = 4096) and GPT-2's (C = 768, B*T = 8192).
//
//   gemm_speed [--bf16] [ref|avx2|avx512|amx] [threads] [NN|NT|TN M N K]
//
// --bf16 times the mixed GEMM (kernels/gemm_lowp.h) on bf16 operands with an f32 C, as bf16
// training runs its matmuls, against the bf16 dot-product peak (vdpbf16ps where the CPU has it,
// else the fp32 FMA peak the widening kernel runs on). The level defaults to what TRIT_CPU or the CPU gives; threads default to trit_threads_get();
// with a shape, only that one is timed. Each shape reports the best of several timed runs
// (others may be using the machine), then a summary line gives the lowest and median share.
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include "trit/base.h"
#include "trit/bench.h"

#include "kernels/gemm.h"
#include "kernels/gemm_lowp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static bool bf16;  // --bf16: A and B point at bf16 values

static void gemm_call(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                      const float *B, int64_t ldb, float *C) {
    if (!bf16) {
        trit_kernel_gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, C, N, false);
        return;
    }
    const trit_gemm_operand a = {A, TRIT_BF16, lda, ta}, b = {B, TRIT_BF16, ldb, tb};
    trit_kernel_gemm_mixed(M, N, K, &a, &b, C, TRIT_F32, N, false, TRIT_MATMUL_MEDIUM, NULL);
}

// A: (M, K) or stored (K, M); B: (K, N) or stored (N, K); C: (M, N). Returns GFLOP/s.
static double time_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                        const float *B, float *C) {
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    double flop = 2.0 * (double)M * (double)N * (double)K;
    int reps = (int)(2e8 / flop) + 1;
    // Warm up for a while: packing buffers grow on the first call, and the OS needs a few
    // milliseconds to spread freshly started threads over the cores.
    for (double t0 = seconds(); seconds() - t0 < 0.1;) gemm_call(ta, tb, M, N, K, A, lda, B, ldb, C);
    double best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = seconds();
        for (int r = 0; r < reps; r++) gemm_call(ta, tb, M, N, K, A, lda, B, ldb, C);
        double t = (seconds() - t0) / reps;
        if (t < best) best = t;
    }
    return flop / best * 1e-9;
}

enum { MAX_SHAPES = 64 };
static double shares[MAX_SHAPES];
static int n_shares;

static void report(const char *label, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                   const float *A, const float *B, float *C, double peak) {
    double g = time_gemm(ta, tb, M, N, K, A, B, C);
    printf("%-7s %s%s  M=%5lld N=%5lld K=%5lld  %7.1f GFLOP/s", label, ta ? "T" : "N", tb ? "T" : "N",
           (long long)M, (long long)N, (long long)K, g);
    if (peak > 0) {
        printf("  %5.1f%% of peak", 100.0 * g * 1e9 / peak);
        if (n_shares < MAX_SHAPES) shares[n_shares++] = g * 1e9 / peak;
    }
    printf("\n");
    fflush(stdout);
}

static int compare_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_level(const char *s, trit_cpu_isa *out) {
    const trit_cpu_isa all[] = {TRIT_CPU_REF, TRIT_CPU_AVX2, TRIT_CPU_AVX512, TRIT_CPU_AMX};
    for (int i = 0; i < 4; i++)
        if (strcmp(s, trit_cpu_level_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    return -1;
}

// The peak loop of `kind` the dispatch picks at this level, on `threads` threads; 0 where none runs.
static double kind_peak(trit_peak_kind kind, int threads) {
    trit_peak_loop loops[TRIT_PEAK_MAX_LOOPS];
    int n = trit_bench_peak_loops(loops, TRIT_PEAK_MAX_LOOPS);
    for (int i = 0; i < n; i++) {
        double ops = 0;
        if (loops[i].kind == kind && loops[i].picked && trit_bench_peak_measure(i, threads, &ops) == TRIT_OK) {
            printf("peak: %s, %d threads, %.1f GFLOP/s\n", loops[i].label, threads, ops * 1e-9);
            return ops;
        }
    }
    return 0;
}

// bf16 dot products where the CPU has them, else the fp32 FMAs the widening kernel runs on.
static double fma_peak(int threads) {
    const double dot = bf16 ? kind_peak(TRIT_PEAK_BF16, threads) : 0;
    return dot > 0 ? dot : kind_peak(TRIT_PEAK_FP32, threads);
}

// One layer's three training matmuls, (in, out) with M = B*T rows of activations.
static void layer(int64_t bt, int64_t in, int64_t out, const float *A, const float *B, float *C, double peak) {
    report("gpt", false, true, bt, out, in, A, B, C, peak);   // Y = X @ W^T
    report("gpt", false, false, bt, in, out, A, B, C, peak);  // dX = dY @ W
    report("gpt", true, false, out, in, bt, A, B, C, peak);   // dW = dY^T @ X
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--bf16") == 0) {
        bf16 = true;
        argv[1] = argv[0];
        argc--, argv++;
    }
    if (argc > 1) {
        trit_cpu_isa level;
        if (parse_level(argv[1], &level) != 0) {
            fprintf(stderr, "unknown level '%s': use ref, avx2, avx512 or amx\n", argv[1]);
            return 2;
        }
        if (trit_cpu_set_level(level) != TRIT_OK) {
            fprintf(stderr, "%s\n", trit_last_error());
            return 1;
        }
    }
    if (argc > 2) trit_threads_set(atoi(argv[2]));
    int64_t one[3] = {0, 0, 0};
    bool ta = false, tb = false;
    if (argc == 7) {
        if (strlen(argv[3]) != 2 || !strchr("NT", argv[3][0]) || !strchr("NT", argv[3][1])) {
            fprintf(stderr, "transposes '%s': use NN, NT, TN or TT\n", argv[3]);
            return 2;
        }
        ta = argv[3][0] == 'T';
        tb = argv[3][1] == 'T';
        for (int i = 0; i < 3; i++) {
            one[i] = atoll(argv[4 + i]);
            if (one[i] < 1 || one[i] > 8192) {
                fprintf(stderr, "M, N and K must be 1 to 8192, not '%s'\n", argv[4 + i]);
                return 2;
            }
        }
    } else if (argc > 3) {
        fprintf(stderr, "usage: gemm_speed [--bf16] [ref|avx2|avx512|amx] [threads] [NN|NT|TN M N K]\n");
        return 2;
    }
    printf("%slevel %s, %d threads, L1d %zu KB, L2 %zu KB\n", bf16 ? "bf16 operands, " : "", trit_cpu_level_name(trit_cpu_level()), trit_threads_get(),
           trit_cpu_cache_bytes(1) >> 10, trit_cpu_cache_bytes(2) >> 10);
    const double peak = fma_peak(trit_threads_get());

    const int64_t most = 8192 * 3072;  // largest operand below, in elements
    float *A = trit_aligned_alloc(sizeof(float) * most);
    float *B = trit_aligned_alloc(sizeof(float) * most);
    float *C = trit_aligned_alloc(sizeof(float) * most);
    if (!A || !B || !C) {
        fprintf(stderr, "%s\n", trit_last_error());
        return 1;
    }
    trit_rng_fill_uniform(A, most, 1, 0, 0, -1.0f, 1.0f);
    trit_rng_fill_uniform(B, most, 1, 1, 0, -1.0f, 1.0f);
    if (bf16) {  // the first half of each buffer, as bf16 (C is free until the timing)
        trit_f32_to_bf16_n((uint16_t *)C, A, most);
        memcpy(A, C, sizeof(uint16_t) * most);
        trit_f32_to_bf16_n((uint16_t *)C, B, most);
        memcpy(B, C, sizeof(uint16_t) * most);
    }

    if (one[0]) {
        report("shape", ta, tb, one[0], one[1], one[2], A, B, C, peak);
    } else {
        for (int64_t n = 256; n <= 2048; n *= 2) report("square", false, false, n, n, n, A, B, C, peak);
        const int64_t small[4][2] = {{384, 1152}, {384, 384}, {384, 1536}, {1536, 384}};
        const int64_t gpt2[4][2] = {{768, 2304}, {768, 768}, {768, 3072}, {3072, 768}};
        for (int i = 0; i < 4; i++) layer(4096, small[i][0], small[i][1], A, B, C, peak);
        for (int i = 0; i < 4; i++) layer(8192, gpt2[i][0], gpt2[i][1], A, B, C, peak);
    }
    if (n_shares > 1) {
        qsort(shares, (size_t)n_shares, sizeof shares[0], compare_double);
        printf("share of the FMA peak over %d shapes: lowest %.1f%%, median %.1f%%\n", n_shares, 100 * shares[0],
               100 * shares[n_shares / 2]);
    }
    trit_aligned_free(A);
    trit_aligned_free(B);
    trit_aligned_free(C);
    return 0;
}
