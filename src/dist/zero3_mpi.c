// ZeRO-3's parameter shards (Rajbhandari et al. 2020, stage 3): the parameter block of the trained
// dtype, frozen weights of that dtype included (the bulk of a LoRA run's memory), cut by
// trit_zero3_shard_bounds so that each rank's part holds the values its gradient shard updates;
// each rank's shard of it resident and the rest given back to the system (madvise DONTNEED: whole
// pages only, so a page shared with the shard or another group stays). A group's
// values are all-gathered in place (MPI_Iallgatherv, the rank's own part already there) when the
// graph says they are needed, and the next group of the phase is started right after, so its
// exchange overlaps this group's compute (Open MPI has no progress thread: the wait on a group
// moves the next one on too). Nothing here knows the model: the groups come from the caller and
// their order from the graph's step list.
#define _DEFAULT_SOURCE
#include "dist/dist_internal.h"

#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

enum { RELEASED = 0, GATHERING, GATHERED };

typedef struct pgroup {
    int64_t begin, end;    // element range of the block (padding to the next group included)
    int64_t outside;       // of which elements outside this rank's shard
    int *counts, *displs;  // (size) each rank's part of the range, elements from begin
    int state;
    MPI_Request req;
    int next[2];           // the group needed after this one in forward, in backward (-1: none)
} pgroup;

struct trit_zero3 {
    MPI_Comm comm;         // a duplicate of the shard group's: the gathers keep their own order,
                           // apart from the gradients' reduce-scatters (a rank that skips a pass
                           // replays its gathers but starts its buckets later)
    int rank, size;
    int64_t *bounds;       // (size + 1) the shards, elements of the block
    trit_dtype dt;         // the trained parameters' (the block's)
    char *base;            // the parameter block of dt: element j at base + j * elsize
    size_t elsize;
    int64_t count;         // its elements
    int nmap;
    int *map;              // (nmap) the caller's group -> this one's, -1 for none in the block
    MPI_Datatype elem;
    trit_graph *graph;     // whose events gather and release
    int ng;
    pgroup *g;             // (ng)
    int bwd_first;         // the group backward needs first (kept from forward's end), -1: none
    bool active;           // the hooks gather and release (off while rank 0 holds everything)
    bool dry;              // counting what is held, no MPI (trit_zero3_new's walk of the steps)
    int64_t held, peak;    // elements outside the shard held now, and at most
    double wait_ms;        // waited for gathers since trit_zero3_take_wait
};

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Gives back the whole pages of elements [a, b) of base.
static void give_back_pages(char *base, size_t elsize, int64_t a, int64_t b) {
    if (a >= b) return;
    const long ps = sysconf(_SC_PAGESIZE);
    const uintptr_t pg = ps > 0 ? (uintptr_t)ps : 4096;
    const uintptr_t lo = ((uintptr_t)(base + (size_t)a * elsize) + pg - 1) / pg * pg;
    const uintptr_t hi = (uintptr_t)(base + (size_t)b * elsize) / pg * pg;
    // Where the system declines, the values stay: they are gathered again before any use.
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void give_back(const trit_zero3 *z, int64_t a, int64_t b) { give_back_pages(z->base, z->elsize, a, b); }

void trit_zero3_give_back_early(const trit_flat *f, trit_dtype dt, int64_t lo, int64_t hi) {
    size_t bytes = 0;
    char *base = trit_flat_block(f, dt, &bytes);
    if (!base) return;
    give_back_pages(base, trit_dtype_size(dt), 0, lo);
    give_back_pages(base, trit_dtype_size(dt), hi, (int64_t)(bytes / trit_dtype_size(dt)));
}

static trit_status start(trit_zero3 *z, int k) {
    pgroup *p = &z->g[k];
    if (p->state != RELEASED) return TRIT_OK;
    p->state = GATHERING;
    z->held += p->outside;
    z->peak = max64(z->peak, z->held);
    if (z->dry) return TRIT_OK;
    int rc = MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, z->base + (size_t)p->begin * z->elsize, p->counts,
                             p->displs, z->elem, z->comm, &p->req);
    return rc == MPI_SUCCESS ? TRIT_OK : trit_dist_mpi_error(rc, "MPI_Iallgatherv of a parameter group");
}

static trit_status finish(trit_zero3 *z, int k) {
    pgroup *p = &z->g[k];
    if (p->state != GATHERING) return TRIT_OK;
    trit_status s = z->dry ? TRIT_OK : trit_dist_wait(&p->req, 1, "the all-gather of a parameter group", &z->wait_ms);
    p->state = GATHERED;
    return s;
}

