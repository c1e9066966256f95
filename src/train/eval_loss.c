// The mean loss of a model over the first windows of a token shard, read in order, so two models
// (say fp32 and its quantized copy) are compared on exactly the same tokens: through the training
// graph (in eval mode), or through the decoder one token at a time.
#include "trit/train.h"

#include <math.h>
#include <stdlib.h>

// *out: the shard opened for windows of T tokens, checked against the model's vocabulary;
// *batches: 0 becomes one pass.
static trit_status open_windows(const trit_gpt *m, const char *shard, int64_t B, int64_t T, int64_t *batches,
                                trit_data **out) {
    trit_data *d = trit_data_open(shard, T);
    if (!d) return TRIT_ERR_IO;
    const int64_t V = trit_gpt_get_config(m)->vocab_size;
    const int32_t top = trit_data_max_token(d);
    if (top > V) {
        trit_data_free(d);
        return trit_error(TRIT_ERR_RANGE, "'%s' holds token ids up to %d but the model's vocabulary has %lld: the "
                          "shard was made with another tokenizer", shard, top - 1, (long long)V);
    }
    const int64_t per_epoch = trit_data_epoch_windows(d) / B;
    if (*batches == 0) *batches = per_epoch > 0 ? per_epoch : 1;
    *out = d;
    return TRIT_OK;
}

trit_status trit_eval_loss(trit_gpt *m, const char *shard, int64_t batches, int64_t B, int64_t T, double *loss,
                           int64_t *used) {
    if (!m || !shard || !loss || batches < 0 || B < 1 || T < 1)
        return trit_error(TRIT_ERR_INVALID, "trit_eval_loss: need a model, a shard, batches >= 0, B >= 1 and T >= 1");
    trit_data *d = NULL;
    trit_status s = open_windows(m, shard, B, T, &batches, &d);
    if (s != TRIT_OK) return s;
    trit_gpt_graph gg = {0};
    s = trit_gpt_build_eval(m, B, T, &gg);
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

// -log softmax(logits)[target], in double.
static double token_loss(const float *logits /* (V) */, int64_t V, int32_t target) {
    double mx = logits[0], z = 0;
    for (int64_t v = 1; v < V; v++) mx = logits[v] > mx ? logits[v] : mx;
    for (int64_t v = 0; v < V; v++) z += exp((double)logits[v] - mx);
    return mx + log(z) - (double)logits[target];
}

trit_status trit_eval_decode_loss(const trit_gpt *m, const char *shard, int64_t batches, int64_t B, int64_t T,
                                  double *loss, int64_t *used) {
    if (!m || !shard || !loss || batches < 0 || B < 1 || T < 1 || T > trit_gpt_get_config(m)->seq_len)
        return trit_error(TRIT_ERR_INVALID, "trit_eval_decode_loss: need a model, a shard, batches >= 0, B >= 1 and "
                          "1 <= T <= the model's context");
    trit_data *d = NULL;
    trit_status s = open_windows(m, shard, B, T, &batches, &d);
    if (s != TRIT_OK) return s;
    const int64_t V = trit_gpt_get_config(m)->vocab_size;
    int32_t *idx = malloc(sizeof(int32_t) * (size_t)(2 * B * T));  // (B, T) inputs, then (B, T) targets
    float *logits = malloc(sizeof(float) * (size_t)V);
    trit_gpt_cache *c = idx && logits ? trit_gpt_cache_new(m) : NULL;
    if (!idx || !logits) s = trit_error(TRIT_ERR_NOMEM, "trit_eval_decode_loss: out of memory");
    else if (!c) s = TRIT_ERR_NOMEM;  // the cache's own message stands
    double sum = 0;
    for (int64_t j = 0; j < batches && s == TRIT_OK; j++) {
        s = trit_data_batch(d, TRIT_DATA_SEQUENTIAL, 0, j, B, idx, idx + B * T);
        for (int64_t b = 0; b < B && s == TRIT_OK; b++) {
            trit_gpt_cache_reset(c);
            for (int64_t t = 0; t < T && s == TRIT_OK; t++) {
                s = trit_gpt_decode(m, c, idx[b * T + t], logits);
                if (s == TRIT_OK) sum += token_loss(logits, V, idx[B * T + b * T + t]);
            }
        }
    }
    if (s == TRIT_OK) {
        *loss = sum / (double)(batches * B * T);
        if (used) *used = batches;
    }
    trit_gpt_cache_free(c);
    free(logits);
    free(idx);
    trit_data_free(d);
    return s;
}
