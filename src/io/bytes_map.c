// Byte-string keys hashed eight bytes at a time: tokens and pre-tokenized chunks are short, and
// the lookup of a whole chunk runs once per chunk while encoding.
#include "io/bytes_map.h"

#include <stdlib.h>
#include <string.h>

#define MIX 0x9E3779B97F4A7C15ull

uint64_t trit_bytes_hash(const uint8_t *s, size_t n) {
    uint64_t h = (uint64_t)n * MIX;
    for (; n >= 8; s += 8, n -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * MIX;
        h ^= h >> 32;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * MIX;
    }
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ (h >> 32);
}

bool trit_bytes_map_init(trit_bytes_map *m, const uint8_t *pool, const int64_t *off, int32_t n) {
    size_t cap = 64;
    while (cap < 2 * (size_t)(n > 0 ? n : 0)) cap *= 2;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return false;
    for (size_t i = 0; i < cap; i++) m->slots[i].id = -1;
    m->cap = cap;
    m->pool = pool;
    m->off = off;
    return true;
}

void trit_bytes_map_free(trit_bytes_map *m) {
    free(m->slots);
    m->slots = NULL;
    m->cap = 0;
}

// Slot of s[0..n): the one holding it, or the free one where it would go.
static size_t find(const trit_bytes_map *m, const uint8_t *s, size_t n, uint64_t h) {
    const uint32_t h32 = (uint32_t)h;
    for (size_t i = (size_t)(h >> 32) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        const trit_bytes_slot *sl = &m->slots[i];
        if (sl->id < 0) return i;
        if (sl->hash != h32) continue;
        const int64_t a = m->off[sl->id], len = m->off[sl->id + 1] - a;
        if ((size_t)len == n && memcmp(m->pool + a, s, n) == 0) return i;
    }
}

int32_t trit_bytes_map_add(trit_bytes_map *m, int32_t id) {
    const uint8_t *s = m->pool + m->off[id];
    const size_t n = (size_t)(m->off[id + 1] - m->off[id]);
    const uint64_t h = trit_bytes_hash(s, n);
    const size_t i = find(m, s, n, h);
    if (m->slots[i].id >= 0) return m->slots[i].id;
    m->slots[i] = (trit_bytes_slot){id, (uint32_t)h};
    return -1;
}

int32_t trit_bytes_map_get(const trit_bytes_map *m, const uint8_t *s, size_t n) {
    return m->slots[find(m, s, n, trit_bytes_hash(s, n))].id;
}
