// Sampling: temperature, top-k, top-p (nucleus) and a multinomial draw whose uniform number is
// Philox (seed, sampling stream, draw index), so a seed fixes the text on any machine. Text is
// generated through the model's KV cache, one O(T) decode per token, by the one decode loop
// (trit_decode_tokens) that greedy decoding, the addition task and `trit bench --decode` use too.
#include "trit/train.h"
#include "train/train_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

trit_sample_config trit_sample_config_default(void) {
    return (trit_sample_config){.temperature = 0.8, .top_k = 0, .top_p = 1.0, .seed = 1, .max_tokens = 256,
                                 .kv_cache = TRIT_F32};
}

typedef struct scored {
    double p;  // logit / temperature, then probability mass
    int32_t id;
} scored;

struct trit_sampler {
    int64_t V;
    trit_sample_config cfg;
    scored *tok;  // (V) scratch
};

trit_status trit_sample_config_check(const trit_sample_config *c) {
    if (!c) return trit_error(TRIT_ERR_INVALID, "sampler: config is NULL");
    if (!(c->temperature >= 0) || c->top_k < 0 || !(c->top_p > 0 && c->top_p <= 1))
        return trit_error(TRIT_ERR_INVALID,
                          "sampler: temperature must be >= 0 (got %g), top-k >= 0 (got %lld), top-p in "
                          "(0, 1] (got %g)", c->temperature, (long long)c->top_k, c->top_p);
    if (c->kv_cache != TRIT_F32 && c->kv_cache != TRIT_F16)
        return trit_error(TRIT_ERR_INVALID, "sampler: the KV cache is f32 or f16, not %s",
                          trit_dtype_name(c->kv_cache));
    return TRIT_OK;
}

static trit_status check_config(int64_t V, const trit_sample_config *c) {
    if (V < 1 || V > INT32_MAX || !c)
        return trit_error(TRIT_ERR_INVALID, "sampler: vocabulary %lld out of range", (long long)V);
    return trit_sample_config_check(c);
}

trit_sampler *trit_sampler_new(int64_t V, const trit_sample_config *c) {
    if (check_config(V, c) != TRIT_OK) return NULL;
    trit_sampler *s = calloc(1, sizeof *s);
    if (s) s->tok = malloc((size_t)V * sizeof *s->tok);
    if (!s || !s->tok) {
        if (s) free(s);
        trit_error(TRIT_ERR_NOMEM, "sampler: cannot allocate scratch for %lld tokens", (long long)V);
        return NULL;
    }
    s->V = V;
    s->cfg = *c;
    return s;
}

void trit_sampler_free(trit_sampler *s) {
    if (!s) return;
    free(s->tok);
    free(s);
}

// Highest first; equal values by lower id, so the order is total and qsort's result unique.
static int by_value_desc(const void *a, const void *b) {
    const scored *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int32_t argmax(const float *logits, int64_t V) {
    int64_t best = 0;
    for (int64_t i = 1; i < V; i++)
        if (logits[i] > logits[best]) best = i;
    return (int32_t)best;
}

int32_t trit_sampler_pick(trit_sampler *s, const float *logits, uint64_t draw) {
    const trit_sample_config *c = &s->cfg;
    if (c->temperature == 0 || c->top_k == 1) return argmax(logits, s->V);
    int64_t n = s->V;
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        s->tok[i] = (scored){logits[i] / c->temperature, (int32_t)i};
        if (s->tok[i].p > mx) mx = s->tok[i].p;
    }
    bool truncate = (c->top_k > 0 && c->top_k < n) || c->top_p < 1;
    if (truncate) {
        qsort(s->tok, (size_t)n, sizeof *s->tok, by_value_desc);
        if (c->top_k > 0 && c->top_k < n) n = c->top_k;
    }
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        s->tok[i].p = exp(s->tok[i].p - mx);
        total += s->tok[i].p;
    }
    if (c->top_p < 1) {
        // The smallest prefix of the sorted tokens whose mass reaches top_p (at least one).
        double cum = 0;
        int64_t keep = 0;
        while (keep < n && cum < c->top_p * total) cum += s->tok[keep++].p;
        n = keep > 0 ? keep : 1;
        total = cum > 0 ? cum : s->tok[0].p;
    }
    double u = (double)trit_rng_uniform(c->seed, TRIT_STREAM_SAMPLE, draw) * total;
    double cum = 0;
    for (int64_t i = 0; i < n; i++) {
        cum += s->tok[i].p;
        if (u < cum) return s->tok[i].id;
    }
    return s->tok[n - 1].id;  // u within rounding of the total
}

// Token j of the history: the prompt, then the tokens made so far.
typedef struct history {
    const int32_t *prompt, *out;
    int64_t n_prompt;
} history;

static int32_t token_at(const history *h, int64_t j) { return j < h->n_prompt ? h->prompt[j] : h->out[j - h->n_prompt]; }

// Where the cache's tokens start once token j is fed, when they started at `start` before: a full
// cache restarts from the T/2 - 1 tokens before j.
static int64_t window_start(int64_t start, int64_t j, int64_t T) {
    const int64_t keep = T / 2 > 0 ? T / 2 - 1 : 0;
    return j - start >= T ? j - keep : start;
}

