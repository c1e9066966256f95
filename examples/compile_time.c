// Graph build + compile time of the GPT training graph against depth: for L = 12, 24, 48 and 96
// blocks (C = 128, H = 4, T = 64, V = 65, B = 4) it prints the best of 5 calls of
// trit_gpt_build_train (build, fusion, liveness, buffer packing, arena), the milliseconds per
// block and the microseconds per graph node, so a super-linear step shows as a growing per-block
// figure.
//
//   compile_time [threads]
#define _POSIX_C_SOURCE 200809L  // clock_gettime
#include "trit/trit.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc > 1) trit_threads_set(atoi(argv[1]));
    static const int64_t depths[] = {12, 24, 48, 96};
    printf("%6s %12s %12s %8s %14s %12s\n", "layers", "compile ms", "ms/layer", "nodes", "us/node", "arena MB");
    for (size_t d = 0; d < sizeof depths / sizeof depths[0]; d++) {
        trit_gpt_config c = trit_gpt_config_default();
        c.n_layer = depths[d];
        trit_gpt *m = trit_gpt_new(&c, 1);
        if (!m) {
            fprintf(stderr, "compile_time: %s\n", trit_last_error());
            return 1;
        }
        double best = 1e30;
        int nodes = 0;
        double arena = 0;
        for (int r = 0; r < 5; r++) {
            trit_gpt_graph gg;
            const double t0 = seconds();
            if (trit_gpt_build_train(m, 4, 64, &gg) != TRIT_OK) {
                fprintf(stderr, "compile_time: %s\n", trit_last_error());
                trit_gpt_free(m);
                return 1;
            }
            const double t = seconds() - t0;
            if (t < best) best = t;
            trit_graph_memory mem;
            if (trit_graph_memory_report(gg.graph, &mem) == TRIT_OK) {
                nodes = mem.num_nodes + mem.num_backward_nodes;
                arena = (double)mem.arena_bytes / 1e6;
            }
            trit_gpt_graph_free(&gg);
        }
        printf("%6lld %12.2f %12.3f %8d %14.2f %12.1f\n", (long long)depths[d], best * 1e3, best * 1e3 / (double)depths[d],
               nodes, best * 1e6 / nodes, arena);
        trit_gpt_free(m);
    }
    return 0;
}
