// Logits of a run's model on tokens from a file: the graph's forward, as trit eval computes it.
//   gpt_logits RUN TOKENS B T OUT
// TOKENS: B*T little-endian int32 ids; OUT: the (B, T, V) logits as little-endian float32.
// bench/hf_gpt2_import.sh compares them with transformers' logits of the same model.
#include "trit/trit.h"
#include "trit/train.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: gpt_logits RUN TOKENS B T OUT\n");
        return 2;
    }
    const int64_t B = atoll(argv[3]), T = atoll(argv[4]);
    trit_gpt *m = trit_checkpoint_load_model(argv[1], NULL);
    uint8_t *raw = NULL;
    size_t n = 0;
    trit_gpt_graph gg = {0};
    int rc = 1;
    if (!m || trit_file_read_all(argv[2], &raw, &n) != TRIT_OK) {
        fprintf(stderr, "gpt_logits: %s\n", trit_last_error());
    } else if (B < 1 || T < 1 || n != (size_t)(B * T) * sizeof(int32_t)) {
        fprintf(stderr, "gpt_logits: %s holds %zu bytes, B*T int32 ids are %lld\n", argv[2], n, (long long)(B * T * 4));
    } else if (trit_gpt_build(m, B, T, &gg) != TRIT_OK) {
        fprintf(stderr, "gpt_logits: %s\n", trit_last_error());
    } else {
        int32_t *idx = gg.idx->data, *tgt = gg.targets->data;
        for (int64_t i = 0; i < B * T; i++) idx[i] = ((const int32_t *)raw)[i], tgt[i] = -1;
        if (trit_graph_forward(gg.graph) != TRIT_OK ||
            trit_file_write_atomic(argv[5], gg.logits->data, trit_tensor_nbytes(gg.logits)) != TRIT_OK)
            fprintf(stderr, "gpt_logits: %s\n", trit_last_error());
        else
            rc = 0;
    }
    trit_gpt_graph_free(&gg);
    free(raw);
    trit_gpt_free(m);
    return rc;
}