static void release(trit_zero3 *z, int k) {
    pgroup *p = &z->g[k];
    if (p->state == RELEASED) return;
    z->held -= p->outside;
    p->state = RELEASED;
    if (z->dry) return;
    const int64_t lo = z->bounds[z->rank], hi = z->bounds[z->rank + 1];
    give_back(z, p->begin, min64(p->end, lo));
    give_back(z, max64(p->begin, hi), p->end);
}

static trit_status on_needed(void *ctx, const trit_graph_event *e) {
    trit_zero3 *z = ctx;
    if (!z->active || e->group < 0 || e->group >= z->ng) return TRIT_OK;
    trit_status s = start(z, e->group);
    if (s == TRIT_OK) s = finish(z, e->group);
    const int next = z->g[e->group].next[e->backward];
    if (s == TRIT_OK && next >= 0) s = start(z, next);
    return s;
}

static trit_status on_done(void *ctx, const trit_graph_event *e) {
    trit_zero3 *z = ctx;
    if (!z->active || e->group < 0 || e->group >= z->ng) return TRIT_OK;
    if (!e->backward && e->group == z->bwd_first) return TRIT_OK;  // backward starts with it
    release(z, e->group);
    return TRIT_OK;
}

// The block of the trained parameters' dtype (frozen values of that dtype in it too) and its
// shards, copied.
static trit_status layout(trit_zero3 *z, const trit_flat *f, const int64_t *bounds) {
    bool any = false;
    for (int i = 0; i < trit_flat_count(f) && !any; i++)
        if (trit_flat_grad_offset(f, i) >= 0) z->dt = trit_flat_tensor(f, i)->dtype, any = true;
    size_t bytes = 0;
    z->base = any ? trit_flat_block(f, z->dt, &bytes) : NULL;
    if (!z->base) return trit_error(TRIT_ERR_STATE, "zero3: the model has no trained parameters");
    z->elsize = trit_dtype_size(z->dt);
    z->count = (int64_t)(bytes / z->elsize);
    for (int i = 0; i < trit_flat_count(f); i++) {
        const trit_tensor *t = trit_flat_tensor(f, i);
        if (trit_flat_grad_offset(f, i) >= 0 && t->dtype != z->dt)
            return trit_error(TRIT_ERR_UNSUPPORTED, "zero3: '%s' trains in %s, other parameters in %s: --dist zero3 "
                              "shards the block of one dtype; train with fp32 master weights", t->name,
                              trit_dtype_name(t->dtype), trit_dtype_name(z->dt));
    }
    z->bounds = malloc(sizeof(int64_t) * ((size_t)z->size + 1));
    if (!z->bounds) return trit_error(TRIT_ERR_NOMEM, "zero3: out of memory");
    for (int r = 0; r <= z->size; r++) {
        if (bounds[r] < (r ? bounds[r - 1] : 0) || (r == 0 && bounds[r] != 0) || (r == z->size && bounds[r] != z->count))
            return trit_error(TRIT_ERR_INVALID, "zero3: shard bound %d is %lld: the bounds rise from 0 to the %lld "
                              "values of the %s block", r, (long long)bounds[r], (long long)z->count,
                              trit_dtype_name(z->dt));
        z->bounds[r] = bounds[r];
    }
    return TRIT_OK;
}

// Element of tensor i of the block.
static int64_t at_of(const trit_zero3 *z, const trit_flat *f, int i) {
    return (int64_t)(((char *)trit_tensor_ptr(trit_flat_tensor(f, i)) - z->base) / (ptrdiff_t)z->elsize);
}

