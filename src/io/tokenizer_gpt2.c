// GPT-2's byte-level BPE, encoding as tiktoken does: text is cut at special tokens, each piece
// pre-tokenized (src/io/pretokenize_gpt2.c); a chunk that is itself a token is that token, else
// its bytes are merged pairwise, always the adjacent pair whose concatenation is the token of
// lowest merge rank, leftmost first. The pair table is built from spellings (every split of
// every merged token into two tokens), not only from the merge list, because that is what
// merging by the rank of the concatenation means.
#include "io/merge_heap.h"
#include "io/tokenizer_internal.h"
#include "io/tokenizer_gpt2.h"
#include "io/io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANK_BYTE (-1)
#define RANK_SPECIAL (-2)

// Printable spelling of a token for messages: ASCII as is, other bytes as \xNN, cut at ~48.
static const char *spell(char *buf, size_t cap, const uint8_t *s, int64_t n) {
    size_t k = 0;
    for (int64_t i = 0; i < n && k + 8 < cap; i++) {
        if (i >= 48) {
            k += (size_t)snprintf(buf + k, cap - k, "...");
            break;
        }
        if (s[i] >= 0x20 && s[i] < 0x7F && s[i] != '\\') buf[k++] = (char)s[i];
        else k += (size_t)snprintf(buf + k, cap - k, "\\x%02x", s[i]);
    }
    buf[k] = 0;
    return buf;
}

static int64_t tok_len(const trit_tokenizer *tok, int32_t id) { return tok->off[id + 1] - tok->off[id]; }
static const uint8_t *tok_bytes(const trit_tokenizer *tok, int32_t id) { return tok->pool + tok->off[id]; }

void trit_tokenizer_gpt2_free(trit_tokenizer *tok) {
    trit_gpt2_data *g = tok->gpt2;
    if (!g) return;
    free(g->rank);
    free(g->merge_result);
    free(g->special);
    trit_bytes_map_free(&g->by_bytes);
    if (g->pairs.keys) trit_pair_map_free(&g->pairs);
    free(g);
    tok->gpt2 = NULL;
}

static trit_status check_offsets(const trit_tokenizer *tok, int32_t V) {
    if (V < 256 || V > TRIT_BPE_MAX_VOCAB)
        return trit_error(TRIT_ERR_FORMAT, "a GPT-2 vocabulary has 256..%d tokens, this one %d", TRIT_BPE_MAX_VOCAB, (int)V);
    if (tok->off[0] != 0) return trit_error(TRIT_ERR_FORMAT, "token offsets do not start at 0");
    for (int32_t i = 0; i < V; i++)
        if (tok->off[i + 1] <= tok->off[i])
            return trit_error(TRIT_ERR_FORMAT, "token %d is empty: every token spells at least one byte", (int)i);
    return TRIT_OK;
}

// Specials: in range, distinct, sorted longest first (the longest match wins at a position).
static trit_status check_specials(const trit_tokenizer *tok, trit_gpt2_data *g, int32_t V) {
    for (int32_t s = 0; s < g->n_special; s++) {
        const int32_t id = g->special[s];
        if (id < 0 || id >= V) return trit_error(TRIT_ERR_FORMAT, "special token id %d outside [0, %d)", (int)id, (int)V);
        if (g->rank[id] == RANK_SPECIAL) return trit_error(TRIT_ERR_FORMAT, "special token %d is listed twice", (int)id);
        g->rank[id] = RANK_SPECIAL;
        g->special_first[tok_bytes(tok, id)[0]] = true;
    }
    for (int32_t s = 1; s < g->n_special; s++)
        for (int32_t j = s; j > 0 && tok_len(tok, g->special[j]) > tok_len(tok, g->special[j - 1]); j--) {
            const int32_t t = g->special[j];
            g->special[j] = g->special[j - 1];
            g->special[j - 1] = t;
        }
    return TRIT_OK;
}

static trit_status check_bytes(trit_tokenizer *tok, trit_gpt2_data *g) {
    for (int b = 0; b < 256; b++) {
        const uint8_t c = (uint8_t)b;
        const int32_t id = trit_bytes_map_get(&g->by_bytes, &c, 1);
        if (id < 0)
            return trit_error(TRIT_ERR_FORMAT, "no token spells the byte 0x%02x: a byte-level BPE has one token for "
                              "each of the 256 bytes", b);
        if (g->rank[id] == RANK_SPECIAL)
            return trit_error(TRIT_ERR_FORMAT, "the token of byte 0x%02x (id %d) is listed as special", b, (int)id);
        tok->byte_to_id[b] = id;
    }
    return TRIT_OK;
}

