// Sentence embeddings of texts from a model: the text's tokens (cut to the context) through the
// GPT in eval mode, the final norm's hidden states pooled as --task embed trained them.
#include "trit/train.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static trit_status embed_tokens(trit_gpt *m, int64_t pool, const int32_t *ids, int64_t n, float *out) {
    const trit_compute_policy pol = trit_gpt_get_policy(m);
    trit_graph *g = trit_graph_new_policy(&pol);
    if (!g) return TRIT_ERR_INVALID;
    const int64_t shape[2] = {1, n};
    trit_tensor *idx = trit_graph_input(g, TRIT_I32, 2, shape, "idx");
    trit_tensor *h = trit_gpt_hidden(g, m, idx);  // (1, n, C)
    trit_tensor *v = pool == TRIT_POOL_LAST ? trit_last_token_pool(g, h, NULL) : trit_mean_pool(g, h, NULL);  // (1, C)
    trit_status s = trit_graph_status(g);
    if (s == TRIT_OK) s = trit_graph_keep(g, v);
    if (s == TRIT_OK) s = trit_graph_compile(g, NULL);
    if (s == TRIT_OK) {
        trit_graph_set_training(g, false);
        memcpy(idx->data, ids, sizeof *ids * (size_t)n);
        s = trit_graph_forward(g);
    }
    const int64_t C = trit_gpt_get_config(m)->n_embd;
    if (s == TRIT_OK && (v->dtype != TRIT_F32 || trit_tensor_numel(v) != C))
        s = trit_error(TRIT_ERR_STATE, "embed: pooled vector of %lld %s values, expected %lld f32",
                       (long long)trit_tensor_numel(v), trit_dtype_name(v->dtype), (long long)C);
    if (s == TRIT_OK) memcpy(out, v->data, sizeof *out * (size_t)C);
    trit_graph_free(g);
    return s;
}

trit_status trit_embed_text(trit_gpt *m, const trit_tokenizer *tok, int64_t pool, const char *text, float *out,
                            bool *cut) {
    if (!m || !tok || !text || !out) return trit_error(TRIT_ERR_INVALID, "trit_embed_text: NULL argument");
    int32_t *ids = NULL;
    size_t n = 0;
    trit_status s = trit_tokenizer_encode(tok, text, strlen(text), &ids, &n);
    if (s != TRIT_OK) return s;
    const int64_t T = trit_gpt_get_config(m)->seq_len;
    if (cut) *cut = (int64_t)n > T;
    if (n == 0) s = trit_error(TRIT_ERR_INVALID, "embed: the text is empty (no tokens to pool)");
    else s = embed_tokens(m, pool, ids, (int64_t)n < T ? (int64_t)n : T, out);
    free(ids);
    return s;
}