// The caller's groups that have a tensor in the block, numbered here in layout order (z->map);
// group k's range: its tensors' first element to the next group's (one run each, checked).
static trit_status make_groups(trit_zero3 *z, const trit_flat *f, const int *group) {
    const int n = trit_flat_count(f);
    for (int i = 0; i < n; i++) {
        if (group[i] < 0) return trit_error(TRIT_ERR_INVALID, "zero3: '%s' is in no group", trit_flat_tensor(f, i)->name);
        if (group[i] >= z->nmap) z->nmap = group[i] + 1;
    }
    z->map = malloc(sizeof(int) * ((size_t)z->nmap + 1));
    z->g = calloc((size_t)n + 1, sizeof *z->g);
    if (!z->map || !z->g) return trit_error(TRIT_ERR_NOMEM, "zero3: out of memory");
    for (int k = 0; k < z->nmap; k++) z->map[k] = -1;
    int prev = -1;
    for (int i = 0; i < n; i++) {
        if (trit_flat_tensor(f, i)->dtype != z->dt) continue;
        const int64_t off = at_of(z, f, i);
        int k = z->map[group[i]];
        if (k >= 0 && k != prev)
            return trit_error(TRIT_ERR_INVALID, "zero3: group %d is not one run of the layout ('%s' is apart from the "
                              "rest)", group[i], trit_flat_tensor(f, i)->name);
        if (k < 0) {
            k = z->map[group[i]] = z->ng++;
            z->g[k] = (pgroup){.begin = off, .req = MPI_REQUEST_NULL, .next = {-1, -1}};
            if (prev >= 0) z->g[prev].end = off;
        }
        prev = k;
    }
    if (prev >= 0) z->g[prev].end = z->count;
    const int64_t lo = z->bounds[z->rank], hi = z->bounds[z->rank + 1];
    for (int k = 0; k < z->ng; k++) {
        pgroup *p = &z->g[k];
        if (p->end - p->begin > INT_MAX)
            return trit_error(TRIT_ERR_UNSUPPORTED, "zero3: a group of %lld values is more than one MPI call takes",
                              (long long)(p->end - p->begin));
        p->outside = (p->end - p->begin) - max64(0, min64(p->end, hi) - max64(p->begin, lo));
        p->counts = calloc((size_t)z->size, sizeof *p->counts);
        p->displs = calloc((size_t)z->size, sizeof *p->displs);
        if (!p->counts || !p->displs) return trit_error(TRIT_ERR_NOMEM, "zero3: out of memory");
        for (int r = 0; r < z->size; r++) {
            const int64_t a = max64(p->begin, z->bounds[r]), b = min64(p->end, z->bounds[r + 1]);
            p->counts[r] = b > a ? (int)(b - a) : 0;
            p->displs[r] = b > a ? (int)(a - p->begin) : 0;
        }
    }
    return TRIT_OK;
}

// The graph's groups (by its parameters), and each phase's order of "needed" events from the
// step list: which group to start after each.
static trit_status set_order(trit_zero3 *z, const trit_flat *f, trit_graph *g, const int *group) {
    const int np = trit_graph_num_params(g);
    int *gp = malloc(sizeof(int) * ((size_t)np + 1));
    if (!gp) return trit_error(TRIT_ERR_NOMEM, "zero3: out of memory");
    for (int p = 0; p < np; p++) {
        gp[p] = -1;
        for (int i = 0; i < trit_flat_count(f); i++)
            if (trit_flat_tensor(f, i) == trit_graph_param(g, p) && trit_flat_tensor(f, i)->dtype == z->dt)
                gp[p] = z->map[group[i]];
    }
    trit_status s = trit_graph_set_param_groups(g, gp, np);
    free(gp);
    int last[2] = {-1, -1};
    z->bwd_first = -1;
    for (int i = 0; s == TRIT_OK && i < trit_graph_num_steps(g); i++) {
        trit_graph_step_info st;
        if ((s = trit_graph_step_at(g, i, &st)) != TRIT_OK) break;
        if (st.kind != TRIT_STEP_EVENT || st.event != TRIT_EVENT_PARAMS_NEEDED || st.group < 0 || st.group >= z->ng)
            continue;
        const int ph = st.backward;
        if (last[ph] >= 0) z->g[last[ph]].next[ph] = st.group;
        else if (ph == 1) z->bwd_first = st.group;
        last[ph] = st.group;
    }
    return s;
}

// The parameter events of the step list (those of the backward phase only, or all) as if the
// graph ran.
static trit_status walk(trit_zero3 *z, bool forward_too) {
    for (int i = 0; i < trit_graph_num_steps(z->graph); i++) {
        trit_graph_step_info st;
        trit_status s = trit_graph_step_at(z->graph, i, &st);
        if (s != TRIT_OK) return s;
        if (st.kind != TRIT_STEP_EVENT || st.group < 0 || (!forward_too && !st.backward)) continue;
        const trit_graph_event e = {.kind = st.event, .param = -1, .group = st.group, .backward = st.backward};
        s = st.event == TRIT_EVENT_PARAMS_NEEDED ? on_needed(z, &e) : on_done(z, &e);
        if (s != TRIT_OK) return s;
    }
    return TRIT_OK;
}

// One micro-batch's events without MPI, for the most held at once.
static trit_status measure(trit_zero3 *z) {
    z->dry = true;
    z->active = true;
    trit_status s = walk(z, true);
    for (int k = 0; k < z->ng; k++) release(z, k);
    z->dry = false;
    return s;
}

trit_status trit_zero3_replay(trit_zero3 *z, bool forward_too) { return walk(z, forward_too); }

