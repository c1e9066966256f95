// Training windows over a token shard. Window w is a pure function of (order, seed, w): random
// windows start at a Philox draw keyed by (seed, w), sequential windows tile the tokens epoch
// after epoch. A batch is B consecutive windows, so a trainer that numbers its batches by step
// reads the same data whether or not the run was interrupted.
#include "trit/io.h"
#include "trit/train.h"
#include "train/train_internal.h"

#include <stdlib.h>
#include <string.h>

struct trit_data {
    uint16_t *tokens;  // n tokens
    int64_t n;
    int64_t T;         // a window holds T + 1 tokens (inputs and their next tokens)
    int32_t max_token;
};

static trit_data *data_wrap(uint16_t *tokens, int64_t n, int64_t T, const char *what) {
    if (T < 1) {
        free(tokens);
        trit_error(TRIT_ERR_INVALID, "sequence length must be >= 1, got %lld", (long long)T);
        return NULL;
    }
    if (n < T + 1) {
        free(tokens);
        trit_error(TRIT_ERR_INVALID,
                   "%s holds %lld tokens, fewer than one window of --seq %lld + 1: use more data "
                   "or a shorter --seq", what, (long long)n, (long long)T);
        return NULL;
    }
    trit_data *d = calloc(1, sizeof *d);
    if (!d) {
        free(tokens);
        trit_error(TRIT_ERR_NOMEM, "cannot allocate a data loader");
        return NULL;
    }
    d->tokens = tokens;
    d->n = n;
    d->T = T;
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] >= d->max_token) d->max_token = (int32_t)tokens[i] + 1;
    return d;
}

trit_data *trit_data_open(const char *shard_path, int64_t T) {
    uint16_t *tokens = NULL;
    int64_t n = 0;
    if (trit_shard_read(shard_path, &tokens, &n) != TRIT_OK) return NULL;
    char what[TRIT_PATH_MAX + 16];
    snprintf(what, sizeof what, "'%s'", shard_path);
    return data_wrap(tokens, n, T, what);
}

trit_data *trit_data_from_tokens(const uint16_t *tokens, int64_t n, int64_t T) {
    if (n < 0 || (n > 0 && !tokens)) {
        trit_error(TRIT_ERR_INVALID, "trit_data_from_tokens: bad token array");
        return NULL;
    }
    uint16_t *copy = malloc((size_t)(n > 0 ? n : 1) * sizeof *copy);
    if (!copy) {
        trit_error(TRIT_ERR_NOMEM, "cannot copy %lld tokens", (long long)n);
        return NULL;
    }
    if (n > 0) memcpy(copy, tokens, (size_t)n * sizeof *copy);
    return data_wrap(copy, n, T, "the token array");
}

void trit_data_free(trit_data *d) {
    if (!d) return;
    free(d->tokens);
    free(d);
}

int64_t trit_data_num_tokens(const trit_data *d) { return d->n; }
int64_t trit_data_seq_len(const trit_data *d) { return d->T; }
int64_t trit_data_epoch_windows(const trit_data *d) { return (d->n - 1) / d->T; }
int32_t trit_data_max_token(const trit_data *d) { return d->max_token; }

int64_t trit_data_window_start(const trit_data *d, trit_data_order order, uint64_t seed, int64_t w) {
    if (order == TRIT_DATA_SEQUENTIAL) return (w % trit_data_epoch_windows(d)) * d->T;
    // Starts are uniform over [0, n - T - 1]; 64 random bits make the modulo bias negligible.
    uint64_t range = (uint64_t)(d->n - d->T);
    uint64_t r = (uint64_t)trit_rng_u32(seed, TRIT_STREAM_DATA, 2 * (uint64_t)w) << 32 |
                 trit_rng_u32(seed, TRIT_STREAM_DATA, 2 * (uint64_t)w + 1);
    return (int64_t)(r % range);
}

trit_status trit_data_batch(const trit_data *d, trit_data_order order, uint64_t seed, int64_t batch,
                            int64_t B, int32_t *x, int32_t *y) {
    if (!d || !x || !y || B < 1 || batch < 0)
        return trit_error(TRIT_ERR_INVALID, "trit_data_batch: bad arguments");
    const int64_t T = d->T;
    for (int64_t b = 0; b < B; b++) {
        const uint16_t *src = d->tokens + trit_data_window_start(d, order, seed, batch * B + b);
        for (int64_t t = 0; t < T; t++) {
            x[b * T + t] = src[t];
            y[b * T + t] = src[t + 1];
        }
    }
    return TRIT_OK;
}
