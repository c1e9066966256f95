// Speed of a linear layer over a frozen quantized weight against the same layer over an f32
// weight: a graph x (M, K) -> linear(x, W) (N outputs) -> sum, x trainable (so backward computes
// dx = dy W; W frozen, so no dW in any variant). Forward and backward are timed apart, the
// variants in turn within each trial (others may be using the machine), best of the trials.
//
//   qlinear_speed [M K N] [threads]     (default: the gpt2 MLP shape 512 768 3072)
//
// Variants: f32 W; qint4 (groups of 128) and nf4 (absmax blocks of 64, QLoRA's), read by
// trit_linear through decoded chunks; the same two through trit_qlinear (inference: qint4 on the
// int8-activation kernels, nf4 above 4 rows on the decoded path), forward only.
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include "trit/trit.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct variant {
    const char *name;
    trit_tensor *w;
    bool qlinear;
    trit_graph *g;
    double fwd, bwd;  // best seconds
} variant;

static int build(variant *v, trit_tensor *x) {
    v->g = trit_graph_new(TRIT_F32);
    trit_tensor *y = v->qlinear ? trit_qlinear(v->g, x, v->w, NULL) : trit_linear(v->g, x, v->w, NULL);
    trit_tensor *loss = trit_sum(v->g, y, 0, NULL, false);
    if (!loss || trit_graph_compile(v->g, v->qlinear ? NULL : loss) != TRIT_OK) {
        fprintf(stderr, "qlinear_speed: %s: %s\n", v->name, trit_last_error());
        return 2;
    }
    v->fwd = v->bwd = 1e30;
    return 0;
}

static void trial(variant *v) {
    double t0 = seconds();
    trit_graph_forward(v->g);
    double t1 = seconds();
    if (t1 - t0 < v->fwd) v->fwd = t1 - t0;
    if (v->qlinear) return;
    trit_graph_backward(v->g);
    double t2 = seconds();
    if (t2 - t1 < v->bwd) v->bwd = t2 - t1;
}

static trit_tensor *quantized(const trit_tensor *w, trit_dtype dt, int64_t group) {
    trit_quant_spec s = trit_quant_spec_default(dt);
    s.group_size = group;
    trit_tensor *q = trit_quantize(w, &s);
    if (q) q->flags |= TRIT_FLAG_PARAM | TRIT_FLAG_FROZEN;
    return q;
}

int main(int argc, char **argv) {
    int64_t M = 512, K = 768, N = 3072;
    if (argc >= 4) M = atoll(argv[1]), K = atoll(argv[2]), N = atoll(argv[3]);
    if (argc == 2 || argc == 5) omp_set_num_threads(atoi(argv[argc - 1]));
    if (argc == 3 || argc > 5 || M <= 0 || K <= 0 || N <= 0 || K % 128 != 0) {
        fprintf(stderr, "usage: qlinear_speed [M K N] [threads]  (positive sizes, K a multiple of 128)\n");
        return 2;
    }
    trit_tensor *x = trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){M, K}, "x");
    trit_tensor *w = trit_tensor_new(TRIT_F32, 2, (int64_t[]){N, K});
    if (!x || !w) return 2;
    trit_tensor_fill_normal(x, 0, 1, 1, 1);
    trit_tensor_fill_normal(w, 0, 0.02, 1, 2);
    w->flags |= TRIT_FLAG_PARAM | TRIT_FLAG_FROZEN;
    trit_tensor *q4 = quantized(w, TRIT_QINT4, 128), *nf4 = quantized(w, TRIT_NF4, 64);
    if (!q4 || !nf4) return 2;
    variant vs[] = {{"f32", w, false, NULL, 0, 0},   {"qint4 g128", q4, false, NULL, 0, 0},
                    {"nf4 g64", nf4, false, NULL, 0, 0}, {"qint4 g128 qlinear", q4, true, NULL, 0, 0},
                    {"nf4 g64 qlinear", nf4, true, NULL, 0, 0}};
    const int nv = (int)(sizeof vs / sizeof vs[0]);
    for (int i = 0; i < nv; i++)
        if (build(&vs[i], x)) return 2;
    for (int i = 0; i < nv; i++) trial(&vs[i]);  // warm up: packing buffers, thread start
    for (int t = 0; t < 40; t++)
        for (int i = 0; i < nv; i++) trial(&vs[i]);
    printf("linear x (%lld, %lld) W (%lld, %lld), %d threads, best of 40\n", (long long)M, (long long)K, (long long)N,
           (long long)K, omp_get_max_threads());
    for (int i = 0; i < nv; i++) {
        printf("  %-20s forward %7.2f ms (%.2fx f32)", vs[i].name, vs[i].fwd * 1e3, vs[i].fwd / vs[0].fwd);
        if (!vs[i].qlinear) printf("   backward (dx) %7.2f ms (%.2fx f32)", vs[i].bwd * 1e3, vs[i].bwd / vs[0].bwd);
        printf("\n");
        trit_graph_free(vs[i].g);
    }
    trit_tensor_free(x);
    trit_tensor_free(w);
    trit_tensor_free(q4);
    trit_tensor_free(nf4);
    return 0;
}
