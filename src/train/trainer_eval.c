// What the trainer does besides stepping: filling the graph inputs, validation loss, the sample
// or task score shown at eval time, and checkpoints.
#include "trit/io.h"
#include "trit/train.h"
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void trit_trainer_fill(trainer *t, int64_t batch, bool validation) {
    if (t->task == TRIT_TASK_EMBED) {
        trit_embed_fill(t, batch, validation);
        return;
    }
    int32_t *x = trit_tensor_ptr(t->gg.idx), *y = trit_tensor_ptr(t->gg.targets);
    const trit_train_config *c = &t->cfg;
    if (t->task == TRIT_TASK_ADDITION) {
        trit_addition_batch(&t->add, (uint64_t)c->seed, batch, c->batch, validation, x, y);
    } else if (validation) {
        // Validation batches are fixed: sequential windows from the start of the val shard.
        trit_data_batch(t->val, TRIT_DATA_SEQUENTIAL, 0, batch, c->batch, x, y);
    } else {
        trit_data_batch(t->train, (trit_data_order)c->order, (uint64_t)c->seed, batch, c->batch, x, y);
    }
}

trit_status trit_trainer_val_loss(trainer *t, double *loss) {
    trit_graph *g = t->gg.graph;
    trit_graph_set_training(g, false);
    double sum = 0;
    trit_status s = TRIT_OK;
    for (int64_t j = 0; s == TRIT_OK && j < t->cfg.eval_batches; j++) {
        trit_trainer_fill(t, j, true);
        s = trit_graph_forward(g);
        sum += trit_tensor_get_flat(t->gg.loss, 0);
    }
    trit_graph_set_training(g, true);
    *loss = sum / (double)t->cfg.eval_batches;
    if (s == TRIT_ERR_NUMERIC) s = TRIT_OK;  // a NaN validation loss is reported, not fatal
    return s;
}

static void print_token(void *ctx, int32_t token) {
    const trit_tokenizer *tok = ctx;
    const uint8_t *b;
    size_t n;
    if (trit_tokenizer_token_bytes(tok, token, &b, &n) == TRIT_OK) fwrite(b, 1, n, stdout);
}

// The sample starts from a newline when the tokenizer has one, else from token 0.
static int32_t start_token(const trit_tokenizer *tok) {
    int32_t *ids = NULL;
    size_t n = 0;
    int32_t t = 0;
    if (trit_tokenizer_encode(tok, "\n", 1, &ids, &n) == TRIT_OK && n == 1) t = ids[0];
    else trit_clear_error();
    free(ids);
    return t;
}

trit_status trit_trainer_show(trainer *t, int64_t n_test, int64_t print, double *accuracy) {
    *accuracy = NAN;
    bool quiet = t->cfg.quiet != 0;
    if (t->task == TRIT_TASK_ADDITION) {
        int64_t correct = 0;
        trit_status s = trit_addition_score(&t->add, trit_trainer_whole_model(t), n_test, &correct, quiet ? 0 : print, stdout);
        if (s == TRIT_OK) *accuracy = (double)correct / (double)n_test;
        trit_train_offload_frozen_drop(t);  // the decoder read every frozen weight
        return s;
    }
    if (quiet || t->cfg.sample_tokens == 0) return TRIT_OK;
    trit_sample_config sc = trit_sample_config_default();
    sc.seed = (uint64_t)t->cfg.seed;
    sc.max_tokens = t->cfg.sample_tokens;
    int32_t start = start_token(t->tok);
    int32_t *out = malloc((size_t)sc.max_tokens * sizeof *out);
    if (!out) return trit_error(TRIT_ERR_NOMEM, "cannot allocate the sample");
    printf("---- sample ----\n");
    print_token(t->tok, start);
    trit_status s = trit_generate(trit_trainer_whole_model(t), &start, 1, &sc, out, NULL, print_token, t->tok);
    trit_train_offload_frozen_drop(t);  // the decoder read every frozen weight
    printf("\n----------------\n");
    fflush(stdout);
    free(out);
    return s;
}

trit_status trit_trainer_checkpoint(trainer *t) {
    if (t->zero) return trit_trainer_zero_checkpoint(t);
    if (t->tensor) return trit_trainer_tensor_checkpoint(t);
    char model[TRIT_PATH_MAX + 32], state[TRIT_PATH_MAX + 32], name[64] = TRIT_CKPT_STATE;
    // A pipeline's other stages write only their own state file (rank 0 the model).
    const bool stage = t->pipe && t->rank > 0;
    trit_status s = t->pipe ? trit_trainer_pipeline_state_name(t, name, sizeof name) : TRIT_OK;
    if (s == TRIT_OK) s = trit_trainer_path(t, TRIT_CKPT_MODEL, model, sizeof model);
    if (s == TRIT_OK) s = trit_trainer_path(t, name, state, sizeof state);
    // The weights file first: the state file (written last) is what a resume trusts, and it
    // holds the weights too, so a crash between the two writes loses nothing.
    if (s == TRIT_OK && !stage) s = trit_checkpoint_save_model(t->model, model, t->step);
    // A run with an adapter also leaves it alone, in PEFT's layout, beside the checkpoint.
    if (s == TRIT_OK && !stage && trit_gpt_get_config(t->model)->adapter.kind != TRIT_ADAPTER_NONE)
        s = trit_peft_save(t->model, t->cfg.out, t->cfg.init_from);
    trit_train_state st = {.config = t->cfg, .step = t->step, .data_batches = t->step * t->accum,
                           .tokenizer_crc = t->tok_crc, .has_scaler = t->use_scaler, .scaler = t->scaler,
                           .skipped = t->skipped, .skip_streak = t->skip_streak};
    st.config.resume[0] = 0;
    st.config.stop_after = TRIT_TRAIN_UNSET;  // where this run stops is not where the resumed one should
    if (s == TRIT_OK) s = trit_state_save(state, &st, t->model, t->opt);
    return s;
}
