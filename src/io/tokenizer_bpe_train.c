// Byte-level BPE training. The text is cut into chunks (pretokenize.c) and identical chunks are
// counted once with their frequency ("words"). Pair counts are kept up to date incrementally:
// merging (a, b) -> c only touches the words that contain (a, b), found through a per-pair list
// of words, and the most frequent pair comes from a max-heap with lazy deletion. So each merge
// costs what it changes, not a recount of the text.
#include "io/tokenizer_internal.h"
#include "io/pretokenize.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t count;
    int32_t a, b, pair;
} heap_entry;

typedef struct {
    // words: unique chunks with their frequency; symbols live in syms[start .. start + len)
    int32_t n_words, cap_words;
    int64_t *freq, *start;
    int32_t *len, *stamp;
    int32_t *syms;
    // pairs: ids a, b, current count, and the words that (may) contain them
    trit_pair_map index;
    int32_t n_pairs, cap_pairs;
    int32_t *pa, *pb, *stamp_pair, *n_occ, *cap_occ;
    int64_t *count;
    int32_t **occ;
    // pairs whose count rose during the current merge
    int32_t *touched;
    int32_t n_touched;
    heap_entry *heap;
    int64_t n_heap, cap_heap;
} trainer;

// Capacity for `need` elements, doubling from `cap`; -1 when it would not fit an int32 index.
static int32_t next_cap(int32_t cap, int64_t need) {
    int64_t c = cap ? cap : 16;
    while (c < need) c *= 2;
    return c > INT32_MAX ? -1 : (int32_t)c;
}

static bool resize(void **p, size_t elem, int32_t n) {
    if (n < 0) return false;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return false;
    *p = q;
    return true;
}
#define RESIZE(ptr, n) resize((void **)&(ptr), sizeof *(ptr), (n))

// ---- counting chunks ---------------------------------------------------------------------

static uint64_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

typedef struct {
    int32_t *slot; // word index or -1
    uint64_t *hash;
    size_t cap;
} chunk_table;

// Count every distinct chunk of text: tr->freq, and tr->start as the chunk's offset in text.
static trit_status count_chunks(trainer *tr, const uint8_t *text, size_t len) {
    chunk_table ct = {NULL, NULL, 1024};
    ct.slot = malloc(ct.cap * sizeof *ct.slot);
    if (!ct.slot) return trit_error(TRIT_ERR_NOMEM, "BPE training: out of memory counting chunks");
    memset(ct.slot, 0xFF, ct.cap * sizeof *ct.slot);
    trit_status s = TRIT_OK;
    for (size_t i = 0; i < len && s == TRIT_OK;) {
        size_t e = trit_pretokenize_next(text, len, i), n = e - i;
        uint64_t h = hash_bytes(text + i, n);
        size_t k = (size_t)h & (ct.cap - 1);
        for (; ct.slot[k] >= 0; k = (k + 1) & (ct.cap - 1)) {
            int32_t w = ct.slot[k];
            if (ct.hash[w] == h && (size_t)tr->len[w] == n && memcmp(text + tr->start[w], text + i, n) == 0) break;
        }
        if (ct.slot[k] >= 0) {
            tr->freq[ct.slot[k]]++;
        } else {
            int32_t w = tr->n_words;
            if (w == tr->cap_words) {
                int32_t c = next_cap(tr->cap_words, w + 1);
                if (!RESIZE(tr->freq, c) || !RESIZE(tr->start, c) || !RESIZE(tr->len, c) || !RESIZE(ct.hash, c)) {
                    s = trit_error(TRIT_ERR_NOMEM, "BPE training: out of memory counting chunks");
                    break;
                }
                tr->cap_words = c;
            }
            tr->freq[w] = 1;
            tr->start[w] = (int64_t)i;
            tr->len[w] = (int32_t)n;
            ct.hash[w] = h;
            ct.slot[k] = w;
            tr->n_words = w + 1;
            if (2 * (size_t)tr->n_words > ct.cap) { // rehash at half full
                size_t cap = ct.cap * 2;
                int32_t *slot = malloc(cap * sizeof *slot);
                if (!slot) {
                    s = trit_error(TRIT_ERR_NOMEM, "BPE training: out of memory counting chunks");
                    break;
                }
                memset(slot, 0xFF, cap * sizeof *slot);
                for (int32_t v = 0; v < tr->n_words; v++) {
                    size_t q = (size_t)ct.hash[v] & (cap - 1);
                    while (slot[q] >= 0) q = (q + 1) & (cap - 1);
                    slot[q] = v;
                }
                free(ct.slot);
                ct.slot = slot;
                ct.cap = cap;
            }
        }
        i = e;
    }
    free(ct.slot);
    free(ct.hash);
    return s;
}

