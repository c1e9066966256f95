// --dist zero1|zero2|zero3 in the trainer: this rank's shard of the gradient block (trit_zero_shard_range
// over the ranks of its shard group: the job, or --shard-group's)
// as 1-D views of the pieces of the trained parameters it covers, each with its gradient's piece,
// and an optimizer over those views alone, in the groups trit_optim_new_gpt2 makes (so the
// update of each element is the one a single process makes). A step unscales the shard, takes
// the global norm from the ranks' squared partial norms (one all-reduce, which also agrees on a
// non-finite gradient: a NaN or Inf anywhere makes the sum so on every rank), clips the shard,
// steps it and all-gathers the parameters. zero3 keeps only the shard of the parameters (their
// groups: a transformer block's halves, and each run of other tensors in the layout) and gathers
// nothing after the update: the next forward gathers each group when it needs it; with shard
// groups the shard's gradient is first summed across the replicas.
#include "train/trainer.h"
#include "trit/bench.h"
#include "trit/dist.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/zero_train.h"

void trit_trainer_zero_free(trainer *t) {
    trainer_zero *zs = t->zero;
    if (!zs) return;
    trit_zero3_free(zs->z3);
    trit_zero_free(zs->z);
    // The optimizer refers to the views: it goes first.
    trit_optim_free(t->opt);
    t->opt = NULL;
    for (int j = 0; j < zs->n; j++) trit_tensor_free(zs->views[j]);
    free(zs->views);
    free(zs->full);
    free(zs->at);
    free(zs->bounds);
    free(zs);
    t->zero = NULL;
}

// The views of this rank's pieces of the trained parameters, in block order.
static trit_status make_views(trainer *t, trainer_zero *zs) {
    const trit_flat *f = trit_gpt_flat(t->model);
    const char *block = zs->stage == 3 ? trit_flat_block(f, zs->dt, NULL) : NULL;
    const int n = trit_flat_count(f);
    zs->views = calloc((size_t)n + 1, sizeof *zs->views);
    zs->full = calloc((size_t)n + 1, sizeof *zs->full);
    zs->at = calloc((size_t)n + 1, sizeof *zs->at);
    if (!zs->views || !zs->full || !zs->at) return trit_error(TRIT_ERR_NOMEM, "zero: out of memory");
    for (int i = 0; i < n; i++) {
        trit_tensor *p = trit_flat_tensor(f, i);
        const int64_t off = trit_flat_grad_offset(f, i), numel = trit_tensor_numel(p);
        if (off < 0) continue;
        zs->trained += numel;
        zs->weight_bytes += (int64_t)trit_dtype_nbytes(p->dtype, numel);
        const int64_t a = (off > zs->lo ? off : zs->lo) - off, b = (off + numel < zs->hi ? off + numel : zs->hi) - off;
        if (a >= b) continue;
        const int64_t len = b - a;
        const char *at = (char *)trit_tensor_ptr(p) + trit_dtype_nbytes(p->dtype, a);
        if (block && (at < block + zs->elsize * (size_t)zs->plo ||
                      at + trit_dtype_nbytes(p->dtype, len) > block + zs->elsize * (size_t)zs->phi))
            return trit_error(TRIT_ERR_STATE, "zero3: the values of '%s' this rank updates are outside its shard of the "
                              "parameter block", p->name);
        trit_tensor *v = trit_tensor_wrap(p->dtype, 1, &len, (char *)at);
        if (v) v->grad = trit_tensor_wrap(TRIT_F32, 1, &len, (float *)trit_tensor_ptr(p->grad) + a);
        if (!v || !v->grad) {
            trit_tensor_free(v);
            return TRIT_ERR_NOMEM;
        }
        v->flags |= TRIT_FLAG_PARAM;
        snprintf(v->name, sizeof v->name, "%s", p->name);
        zs->views[zs->n] = v, zs->full[zs->n] = p, zs->at[zs->n] = a;
        zs->n++;
    }
    return TRIT_OK;
}

// The shard's optimizer: trit_optim_new_gpt2's two groups (the decay rule read off the whole
// parameters) over the views.
static trit_optim *shard_optim(const trainer *t, const trainer_zero *zs) {
    trit_tensor **lists = calloc(2 * (size_t)zs->n + 2, sizeof *lists);
    if (!lists) {
        trit_error(TRIT_ERR_NOMEM, "zero: out of memory");
        return NULL;
    }
    trit_tensor **decay = lists, **plain = lists + zs->n + 1;
    int nd = 0, np = 0;
    for (int j = 0; j < zs->n; j++) {
        if (trit_optim_wants_decay(zs->full[j])) decay[nd++] = zs->views[j];
        else plain[np++] = zs->views[j];
    }
    const trit_optim_group g[2] = {{decay, nd, 1.0, t->cfg.weight_decay, false}, {plain, np, 1.0, 0.0, false}};
    trit_optim *o = trit_optim_new(trit_optim_get_config(t->opt), g, 2);
    free(lists);
    return o;
}

