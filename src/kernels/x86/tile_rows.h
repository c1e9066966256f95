// The last rows of a loop over MR = 6-row register tiles: CALL(m) for the n < 6 rows left, with
// m a constant, so the tile function (always inlined) is specialised for that row count.
#ifndef TRIT_KERNELS_X86_TILE_ROWS_H
#define TRIT_KERNELS_X86_TILE_ROWS_H

#define TRIT_TILE_ROWS_LEFT(n, CALL) \
    switch (n) {                     \
    case 1: CALL(1); break;          \
    case 2: CALL(2); break;          \
    case 3: CALL(3); break;          \
    case 4: CALL(4); break;          \
    case 5: CALL(5); break;          \
    default: break;                  \
    }

#endif
