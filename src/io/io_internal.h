// Helpers shared by the file formats in src/io: little-endian fields and CRC-32.
#ifndef TRIT_IO_INTERNAL_H
#define TRIT_IO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The formats are little-endian on disk whatever the host; these spell that out.
static inline uint32_t trit_le32_load(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t trit_le64_load(const uint8_t *p) {
    return (uint64_t)trit_le32_load(p) | (uint64_t)trit_le32_load(p + 4) << 32;
}
static inline void trit_le32_store(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}
static inline void trit_le64_store(uint8_t *p, uint64_t v) {
    trit_le32_store(p, (uint32_t)v);
    trit_le32_store(p + 4, (uint32_t)(v >> 32));
}

// Whether s[0..n) is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF); if not, *bad_at (may be NULL) gets the offset of the first bad sequence.
bool trit_utf8_valid(const uint8_t *s, size_t n, size_t *bad_at);

// CRC-32 (IEEE 802.3, the zlib polynomial) of n bytes; crc = 0 to start, or a previous result
// to continue over more bytes.
uint32_t trit_crc32(uint32_t crc, const void *data, size_t n);

#endif
