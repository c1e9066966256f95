// --recompute and --memory-budget for the trainer: the training graph is built under the chosen
// policy; `auto` builds it recomputing the fewest whole blocks (the first k) whose memory report
// total fits the budget, found by bisection over k (the total falls as k grows). A fixed policy
// with a budget must fit it too. The graph without recompute is planned once for the report's
// "saving" line. The candidates are planned only (trit_graph_set_plan_only): none of their arenas
// is allocated, so choosing never holds more than the chosen graph.
#include "trit/bench.h"
#include "train/trainer.h"

#include <stdio.h>

trit_status trit_trainer_build_graph(trainer *t, bool plan_only) {
    if (t->gg.graph) trit_gpt_graph_free(&t->gg);
    if (t->task == TRIT_TASK_EMBED) return trit_embed_build(t, plan_only);
    return plan_only ? trit_gpt_plan_train(t->model, t->cfg.batch, t->T, &t->gg)
                     : trit_gpt_build_train(t->model, t->cfg.batch, t->T, &t->gg);
}

// t->gg under `policy` on the first k blocks, planned only or built to run; the memory report's
// total and the arena into *total and *arena (either may be NULL).
static trit_status make_graph(trainer *t, trit_recompute_policy policy, int64_t k, bool plan_only, size_t *total,
                              size_t *arena) {
    trit_status s = trit_gpt_set_recompute_blocks(t->model, policy, k);
    if (s == TRIT_OK) s = trit_trainer_build_graph(t, plan_only);
    trit_memory_report r;
    if (s == TRIT_OK && (total || arena)) s = trit_memory_report_make(t->gg.graph, t->opt, 0, &r);
    if (s == TRIT_OK && total) *total = r.total;
    if (s == TRIT_OK && arena) *arena = r.arena;
    return s;
}

static trit_status too_small(const trainer *t, size_t need, const char *what) {
    return trit_error(TRIT_ERR_RANGE, "--memory-budget %g MB is too small: %s the run needs %.2f MB (the memory report's "
                      "total: weights, gradients, optimizer state, activations, workspace); raise the budget, lower "
                      "--batch or --seq, or --freeze parameters", t->cfg.memory_budget, what, (double)need / 1e6);
}

// auto: the fewest leading blocks recomputed whole whose plan fits, by bisection (the total
// falls as k grows); *k receives it.
static trit_status choose_blocks(trainer *t, size_t budget, int64_t *k) {
    const int64_t L = trit_gpt_get_config(t->model)->n_layer;
    size_t total = 0;
    *k = 0;
    if (t->total_plain <= budget) return TRIT_OK;
    trit_status s = make_graph(t, TRIT_RECOMPUTE_BLOCK, L, true, &total, NULL);
    if (s != TRIT_OK) return s;
    if (total > budget) return too_small(t, total, "even recomputing every block,");
    int64_t lo = 0, hi = L;  // fits(hi), !fits(lo)
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((s = make_graph(t, TRIT_RECOMPUTE_BLOCK, mid, true, &total, NULL)) != TRIT_OK) return s;
        if (total <= budget) hi = mid;
        else lo = mid;
    }
    *k = hi;
    return TRIT_OK;
}

static const char *policy_name(int64_t p) {
    static const char *const names[] = {"none", "block", "attn", "mlp", "auto"};
    return p >= 0 && p <= TRIT_RECOMPUTE_AUTO ? names[p] : "?";
}

trit_status trit_trainer_fit_memory(trainer *t) {
    const trit_train_config *c = &t->cfg;
    const int64_t L = trit_gpt_get_config(t->model)->n_layer;
    const bool is_auto = c->recompute == TRIT_RECOMPUTE_AUTO;
    if (c->recompute == TRIT_RECOMPUTE_NONE && c->memory_budget == 0) {
        t->recompute_blocks = 0;
        return make_graph(t, TRIT_RECOMPUTE_NONE, 0, false, NULL, NULL);
    }
    // Plans first (no arena is held), then the one graph that runs.
    trit_status s = make_graph(t, TRIT_RECOMPUTE_NONE, 0, true, &t->total_plain, &t->arena_plain);
    if (s != TRIT_OK) return s;
    const size_t budget = (size_t)(c->memory_budget * 1e6);
    const trit_recompute_policy policy = is_auto ? TRIT_RECOMPUTE_BLOCK : (trit_recompute_policy)c->recompute;
    int64_t k = c->recompute == TRIT_RECOMPUTE_NONE ? 0 : L;
    if (is_auto) {
        s = choose_blocks(t, budget, &k);
    } else if (c->memory_budget > 0) {
        size_t total = t->total_plain;
        if (policy != TRIT_RECOMPUTE_NONE) s = make_graph(t, policy, k, true, &total, NULL);
        char what[64];
        snprintf(what, sizeof what, "with --recompute %s", policy_name(c->recompute));
        if (s == TRIT_OK && total > budget) s = too_small(t, total, what);
    }
    t->recompute_blocks = k;
    return s == TRIT_OK ? make_graph(t, k ? policy : TRIT_RECOMPUTE_NONE, k, false, NULL, NULL) : s;
}

void trit_trainer_print_recompute(const trainer *t, FILE *fp) {
    const trit_train_config *c = &t->cfg;
    if (c->recompute == TRIT_RECOMPUTE_NONE || t->arena_plain == 0) return;
    trit_graph_memory gm;
    trit_memory_report r;
    if (trit_graph_memory_report(t->gg.graph, &gm) != TRIT_OK || trit_memory_report_make(t->gg.graph, t->opt, 0, &r) != TRIT_OK)
        return;
    const int64_t L = trit_gpt_get_config(t->model)->n_layer;
    fprintf(fp, "recompute: %s", policy_name(c->recompute));
    if (c->recompute == TRIT_RECOMPUTE_AUTO)
        fprintf(fp, " (block on %lld of %lld blocks to fit %g MB)", (long long)t->recompute_blocks, (long long)L,
                c->memory_budget);
    fprintf(fp, ": arena %.2f MB, %.2f MB without recompute (saves %.2f MB; total %.2f MB -> %.2f MB)\n",
            (double)gm.arena_bytes / 1e6, (double)t->arena_plain / 1e6,
            ((double)t->arena_plain - (double)gm.arena_bytes) / 1e6, (double)t->total_plain / 1e6, (double)r.total / 1e6);
}