// zero3: the shards of the parameter block, frozen values included, and the gradient shards
// inside them (trit_zero3_shard_bounds).
static trit_status shard_block(const trainer *t, trainer_zero *zs) {
    const trit_flat *f = trit_gpt_flat(t->model);
    const int N = zs->shards;
    zs->bounds = malloc(sizeof(int64_t) * 2 * ((size_t)N + 1));
    if (!zs->bounds) return trit_error(TRIT_ERR_NOMEM, "zero3: out of memory");
    trit_status s = trit_zero3_shard_bounds(f, N, &zs->dt, zs->bounds, zs->bounds + N + 1);
    if (s != TRIT_OK) return s;
    const trit_dtype dt = zs->dt;
    size_t bytes = 0;
    trit_flat_block(f, dt, &bytes);
    zs->elsize = trit_dtype_size(dt);
    zs->pcount = (int64_t)(bytes / zs->elsize);
    zs->plo = zs->bounds[zs->shard], zs->phi = zs->bounds[zs->shard + 1];
    zs->lo = zs->bounds[N + 1 + zs->shard], zs->hi = zs->bounds[N + 2 + zs->shard];
    for (int i = 0; i < trit_flat_count(f); i++)
        if (trit_flat_tensor(f, i)->dtype == dt && trit_flat_grad_offset(f, i) < 0)
            zs->frozen += trit_tensor_numel(trit_flat_tensor(f, i));
    return TRIT_OK;
}

static const char *dist_name(int64_t d) {
    return d == TRIT_DIST_ZERO3 ? "zero3" : d == TRIT_DIST_ZERO2 ? "zero2" : "zero1";
}

static bool is_zero(int64_t d) { return d == TRIT_DIST_ZERO1 || d == TRIT_DIST_ZERO2 || d == TRIT_DIST_ZERO3; }

trit_status trit_trainer_zero_check(const trit_train_config *c, int ranks) {
    if (c->dist == TRIT_DIST_ZERO3 && c->shard_group > 0 && ranks % c->shard_group != 0)
        return trit_error(TRIT_ERR_INVALID, "--shard-group %lld does not divide the job's %d ranks: hybrid sharding "
                          "makes groups of G consecutive ranks; start the job with mpirun -np N, N a multiple of "
                          "%lld, or pass a G that divides %d", (long long)c->shard_group, ranks,
                          (long long)c->shard_group, ranks);
    if (ranks < 2 || !is_zero(c->dist)) return TRIT_OK;
    if (c->optimizer != TRIT_TRAIN_ADAMW)
        return trit_error(TRIT_ERR_UNSUPPORTED, "--dist %s shards AdamW's state, element by element; --optimizer %s "
                          "keeps state that does not split that way (8-bit blocks, low-rank projections): use "
                          "--optimizer adamw, or --dist ddp", dist_name(c->dist), c->optimizer == TRIT_TRAIN_ADAMW8BIT
                          ? "adamw8bit" : c->optimizer == TRIT_TRAIN_GALORE ? "galore" : "qgalore");
    if (c->terngrad)
        return trit_error(TRIT_ERR_UNSUPPORTED, "--terngrad with --dist %s: the ternary round trip needs each whole "
                          "gradient on one rank; use --dist ddp", dist_name(c->dist));
    if (c->offload != TRIT_OFFLOAD_OFF && c->dist == TRIT_DIST_ZERO3)
        return trit_error(TRIT_ERR_UNSUPPORTED, "--offload with --dist zero3: the optimizer state and the frozen f32 "
                          "weights are sharded already (a rank holds 1/%d of each, the frozen weights gathered a "
                          "block at a time); leave --offload out or use --dist ddp", c->shard_group > 0 ?
                          (int)c->shard_group : ranks);
    if (c->offload != TRIT_OFFLOAD_OFF)
        return trit_error(TRIT_ERR_UNSUPPORTED, "--offload with --dist %s: the shard's optimizer state stays in "
                          "memory (it is 1/%d of the whole already); leave --offload out or use --dist ddp",
                          dist_name(c->dist), ranks);
    return TRIT_OK;
}

