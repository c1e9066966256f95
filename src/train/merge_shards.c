// trit merge-shards: a --dist zero1|zero2|zero3 run directory, whose checkpoint keeps the optimizer
// state in one shard file per rank (zero_ckpt.c), as a normal run directory: the shards' pieces
// put together into each parameter's whole buffers, written with the weights into one
// train_state.bin in the single-process layout, and the run's other files copied. The result
// resumes in one process, or on any number of ranks with --dist ddp|zero1|zero2|zero3.
#include "train/train_internal.h"
#include "trit/dist.h"
#include "io/io_internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct merged {
    trit_state_entry e;      // name, role "optim", the weight's shape, f32 values
    char name[TRIT_NAME_MAX + 64];
    const trit_state_entry *weight;
    uint8_t *covered;        // (count) elements a shard filled
} merged;

static const trit_state_entry *find(const trit_state_list *l, const char *name, const char *role) {
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->entries[i].name, name) == 0 && (!role || strcmp(l->entries[i].role, role) == 0))
            return &l->entries[i];
    return NULL;
}

// The merged buffer called `name` ("<weight>.<key>"), made on first sight.
static merged *buffer_for(merged *m, int *nm, int cap, const trit_state_list *st, const char *name, const char *path) {
    for (int i = 0; i < *nm; i++)
        if (strcmp(m[i].e.name, name) == 0) return &m[i];
    char weight[TRIT_NAME_MAX + 32];
    snprintf(weight, sizeof weight, "%s", name);
    char *dot = strrchr(weight, '.');
    if (dot) *dot = 0;
    const trit_state_entry *w = dot ? find(st, weight, "weight") : NULL;
    if (!w || *nm == cap) {
        trit_error(TRIT_ERR_FORMAT, "'%s' holds optimizer state '%s' for no weight of the checkpoint", path, name);
        return NULL;
    }
    merged *b = &m[(*nm)++];
    b->weight = w;
    snprintf(b->name, sizeof b->name, "%s", name);
    b->e = (trit_state_entry){.name = b->name, .role = "optim", .dtype = TRIT_F32, .ndim = w->ndim, .count = w->count};
    memcpy(b->e.shape, w->shape, sizeof b->e.shape);
    b->e.data = calloc((size_t)w->count + 1, sizeof(float));
    b->covered = calloc((size_t)w->count + 1, 1);
    if (!b->e.data || !b->covered) {
        trit_error(TRIT_ERR_NOMEM, "merge-shards: out of memory");
        return NULL;
    }
    return b;
}

static trit_status check_shard(const trit_state_list *sh, const double *mark, int r, const char *path,
                               const trit_state_entry **pieces) {
    const trit_state_entry *meta = find(sh, "zero.shard", "zero");
    *pieces = find(sh, "zero.pieces", "zero");
    if (!meta || meta->count != 8 || !*pieces)
        return trit_error(TRIT_ERR_FORMAT, "'%s' is not an optimizer shard of trit train --dist zero1|zero2|zero3", path);
    const double *v = meta->data;
    if (v[0] != mark[0] || v[1] != r)
        return trit_error(TRIT_ERR_FORMAT, "'%s' says it is rank %.0f of %.0f, not rank %d of %.0f", path, v[1], v[0], r,
                          mark[0]);
    if ((uint32_t)v[5] != (uint32_t)mark[1] || v[6] != mark[2])
        return trit_error(TRIT_ERR_FORMAT, "'%s' is the optimizer shard of another run, or of another checkpoint of "
                          "this one (step %.0f, weights' CRC-32 %08x; the state file: step %.0f, %08x)", path, v[6],
                          (uint32_t)v[5], mark[2], (uint32_t)mark[1]);
    return TRIT_OK;
}

// Rank r's shard into the merged buffers.
static trit_status add_shard(const trit_state_list *st, const double *mark, int r, const char *run, merged *m, int *nm,
                             int cap, int64_t *optim_step) {
    char name[96], path[TRIT_PATH_MAX + 128];
    snprintf(name, sizeof name, "optim_shard.r%d-of-%d.step%lld.bin", r, (int)mark[0], (long long)mark[2]);
    trit_status s = trit_path_join(path, sizeof path, run, name);
    trit_state_list sh;
    if (s == TRIT_OK) s = trit_state_list_read(path, &sh);
    if (s != TRIT_OK) return s;
    const trit_state_entry *pieces;
    s = check_shard(&sh, mark, r, path, &pieces);
    if (s == TRIT_OK && r > 0 && sh.optim_step != *optim_step)
        s = trit_error(TRIT_ERR_FORMAT, "'%s' is at optimizer step %lld, rank 0's shard at %lld", path,
                       (long long)sh.optim_step, (long long)*optim_step);
    *optim_step = sh.optim_step;
    for (int i = 0, k = 0; s == TRIT_OK && i < sh.n; i++) {
        const trit_state_entry *e = &sh.entries[i];
        if (strcmp(e->role, "optim") != 0) continue;
        const double *pv = pieces->data;
        if (2 * (int64_t)k + 1 >= pieces->count || e->dtype != TRIT_F32) {
            s = trit_error(TRIT_ERR_FORMAT, "'%s': buffer '%s' has no piece record, or is not f32", path, e->name);
            break;
        }
        const int64_t at = (int64_t)pv[2 * k], whole = (int64_t)pv[2 * k + 1];
        k++;
        merged *b = buffer_for(m, nm, cap, st, e->name, path);
        if (!b) {
            s = TRIT_ERR_FORMAT;
            break;
        }
        if (whole != b->e.count || at < 0 || e->count > whole - at) {
            s = trit_error(TRIT_ERR_FORMAT, "'%s': '%s' holds elements [%lld, %lld) of %lld, the weight has %lld", path,
                           e->name, (long long)at, (long long)(at + e->count), (long long)whole, (long long)b->e.count);
            break;
        }
        for (int64_t j = 0; j < e->count && s == TRIT_OK; j++)
            if (b->covered[at + j]++)
                s = trit_error(TRIT_ERR_FORMAT, "'%s': element %lld of '%s' is in two shards", path, (long long)(at + j),
                               e->name);
        memcpy((float *)b->e.data + at, e->data, sizeof(float) * (size_t)e->count);
    }
    trit_state_list_free(&sh);
    return s;
}

