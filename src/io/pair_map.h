// A hash map from a pair of token ids to an int32 (a pair's index in training, a merge's rank in
// encoding). Open addressing with linear probing; keys are (left << 32 | right).
#ifndef TRIT_IO_PAIR_MAP_H
#define TRIT_IO_PAIR_MAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct trit_pair_map {
    uint64_t *keys;  // PAIR_MAP_EMPTY marks a free slot
    int32_t *values;
    size_t cap;      // power of two
    size_t count;
} trit_pair_map;

static inline uint64_t trit_pair_key(int32_t left, int32_t right) {
    return (uint64_t)(uint32_t)left << 32 | (uint32_t)right;
}

bool trit_pair_map_init(trit_pair_map *m, size_t expected);
void trit_pair_map_free(trit_pair_map *m);
// Value for (left, right), or -1 if absent.
int32_t trit_pair_map_get(const trit_pair_map *m, int32_t left, int32_t right);
// Insert or overwrite; false only when growing the table fails.
bool trit_pair_map_put(trit_pair_map *m, int32_t left, int32_t right, int32_t value);

#endif
