// CRC-32 with the reflected IEEE polynomial 0xEDB88320 (same values as zlib's crc32()).
// Bit by bit: no shared table to initialize, so any thread may call it; the files it guards are
// small (tokenizers), where 8 steps per byte cost nothing.
#include "io/io_internal.h"

uint32_t trit_crc32(uint32_t crc, const void *data, size_t n) {
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
    }
    return ~crc;
}
