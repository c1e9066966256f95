// CRC-32 with the reflected IEEE polynomial 0xEDB88320 (same values as zlib's crc32()).
#include "io/io_internal.h"

static uint32_t crc_table[256];
static int crc_table_ready; // the table is a pure function, so a racing double fill is harmless

static void crc_table_fill(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[i] = c;
    }
    crc_table_ready = 1;
}

uint32_t trit_crc32(uint32_t crc, const void *data, size_t n) {
    if (!crc_table_ready) crc_table_fill();
    const uint8_t *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}
