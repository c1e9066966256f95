// Byte-level BPE: building the vocabulary from merges and encoding. Ids 0..255 are the bytes;
// merge r joins (left, right) into id 256 + r. A chunk is encoded by repeatedly applying the
// lowest-ranked merge present, leftmost first: a min-heap of (rank, position) over a linked list
// of symbols does this in O(n log n) per chunk instead of rescanning the chunk per merge.
#include "io/merge_heap.h"
#include "io/tokenizer_internal.h"
#include "io/pretokenize.h"

#include <stdlib.h>

// Trained tokens never exceed a chunk, so a longer token means a forged or corrupt file.
#define BPE_MAX_TOKEN_BYTES TRIT_BPE_MAX_CHUNK
#define BPE_MAX_POOL_BYTES ((int64_t)1 << 30)

static trit_status check_merges(const int32_t *merges, int32_t n, int64_t *pool_bytes, int64_t *len) {
    int64_t total = 256;
    for (int32_t r = 0; r < n; r++) {
        int32_t a = merges[2 * r], b = merges[2 * r + 1];
        if (a < 0 || b < 0 || a >= 256 + r || b >= 256 + r)
            return trit_error(TRIT_ERR_FORMAT,
                              "merge %d joins tokens (%d, %d), but only ids below %d exist at that rank",
                              (int)r, (int)a, (int)b, (int)(256 + r));
        len[256 + r] = len[a] + len[b];
        if (len[256 + r] > BPE_MAX_TOKEN_BYTES)
            return trit_error(TRIT_ERR_FORMAT, "merge %d makes a token of %lld bytes (limit %d)", (int)r,
                              (long long)len[256 + r], BPE_MAX_TOKEN_BYTES);
        total += len[256 + r];
        if (total > BPE_MAX_POOL_BYTES)
            return trit_error(TRIT_ERR_FORMAT, "merges up to %d need over %lld bytes of token text", (int)r,
                              (long long)BPE_MAX_POOL_BYTES);
    }
    *pool_bytes = total;
    return TRIT_OK;
}

trit_status trit_tokenizer_bpe_build(trit_tokenizer *tok, int32_t *merges, int32_t n) {
    tok->merges = merges; // owned from here on, freed with the tokenizer whatever happens
    tok->n_merges = n;
    int32_t vocab = 256 + n;
    tok->off = malloc(((size_t)vocab + 1) * sizeof *tok->off);
    if (!tok->off) return trit_error(TRIT_ERR_NOMEM, "cannot allocate a vocabulary of %d tokens", (int)vocab);
    int64_t *len = tok->off + 1; // lengths first, turned into offsets below
    for (int b = 0; b < 256; b++) len[b] = 1;
    int64_t pool_bytes = 0;
    trit_status s = check_merges(merges, n, &pool_bytes, len);
    if (s != TRIT_OK) return s;
    tok->pool = malloc((size_t)pool_bytes);
    if (!tok->pool) return trit_error(TRIT_ERR_NOMEM, "cannot allocate %lld bytes of token text", (long long)pool_bytes);
    tok->off[0] = 0;
    for (int32_t i = 0; i < vocab; i++) tok->off[i + 1] += tok->off[i];
    for (int b = 0; b < 256; b++) tok->pool[b] = (uint8_t)b;
    if (!trit_pair_map_init(&tok->ranks, (size_t)n))
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate the merge table");
    for (int32_t r = 0; r < n; r++) {
        int32_t a = merges[2 * r], b = merges[2 * r + 1];
        if (trit_pair_map_get(&tok->ranks, a, b) >= 0)
            return trit_error(TRIT_ERR_FORMAT, "merge %d repeats the pair (%d, %d) of merge %d", (int)r,
                              (int)a, (int)b, (int)trit_pair_map_get(&tok->ranks, a, b));
        if (!trit_pair_map_put(&tok->ranks, a, b, r)) return trit_error(TRIT_ERR_NOMEM, "cannot grow the merge table");
        int64_t la = tok->off[a + 1] - tok->off[a], lb = tok->off[b + 1] - tok->off[b];
        uint8_t *dst = tok->pool + tok->off[256 + r];
        for (int64_t k = 0; k < la; k++) dst[k] = tok->pool[tok->off[a] + k];
        for (int64_t k = 0; k < lb; k++) dst[la + k] = tok->pool[tok->off[b] + k];
    }
    tok->vocab_size = vocab;
    return TRIT_OK;
}

// ---- encoding ----------------------------------------------------------------------------

typedef struct {
    int32_t *sym, *next, *prev; // symbols of the chunk as a linked list; -1 ends it
    trit_merge_heap heap;
} chunk_work;

static void push_pair(const trit_tokenizer *tok, chunk_work *w, int32_t pos) {
    if (pos < 0 || w->next[pos] < 0) return;
    int32_t r = trit_pair_map_get(&tok->ranks, w->sym[pos], w->sym[w->next[pos]]);
    if (r >= 0) trit_merge_heap_push(&w->heap, r, pos);
}

// A merge made at rank r creates pairs whose merges (if any) have ranks above r, so popping in
// (rank, position) order applies merges exactly as "lowest rank first, left to right".
static size_t encode_chunk(const trit_tokenizer *tok, chunk_work *w, const uint8_t *t, int32_t n,
                           int32_t *out) {
    for (int32_t i = 0; i < n; i++) {
        w->sym[i] = t[i];
        w->next[i] = i + 1 < n ? i + 1 : -1;
        w->prev[i] = i - 1;
    }
    w->heap.n = 0;
    for (int32_t i = 0; i + 1 < n; i++) push_pair(tok, w, i);
    while (w->heap.n > 0) {
        trit_merge_item it = trit_merge_heap_pop(&w->heap);
        int32_t i = it.pos, j = w->next[i];
        // Stale entries: i was absorbed (sym -1) or its right neighbour changed.
        if (w->sym[i] < 0 || j < 0 || trit_pair_map_get(&tok->ranks, w->sym[i], w->sym[j]) != it.rank) continue;
        w->sym[i] = 256 + it.rank;
        w->sym[j] = -1;
        w->next[i] = w->next[j];
        if (w->next[j] >= 0) w->prev[w->next[j]] = i;
        push_pair(tok, w, w->prev[i]);
        push_pair(tok, w, i);
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = w->next[i]) out[k++] = w->sym[i];
    return k;
}

trit_status trit_tokenizer_bpe_encode(const trit_tokenizer *tok, const uint8_t *text, size_t len,
                                      int32_t *out, size_t *n_out) {
    chunk_work w;
    int32_t cap = TRIT_BPE_MAX_CHUNK;
    w.sym = malloc((size_t)cap * 3 * sizeof(int32_t));
    // Each merge pushes at most two entries on top of the initial n - 1.
    w.heap.items = malloc((size_t)cap * 3 * sizeof(trit_merge_item));
    if (!w.sym || !w.heap.items) {
        free(w.sym);
        free(w.heap.items);
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate BPE encoding scratch");
    }
    w.next = w.sym + cap;
    w.prev = w.sym + 2 * cap;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        size_t e = trit_pretokenize_next(text, len, i);
        if (e - i == 1)
            out[n++] = text[i];
        else
            n += encode_chunk(tok, &w, text + i, (int32_t)(e - i), out + n);
        i = e;
    }
    free(w.sym);
    free(w.heap.items);
    *n_out = n;
    return TRIT_OK;
}
