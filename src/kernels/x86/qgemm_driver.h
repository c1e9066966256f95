// What the x86 integer matmuls (kernels/qgemm.h) share: the loop over tokens and weight rows,
// and the unpacking of a block's qint4/ternary rows to one biased byte per code when several
// tokens will read them. An ISA file includes this, then defines
//   rows(R, kind, K, G, q, gsum, xs, w, row_bytes, ws, y)  R (1 or 4) rows of W against one token
//   unpack_row(kind, w, K, dst)                            a packed row to K biased bytes
// and instantiates QGEMM_ENTRY_POINTS(isa), or QGEMM_ENTRY for the dtypes it does not wrap.
#ifndef TRIT_KERNELS_X86_QGEMM_DRIVER_H
#define TRIT_KERNELS_X86_QGEMM_DRIVER_H

#include "kernels/qgemm.h"
#include "kernels/thread_buffer.h"

// W_U4 and W_U2: qint4 / ternary codes already unpacked to one biased byte each, in the
// activations' order, so several tokens do not unpack the same rows again.
typedef enum wkind { W_Q8, W_Q4, W_T2, W_U4, W_U2 } wkind;

static inline void rows(int R, wkind kind, int64_t K, int64_t G, const int8_t *q, const int32_t *gsum, float xs,
                        const uint8_t *w, size_t row_bytes, const float *ws, float *y);
static void unpack_row(wkind kind, const uint8_t *w, int64_t K, uint8_t *dst);

static _Thread_local float *unpack_mem;
static _Thread_local size_t unpack_floats;

// Rows [0, n) of packed codes as K biased bytes each; NULL when out of memory.
static const uint8_t *unpack(wkind kind, const uint8_t *w, size_t row_bytes, int64_t n, int64_t K) {
    uint8_t *u = (uint8_t *)trit_thread_buffer(&unpack_mem, &unpack_floats, (size_t)((n * K + 3) / 4));
    for (int64_t r = 0; u && r < n; r++) unpack_row(kind, w + r * row_bytes, K, u + r * K);
    return u;
}

static void qgemm(wkind kind, int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x,
                  const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    size_t row_bytes = kind == W_Q8 ? (size_t)K : kind == W_Q4 ? (size_t)K / 2 : (size_t)K / 4;
    const uint8_t *u = M > 1 && kind != W_Q8 ? unpack(kind, w + n0 * row_bytes, row_bytes, n1 - n0, K) : NULL;
    const uint8_t *base = w + n0 * row_bytes;  // row n0
    if (u) {  // from here on the rows are the unpacked ones
        base = u;
        row_bytes = (size_t)K;
        kind = kind == W_Q4 ? W_U4 : W_U2;
    }
    const int64_t NG = K / G;
    for (int64_t m = 0; m < M; m++) {
        const int8_t *q = x->q + m * K;
        const int32_t *gs = x->gsum + m * NG;
        int64_t n = n0;
        // One token (decoding) reads each weight row once, from memory: one stream at a time
        // streams fastest. Several tokens share each load of a row among four rows' sums.
        for (; M > 1 && n + 4 <= n1; n += 4)
            rows(4, kind, K, G, q, gs, x->scale[m], base + (n - n0) * row_bytes, row_bytes, ws + n * NG, y + m * ldy + n);
        for (; n < n1; n++)
            rows(1, kind, K, G, q, gs, x->scale[m], base + (n - n0) * row_bytes, row_bytes, ws + n * NG, y + m * ldy + n);
    }
}

#define QGEMM_ENTRY(name, kind)                                                                              \
    void name(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x, const uint8_t *w, \
              const float *ws, float *y, int64_t ldy) {                                                     \
        qgemm(kind, M, n0, n1, K, G, x, w, ws, y, ldy);                                                     \
    }
#define QGEMM_ENTRY_POINTS(isa)                     \
    QGEMM_ENTRY(trit_kernel_qgemm_q8_##isa, W_Q8)   \
    QGEMM_ENTRY(trit_kernel_qgemm_q4_##isa, W_Q4)   \
    QGEMM_ENTRY(trit_kernel_qgemm_t2_##isa, W_T2)

#endif