trit_status trit_trainer_zero_optim(trainer *t) {
    const trit_train_config *c = &t->cfg;
    trit_status cs = trit_trainer_zero_check(c, t->ranks);
    if (cs != TRIT_OK) return cs;
    trainer_zero *zs = calloc(1, sizeof *zs);
    if (!zs) return trit_error(TRIT_ERR_NOMEM, "zero: out of memory");
    t->zero = zs;
    zs->stage = c->dist == TRIT_DIST_ZERO3 ? 3 : c->dist == TRIT_DIST_ZERO2 ? 2 : 1;
    zs->shards = c->dist == TRIT_DIST_ZERO3 && c->shard_group > 0 ? (int)c->shard_group : t->ranks;
    zs->shard = t->rank % zs->shards;
    zs->prev_ckpt = -1;
    int64_t count = 0;
    if (!trit_flat_grads(trit_gpt_flat(t->model), &count))
        return trit_error(TRIT_ERR_STATE, "--dist %s: the model has no trained parameters", dist_name(c->dist));
    zs->count = count;
    trit_zero_shard_range(count, zs->shards, zs->shard, &zs->lo, &zs->hi);
    trit_status s = zs->stage == 3 ? shard_block(t, zs) : TRIT_OK;
    if (s == TRIT_OK) s = make_views(t, zs);
    // zero3: the weights outside this rank's part go now, before the graph's arena is allocated
    // (nothing reads them until the first forward's gathers; a resume writes them whole again).
    if (s == TRIT_OK && zs->stage == 3) trit_zero3_give_back_early(trit_gpt_flat(t->model), zs->dt, zs->plo, zs->phi);
    if (s != TRIT_OK) return s;
    trit_optim *o = shard_optim(t, zs);
    if (!o) return TRIT_ERR_INVALID;
    // 16-bit weights round with the draws each element gets in one process: its parameter's
    // index in the whole optimizer and its place in the parameter.
    for (int i = 0; s == TRIT_OK && i < trit_optim_num_params(o); i++) {
        const trit_tensor *v = trit_optim_param(o, i);
        int j = 0, k = 0;
        while (j < zs->n && zs->views[j] != v) j++;
        while (k < trit_optim_num_params(t->opt) && trit_optim_param(t->opt, k) != zs->full[j]) k++;
        s = j < zs->n && k < trit_optim_num_params(t->opt) ? trit_optim_set_rounding_key(o, i, k, zs->at[j])
                                                             : trit_error(TRIT_ERR_STATE, "zero: a piece of no parameter");
    }
    if (s != TRIT_OK) {
        trit_optim_free(o);
        return s;
    }
    trit_optim_free(t->opt);
    t->opt = o;
    return TRIT_OK;
}

// zero3's parameter groups, for each tensor of the layout: each transformer block's attention half
// (ln_1, attn.*) and MLP half (ln_2, mlp.*) are groups, and so is each run of other tensors
// between them. Halves, not whole blocks: the group in use and the one started ahead are then
// about one block together, not two.
static int *param_groups(const trit_flat *f) {
    const int n = trit_flat_count(f);
    int *group = malloc(sizeof(int) * ((size_t)n + 1));
    if (!group) {
        trit_error(TRIT_ERR_NOMEM, "zero3: out of memory");
        return NULL;
    }
    char prev[TRIT_NAME_MAX + 8] = "";
    int k = -1;
    for (int i = 0; i < n; i++) {
        const char *name = trit_flat_tensor(f, i)->name;
        char key[TRIT_NAME_MAX + 8] = "";
        const char *dot = strncmp(name, "h.", 2) == 0 ? strchr(name + 2, '.') : NULL;
        if (dot) {
            const bool attn = strncmp(dot + 1, "ln_1", 4) == 0 || strncmp(dot + 1, "attn", 4) == 0;
            snprintf(key, sizeof key, "%.*s.%s", (int)(dot - name), name, attn ? "attn" : "mlp");
        }
        if (k < 0 || strcmp(key, prev) != 0) k++;
        snprintf(prev, sizeof prev, "%s", key);
        group[i] = k;
    }
    return group;
}

trit_status trit_trainer_zero_start(trainer *t) {
    trainer_zero *zs = t->zero;
    const trit_flat *f = trit_gpt_flat(t->model);
    zs->z = trit_zero_new(f, t->ddp, zs->stage, zs->shards, zs->stage == 3 ? zs->bounds + zs->shards + 1 : NULL);
    if (!zs->z || zs->stage < 3) return zs->z ? TRIT_OK : TRIT_ERR_INVALID;
    int *group = param_groups(f);
    if (!group) return TRIT_ERR_NOMEM;
    zs->z3 = trit_zero3_new(zs->z, f, t->gg.graph, group, zs->bounds);
    free(group);
    if (!zs->z3) return TRIT_ERR_INVALID;
    // The memory report's parameter bytes in the sharded block, and the rest (kept whole).
    trit_graph_memory gm;
    trit_status s = trit_graph_memory_report(t->gg.graph, &gm);
    for (int p = 0; s == TRIT_OK && p < trit_graph_num_params(t->gg.graph); p++) {
        const trit_tensor *w = trit_graph_param(t->gg.graph, p);
        if (w->dtype == zs->dt) zs->sharded_bytes += (int64_t)trit_tensor_nbytes(w);
    }
    zs->whole_bytes = (int64_t)gm.param_bytes - zs->sharded_bytes;
    return s;
}

