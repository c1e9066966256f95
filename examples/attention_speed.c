// Attention speed and memory: flash (tiled) against the straightforward causal attention, at a
// fixed 8192 tokens per batch (B * T) for T = 64, 256, 1024, 2048, with C = 384 and H = 6 (a
// "small" GPT's attention layer). q, k, v are column slices of one (B, T, 3C) parameter, as in
// the GPT, and the loss is the sum of the output. For each case it prints the best forward +
// backward time of several steps, the graph's arena (activations, what ops keep for backward,
// gradients, scratch) and the process's peak resident memory (each case runs in a child
// process). The straightforward op keeps B*H*T*T probabilities; flash keeps B*H*T numbers.
//
//   attention_speed [steps] [threads]      (defaults: 3 timed steps, trit_threads_get())
#define _POSIX_C_SOURCE 200809L  // clock_gettime, fork, pipe
#include "trit/trit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOKENS 8192
#define C 384
#define H 6

typedef struct result {
    double ms;            // best forward + backward
    double arena, rss;    // bytes
    int ok;
} result;

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

// Peak resident set of this process in bytes (VmHWM), or 0 if unknown.
static double peak_rss(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = atof(line + 6);
    fclose(f);
    return kb * 1024.0;
}

// One case, run in a child: builds loss = sum(attention(q, k, v)) and times steps.
static result run_case(int64_t T, bool flash, int steps) {
    result r = {0};
    const int64_t B = TOKENS / T, shape[3] = {B, T, 3 * C}, sizes[3] = {C, C, C};
    trit_tensor *qkv = trit_tensor_new_param(TRIT_F32, 3, shape, "qkv");
    if (!qkv) return r;
    trit_tensor_fill_normal(qkv, 0.0, 1.0, 1, 0);
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *part[3] = {NULL, NULL, NULL};
    trit_tensor *out = NULL;
    if (trit_split(g, qkv, 2, 3, sizes, part) == TRIT_OK)
        out = flash ? trit_flash_attention(g, part[0], part[1], part[2], H) : trit_attention(g, part[0], part[1], part[2], H);
    trit_tensor *loss = out ? trit_sum(g, out, 0, NULL, false) : NULL;
    if (trit_graph_compile(g, loss) != TRIT_OK) {
        fprintf(stderr, "attention_speed: %s\n", trit_last_error());
        trit_graph_free(g);
        trit_tensor_free(qkv);
        return r;
    }
    trit_graph_memory mem;
    trit_graph_memory_report(g, &mem);
    r.arena = (double)mem.arena_bytes;
    r.ms = 1e30;
    for (int s = 0; s <= steps; s++) {  // step 0 warms up
        trit_graph_zero_grad(g);
        double t0 = seconds();
        if (trit_graph_forward(g) != TRIT_OK || trit_graph_backward(g) != TRIT_OK) {
            fprintf(stderr, "attention_speed: %s\n", trit_last_error());
            break;
        }
        double ms = 1e3 * (seconds() - t0);
        if (s > 0 && ms < r.ms) r.ms = ms;
        r.ok = s == steps;
    }
    r.rss = peak_rss();
    trit_graph_free(g);
    trit_tensor_free(qkv);
    return r;
}

// Runs a case in a child process so that its peak RSS is its own; OpenMP threads start there
// too, never in this process (forking a process that has them is unsafe).
static result run_isolated(int64_t T, bool flash, int steps, int threads) {
    result r = {0};
    int fd[2];
    if (pipe(fd) != 0) return r;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        trit_threads_set(threads);
        result c = run_case(T, flash, steps);
        ssize_t n = write(fd[1], &c, sizeof c);
        close(fd[1]);
        _exit(n == (ssize_t)sizeof c ? 0 : 1);
    }
    close(fd[1]);
    if (pid > 0) {
        if (read(fd[0], &r, sizeof r) != (ssize_t)sizeof r) memset(&r, 0, sizeof r);
        waitpid(pid, NULL, 0);
    }
    close(fd[0]);
    return r;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 3;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    if (steps < 1) steps = 1;
    const int64_t Ts[] = {64, 256, 1024, 2048};
    const double MB = 1024.0 * 1024.0;
    printf("causal attention forward + backward, B*T = %d tokens, C = %d, H = %d, f32, best of %d steps\n", TOKENS, C, H, steps);
    printf("%6s %5s | %-15s %9s %10s %10s | %7s\n", "T", "B", "op", "ms", "arena MB", "RSS MB", "speedup");
    for (int i = 0; i < 4; i++) {
        result r[2];
        for (int f = 0; f < 2; f++) r[f] = run_isolated(Ts[i], f == 1, steps, threads);
        for (int f = 0; f < 2; f++) {
            if (!r[f].ok) {
                printf("%6lld %5lld | %-15s failed\n", (long long)Ts[i], (long long)(TOKENS / Ts[i]), f ? "flash" : "straightforward");
                continue;
            }
            printf("%6lld %5lld | %-15s %9.1f %10.1f %10.1f |", (long long)Ts[i], (long long)(TOKENS / Ts[i]),
                   f ? "flash" : "straightforward", r[f].ms, r[f].arena / MB, r[f].rss / MB);
            if (f == 1 && r[0].ok) printf(" %6.2fx", r[0].ms / r[1].ms);
            printf("\n");
        }
    }
    return 0;
}
