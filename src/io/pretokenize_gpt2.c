// GPT-2's pre-tokenization on UTF-8 text, as tiktoken's gpt2 encoding applies it:
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// \p{L} and \p{N} are Unicode general categories (L*, N*) and \s is the White_Space property,
// both from ICU. A byte that does not start a well-formed UTF-8 sequence is one character of
// the "other" class, so any bytes are cut into chunks that tile the input (tiktoken only takes
// valid UTF-8; on it the two agree). Chunks are never capped: capping would change token ids.
#include "io/tokenizer_gpt2.h"

#include <unicode/uchar.h>

enum { CLS_LETTER, CLS_NUMBER, CLS_SPACE, CLS_OTHER };

// Classes of the ASCII range: letters, digits, \t \n \v \f \r and space, the rest "other".
static const uint8_t ascii_class[128] = {
    3, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3,
    2, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3,
    3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3,
    3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 3, 3, 3, 3,
};

// Code point of the well-formed UTF-8 sequence at t[i] (n - i > 0 bytes left) and its length,
// or -1 and length 1 for a byte that starts none.
static int32_t decode_utf8(const uint8_t *t, size_t n, size_t i, size_t *len) {
    const uint8_t b = t[i];
    size_t k;
    int32_t cp;
    uint8_t lo = 0x80, hi = 0xBF;
    *len = 1;
    if (b >= 0xC2 && b <= 0xDF) k = 2, cp = b & 0x1F;
    else if (b >= 0xE0 && b <= 0xEF) k = 3, cp = b & 0x0F;
    else if (b >= 0xF0 && b <= 0xF4) k = 4, cp = b & 0x07;
    else return -1;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
    if (n - i < k || t[i + 1] < lo || t[i + 1] > hi) return -1;
    for (size_t j = 1; j < k; j++) {
        if ((t[i + j] & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (t[i + j] & 0x3F);
    }
    *len = k;
    return cp;
}

static int unicode_class(int32_t cp) {
    if (cp < 0) return CLS_OTHER;
    const uint32_t gc = U_GET_GC_MASK(cp);
    if (gc & U_GC_L_MASK) return CLS_LETTER;
    if (gc & U_GC_N_MASK) return CLS_NUMBER;
    if (u_isUWhiteSpace(cp)) return CLS_SPACE;
    return CLS_OTHER;
}

// Class of the character at t[i] and its length in bytes.
static inline int class_at(const uint8_t *t, size_t n, size_t i, size_t *len) {
    if (t[i] < 0x80) {
        *len = 1;
        return ascii_class[t[i]];
    }
    return unicode_class(decode_utf8(t, n, i, len));
}

// Length of a contraction ('s 't 'm 'd 're 've 'll, lower case only) at t[i], or 0.
static size_t contraction(const uint8_t *t, size_t n, size_t i) {
    if (t[i] != '\'' || i + 1 >= n) return 0;
    const uint8_t a = t[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 < n) {
        const uint8_t b = t[i + 2];
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    return 0;
}

// End of the run of class `cls` characters starting at t[j].
static size_t run_end(const uint8_t *t, size_t n, size_t j, int cls) {
    size_t len;
    if (cls == CLS_LETTER) {  // the common case: ASCII letters without a call
        while (j < n && t[j] < 0x80 && ascii_class[t[j]] == CLS_LETTER) j++;
    }
    while (j < n && class_at(t, n, j, &len) == cls) j += len;
    return j;
}

size_t trit_pretokenize_gpt2_next(const uint8_t *t, size_t n, size_t i) {
    const size_t c = contraction(t, n, i);
    if (c) return i + c;
    size_t len, len1;
    int cls = class_at(t, n, i, &len);
    // " ?X+": one ASCII space joins the letters, numbers or other symbols that follow it.
    if (t[i] == ' ' && i + 1 < n) {
        const int next = class_at(t, n, i + 1, &len1);
        if (next != CLS_SPACE) return run_end(t, n, i + 1, next);
    }
    if (cls != CLS_SPACE) return run_end(t, n, i + len, cls);
    // "\s+(?!\S)|\s+": a whitespace run followed by a non-space gives its last character to the
    // next chunk, unless that character is the whole run.
    size_t j = i, last = i;
    while (j < n && class_at(t, n, j, &len) == CLS_SPACE) last = j, j += len;
    if (j < n && last > i) return last;
    return j;
}