trit_status trit_trainer_zero_hold(trainer *t, bool hold) {
    trainer_zero *zs = t->zero;
    if (!zs || zs->stage < 3 || hold == zs->holding) return TRIT_OK;
    zs->holding = hold;
    if (!hold) {
        trit_zero3_release(zs->z3);
        return TRIT_OK;
    }
    double wait = 0;
    return trit_dist_agree(trit_zero3_gather_root(zs->z3, &wait), "gathering the weights on rank 0");
}

trit_status trit_trainer_zero_skip_micro(trainer *t, bool forward_too) {
    return t->zero && t->zero->z3 ? trit_zero3_replay(t->zero->z3, forward_too) : TRIT_OK;
}

void trit_trainer_zero_zero_grads(trainer *t) { trit_zero_zero_grads(t->zero->z); }

// The shard's squared norm: NaN for a non-finite gradient.
static double shard_sumsq(const trainer_zero *zs) {
    double norm = 0;
    if (trit_optim_grad_norm(zs->views, zs->n, &norm) != TRIT_OK) {
        trit_clear_error();
        return NAN;
    }
    return norm * norm;
}

trit_status trit_trainer_zero_update(trainer *t, double lr, double scale, trit_train_step_info *info, bool *finite) {
    trainer_zero *zs = t->zero;
    info->grad_norm = NAN;
    if (!*finite) return TRIT_OK;  // the loss said so on every rank (the exchange agreed on it)
    double wait = 0;
    trit_status s = trit_zero_sum_replicas(zs->z, &wait);
    t->comm_ms += wait + (zs->z3 ? trit_zero3_take_wait(zs->z3) : 0);  // zero3: the waits for gathers too
    if (s != TRIT_OK) return s;
    bool ok = !t->use_scaler || trit_grads_unscale(zs->views, zs->n, 1.0 / scale);
    double sq = ok ? shard_sumsq(zs) : NAN;
    // Each shard group holds the whole gradient once.
    s = trit_zero_allreduce_group(zs->z, &sq, 1);
    if (s != TRIT_OK) return s;
    const double norm = sqrt(sq);
    *finite = isfinite(norm);
    if (!*finite) return TRIT_OK;
    info->grad_norm = norm;
    // As trit_optim_clip_grad_norm: torch's factor, in fp32 from the fp32 norm.
    const float coef = t->cfg.clip > 0 ? (float)t->cfg.clip / ((float)norm + 1e-6f) : 1.0f;
    for (int j = 0; coef < 1.0f && j < zs->n; j++) {
        float *g = trit_tensor_ptr(zs->views[j]->grad);
        const int64_t n = trit_tensor_numel(zs->views[j]);
        for (int64_t i = 0; i < n; i++) g[i] *= coef;
    }
    s = trit_dist_agree(trit_optim_step(t->opt, lr), "the optimizer step of the shards");
    wait = 0;
    if (s == TRIT_OK && zs->stage < 3) s = trit_zero_gather_params(zs->z, &wait);
    t->comm_ms += wait;
    info->comm_ms = t->comm_ms;
    return s;
}

// Optimizer bytes of the shard, as the memory report counts them.
static int64_t shard_optimizer_bytes(const trainer *t) {
    int64_t b = 0;
    for (int i = 0; i < trit_optim_num_state(t->opt); i++) {
        trit_optim_state_buf sb;
        if (trit_optim_get_state(t->opt, i, &sb) == TRIT_OK)
            b += (int64_t)trit_dtype_nbytes(sb.dtype, sb.count) + (int64_t)sizeof(float) * sb.num_scales;
    }
    return b;
}

