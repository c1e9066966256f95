// --task embed: a sentence-embedding model fine-tuned from (anchor, positive) pairs. The pairs
// file is JSON Lines, one {"anchor": "...", "positive": "..."} object a line (other fields are
// ignored, blank lines skipped); its last --val-fraction of pairs is held out. Each text is
// tokenized with the base's tokenizer, cut to the context T and right-padded. The graph runs the
// GPT over the anchors and over the positives (the same weights), pools each row's hidden states
// (mean, or the last real token) and takes InfoNCE with in-batch negatives at --temperature: row
// i's positive against the other rows' positives. Causal attention makes the padding invisible to
// the real positions, and pooling reads only those.
#define _POSIX_C_SOURCE 200809L
#include "trit/train.h"
#include "train/trainer.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { TRIT_STREAM_EMBED = 0xe3bd };  // the order of training pairs

struct trit_embed_task {
    int64_t n_pairs, n_train, n_val;  // pairs in the file, for training, held out
    int32_t *tokens;                  // every text's tokens, text j = 2 pair + (0 anchor, 1 positive)
    int64_t *off;                     // (2 n_pairs + 1): text j is tokens[off[j], off[j + 1])
    int64_t *perm;                    // (n_train) the order of the current epoch
    int64_t perm_epoch;               // -1 before the first
    trit_tensor *idx[2], *len[2];     // graph inputs: anchors, positives: (B, T) i32 and (B) i32
};

// ---- reading the pairs ----------------------------------------------------------------------

typedef struct pair_reader {
    const char *path;
    const trit_tokenizer *tok;
    int64_t T;
    struct trit_embed_task *e;
    int64_t cap_tokens, cap_texts, n_texts;
} pair_reader;

static trit_status push_text(pair_reader *r, const char *text, int64_t line, const char *field) {
    struct trit_embed_task *e = r->e;
    int32_t *ids = NULL;
    size_t n = 0;
    if (trit_tokenizer_encode(r->tok, text, strlen(text), &ids, &n) != TRIT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", trit_last_error());
        return trit_error(TRIT_ERR_FORMAT, "%s line %lld: the \"%s\" text cannot be tokenized with the base's "
                          "tokenizer: %s", r->path, (long long)line, field, why);
    }
    if (n == 0) {
        free(ids);
        return trit_error(TRIT_ERR_FORMAT, "%s line %lld: the \"%s\" text is empty: every anchor and positive needs "
                          "at least one token", r->path, (long long)line, field);
    }
    const int64_t keep = (int64_t)n < r->T ? (int64_t)n : r->T;  // cut to the context
    const int64_t at = e->off[r->n_texts];
    if (at + keep > r->cap_tokens || r->n_texts + 2 > r->cap_texts) {
        const int64_t ct = (at + keep) * 2 + 1024, cx = (r->n_texts + 2) * 2 + 64;
        int32_t *t = realloc(e->tokens, sizeof *t * (size_t)ct);
        if (t) e->tokens = t;
        int64_t *o = t ? realloc(e->off, sizeof *o * (size_t)cx) : NULL;
        if (o) e->off = o;
        if (!t || !o) {
            free(ids);
            return trit_error(TRIT_ERR_NOMEM, "%s: out of memory at line %lld", r->path, (long long)line);
        }
        r->cap_tokens = ct, r->cap_texts = cx;
    }
    memcpy(e->tokens + at, ids, sizeof *ids * (size_t)keep);
    free(ids);
    e->off[++r->n_texts] = at + keep;
    return TRIT_OK;
}

static trit_status read_line(pair_reader *r, char *line, int64_t no) {
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) line[--n] = 0;
    if (n == 0) return TRIT_OK;
    cJSON *o = cJSON_Parse(line);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return trit_error(TRIT_ERR_FORMAT, "%s line %lld is not a JSON object: each line holds {\"anchor\": \"...\", "
                          "\"positive\": \"...\"}", r->path, (long long)no);
    }
    static const char *const fields[2] = {"anchor", "positive"};
    trit_status s = TRIT_OK;
    for (int k = 0; k < 2 && s == TRIT_OK; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, fields[k]);
        if (!v) s = trit_error(TRIT_ERR_FORMAT, "%s line %lld has no \"%s\" field: each line holds {\"anchor\": \"...\", "
                               "\"positive\": \"...\"}", r->path, (long long)no, fields[k]);
        else if (!cJSON_IsString(v)) s = trit_error(TRIT_ERR_FORMAT, "%s line %lld: \"%s\" is not a string", r->path,
                                                    (long long)no, fields[k]);
        else s = push_text(r, v->valuestring, no, fields[k]);
    }
    cJSON_Delete(o);
    return s;
}

static trit_status read_pairs(pair_reader *r) {
    FILE *fp = fopen(r->path, "r");
    if (!fp) return trit_error(TRIT_ERR_IO, "cannot open '%s' (--task embed reads --data PAIRS.jsonl)", r->path);
    if (!(r->e->off = calloc(1, sizeof *r->e->off))) {
        fclose(fp);
        return trit_error(TRIT_ERR_NOMEM, "out of memory");
    }
    r->cap_texts = 1;
    char *line = NULL;
    size_t cap = 0;
    trit_status s = TRIT_OK;
    for (int64_t no = 1; s == TRIT_OK && getline(&line, &cap, fp) >= 0; no++) s = read_line(r, line, no);
    free(line);
    fclose(fp);
    r->e->n_pairs = r->n_texts / 2;
    return s;
}

