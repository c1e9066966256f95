// GPT-2 style pre-splitting on bytes. The GPT-2 pattern is
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// Here it is applied to bytes: ASCII letters and every byte >= 0x80 count as letters (so UTF-8
// words stay whole and invalid UTF-8 still goes somewhere), ASCII digits as numbers, the six
// ASCII spaces as whitespace, and everything else (punctuation, controls, NUL) as symbols.
// The chunks tile the input exactly, which is what makes decode(encode(x)) == x for any bytes.
#include "io/pretokenize.h"

enum { CLS_LETTER, CLS_DIGIT, CLS_SPACE, CLS_OTHER };

static int byte_class(uint8_t c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CLS_LETTER;
    if (c >= '0' && c <= '9') return CLS_DIGIT;
    if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') return CLS_SPACE;
    return CLS_OTHER;
}

// Length of a contraction ('s 't 'm 'd 're 've 'll) at text[i], or 0.
static size_t contraction(const uint8_t *t, size_t n, size_t i) {
    if (t[i] != '\'' || i + 1 >= n) return 0;
    uint8_t a = t[i + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if (i + 2 < n) {
        uint8_t b = t[i + 2];
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    }
    return 0;
}

static size_t chunk_end(const uint8_t *t, size_t n, size_t i) {
    size_t c = contraction(t, n, i);
    if (c) return i + c;
    size_t j = i;
    // " ?X+": one plain space joins the run that follows it.
    if (t[j] == ' ' && j + 1 < n && byte_class(t[j + 1]) != CLS_SPACE) j++;
    int cls = byte_class(t[j]);
    if (cls != CLS_SPACE) {
        while (j < n && byte_class(t[j]) == cls) j++;
        return j;
    }
    // "\s+(?!\S)|\s+": a whitespace run followed by a non-space leaves its last byte for the
    // next chunk (where a space becomes the " ?" prefix of the next word).
    while (j < n && byte_class(t[j]) == CLS_SPACE) j++;
    if (j < n && j - i > 1) j--;
    return j;
}

size_t trit_pretokenize_next(const uint8_t *text, size_t n, size_t i) {
    size_t e = chunk_end(text, n, i);
    return e - i > TRIT_BPE_MAX_CHUNK ? i + TRIT_BPE_MAX_CHUNK : e;
}
