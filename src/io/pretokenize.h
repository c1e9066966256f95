// Cutting text into chunks before BPE, so merges never cross a word/space/symbol boundary.
#ifndef TRIT_IO_PRETOKENIZE_H
#define TRIT_IO_PRETOKENIZE_H

#include <stddef.h>
#include <stdint.h>

// Chunks longer than this are cut, which bounds the work per chunk on pathological input.
#define TRIT_BPE_MAX_CHUNK 4096

// End (exclusive) of the chunk that starts at text[i], i < n.
size_t trit_pretokenize_next(const uint8_t *text, size_t n, size_t i);

#endif
