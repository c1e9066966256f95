// Two ranks of a tensor-parallel group simulated by two threads: a trit_allreduce whose sum meets
// at a barrier and adds both ranks' buffers in rank order (the same bits on both), for f32 or f64
// values, counting each rank's calls. Shared by the tp op's and the GPT shards' tests.
#ifndef TRIT_TEST_PAIR_SUM_H
#define TRIT_TEST_PAIR_SUM_H

#include "trit/trit.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

enum { PAIR_RANKS = 2 };

typedef struct pair_group {
    pthread_barrier_t bar;
    void *bufs[PAIR_RANKS];
    int64_t n[PAIR_RANKS];
    trit_dtype dtype[PAIR_RANKS];
    int calls[PAIR_RANKS];
    bool mismatch;  // the ranks passed different lengths or dtypes, or memory ran out
} pair_group;

typedef struct pair_member {
    pair_group *g;
    int rank;
} pair_member;

void pair_group_init(pair_group *g);
// Destroys the barrier; returns whether every call matched.
bool pair_group_finish(pair_group *g);
// The trit_allreduce of member m (a trit_allreduce_fn with m as its context).
trit_allreduce pair_sum_of(pair_member *m);

#endif