static trit_status check_merges(trit_tokenizer *tok, trit_gpt2_data *g, const int32_t *m3, int32_t V) {
    char s1[256], s2[256];
    for (int32_t r = 0; r < tok->n_merges; r++) {
        const int32_t a = m3[3 * r], b = m3[3 * r + 1], t = m3[3 * r + 2];
        if (a < 0 || b < 0 || t < 0 || a >= V || b >= V || t >= V)
            return trit_error(TRIT_ERR_FORMAT, "merge %d (%d, %d) -> %d uses an id outside [0, %d)", (int)r, (int)a,
                              (int)b, (int)t, (int)V);
        if (g->rank[a] == RANK_SPECIAL || g->rank[b] == RANK_SPECIAL || g->rank[t] == RANK_SPECIAL)
            return trit_error(TRIT_ERR_FORMAT, "merge %d involves a special token", (int)r);
        const int64_t la = tok_len(tok, a), lb = tok_len(tok, b);
        if (tok_len(tok, t) != la + lb || memcmp(tok_bytes(tok, t), tok_bytes(tok, a), (size_t)la) != 0 ||
            memcmp(tok_bytes(tok, t) + la, tok_bytes(tok, b), (size_t)lb) != 0)
            return trit_error(TRIT_ERR_FORMAT, "merge %d joins '%s' and '%s' but makes token %d, spelled otherwise",
                              (int)r, spell(s1, sizeof s1, tok_bytes(tok, a), la),
                              spell(s2, sizeof s2, tok_bytes(tok, b), lb), (int)t);
        if (g->rank[t] >= 0)
            return trit_error(TRIT_ERR_FORMAT, "merges %d and %d both make '%s'", (int)g->rank[t], (int)r,
                              spell(s1, sizeof s1, tok_bytes(tok, t), tok_len(tok, t)));
        g->rank[t] = r;
        g->merge_result[r] = t;
        tok->merges[2 * r] = a;
        tok->merges[2 * r + 1] = b;
    }
    for (int32_t id = 0; id < V; id++)
        if (g->rank[id] == RANK_BYTE && tok_len(tok, id) > 1)
            return trit_error(TRIT_ERR_FORMAT, "token %d ('%s') is neither a byte, nor made by a merge, nor a special "
                              "token: the vocabulary and the merges do not belong together", (int)id,
                              spell(s1, sizeof s1, tok_bytes(tok, id), tok_len(tok, id)));
    return TRIT_OK;
}

// (left, right) -> t for every way to spell merged token t as two mergeable tokens.
static trit_status build_pairs(const trit_tokenizer *tok, trit_gpt2_data *g) {
    if (!trit_pair_map_init(&g->pairs, (size_t)tok->n_merges * 4))
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate the pair table");
    for (int32_t r = 0; r < tok->n_merges; r++) {
        const int32_t t = g->merge_result[r];
        const uint8_t *s = tok_bytes(tok, t);
        const int64_t n = tok_len(tok, t);
        for (int64_t k = 1; k < n; k++) {
            const int32_t a = trit_bytes_map_get(&g->by_bytes, s, (size_t)k);
            if (a < 0 || g->rank[a] == RANK_SPECIAL) continue;
            const int32_t b = trit_bytes_map_get(&g->by_bytes, s + k, (size_t)(n - k));
            if (b < 0 || g->rank[b] == RANK_SPECIAL) continue;
            if (!trit_pair_map_put(&g->pairs, a, b, t)) return trit_error(TRIT_ERR_NOMEM, "cannot grow the pair table");
        }
    }
    return TRIT_OK;
}

