// The min-heap of byte-pair merging, shared by trit's BPE and GPT-2's tokenizer: (rank, position)
// items of the mergeable adjacent pairs of a chunk, lowest rank first and, within a rank, leftmost
// first. Entries go stale as merges happen; the tokenizers skip those when they pop them.
#ifndef TRIT_IO_MERGE_HEAP_H
#define TRIT_IO_MERGE_HEAP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int32_t rank, pos;
} trit_merge_item;

typedef struct {
    trit_merge_item *items;  // (capacity) owned by the caller: a chunk of n symbols pushes at most 3 n
    int32_t n;
} trit_merge_heap;

static inline bool trit_merge_item_less(trit_merge_item a, trit_merge_item b) {
    return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos);
}

static inline void trit_merge_heap_push(trit_merge_heap *h, int32_t rank, int32_t pos) {
    int32_t i = h->n++;
    const trit_merge_item it = {rank, pos};
    while (i > 0 && trit_merge_item_less(it, h->items[(i - 1) / 2])) {
        h->items[i] = h->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->items[i] = it;
}

// The least item; h must not be empty.
static inline trit_merge_item trit_merge_heap_pop(trit_merge_heap *h) {
    const trit_merge_item top = h->items[0], last = h->items[--h->n];
    int32_t i = 0;
    const int32_t n = h->n;
    for (;;) {
        int32_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && trit_merge_item_less(h->items[c + 1], h->items[c])) c++;
        if (!trit_merge_item_less(h->items[c], last)) break;
        h->items[i] = h->items[c];
        i = c;
    }
    if (n > 0) h->items[i] = last;
    return top;
}

#endif