// Feed token j (of a history whose cache holds tokens [*start, j)): decoded on top of the cache,
// or, when the cache is full, the cache refilled with the tokens of the new window at once.
static trit_status feed(const trit_gpt *m, trit_gpt_cache *cache, const history *h, int64_t j, int64_t *start,
                        int32_t **scratch, float *logits) {
    const int64_t T = trit_gpt_get_config(m)->seq_len, from = window_start(*start, j, T);
    if (from == *start) return trit_gpt_decode(m, cache, token_at(h, j), logits);
    if (!*scratch && !(*scratch = malloc((size_t)T * sizeof **scratch)))
        return trit_error(TRIT_ERR_NOMEM, "decode: out of memory");
    for (int64_t k = from; k <= j; k++) (*scratch)[k - from] = token_at(h, k);
    *start = from;
    trit_gpt_cache_reset(cache);
    return trit_gpt_prefill(m, cache, *scratch, j - from + 1, logits);
}

trit_status trit_decode_tokens(const trit_gpt *m, trit_gpt_cache *cache, const int32_t *prompt, int64_t n_prompt,
                               int64_t n, const trit_decode_fns *fns, int32_t *out, float *logits) {
    if (!m || !cache || !prompt || n_prompt < 1 || n < 0 || (n > 0 && !out) || !logits)
        return trit_error(TRIT_ERR_INVALID, "decode: needs a model, its cache, a prompt of >= 1 token, n >= 0, an "
                          "output for n tokens and logits");
    const int64_t T = trit_gpt_get_config(m)->seq_len, V = trit_gpt_get_config(m)->vocab_size;
    // A prompt longer than the context: the window it would leave when fed token by token.
    int64_t start = 0;
    for (int64_t j = 0; j < n_prompt; j++) start = window_start(start, j, T);
    trit_gpt_cache_reset(cache);
    trit_status s = trit_gpt_prefill(m, cache, prompt + start, n_prompt - start, logits);
    const history h = {prompt, out, n_prompt};
    int32_t *scratch = NULL;
    for (int64_t i = 0; s == TRIT_OK && i < n; i++) {
        const int32_t t = fns && fns->pick ? fns->pick(fns->ctx, logits, i) : argmax(logits, V);
        out[i] = t;
        if (fns && fns->on_token) fns->on_token(fns->ctx, i, t);
        if (i + 1 < n) s = feed(m, cache, &h, n_prompt + i, &start, &scratch, logits);
    }
    free(scratch);
    return s;
}

trit_status trit_greedy_decode(const trit_gpt *m, trit_gpt_cache *cache, const int32_t *prompt, int64_t n_prompt,
                               int64_t n, int32_t *out, float *logits) {
    return trit_decode_tokens(m, cache, prompt, n_prompt, n, NULL, out, logits);
}

typedef struct generating {
    trit_sampler *sampler;
    void (*on_token)(void *ctx, int32_t token);
    void *ctx;
    int64_t made;
} generating;

static int32_t sampler_pick(void *ctx, const float *logits, int64_t i) {
    const generating *g = ctx;
    return trit_sampler_pick(g->sampler, logits, (uint64_t)i);
}

static void generated(void *ctx, int64_t i, int32_t token) {
    generating *g = ctx;
    g->made = i + 1;
    if (g->on_token) g->on_token(g->ctx, token);
}

trit_status trit_generate(const trit_gpt *m, const int32_t *prompt, int64_t n_prompt,
                          const trit_sample_config *c, int32_t *out, int64_t *n_out,
                          void (*on_token)(void *ctx, int32_t token), void *ctx) {
    if (!m || !prompt || n_prompt < 1 || !c || c->max_tokens < 0 || (c->max_tokens > 0 && !out))
        return trit_error(TRIT_ERR_INVALID, "trit_generate: needs a model, a prompt of >= 1 token "
                                            "and an output buffer");
    int64_t V = trit_gpt_get_config(m)->vocab_size;
    for (int64_t i = 0; i < n_prompt; i++)
        if (prompt[i] < 0 || prompt[i] >= V)
            return trit_error(TRIT_ERR_RANGE, "prompt token %d at %lld is outside the vocabulary of %lld",
                              prompt[i], (long long)i, (long long)V);
    trit_status bad = check_config(V, c);  // before allocating, so its message is the one kept
    if (bad != TRIT_OK) return bad;
    generating g = {trit_sampler_new(V, c), on_token, ctx, 0};
    trit_gpt_cache *cache = trit_gpt_cache_new_kv(m, c->kv_cache);
    float *logits = malloc((size_t)V * sizeof *logits);
    trit_status s = g.sampler && cache && logits ? TRIT_OK : trit_error(TRIT_ERR_NOMEM, "trit_generate: out of memory");
    const trit_decode_fns fns = {sampler_pick, generated, &g};
    if (s == TRIT_OK) s = trit_decode_tokens(m, cache, prompt, n_prompt, c->max_tokens, &fns, out, logits);
    if (n_out) *n_out = g.made;
    free(logits);
    trit_gpt_cache_free(cache);
    trit_sampler_free(g.sampler);
    return s;
}