static trit_status build(trit_tokenizer *tok, trit_gpt2_data *g, const trit_gpt2_spec *sp) {
    const int32_t V = sp->vocab;
    trit_status s = check_offsets(tok, V);
    if (s != TRIT_OK) return s;
    if (sp->n_merges < 0 || sp->n_merges > V || sp->n_special < 0 || sp->n_special > V)
        return trit_error(TRIT_ERR_FORMAT, "%d merges and %d special tokens for a vocabulary of %d",
                          (int)sp->n_merges, (int)sp->n_special, (int)V);
    tok->n_merges = sp->n_merges;
    g->rank = malloc((size_t)V * sizeof *g->rank);
    g->merge_result = malloc(((size_t)sp->n_merges + 1) * sizeof *g->merge_result);
    tok->merges = malloc(((size_t)sp->n_merges + 1) * 2 * sizeof *tok->merges);
    if (!g->rank || !g->merge_result || !tok->merges || !trit_bytes_map_init(&g->by_bytes, tok->pool, tok->off, V))
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate a vocabulary of %d tokens", (int)V);
    for (int32_t id = 0; id < V; id++) g->rank[id] = RANK_BYTE;
    char s1[256];
    for (int32_t id = 0; id < V; id++) {
        const int32_t dup = trit_bytes_map_add(&g->by_bytes, id);
        if (dup >= 0)
            return trit_error(TRIT_ERR_FORMAT, "tokens %d and %d are both spelled '%s'", (int)dup, (int)id,
                              spell(s1, sizeof s1, tok_bytes(tok, id), tok_len(tok, id)));
    }
    if ((s = check_specials(tok, g, V)) != TRIT_OK) return s;
    if ((s = check_bytes(tok, g)) != TRIT_OK) return s;
    if ((s = check_merges(tok, g, sp->merges, V)) != TRIT_OK) return s;
    return build_pairs(tok, g);
}

trit_status trit_tokenizer_gpt2_build(trit_tokenizer *tok, trit_gpt2_spec *sp) {
    tok->pool = sp->pool;
    tok->off = sp->off;
    trit_gpt2_data *g = calloc(1, sizeof *g);
    if (g) {
        g->special = sp->special;
        g->n_special = sp->n_special;
        tok->gpt2 = g;
    } else {
        free(sp->special);
    }
    trit_status s = g ? build(tok, g, sp) : trit_error(TRIT_ERR_NOMEM, "cannot allocate a tokenizer");
    if (s == TRIT_OK) tok->vocab_size = sp->vocab;
    free(sp->merges);
    *sp = (trit_gpt2_spec){0};
    return s;
}

int32_t trit_tokenizer_gpt2_special_id(const trit_tokenizer *tok, const char *text) {
    const size_t n = strlen(text);
    const int32_t id = n ? trit_bytes_map_get(&tok->gpt2->by_bytes, (const uint8_t *)text, n) : -1;
    return id >= 0 && tok->gpt2->rank[id] == RANK_SPECIAL ? id : -1;
}

// ---- encoding ----------------------------------------------------------------------------

// Scratch for merging one chunk: its symbols as a linked list (-1 ends it) and a min-heap of
// (rank, position) over the mergeable adjacent pairs, stale entries skipped when popped.
typedef struct {
    int32_t *sym, *next, *prev;
    trit_merge_heap heap;
    size_t cap;
} chunk_work;

static void work_free(chunk_work *w) {
    free(w->sym);
    free(w->heap.items);
}

static trit_status work_reserve(chunk_work *w, size_t n) {
    if (n <= w->cap) return TRIT_OK;
    if (n > (size_t)INT32_MAX / 4)
        return trit_error(TRIT_ERR_RANGE, "a run of %zu bytes without a break is too long to encode (limit %d)", n,
                          INT32_MAX / 4);
    size_t cap = w->cap ? w->cap : 256;
    while (cap < n) cap *= 2;
    work_free(w);
    w->sym = malloc(cap * 3 * sizeof(int32_t));
    w->heap.items = malloc(cap * 3 * sizeof(trit_merge_item));  // n - 1 pairs, then at most 2 per merge
    w->cap = w->sym && w->heap.items ? cap : 0;
    if (!w->cap) return trit_error(TRIT_ERR_NOMEM, "cannot allocate scratch to encode a run of %zu bytes", n);
    w->next = w->sym + cap;
    w->prev = w->sym + 2 * cap;
    return TRIT_OK;
}

// Rank of merging the symbols at pos and its successor, or -1.
static int32_t pair_rank(const trit_gpt2_data *g, const chunk_work *w, int32_t pos) {
    if (pos < 0 || w->next[pos] < 0) return -1;
    const int32_t t = trit_pair_map_get(&g->pairs, w->sym[pos], w->sym[w->next[pos]]);
    return t < 0 ? -1 : g->rank[t];
}

