// --recompute and --memory-budget for the trainer: the training graph is built under the chosen
// policy; `auto` builds it recomputing the fewest whole blocks (the first k) whose memory report
// total fits the budget, found by bisection over k (the total falls as k grows). A fixed policy
// with a budget must fit it too. The graph without recompute is planned once for the report's
// "saving" line.
#include "trit/bench.h"
#include "train/trainer.h"

#include <stdio.h>

static trit_status total_bytes(trainer *t, size_t *total) {
    trit_memory_report r;
    trit_status s = trit_memory_report_make(t->gg.graph, t->opt, 0, &r);
    if (s == TRIT_OK) *total = r.total;
    return s;
}

// t->gg rebuilt with `policy` on the first k blocks; its report's total into *total (may be NULL).
static trit_status rebuild(trainer *t, trit_recompute_policy policy, int64_t k, size_t *total) {
    if (t->gg.graph) trit_gpt_graph_free(&t->gg);
    trit_status s = trit_gpt_set_recompute_blocks(t->model, policy, k);
    if (s == TRIT_OK) s = trit_trainer_build_graph(t);
    if (s == TRIT_OK && total) s = total_bytes(t, total);
    return s;
}

trit_status trit_trainer_build_graph(trainer *t) {
    if (t->task == TRIT_TASK_EMBED) return trit_embed_build(t);
    return trit_gpt_build_train(t->model, t->cfg.batch, t->T, &t->gg);
}

static trit_status too_small(const trainer *t, size_t need, const char *what) {
    return trit_error(TRIT_ERR_RANGE, "--memory-budget %g MB is too small: %s the run needs %.2f MB (the memory report's "
                      "total: weights, gradients, optimizer state, activations, workspace); raise the budget, lower "
                      "--batch or --seq, or --freeze parameters", t->cfg.memory_budget, what, (double)need / 1e6);
}

static trit_status choose_blocks(trainer *t, size_t budget, size_t none_total) {
    const int64_t L = trit_gpt_get_config(t->model)->n_layer;
    size_t total = 0;
    t->recompute_blocks = 0;
    if (none_total <= budget) return rebuild(t, TRIT_RECOMPUTE_NONE, 0, NULL);
    trit_status s = rebuild(t, TRIT_RECOMPUTE_BLOCK, L, &total);
    if (s != TRIT_OK) return s;
    if (total > budget) return too_small(t, total, "even recomputing every block,");
    int64_t lo = 0, hi = L;  // fits(hi), !fits(lo)
    while (hi - lo > 1) {
        const int64_t mid = lo + (hi - lo) / 2;
        if ((s = rebuild(t, TRIT_RECOMPUTE_BLOCK, mid, &total)) != TRIT_OK) return s;
        if (total <= budget) hi = mid;
        else lo = mid;
    }
    t->recompute_blocks = hi;
    return rebuild(t, TRIT_RECOMPUTE_BLOCK, hi, NULL);
}

trit_status trit_trainer_fit_memory(trainer *t) {
    const trit_train_config *c = &t->cfg;
    const int64_t L = trit_gpt_get_config(t->model)->n_layer;
    const bool is_auto = c->recompute == TRIT_RECOMPUTE_AUTO;
    t->recompute_blocks = c->recompute == TRIT_RECOMPUTE_NONE ? 0 : L;
    if (!is_auto && c->recompute == TRIT_RECOMPUTE_NONE && c->memory_budget == 0) return TRIT_OK;
    // The graph without recompute, for auto's first candidate and the report's saving.
    size_t mine = 0, none_total = 0;
    trit_status s = total_bytes(t, &mine);
    if (s != TRIT_OK) return s;
    trit_graph_memory gm;
    if (c->recompute != TRIT_RECOMPUTE_NONE) {
        if ((s = rebuild(t, TRIT_RECOMPUTE_NONE, 0, &none_total)) != TRIT_OK) return s;
    } else {
        none_total = mine;
    }
    if ((s = trit_graph_memory_report(t->gg.graph, &gm)) != TRIT_OK) return s;
    t->arena_plain = gm.arena_bytes;
    t->total_plain = none_total;
    const size_t budget = (size_t)(c->memory_budget * 1e6);
    if (is_auto) return choose_blocks(t, budget, none_total);
    if (c->recompute != TRIT_RECOMPUTE_NONE && (s = rebuild(t, (trit_recompute_policy)c->recompute, L, &mine)) != TRIT_OK)
        return s;
    if (c->memory_budget > 0 && mine > budget) {
        char what[96];
        snprintf(what, sizeof what, "with --recompute %s", c->recompute == TRIT_RECOMPUTE_NONE ? "none" :
                 c->recompute == TRIT_RECOMPUTE_ATTN ? "attn" : c->recompute == TRIT_RECOMPUTE_MLP ? "mlp" : "block");
        return too_small(t, mine, what);
    }
    return TRIT_OK;
}

void trit_trainer_print_recompute(const trainer *t, FILE *fp) {
    const trit_train_config *c = &t->cfg;
    if (c->recompute == TRIT_RECOMPUTE_NONE || t->arena_plain == 0) return;
    static const char *const names[] = {"none", "block", "attn", "mlp", "auto"};
    trit_graph_memory gm;
    trit_memory_report r;
    if (trit_graph_memory_report(t->gg.graph, &gm) != TRIT_OK || trit_memory_report_make(t->gg.graph, t->opt, 0, &r) != TRIT_OK)
        return;
    const int64_t L = trit_gpt_get_config(t->model)->n_layer;
    fprintf(fp, "recompute: %s", names[c->recompute]);
    if (c->recompute == TRIT_RECOMPUTE_AUTO)
        fprintf(fp, " (block on %lld of %lld blocks to fit %g MB)", (long long)t->recompute_blocks, (long long)L,
                c->memory_budget);
    fprintf(fp, ": arena %.2f MB, %.2f MB without recompute (saves %.2f MB; total %.2f MB -> %.2f MB)\n",
            (double)gm.arena_bytes / 1e6, (double)t->arena_plain / 1e6,
            ((double)t->arena_plain - (double)gm.arena_bytes) / 1e6, (double)t->total_plain / 1e6, (double)r.total / 1e6);
}
