// GEMM speed at one CPU level: GFLOP/s of trit_kernel_gemm_f32 for square sizes and for the
// matmul shapes of a small GPT (M = B*T = 4096 rows, K and N from {384, 1152, 1536}).
//
//   gemm_speed [ref|avx2|avx512|amx] [threads]
//
// The level defaults to what TRIT_CPU or the CPU gives; threads default to trit_threads_get().
// Each shape reports the best of several timed runs (others may be using the machine).
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include "trit/base.h"

#include "kernels/gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// A: (M, K) or stored (K, M); B: (K, N) or stored (N, K); C: (M, N). Returns GFLOP/s.
static double time_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A,
                        const float *B, float *C) {
    int64_t lda = ta ? M : K, ldb = tb ? K : N;
    double flop = 2.0 * (double)M * (double)N * (double)K;
    int reps = (int)(2e8 / flop) + 1;
    // Warm up for a while: packing buffers grow on the first call, and the OS needs a few
    // milliseconds to spread freshly started threads over the cores.
    for (double t0 = seconds(); seconds() - t0 < 0.1;)
        trit_kernel_gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, C, N, false);
    double best = 1e30;
    for (int trial = 0; trial < 5; trial++) {
        double t0 = seconds();
        for (int r = 0; r < reps; r++)
            trit_kernel_gemm_f32(ta, tb, M, N, K, A, lda, B, ldb, C, N, false);
        double t = (seconds() - t0) / reps;
        if (t < best) best = t;
    }
    return flop / best * 1e-9;
}

static void report(const char *label, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                   const float *A, const float *B, float *C) {
    double g = time_gemm(ta, tb, M, N, K, A, B, C);
    printf("%-7s %s%s  M=%5lld N=%5lld K=%5lld  %7.1f GFLOP/s\n", label, ta ? "T" : "N",
           tb ? "T" : "N", (long long)M, (long long)N, (long long)K, g);
    fflush(stdout);
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

int main(int argc, char **argv) {
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
    printf("level %s, %d threads\n", trit_cpu_level_name(trit_cpu_level()), trit_threads_get());

    const int64_t most = 4096 * 2048;  // largest operand below, in elements
    float *A = trit_aligned_alloc(sizeof(float) * most);
    float *B = trit_aligned_alloc(sizeof(float) * most);
    float *C = trit_aligned_alloc(sizeof(float) * most);
    if (!A || !B || !C) {
        fprintf(stderr, "%s\n", trit_last_error());
        return 1;
    }
    trit_rng_fill_uniform(A, most, 1, 0, 0, -1.0f, 1.0f);
    trit_rng_fill_uniform(B, most, 1, 1, 0, -1.0f, 1.0f);

    for (int64_t n = 256; n <= 2048; n *= 2) report("square", false, false, n, n, n, A, B, C);
    const int64_t dims[] = {384, 1152, 1536};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) report("gpt", false, false, 4096, dims[j], dims[i], A, B, C);
    // The backward matmuls: dX = dY @ W (NN above), dW = dY^T @ X (TN), and X @ W^T (NT).
    for (int i = 0; i < 3; i++) {
        report("gpt", false, true, 4096, dims[i], dims[(i + 1) % 3], A, B, C);
        report("gpt", true, false, dims[i], dims[(i + 1) % 3], 4096, A, B, C);
    }
    trit_aligned_free(A);
    trit_aligned_free(B);
    trit_aligned_free(C);
    return 0;
}