void trit_trainer_zero_memory(const trainer *t, struct trit_memory_report *mem) {
    const trainer_zero *zs = t->zero;
    if (zs->stage < 2) return;
    const size_t shard = sizeof(float) * (size_t)(zs->hi - zs->lo);
    mem->total -= mem->grads - shard;
    mem->grads = shard;
    if (zs->stage < 3) return;
    // The shard of the parameter block (frozen values of its dtype included), the most of the
    // rest a micro-batch holds gathered at once, and the parameters of other dtypes, kept whole.
    const size_t params = zs->elsize * (size_t)(zs->phi - zs->plo) + trit_zero3_gathered_peak(zs->z3) +
                          (size_t)zs->whole_bytes;
    mem->total -= mem->params - params;
    mem->params = params;
}

void trit_trainer_zero_print(const trainer *t, FILE *fp) {
    const trainer_zero *zs = t->zero;
    const double P = (double)zs->trained, N = (double)zs->shards, w = (double)zs->weight_bytes / P;
    const double g = 4.0 * (zs->stage >= 2 ? (double)(zs->hi - zs->lo) : (double)zs->count);
    const double o = (double)shard_optimizer_bytes(t);
    // ZeRO's per-rank bytes a trained parameter (Rajbhandari et al. 2020, Fig. 1), in trit's
    // dtypes: weights w (4 with f32 master weights), f32 gradients 4, AdamW's f32 moments K = 8.
    const double ddp = (w + 4 + 8) * P;
    const double formula = (zs->stage == 3 ? (w + 4 + 8) / N : zs->stage == 2 ? w + (4 + 8) / N : w + 4 + 8 / N) * P;
    const char *terms = zs->stage == 3 ? "(%g + 4 + 8) / N" : zs->stage == 2 ? "(%g + (4 + 8) / N)" : "(%g + 4 + 8 / N)";
    char shown[128];
    snprintf(shown, sizeof shown, terms, w);
    char groups[96] = "";
    if (zs->shards != t->ranks)
        snprintf(groups, sizeof groups, " (shard group %d of %d, %d ranks each)", t->rank / zs->shards,
                 t->ranks / zs->shards, zs->shards);
    if (zs->stage < 3) {
        fprintf(fp, "%s: rank %d of %d updates elements [%lld, %lld) of %lld: trained weights %.2f MB + gradients "
                "%.2f MB + optimizer %.2f MB = %.2f MB a rank (DDP %.2f MB; ZeRO's %s x %.0f parameters = %.2f MB)\n",
                dist_name(t->cfg.dist), t->rank, t->ranks, (long long)zs->lo, (long long)zs->hi, (long long)zs->count,
                (double)zs->weight_bytes / 1e6, g / 1e6, o / 1e6, ((double)zs->weight_bytes + g + o) / 1e6, ddp / 1e6,
                shown, P, formula / 1e6);
        return;
    }
    // Frozen values of the block's dtype are sharded too (w bytes each); other dtypes stay whole.
    const double F = (double)zs->frozen, W = (double)zs->whole_bytes, wb = (double)zs->elsize;
    const bool plain = zs->frozen == 0 && zs->whole_bytes == 0;
    const double mine = wb * (double)(zs->phi - zs->plo), gathered = (double)trit_zero3_gathered_peak(zs->z3);
    const double ddp3 = (wb + 4 + 8) * P + wb * F + W, formula3 = ((wb + 4 + 8) * P + wb * F) / N + W;
    char block[160] = "", whole[64] = "", trained[48] = "";
    if (plain) snprintf(trained, sizeof trained, " x %.0f parameters", P);
    if (!plain) {
        snprintf(block, sizeof block, " and values [%lld, %lld) of the %s parameter block's %lld (%.0f frozen)",
                 (long long)zs->plo, (long long)zs->phi, trit_dtype_name(zs->dt), (long long)zs->pcount, F);
        snprintf(shown, sizeof shown, "((%g + 4 + 8) x %.0f + %g x %.0f frozen) / N%s", wb, P, wb, F, W > 0 ? " + whole" : "");
    }
    if (W > 0) snprintf(whole, sizeof whole, " + %.2f MB kept whole (other dtypes)", W / 1e6);
    fprintf(fp, "zero3: rank %d of %d%s keeps elements [%lld, %lld) of %lld%s: weights %.2f MB (+ %.2f MB gathered at "
            "most)%s + gradients %.2f MB + optimizer %.2f MB = %.2f MB a rank, %.2f MB with the gathered (DDP %.2f MB; "
            "ZeRO's %s%s = %.2f MB, N = %d)\n", t->rank, t->ranks, groups, (long long)zs->lo, (long long)zs->hi,
            (long long)zs->count, block, mine / 1e6, gathered / 1e6, whole, g / 1e6, o / 1e6, (mine + W + g + o) / 1e6,
            (mine + W + gathered + g + o) / 1e6, ddp3 / 1e6, shown, trained, formula3 / 1e6, zs->shards);
}
