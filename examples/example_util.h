// Small helpers shared by the training demos in examples/ (each demo is one program, so these
// are static functions in a header rather than a library).
#ifndef TRIT_EXAMPLES_EXAMPLE_UTIL_H
#define TRIT_EXAMPLES_EXAMPLE_UTIL_H

#include "trit/trit.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Reads [--steps N] [--seed S] [--check] into *steps, *seed and *check, which hold the defaults
// on entry. Returns 0, or 2 after printing usage or what is wrong (the exit code to return).
static int example_parse_args(int argc, char **argv, const char *prog, int *steps,
                              uint64_t *seed, bool *check) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--steps") && i + 1 < argc) *steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) *seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--check")) *check = true;
        else {
            fprintf(stderr, "usage: %s [--steps N] [--seed S] [--check]\n", prog);
            return 2;
        }
    }
    if (*steps <= 0) {
        fprintf(stderr, "%s: --steps must be a positive integer\n", prog);
        return 2;
    }
    return 0;
}

// How many of the n rows of logits (n, classes) have their largest value at the label y[i]
// (the first of equal values wins).
static int64_t example_correct(const trit_tensor *logits /* (n, classes) */,
                               const int32_t *y /* (n) */, int64_t n, int classes) {
    const float *l = logits->data;
    int64_t right = 0;
    for (int64_t i = 0; i < n; i++) {
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (l[i * classes + c] > l[i * classes + best]) best = c;
        right += best == y[i];
    }
    return right;
}

// Prints what failed with the library's last error message; returns the exit code 2.
static int example_fail(const char *prog, const char *what) {
    fprintf(stderr, "%s: %s: %s\n", prog, what, trit_last_error());
    return 2;
}

#endif
