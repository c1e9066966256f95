#define _POSIX_C_SOURCE 200809L  // pthread barriers
#include "pair_sum.h"

#include <stdlib.h>
#include <string.h>

void pair_group_init(pair_group *g) {
    memset(g, 0, sizeof *g);
    pthread_barrier_init(&g->bar, NULL, PAIR_RANKS);
}

bool pair_group_finish(pair_group *g) {
    pthread_barrier_destroy(&g->bar);
    return !g->mismatch;
}

static trit_status pair_sum(void *ctx, void *data, trit_dtype dtype, int64_t n) {
    pair_member *m = ctx;
    pair_group *g = m->g;
    if (dtype != TRIT_F32 && dtype != TRIT_F64) return trit_error(TRIT_ERR_DTYPE, "pair_sum: f32 or f64 only");
    g->bufs[m->rank] = data;
    g->n[m->rank] = n;
    g->dtype[m->rank] = dtype;
    g->calls[m->rank]++;
    pthread_barrier_wait(&g->bar);
    if (g->n[0] != g->n[1] || g->dtype[0] != g->dtype[1]) g->mismatch = true;
    const size_t es = dtype == TRIT_F64 ? sizeof(double) : sizeof(float);
    void *tmp = g->mismatch ? NULL : malloc(es * (size_t)(n > 0 ? n : 1));
    if (!g->mismatch && !tmp) g->mismatch = true;
    for (int64_t i = 0; tmp && i < n; i++) {
        if (dtype == TRIT_F64)
            ((double *)tmp)[i] = ((const double *)g->bufs[0])[i] + ((const double *)g->bufs[1])[i];
        else
            ((float *)tmp)[i] = ((const float *)g->bufs[0])[i] + ((const float *)g->bufs[1])[i];
    }
    pthread_barrier_wait(&g->bar);  // both have read both buffers before either is overwritten
    if (tmp) memcpy(data, tmp, es * (size_t)n);
    free(tmp);
    pthread_barrier_wait(&g->bar);
    return TRIT_OK;
}

trit_allreduce pair_sum_of(pair_member *m) { return (trit_allreduce){.fn = pair_sum, .ctx = m}; }
