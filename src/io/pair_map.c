// Open-addressing hash map for token-id pairs, kept at most half full so probes stay short.
#include "io/pair_map.h"

#include <stdlib.h>
#include <string.h>

#define PAIR_MAP_EMPTY UINT64_MAX

static size_t slot_of(uint64_t key, size_t cap) {
    // splitmix64 finalizer: pairs of small ids would otherwise cluster.
    key ^= key >> 30;
    key *= 0xbf58476d1ce4e5b9ull;
    key ^= key >> 27;
    key *= 0x94d049bb133111ebull;
    key ^= key >> 31;
    return (size_t)key & (cap - 1);
}

static bool alloc_table(trit_pair_map *m, size_t cap) {
    m->keys = malloc(cap * sizeof *m->keys);
    m->values = malloc(cap * sizeof *m->values);
    if (!m->keys || !m->values) {
        free(m->keys);
        free(m->values);
        m->keys = NULL;
        m->values = NULL;
        return false;
    }
    memset(m->keys, 0xFF, cap * sizeof *m->keys);
    m->cap = cap;
    m->count = 0;
    return true;
}

bool trit_pair_map_init(trit_pair_map *m, size_t expected) {
    size_t cap = 64;
    while (cap < 2 * expected) cap *= 2;
    return alloc_table(m, cap);
}

void trit_pair_map_free(trit_pair_map *m) {
    free(m->keys);
    free(m->values);
    memset(m, 0, sizeof *m);
}

int32_t trit_pair_map_get(const trit_pair_map *m, int32_t left, int32_t right) {
    uint64_t key = trit_pair_key(left, right);
    for (size_t s = slot_of(key, m->cap);; s = (s + 1) & (m->cap - 1)) {
        if (m->keys[s] == key) return m->values[s];
        if (m->keys[s] == PAIR_MAP_EMPTY) return -1;
    }
}

static void insert_slot(trit_pair_map *m, uint64_t key, int32_t value) {
    size_t s = slot_of(key, m->cap);
    while (m->keys[s] != PAIR_MAP_EMPTY && m->keys[s] != key) s = (s + 1) & (m->cap - 1);
    if (m->keys[s] == PAIR_MAP_EMPTY) m->count++;
    m->keys[s] = key;
    m->values[s] = value;
}

static bool grow(trit_pair_map *m) {
    trit_pair_map old = *m;
    if (!alloc_table(m, old.cap * 2)) {
        *m = old;
        return false;
    }
    for (size_t s = 0; s < old.cap; s++)
        if (old.keys[s] != PAIR_MAP_EMPTY) insert_slot(m, old.keys[s], old.values[s]);
    free(old.keys);
    free(old.values);
    return true;
}

bool trit_pair_map_put(trit_pair_map *m, int32_t left, int32_t right, int32_t value) {
    if (2 * (m->count + 1) > m->cap && !grow(m)) return false;
    insert_slot(m, trit_pair_key(left, right), value);
    return true;
}
