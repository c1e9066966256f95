// Integer matmul speed: y = x W^T for W in qint8, qint4 and ternary codes (per-channel scales)
// and x quantized per token to int8, against trit's f32 GEMM on the same shapes, in GOP/s
// (2 M N K operations per product; the activation quantization is timed separately). Where the
// CPU has 16-row panel kernels (qgemm_panel.h), a second row per shape times them on the same
// codes (for a dtype without one there, qint8 on AVX2, the rows kernel again).
// Scales per channel, and int4 also in groups of 128 ("int4/128").
//
//   qgemm_speed [ref|avx2|avx512|amx] [threads]
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include "trit/base.h"

#include "kernels/gemm.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_panel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct shape {
    int64_t M, N, K;
} shape;

// Best time of 5 trials of `reps` calls, after 0.1 s of warm-up.
#define BEST_TIME(call, flop, out)                                       \
    do {                                                                 \
        const int reps_ = (int)(2e8 / (flop)) + 1;                      \
        for (double t0_ = seconds(); seconds() - t0_ < 0.1;) call;      \
        double best_ = 1e30;                                             \
        for (int tr_ = 0; tr_ < 5; tr_++) {                              \
            const double t0_ = seconds();                                \
            for (int r_ = 0; r_ < reps_; r_++) call;                     \
            const double t_ = (seconds() - t0_) / reps_;                 \
            if (t_ < best_) best_ = t_;                                  \
        }                                                                \
        (out) = best_;                                                   \
    } while (0)

int main(int argc, char **argv) {
    if (argc > 1) {
        const trit_cpu_isa all[] = {TRIT_CPU_REF, TRIT_CPU_AVX2, TRIT_CPU_AVX512, TRIT_CPU_AMX};
        int found = 0;
        for (int i = 0; i < 4; i++)
            if (strcmp(argv[1], trit_cpu_level_name(all[i])) == 0) found = trit_cpu_set_level(all[i]) == TRIT_OK;
        if (!found) {
            fprintf(stderr, "level '%s' unknown or not on this CPU: use ref, avx2, avx512 or amx\n", argv[1]);
            return 2;
        }
    }
    if (argc > 2) trit_threads_set(atoi(argv[2]));
    printf("level %s, %d threads; GOP/s (2 M N K per product), ratio to f32\n", trit_cpu_level_name(trit_cpu_level()),
           trit_threads_get());
    const shape shapes[] = {{1, 2304, 768}, {1, 3072, 768}, {128, 3072, 768}, {1024, 1024, 1024}, {2048, 2048, 2048}};
    const int64_t most = 2048 * 3072;
    float *x = trit_aligned_alloc(sizeof(float) * most), *w = trit_aligned_alloc(sizeof(float) * most);
    float *y = trit_aligned_alloc(sizeof(float) * most), *ws = trit_aligned_alloc(sizeof(float) * most / 64);
    uint8_t *codes = trit_aligned_alloc((size_t)most);
    trit_qact a = {trit_aligned_alloc((size_t)most), trit_aligned_alloc(sizeof(float) * 4096),
                   trit_aligned_alloc(sizeof(int32_t) * most / 64)};
    if (!x || !w || !y || !ws || !codes || !a.q || !a.scale || !a.gsum) return 1;
    trit_rng_fill_uniform(x, most, 1, 1, 0, -1, 1);
    trit_rng_fill_uniform(w, most, 1, 2, 0, -1, 1);
    for (int64_t i = 0; i < most; i++) codes[i] = (uint8_t)(trit_rng_u32(1, 3, (uint64_t)i) & 0x77);
    for (int64_t i = 0; i < most / 64; i++) ws[i] = 0.01f;
    printf("%5s %5s %5s %6s | %8s | %8s %6s | %8s %6s | %8s %6s | %8s %6s | %10s\n", "M", "N", "K", "layout", "f32",
           "int8", "x", "int4", "x", "int4/128", "x", "ternary", "x", "act quant");
    const trit_dtype dts[4] = {TRIT_QINT8, TRIT_QINT4, TRIT_QINT4, TRIT_TERNARY};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t M = shapes[s].M, N = shapes[s].N, K = shapes[s].K;
        const double flop = 2.0 * (double)M * (double)N * (double)K;
        double tf, tq, t[2][4];
        BEST_TIME(trit_kernel_gemm_f32(false, true, M, N, K, x, K, w, K, y, N, false), flop, tf);
        BEST_TIME(trit_qact_quantize(x, M, K, K, TRIT_QINT8, &a), 4.0 * (double)M * (double)K, tq);
        const int layouts = trit_qpanels_preferred(TRIT_QINT4) ? 2 : 1;
        for (int d = 0; d < 4; d++) {
            const int64_t G = d == 2 ? 128 : K;
            trit_qact_quantize(x, M, K, G, dts[d], &a);
            BEST_TIME(trit_kernel_qgemm(dts[d], M, N, K, G, &a, codes, ws, y, N), flop, t[0][d]);
            t[1][d] = t[0][d];  // a dtype without a panel kernel here keeps the rows
            if (layouts < 2 || !trit_qpanels_preferred(dts[d])) continue;
            trit_qpanels p;
            if (trit_qpanels_pack(dts[d], N, K, G, codes, ws, &p) != TRIT_OK) return 1;
            trit_qpanels_quantize(&p, x, M, &a);
            BEST_TIME(trit_kernel_qgemm_panels(&p, M, &a, y, N, NULL), flop, t[1][d]);
            trit_qpanels_free(&p);
        }
        for (int l = 0; l < layouts; l++) {
            printf("%5lld %5lld %5lld %6s | %8.1f", (long long)M, (long long)N, (long long)K, l ? "panels" : "rows",
                   flop / tf * 1e-9);
            for (int d = 0; d < 4; d++) printf(" | %8.1f %5.2fx", flop / t[l][d] * 1e-9, tf / t[l][d]);
            printf(" | %8.1f us\n", tq * 1e6);
        }
        fflush(stdout);
    }
    return 0;
}