// ---- pairs and the heap ------------------------------------------------------------------

static bool heap_above(heap_entry x, heap_entry y) {
    if (x.count != y.count) return x.count > y.count;
    return x.a != y.a ? x.a < y.a : x.b < y.b;
}

static bool heap_push(trainer *tr, int32_t p) {
    if (tr->n_heap == tr->cap_heap) {
        int64_t cap = tr->cap_heap ? 2 * tr->cap_heap : 1024;
        heap_entry *h = realloc(tr->heap, (size_t)cap * sizeof *h);
        if (!h) return false;
        tr->heap = h;
        tr->cap_heap = cap;
    }
    heap_entry e = {tr->count[p], tr->pa[p], tr->pb[p], p};
    int64_t i = tr->n_heap++;
    while (i > 0 && heap_above(e, tr->heap[(i - 1) / 2])) {
        tr->heap[i] = tr->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    tr->heap[i] = e;
    return true;
}

static void heap_pop(trainer *tr) {
    heap_entry last = tr->heap[--tr->n_heap];
    int64_t i = 0, n = tr->n_heap;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && heap_above(tr->heap[c + 1], tr->heap[c])) c++;
        if (!heap_above(tr->heap[c], last)) break;
        tr->heap[i] = tr->heap[c];
        i = c;
    }
    if (n > 0) tr->heap[i] = last;
}

// The pair with the highest count (ties: smallest (a, b)), or -1 when no pair is left. Entries
// are never updated in place: a count that rose was pushed again, one that fell is re-pushed here.
static int32_t best_pair(trainer *tr, bool *oom) {
    while (tr->n_heap > 0) {
        heap_entry top = tr->heap[0];
        int64_t now = tr->count[top.pair];
        if (now == top.count && now > 0) return top.pair;
        heap_pop(tr);
        if (now > 0 && now < top.count && !heap_push(tr, top.pair)) {
            *oom = true;
            return -1;
        }
    }
    return -1;
}

// Index of pair (a, b), created with count 0 if new; -1 when out of memory.
static int32_t pair_get(trainer *tr, int32_t a, int32_t b) {
    int32_t p = trit_pair_map_get(&tr->index, a, b);
    if (p >= 0) return p;
    p = tr->n_pairs;
    if (p == tr->cap_pairs) {
        int32_t c = next_cap(tr->cap_pairs, p + 1);
        if (!RESIZE(tr->pa, c) || !RESIZE(tr->pb, c) || !RESIZE(tr->stamp_pair, c) || !RESIZE(tr->n_occ, c) ||
            !RESIZE(tr->cap_occ, c) || !RESIZE(tr->count, c) || !RESIZE(tr->occ, c))
            return -1;
        tr->cap_pairs = c;
    }
    if (!trit_pair_map_put(&tr->index, a, b, p)) return -1;
    tr->pa[p] = a;
    tr->pb[p] = b;
    tr->stamp_pair[p] = 0;
    tr->n_occ[p] = tr->cap_occ[p] = 0;
    tr->count[p] = 0;
    tr->occ[p] = NULL;
    tr->n_pairs = p + 1;
    return p;
}