static void push_pair(const trit_gpt2_data *g, chunk_work *w, int32_t pos) {
    const int32_t r = pair_rank(g, w, pos);
    if (r >= 0) trit_merge_heap_push(&w->heap, r, pos);
}

// Popping in (rank, position) order merges the lowest-ranked pair, leftmost first, as tiktoken's
// repeated scan for the minimum does; an entry is stale once its pair no longer has that rank.
static size_t merge_chunk(const trit_tokenizer *tok, chunk_work *w, const uint8_t *t, int32_t n, int32_t *out) {
    const trit_gpt2_data *g = tok->gpt2;
    for (int32_t i = 0; i < n; i++) {
        w->sym[i] = tok->byte_to_id[t[i]];
        w->next[i] = i + 1 < n ? i + 1 : -1;
        w->prev[i] = i - 1;
    }
    w->heap.n = 0;
    for (int32_t i = 0; i + 1 < n; i++) push_pair(g, w, i);
    while (w->heap.n > 0) {
        const trit_merge_item it = trit_merge_heap_pop(&w->heap);
        const int32_t i = it.pos;
        if (w->sym[i] < 0 || pair_rank(g, w, i) != it.rank) continue;
        const int32_t j = w->next[i];
        w->sym[i] = g->merge_result[it.rank];
        w->sym[j] = -1;
        w->next[i] = w->next[j];
        if (w->next[j] >= 0) w->prev[w->next[j]] = i;
        push_pair(g, w, w->prev[i]);
        push_pair(g, w, i);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = w->next[i]) out[k++] = w->sym[i];
    return k;
}

static trit_status encode_chunk(const trit_tokenizer *tok, chunk_work *w, const uint8_t *t, size_t n, int32_t *out,
                                size_t *k) {
    if (n == 1) {
        out[(*k)++] = tok->byte_to_id[t[0]];
        return TRIT_OK;
    }
    const int32_t id = trit_bytes_map_get(&tok->gpt2->by_bytes, t, n);
    if (id >= 0 && tok->gpt2->rank[id] != RANK_SPECIAL) {
        out[(*k)++] = id;
        return TRIT_OK;
    }
    trit_status s = work_reserve(w, n);
    if (s == TRIT_OK) *k += merge_chunk(tok, w, t, (int32_t)n, out + *k);
    return s;
}

// Start of the first special token in t[from..n) (its id in *id), or n.
static size_t find_special(const trit_tokenizer *tok, const uint8_t *t, size_t n, size_t from, int32_t *id) {
    const trit_gpt2_data *g = tok->gpt2;
    for (size_t i = from; i < n; i++) {
        if (!g->special_first[t[i]]) continue;
        for (int32_t s = 0; s < g->n_special; s++) {
            const int32_t sid = g->special[s];
            const size_t len = (size_t)tok_len(tok, sid);
            if (n - i >= len && memcmp(t + i, tok_bytes(tok, sid), len) == 0) {
                *id = sid;
                return i;
            }
        }
    }
    return n;
}

trit_status trit_tokenizer_gpt2_encode(const trit_tokenizer *tok, const uint8_t *text, size_t len, bool ordinary,
                                       int32_t *out, size_t *n_out) {
    chunk_work w = {0};
    trit_status s = TRIT_OK;
    size_t k = 0;
    for (size_t pos = 0; pos < len && s == TRIT_OK;) {
        int32_t sid = -1;
        const size_t end = ordinary || tok->gpt2->n_special == 0 ? len : find_special(tok, text, len, pos, &sid);
        // Each piece between special tokens is pre-tokenized on its own, as tiktoken does.
        for (size_t i = pos; i < end && s == TRIT_OK;) {
            const size_t e = trit_pretokenize_gpt2_next(text + pos, end - pos, i - pos) + pos;
            s = encode_chunk(tok, &w, text + i, e - i, out, &k);
            i = e;
        }
        if (sid >= 0) {
            out[k++] = sid;
            pos = end + (size_t)tok_len(tok, sid);
        } else {
            pos = end;
        }
    }
    work_free(&w);
    *n_out = k;
    return s;
}