static trit_status copy_file(const char *from, const char *to) {
    uint8_t *b = NULL;
    size_t n = 0;
    trit_status s = trit_file_read_all(from, &b, &n);
    if (s == TRIT_OK) s = trit_file_write_atomic(to, b, n);
    free(b);
    return s;
}

// The run's files but its checkpoint state, shards, temporaries and offload mappings.
static trit_status copy_run(const char *run, const char *out) {
    DIR *d = opendir(run);
    if (!d) return trit_error(TRIT_ERR_IO, "cannot read the directory '%s'", run);
    trit_status s = TRIT_OK;
    for (struct dirent *e; s == TRIT_OK && (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (strcmp(n, TRIT_CKPT_STATE) == 0 || strncmp(n, "optim_shard.", 12) == 0 || strstr(n, ".tmp.") ||
            strncmp(n, "optimizer.offload", 17) == 0 || strncmp(n, "frozen.offload", 14) == 0)
            continue;
        char from[TRIT_PATH_MAX + 300], to[TRIT_PATH_MAX + 300];
        struct stat sb;
        s = trit_path_join(from, sizeof from, run, n);
        if (s == TRIT_OK && (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode))) continue;
        if (s == TRIT_OK) s = trit_path_join(to, sizeof to, out, n);
        if (s == TRIT_OK) s = copy_file(from, to);
    }
    closedir(d);
    return s;
}

static trit_status merge(const trit_state_list *st, const double *mark, const char *run, const char *out) {
    uint32_t crc = 0;
    int nw = 0;
    for (int i = 0; i < st->n; i++)
        if (strcmp(st->entries[i].role, "weight") == 0)
            crc = trit_crc32(crc, st->entries[i].data, trit_dtype_nbytes(st->entries[i].dtype, st->entries[i].count)), nw++;
    if (crc != (uint32_t)mark[1])
        return trit_error(TRIT_ERR_FORMAT, "'%s/%s': the weights do not match the CRC-32 the checkpoint recorded",
                          run, TRIT_CKPT_STATE);
    const int cap = 4 * nw + 4;
    merged *m = calloc((size_t)cap, sizeof *m);
    trit_state_entry *all = calloc((size_t)(nw + cap), sizeof *all);
    int nm = 0;
    int64_t optim_step = 0;
    trit_status s = m && all ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "merge-shards: out of memory");
    for (int r = 0; s == TRIT_OK && r < (int)mark[0]; r++) s = add_shard(st, mark, r, run, m, &nm, cap, &optim_step);
    for (int i = 0; s == TRIT_OK && i < nm; i++)
        for (int64_t j = 0; j < m[i].e.count && s == TRIT_OK; j++)
            if (!m[i].covered[j])
                s = trit_error(TRIT_ERR_FORMAT, "element %lld of '%s' is in none of the %.0f shards", (long long)j,
                               m[i].e.name, mark[0]);
    int n = 0;
    for (int i = 0; i < st->n && s == TRIT_OK; i++)
        if (strcmp(st->entries[i].role, "weight") == 0) all[n++] = st->entries[i];
    for (int i = 0; i < nm && s == TRIT_OK; i++) all[n++] = m[i].e;
    bool made = false;
    char state[TRIT_PATH_MAX + 32];
    if (s == TRIT_OK) s = trit_path_join(state, sizeof state, out, TRIT_CKPT_STATE);
    struct stat sb;
    if (s == TRIT_OK && stat(state, &sb) == 0)
        s = trit_error(TRIT_ERR_INVALID, "'%s' already holds a training run: choose another --out", out);
    if (s == TRIT_OK) s = trit_make_dir(out, &made);
    if (s == TRIT_OK) s = copy_run(run, out);
    trit_train_state merged_st = st->state;
    merged_st.config.dist = TRIT_DIST_OFF;  // a normal run: --dist on resume says how it continues
    if (s == TRIT_OK) s = trit_state_write(state, &merged_st, all, n, st->optim_kind, optim_step);
    for (int i = 0; m && i < nm; i++) {
        free(m[i].e.data);
        free(m[i].covered);
    }
    free(m);
    free(all);
    return s;
}

trit_status trit_train_merge_shards(const char *run, const char *out, int *ranks) {
    char path[TRIT_PATH_MAX + 32];
    trit_status s = trit_path_join(path, sizeof path, run, TRIT_CKPT_STATE);
    trit_state_list st;
    if (s == TRIT_OK) s = trit_state_list_read(path, &st);
    if (s != TRIT_OK) return s;
    const trit_state_entry *mk = find(&st, "zero.shards", "zero");
    if (!mk || mk->count != 3) {
        trit_state_list_free(&st);
        return trit_error(TRIT_ERR_INVALID, "'%s' is not a sharded checkpoint (a run of --dist zero1|zero2|zero3 on more "
                          "than one rank): it resumes as it is", run);
    }
    const double *mark = mk->data;
    if (ranks) *ranks = (int)mark[0];
    s = merge(&st, mark, run, out);
    trit_state_list_free(&st);
    return s;
}