static bool occ_add(trainer *tr, int32_t p, int32_t w) {
    if (tr->n_occ[p] > 0 && tr->occ[p][tr->n_occ[p] - 1] == w) return true;
    if (tr->n_occ[p] == tr->cap_occ[p]) {
        int32_t c = next_cap(tr->cap_occ[p], tr->n_occ[p] + 1);
        if (!RESIZE(tr->occ[p], c)) return false;
        tr->cap_occ[p] = c;
    }
    tr->occ[p][tr->n_occ[p]++] = w;
    return true;
}

// ---- merging -----------------------------------------------------------------------------

// Add (sign = +1) or remove (-1) word w's pairs from the counts. Adding after merge `m` into c
// also records w for pairs that contain c and marks them as touched.
static bool word_pairs(trainer *tr, int32_t w, int sign, int32_t c, int32_t m) {
    const int32_t *s = tr->syms + tr->start[w];
    for (int32_t i = 0; i + 1 < tr->len[w]; i++) {
        int32_t p = sign < 0 ? trit_pair_map_get(&tr->index, s[i], s[i + 1]) : pair_get(tr, s[i], s[i + 1]);
        if (p < 0) return false;
        tr->count[p] += sign * tr->freq[w];
        if (sign > 0 && (s[i] == c || s[i + 1] == c)) {
            if (!occ_add(tr, p, w)) return false;
            if (tr->stamp_pair[p] != m + 1) {
                tr->stamp_pair[p] = m + 1;
                tr->touched[tr->n_touched++] = p;
            }
        }
    }
    return true;
}

static bool merge_word(trainer *tr, int32_t w, int32_t a, int32_t b, int32_t c, int32_t m) {
    int32_t *s = tr->syms + tr->start[w];
    int32_t n = tr->len[w], i = 0;
    while (i + 1 < n && !(s[i] == a && s[i + 1] == b)) i++;
    if (i + 1 >= n) return true; // the list entry is stale: an earlier merge consumed the pair
    if (!word_pairs(tr, w, -1, c, m)) return false;
    int32_t k = 0;
    for (i = 0; i < n; i++) {
        if (i + 1 < n && s[i] == a && s[i + 1] == b) {
            s[k++] = c;
            i++;
        } else {
            s[k++] = s[i];
        }
    }
    tr->len[w] = k;
    return word_pairs(tr, w, +1, c, m);
}

static bool apply_merge(trainer *tr, int32_t p, int32_t m) {
    int32_t a = tr->pa[p], b = tr->pb[p], c = 256 + m;
    tr->n_touched = 0;
    // Lists of pairs with c may grow meanwhile; p's own list cannot (c is new), so index it afresh.
    for (int32_t k = 0; k < tr->n_occ[p]; k++) {
        int32_t w = tr->occ[p][k];
        if (tr->stamp[w] == m + 1) continue;
        tr->stamp[w] = m + 1;
        if (!merge_word(tr, w, a, b, c, m)) return false;
    }
    free(tr->occ[p]);
    tr->occ[p] = NULL;
    tr->n_occ[p] = tr->cap_occ[p] = 0;
    for (int32_t k = 0; k < tr->n_touched; k++)
        if (tr->count[tr->touched[k]] > 0 && !heap_push(tr, tr->touched[k])) return false;
    return true;
}

// ---- driver ------------------------------------------------------------------------------

static bool setup_words(trainer *tr, const uint8_t *text) {
    size_t total = 1, words = 1;
    for (int32_t w = 0; w < tr->n_words; w++) total += (size_t)tr->len[w];
    if (tr->n_words > 0) words = (size_t)tr->n_words;
    tr->syms = malloc(total * sizeof *tr->syms);
    tr->stamp = calloc(words, sizeof *tr->stamp);
    // A merge touches at most the pairs of the words it rewrites.
    tr->touched = malloc(total * sizeof *tr->touched);
    if (!tr->syms || !tr->stamp || !tr->touched) return false;
    int64_t pos = 0;
    for (int32_t w = 0; w < tr->n_words; w++) {
        for (int32_t i = 0; i < tr->len[w]; i++) tr->syms[pos + i] = text[tr->start[w] + i];
        tr->start[w] = pos;
        pos += tr->len[w];
    }
    if (!trit_pair_map_init(&tr->index, 4096)) return false;
    for (int32_t w = 0; w < tr->n_words; w++) {
        const int32_t *s = tr->syms + tr->start[w];
        for (int32_t i = 0; i + 1 < tr->len[w]; i++) {
            int32_t p = pair_get(tr, s[i], s[i + 1]);
            if (p < 0 || !occ_add(tr, p, w)) return false;
            tr->count[p] += tr->freq[w];
        }
    }
    for (int32_t p = 0; p < tr->n_pairs; p++)
        if (!heap_push(tr, p)) return false;
    return true;
}

