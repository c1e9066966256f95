// The mean loss of a model over the first windows of a token shard, read in order, so two models
// (say fp32 and its quantized copy) are compared on exactly the same tokens.
#include "trit/train.h"

trit_status trit_eval_loss(trit_gpt *m, const char *shard, int64_t batches, int64_t B, int64_t T, double *loss,
                           int64_t *used) {
    if (!m || !shard || !loss || batches < 0 || B < 1 || T < 1)
        return trit_error(TRIT_ERR_INVALID, "trit_eval_loss: need a model, a shard, batches >= 0, B >= 1 and T >= 1");
    trit_data *d = trit_data_open(shard, T);
    if (!d) return TRIT_ERR_IO;
    const int64_t V = trit_gpt_get_config(m)->vocab_size;
    trit_status s = TRIT_OK;
    if (trit_data_max_token(d) > V)
        s = trit_error(TRIT_ERR_RANGE, "'%s' holds token ids up to %d but the model's vocabulary has %lld: the shard "
                       "was made with another tokenizer", shard, trit_data_max_token(d) - 1, (long long)V);
    const int64_t per_epoch = trit_data_epoch_windows(d) / B;
    if (batches == 0) batches = per_epoch > 0 ? per_epoch : 1;
    trit_gpt_graph gg = {0};
    if (s == TRIT_OK) s = trit_gpt_build(m, B, T, &gg);
    if (s == TRIT_OK) trit_graph_set_training(gg.graph, false);
    double sum = 0;
    for (int64_t j = 0; j < batches && s == TRIT_OK; j++) {
        trit_data_batch(d, TRIT_DATA_SEQUENTIAL, 0, j, B, trit_tensor_ptr(gg.idx), trit_tensor_ptr(gg.targets));
        s = trit_graph_forward(gg.graph);
        if (s == TRIT_ERR_NUMERIC) s = TRIT_OK;  // a non-finite loss is reported as such
        sum += trit_tensor_get_flat(gg.loss, 0);
    }
    if (s == TRIT_OK) {
        *loss = sum / (double)batches;
        if (used) *used = batches;
    }
    if (gg.graph) trit_gpt_graph_free(&gg);
    trit_data_free(d);
    return s;
}