trit_zero3 *trit_zero3_new(trit_zero *zero, const trit_flat *f, trit_graph *g, const int *group, const int64_t *bounds) {
    if (!zero || !f || !g || !group || !bounds) {
        trit_error(TRIT_ERR_INVALID, "trit_zero3_new: the sharded exchange, flat storage, a compiled graph, groups and "
                   "shard bounds");
        return NULL;
    }
    trit_zero3 *z = calloc(1, sizeof *z);
    if (!z) {
        trit_error(TRIT_ERR_NOMEM, "zero3: out of memory");
        return NULL;
    }
    z->comm = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(trit_zero_comm(zero), &z->comm);
    if (rc != MPI_SUCCESS) {
        trit_dist_mpi_error(rc, "MPI_Comm_dup for the parameter gathers");
        free(z);
        return NULL;
    }
    z->rank = trit_zero_group_rank(zero), z->size = trit_zero_group_size(zero);
    z->elem = MPI_DATATYPE_NULL;
    z->graph = g;
    trit_status s = layout(z, f, bounds);
    if (s == TRIT_OK) s = make_groups(z, f, group);
    if (s == TRIT_OK) s = set_order(z, f, g, group);
    if (s == TRIT_OK) s = measure(z);
    if (s == TRIT_OK) {
        rc = MPI_Type_contiguous((int)z->elsize, MPI_BYTE, &z->elem);
        if (rc == MPI_SUCCESS) rc = MPI_Type_commit(&z->elem);
        if (rc != MPI_SUCCESS) s = trit_dist_mpi_error(rc, "MPI_Type_commit");
    }
    if (s == TRIT_OK) s = trit_graph_add_hook(g, TRIT_EVENT_PARAMS_NEEDED, on_needed, z);
    if (s == TRIT_OK) s = trit_graph_add_hook(g, TRIT_EVENT_PARAMS_DONE, on_done, z);
    if (s != TRIT_OK) {
        trit_zero3_free(z);
        return NULL;
    }
    // Every rank made the whole model; from here it keeps its shard.
    for (int k = 0; k < z->ng; k++) z->g[k].state = GATHERED;
    trit_zero3_release(z);
    return z;
}

size_t trit_zero3_gathered_peak(const trit_zero3 *z) { return (size_t)z->peak * z->elsize; }

double trit_zero3_take_wait(trit_zero3 *z) {
    const double w = z->wait_ms;
    z->wait_ms = 0;
    return w;
}

trit_status trit_zero3_gather_root(trit_zero3 *z, double *wait_ms) {
    *wait_ms = 0;
    trit_status s = TRIT_OK;
    for (int k = 0; k < z->ng && s == TRIT_OK; k++) s = finish(z, k);  // nothing is in flight between steps
    z->active = false;
    int *counts = calloc((size_t)z->size, sizeof *counts), *displs = calloc((size_t)z->size, sizeof *displs);
    if (s == TRIT_OK && (!counts || !displs)) s = trit_error(TRIT_ERR_NOMEM, "zero3: out of memory");
    for (int r = 0; s == TRIT_OK && r < z->size; r++) {
        if (z->bounds[r + 1] > INT_MAX)
            s = trit_error(TRIT_ERR_UNSUPPORTED, "zero3: %lld parameters are more than one MPI call gathers",
                           (long long)z->count);
        else
            counts[r] = (int)(z->bounds[r + 1] - z->bounds[r]), displs[r] = (int)z->bounds[r];
    }
    MPI_Request req = MPI_REQUEST_NULL;
    if (s == TRIT_OK) {
        char *mine = z->base + (size_t)z->bounds[z->rank] * z->elsize;
        int rc = MPI_Igatherv(z->rank == 0 ? MPI_IN_PLACE : mine, counts[z->rank], z->elem, z->base, counts, displs,
                              z->elem, 0, z->comm, &req);
        s = rc == MPI_SUCCESS ? trit_dist_wait(&req, 1, "the gather of the parameters for rank 0", wait_ms)
                              : trit_dist_mpi_error(rc, "MPI_Igatherv of the parameters");
    }
    free(counts);
    free(displs);
    if (s == TRIT_OK && z->rank == 0)
        for (int k = 0; k < z->ng; k++) z->g[k].state = GATHERED;
    return s;
}

void trit_zero3_release(trit_zero3 *z) {
    for (int k = 0; k < z->ng; k++) {
        if (z->g[k].state == GATHERING) {
            MPI_Wait(&z->g[k].req, MPI_STATUS_IGNORE);
            z->g[k].state = GATHERED;
        }
        release(z, k);
    }
    z->held = 0;
    z->active = true;
}

void trit_zero3_free(trit_zero3 *z) {
    if (!z) return;
    for (int k = 0; k < z->ng; k++) {
        if (z->g[k].state == GATHERING) MPI_Wait(&z->g[k].req, MPI_STATUS_IGNORE);
        free(z->g[k].counts);
        free(z->g[k].displs);
    }
    if (z->elem != MPI_DATATYPE_NULL) MPI_Type_free(&z->elem);
    if (z->comm != MPI_COMM_NULL) MPI_Comm_free(&z->comm);
    free(z->bounds);
    free(z->map);
    free(z->g);
    free(z);
}
