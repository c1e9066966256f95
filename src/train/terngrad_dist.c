// --dist ddp --terngrad: the gradients exchanged in TernGrad's ternary wire form between the
// ranks (or, with --terngrad-between-groups G, summed in fp32 inside groups of G ranks and
// exchanged ternary between the groups) instead of DDP's fp32 all-reduce (src/dist/terngrad_mpi.c).
#include "train/trainer.h"
#include "trit/dist.h"

#include <stdio.h>

trit_status trit_trainer_setup_terngrad_dist(trainer *t) {
    const trit_train_config *c = &t->cfg;
    const trit_terngrad_dist_config tc = {
        .bucket_mb = c->bucket_mb, .min_size = c->terngrad_min_size, .scale_bucket = c->terngrad_bucket,
        .clip_sigma = c->terngrad_clip, .seed = (uint64_t)c->seed, .group = (int)c->terngrad_groups,
    };
    t->tgx = trit_terngrad_dist_new(trit_gpt_flat(t->model), t->gg.graph, &tc);
    return trit_dist_agree(t->tgx ? TRIT_OK : TRIT_ERR_INVALID, "making the ternary gradient exchange");
}

void trit_trainer_print_terngrad_dist(const trainer *t, FILE *fp) {
    const trit_terngrad_dist_bytes b = trit_terngrad_dist_bytes_per_step(t->tgx);
    const int64_t G = t->cfg.terngrad_groups;
    int64_t fp32 = 0;  // what DDP would all-reduce: the whole gradient block
    trit_flat_grads(trit_gpt_flat(t->model), &fp32);
    fp32 *= (int64_t)sizeof(float);
    char groups[96] = "";
    if (G > 1)
        snprintf(groups, sizeof groups, " (%lld groups of %lld, fp32 inside: %.2f MB)", (long long)(t->ranks / G),
                 (long long)G, (double)b.group_fp32 / 1e6);
    fprintf(fp, "terngrad: %d ranks%s, ternary gradients all-gathered in %d bucket%s: %.1f kB a step (codes %.1f kB, "
            "fp32 gradients under --terngrad-min-size %.1f kB, scales %.2f kB) against %.1f kB of fp32 DDP (1/%.1f)\n",
            t->ranks, groups, trit_terngrad_dist_num_buckets(t->tgx), trit_terngrad_dist_num_buckets(t->tgx) == 1 ? "" : "s",
            (double)b.total / 1e3, (double)b.codes / 1e3, (double)b.fp32 / 1e3, (double)b.scales / 1e3,
            (double)fp32 / 1e3, (double)fp32 / (double)(b.total - b.group_fp32));
}
