// Strict UTF-8 validation (RFC 3629): the text formats trit reads (safetensors' JSON header)
// must be UTF-8, and a reader that let other bytes through would hand them on to JSON parsers,
// terminals and metadata consumers.
#include "io/io_internal.h"

// Length of the well-formed sequence at s (n > 0 bytes left), or 0. The second byte's range
// depends on the first: that is what rules out overlong forms (E0 80..9F, F0 80..8F),
// surrogates (ED A0..BF) and code points past U+10FFFF (F4 90.., F5..FF).
static size_t seq_len(const uint8_t *s, size_t n) {
    const uint8_t b = s[0];
    if (b < 0x80) return 1;
    size_t len;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) len = 3;
    else if (b >= 0xF0 && b <= 0xF4) len = 4;
    else return 0;  // 80..BF continuation first, C0/C1 overlong, F5..FF beyond U+10FFFF
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    return len;
}

bool trit_utf8_valid(const uint8_t *s, size_t n, size_t *bad_at) {
    for (size_t i = 0; i < n;) {
        const size_t k = seq_len(s + i, n - i);
        if (k == 0) {
            if (bad_at) *bad_at = i;
            return false;
        }
        i += k;
    }
    return true;
}