static void trainer_free(trainer *tr) {
    free(tr->freq);
    free(tr->start);
    free(tr->len);
    free(tr->stamp);
    free(tr->syms);
    if (tr->index.keys) trit_pair_map_free(&tr->index);
    for (int32_t p = 0; p < tr->n_pairs; p++) free(tr->occ[p]);
    free(tr->occ);
    free(tr->pa);
    free(tr->pb);
    free(tr->stamp_pair);
    free(tr->n_occ);
    free(tr->cap_occ);
    free(tr->count);
    free(tr->touched);
    free(tr->heap);
}

// Learn up to n_want merges into merges[]; returns how many were learned, or -1 (error set).
static int32_t learn_merges(const uint8_t *text, size_t len, int32_t n_want, int32_t *merges) {
    trainer tr;
    memset(&tr, 0, sizeof tr);
    int32_t m = -1;
    if (count_chunks(&tr, text, len) != TRIT_OK) goto done;
    if (!setup_words(&tr, text)) {
        trit_error(TRIT_ERR_NOMEM, "BPE training: out of memory setting up pair counts");
        goto done;
    }
    bool oom = false;
    for (m = 0; m < n_want; m++) {
        int32_t p = best_pair(&tr, &oom);
        if (p < 0) break;
        merges[2 * m] = tr.pa[p];
        merges[2 * m + 1] = tr.pb[p];
        if (!apply_merge(&tr, p, m)) {
            oom = true;
            break;
        }
    }
    if (oom) {
        trit_error(TRIT_ERR_NOMEM, "BPE training: out of memory after %d merges", (int)m);
        m = -1;
    }
done:
    trainer_free(&tr);
    return m;
}

trit_tokenizer *trit_tokenizer_train_bpe(const void *text, size_t len, int32_t vocab_size) {
    if (vocab_size < 256 || vocab_size > TRIT_BPE_MAX_VOCAB) {
        trit_error(TRIT_ERR_RANGE, "BPE vocab size %d is outside [256, %d]: 256 byte tokens come first",
                   (int)vocab_size, TRIT_BPE_MAX_VOCAB);
        return NULL;
    }
    if (!text || len == 0) {
        trit_error(TRIT_ERR_INVALID, "BPE training needs a non-empty text (got %zu bytes)", len);
        return NULL;
    }
    int32_t n_want = vocab_size - 256;
    int32_t *merges = malloc((size_t)(n_want ? n_want : 1) * 2 * sizeof *merges);
    if (!merges) {
        trit_error(TRIT_ERR_NOMEM, "cannot allocate %d merges", (int)n_want);
        return NULL;
    }
    int32_t n = learn_merges(text, len, n_want, merges);
    if (n < 0) {
        free(merges);
        return NULL;
    }
    if (n < n_want)
        trit_log(TRIT_LOG_WARN, "BPE: the text has no pairs left after %d merges; vocabulary is %d, not %d",
                 (int)n, (int)(256 + n), (int)vocab_size);
    trit_tokenizer *tok = trit_tokenizer_alloc(TRIT_TOKENIZER_BPE);
    if (!tok) {
        free(merges);
        return NULL;
    }
    if (trit_tokenizer_bpe_build(tok, merges, n) != TRIT_OK) {
        trit_tokenizer_free(tok);
        return NULL;
    }
    return tok;
}
