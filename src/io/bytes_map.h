// A hash map from byte strings to token ids, over a tokenizer's token pool: the keys are not
// copied, a slot holds an id and the key's hash. Open addressing, at most half full.
#ifndef TRIT_IO_BYTES_MAP_H
#define TRIT_IO_BYTES_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct trit_bytes_slot {
    int32_t id;  // -1: free
    uint32_t hash;
} trit_bytes_slot;

typedef struct trit_bytes_map {
    trit_bytes_slot *slots;
    size_t cap;            // power of two
    const uint8_t *pool;   // token i is pool[off[i] .. off[i + 1])
    const int64_t *off;
} trit_bytes_map;

uint64_t trit_bytes_hash(const uint8_t *s, size_t n);

// Room for n ids of pool/off (kept by pointer: they must outlive the map).
bool trit_bytes_map_init(trit_bytes_map *m, const uint8_t *pool, const int64_t *off, int32_t n);
void trit_bytes_map_free(trit_bytes_map *m);
// Adds id; returns the id already spelled the same way, or -1 when id was added.
int32_t trit_bytes_map_add(trit_bytes_map *m, int32_t id);
// Id spelled s[0..n), or -1.
int32_t trit_bytes_map_get(const trit_bytes_map *m, const uint8_t *s, size_t n);

#endif