// ---- the tokenizer file's payload ----------------------------------------------------------
//
//   u32 n_merges, u32 n_special, u32 length of each of the V tokens, the token bytes back to
//   back, n_merges x (u32 left, u32 right, u32 result), n_special x u32 id.

size_t trit_tokenizer_gpt2_payload(const trit_tokenizer *tok, uint8_t *out) {
    const int32_t V = tok->vocab_size, M = tok->n_merges, S = tok->gpt2->n_special;
    const size_t pool = (size_t)tok->off[V];
    const size_t total = 8 + 4 * (size_t)V + pool + 12 * (size_t)M + 4 * (size_t)S;
    if (!out) return total;
    uint8_t *p = out;
    trit_le32_store(p, (uint32_t)M), p += 4;
    trit_le32_store(p, (uint32_t)S), p += 4;
    for (int32_t i = 0; i < V; i++, p += 4) trit_le32_store(p, (uint32_t)tok_len(tok, i));
    memcpy(p, tok->pool, pool), p += pool;
    for (int32_t r = 0; r < M; r++, p += 12) {
        trit_le32_store(p, (uint32_t)tok->merges[2 * r]);
        trit_le32_store(p + 4, (uint32_t)tok->merges[2 * r + 1]);
        trit_le32_store(p + 8, (uint32_t)tok->gpt2->merge_result[r]);
    }
    for (int32_t s = 0; s < S; s++, p += 4) trit_le32_store(p, (uint32_t)tok->gpt2->special[s]);
    return total;
}

static trit_status payload_short(size_t need, size_t pay) {
    return trit_error(TRIT_ERR_FORMAT, "GPT-2 tokenizer payload of %zu bytes, its own counts need %zu", pay, need);
}

trit_status trit_tokenizer_gpt2_load_payload(trit_tokenizer *tok, uint32_t vocab, const uint8_t *pay_, size_t pay) {
    if (vocab < 256 || vocab > TRIT_BPE_MAX_VOCAB)
        return trit_error(TRIT_ERR_FORMAT, "GPT-2 tokenizer with %u tokens (expected 256..%d)", vocab, TRIT_BPE_MAX_VOCAB);
    const size_t V = vocab;
    if (pay < 8 + 4 * V) return payload_short(8 + 4 * V, pay);
    const uint32_t M = trit_le32_load(pay_), S = trit_le32_load(pay_ + 4);
    if (M > vocab || S > vocab) return trit_error(TRIT_ERR_FORMAT, "%u merges and %u special tokens for %u tokens", M, S, vocab);
    trit_gpt2_spec sp = {.vocab = (int32_t)vocab, .n_merges = (int32_t)M, .n_special = (int32_t)S};
    sp.off = malloc((V + 1) * sizeof *sp.off);
    if (!sp.off) return trit_error(TRIT_ERR_NOMEM, "cannot allocate a vocabulary of %u tokens", vocab);
    sp.off[0] = 0;
    for (size_t i = 0; i < V; i++) sp.off[i + 1] = sp.off[i] + trit_le32_load(pay_ + 8 + 4 * i);
    const size_t pool = (size_t)sp.off[V];
    const size_t need = 8 + 4 * V + 12 * (size_t)M + 4 * (size_t)S;
    if (pool > pay || pay - pool != need) {
        free(sp.off);
        return payload_short(need + pool, pay);
    }
    const uint8_t *p = pay_ + 8 + 4 * V;
    sp.pool = malloc(pool ? pool : 1);
    sp.merges = malloc(((size_t)M + 1) * 3 * sizeof *sp.merges);
    sp.special = malloc(((size_t)S + 1) * sizeof *sp.special);
    if (sp.pool) memcpy(sp.pool, p, pool);
    p += pool;
    for (size_t i = 0; sp.merges && i < 3 * (size_t)M; i++, p += 4) sp.merges[i] = (int32_t)trit_le32_load(p);
    for (size_t i = 0; sp.special && i < S; i++, p += 4) sp.special[i] = (int32_t)trit_le32_load(p);
    if (!sp.pool || !sp.merges || !sp.special) {
        tok->off = sp.off, tok->pool = sp.pool;  // freed with the tokenizer
        free(sp.merges);
        free(sp.special);
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate a vocabulary of %u tokens", vocab);
    }
    return trit_tokenizer_gpt2_build(tok, &sp);
}