// ---- the task -------------------------------------------------------------------------------------

void trit_embed_free(struct trit_embed_task *e) {
    if (!e) return;
    free(e->tokens);
    free(e->off);
    free(e->perm);
    free(e);
}

trit_status trit_embed_load(trainer *t, const trit_tokenizer *tok) {
    const trit_train_config *c = &t->cfg;
    struct trit_embed_task *e = calloc(1, sizeof *e);
    if (!e) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    t->embed = e;
    e->perm_epoch = -1;
    pair_reader r = {.path = c->data, .tok = tok, .T = t->T, .e = e};
    trit_status s = read_pairs(&r);
    if (s != TRIT_OK) return s;
    e->n_val = (int64_t)floor((double)e->n_pairs * c->val_fraction);
    e->n_train = e->n_pairs - e->n_val;
    if (e->n_val < c->batch || e->n_train < c->batch)
        return trit_error(TRIT_ERR_INVALID, "'%s' holds %lld pairs: %lld for training and %lld held out (--val-fraction "
                          "%g), but each needs at least --batch %lld (in-batch negatives come from the batch): give "
                          "more pairs, or lower --batch", c->data, (long long)e->n_pairs, (long long)e->n_train,
                          (long long)e->n_val, c->val_fraction, (long long)c->batch);
    if (!(e->perm = malloc(sizeof *e->perm * (size_t)e->n_train))) return trit_error(TRIT_ERR_NOMEM, "out of memory");
    return TRIT_OK;
}

int64_t trit_embed_num_pairs(const trainer *t, bool validation) {
    return t->embed ? (validation ? t->embed->n_val : t->embed->n_train) : 0;
}

trit_status trit_embed_build(trainer *t, bool plan_only) {
    struct trit_embed_task *e = t->embed;
    const trit_compute_policy pol = trit_gpt_get_policy(t->model);
    trit_graph *g = trit_graph_new_policy(&pol);
    if (!g) return TRIT_ERR_INVALID;
    memset(&t->gg, 0, sizeof t->gg);
    t->gg.graph = g;
    trit_graph_set_plan_only(g, plan_only);
    const int64_t bt[2] = {t->cfg.batch, t->T};
    trit_tensor *pooled[2];
    for (int k = 0; k < 2; k++) {
        e->idx[k] = trit_graph_input(g, TRIT_I32, 2, bt, k ? "positive" : "anchor");
        e->len[k] = trit_graph_input(g, TRIT_I32, 1, bt, k ? "positive_len" : "anchor_len");
        trit_tensor *h = trit_gpt_hidden(g, t->model, e->idx[k]);  // (B, T, C)
        pooled[k] = t->cfg.pool == TRIT_POOL_LAST ? trit_last_token_pool(g, h, e->len[k]) : trit_mean_pool(g, h, e->len[k]);
    }
    t->gg.loss = trit_info_nce(g, pooled[0], pooled[1], t->cfg.temperature, TRIT_REDUCE_MEAN);
    return trit_graph_compile(g, t->gg.loss);
}

// Training pair `k` of the run: epochs of whole batches, each a Philox shuffle of the pairs
// keyed by (seed, epoch), so no batch holds a pair twice and batch b is a function of b.
static int64_t train_pair(struct trit_embed_task *e, uint64_t seed, int64_t B, int64_t batch, int64_t i) {
    const int64_t per_epoch = e->n_train / B, epoch = batch / per_epoch;
    if (epoch != e->perm_epoch) {
        for (int64_t j = 0; j < e->n_train; j++) e->perm[j] = j;
        for (int64_t j = e->n_train - 1; j > 0; j--) {
            const uint64_t r = (uint64_t)trit_rng_u32(seed, TRIT_STREAM_EMBED ^ ((uint64_t)epoch << 20), (uint64_t)j);
            const int64_t k = (int64_t)(r % (uint64_t)(j + 1)), tmp = e->perm[j];
            e->perm[j] = e->perm[k], e->perm[k] = tmp;
        }
        e->perm_epoch = epoch;
    }
    return e->perm[(batch % per_epoch) * B + i];
}

void trit_embed_fill(trainer *t, int64_t batch, bool validation) {
    struct trit_embed_task *e = t->embed;
    const int64_t B = t->cfg.batch, T = t->T;
    for (int64_t i = 0; i < B; i++) {
        const int64_t pair = validation ? e->n_train + (batch * B + i) % e->n_val
                                        : train_pair(e, (uint64_t)t->cfg.seed, B, batch, i);
        for (int k = 0; k < 2; k++) {
            const int64_t j = 2 * pair + k, n = e->off[j + 1] - e->off[j];
            int32_t *row = (int32_t *)e->idx[k]->data + i * T;
            memcpy(row, e->tokens + e->off[j], sizeof *row * (size_t)n);
            memset(row + n, 0, sizeof *row * (size_t)(T - n));  // padding: never pooled, never attended to
            ((int32_t *)e->len[k]->data)[i] = (int32_t)n;
        }
    }
}
