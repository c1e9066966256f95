// The trainer's optimizer and its parameter groups. AdamW and AdamW8bit: the GPT-2 decay rule
// (matrices decay, vectors do not). GaLore and Q-GaLore project the matrices of the transformer
// blocks (attention and MLP weights, as galore-torch's examples target "attn" and "mlp"); the
// embeddings stay with plain AdamW, as in the paper.
#include "train/trainer.h"

#include <stdlib.h>
#include <string.h>

static bool in_block(const trit_tensor *p) { return strncmp(p->name, "h.", 2) == 0; }

static trit_optim *new_galore(const trit_optim_config *oc, const trit_train_config *c, trit_tensor *const *params,
                              int n) {
    trit_tensor **lists = calloc(3 * (size_t)n + 3, sizeof *lists);
    if (!lists) {
        trit_error(TRIT_ERR_NOMEM, "optimizer: out of memory");
        return NULL;
    }
    trit_tensor **low = lists, **mats = lists + n + 1, **vecs = lists + 2 * n + 2;
    int nl = 0, nm = 0, nv = 0;
    for (int i = 0; i < n; i++) {
        if (!trit_optim_wants_decay(params[i])) vecs[nv++] = params[i];
        else if (params[i]->ndim == 2 && in_block(params[i])) low[nl++] = params[i];
        else mats[nm++] = params[i];
    }
    const trit_optim_group g[3] = {
        {.params = low, .num_params = nl, .lr_scale = 1.0, .weight_decay = c->weight_decay, .low_rank = true},
        {.params = mats, .num_params = nm, .lr_scale = 1.0, .weight_decay = c->weight_decay},
        {.params = vecs, .num_params = nv, .lr_scale = 1.0, .weight_decay = 0.0},
    };
    trit_optim *o = trit_optim_new(oc, g, 3);
    free(lists);
    return o;
}

trit_optim *trit_trainer_new_optim(const trit_train_config *c, trit_tensor *const *params, int n) {
    trit_optim_config oc = trit_optim_adamw(c->beta1, c->beta2, c->eps);
    switch ((trit_train_optimizer)c->optimizer) {
    case TRIT_TRAIN_ADAMW: break;
    case TRIT_TRAIN_ADAMW8BIT: oc.kind = TRIT_OPTIM_ADAMW8BIT; break;
    case TRIT_TRAIN_GALORE:
    case TRIT_TRAIN_QGALORE: {
        trit_optim_config gc = c->optimizer == TRIT_TRAIN_GALORE
                                   ? trit_optim_galore(c->galore_rank, c->galore_update, c->galore_scale)
                                   : trit_optim_qgalore(c->galore_rank, c->galore_update, c->galore_scale);
        gc.beta1 = c->beta1, gc.beta2 = c->beta2, gc.eps = c->eps;
        return new_galore(&gc, c, params, n);
    }
    }
    return trit_optim_new_gpt2(&oc, params, n, c->weight_decay);
}
