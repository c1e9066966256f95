// What the x86 integer matmuls (kernels/qgemm.h) share: the loop over tokens and weight rows,
// and the unpacking of a block's qint4/ternary rows to one biased byte per code when several
// tokens will read them. An ISA file includes this, then defines
//   rows(R, kind, K, G, q, gsum, xs, w, row_bytes, ws, y)  R (1 or 4) rows of W against one token
//   unpack_row(kind, w, K, dst)                            a packed row to K biased bytes
// and instantiates QGEMM_ENTRY_POINTS(isa).
#ifndef TRIT_KERNELS_X86_QGEMM_DRIVER_H
#define TRIT_KERNELS_X86_QGEMM_DRIVER_H

#include "kernels/qgemm.h"
#include "kernels/thread_buffer.h"

#include <immintrin.h>

// W_U4 and W_U2: qint4 / ternary codes already unpacked to one biased byte each, in the
// activations' order, so several tokens do not unpack the same rows again.
typedef enum wkind { W_Q8, W_Q4, W_T2, W_U4, W_U2 } wkind;

static inline void rows(int R, wkind kind, int64_t K, int64_t G, const int8_t *q, const int32_t *gsum, float xs,
                        const uint8_t *w, size_t row_bytes, const float *ws, float *y);
static void unpack_row(wkind kind, const uint8_t *w, int64_t K, uint8_t *dst);

// Every implementation finishes a group the same way, so a token's outputs have the same bits
// whichever path (one token, several, unpacked rows) computed the exact integer sums: the
// lanes of each of the four rows' vectors are added (rows past R are zero vectors), the weight
// bias times the activations' group sum comes out in int32, and one multiply-add scales the
// four sums. bias * gsum fits int32 for any group trit_qgemm_supported allows.
static inline __m128 group_sums4(__m256i a0, __m256i a1, __m256i a2, __m256i a3, int32_t unbias) {
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(a0, a1), _mm256_hadd_epi32(a2, a3));
    const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    return _mm_cvtepi32_ps(_mm_sub_epi32(s, _mm_set1_epi32(unbias)));
}

// One row's group sum, as group_sums4 gives it (an exact integer, so in any order).
static inline float group_sum1(__m256i a, int32_t unbias) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return (float)(_mm_cvtsi128_si32(s) - unbias);
}

// f + the group sums times the scales of rows r < R of group g (ws: (R, NG)).
static inline __m128 scale_group(__m128 f, __m128 sums, int R, const float *ws, int64_t NG, int64_t g) {
    float sc[4] = {0, 0, 0, 0};
    for (int r = 0; r < R; r++) sc[r] = ws[r * NG + g];
    return _mm_fmadd_ps(sums, _mm_loadu_ps(sc), f);
}

// y[r] = xs * f[r] for r < R.
static inline void store_rows(int R, float xs, __m128 f, float *y) {
    float out[4];
    _mm_storeu_ps(out, _mm_mul_ps(f, _mm_set1_ps(xs)));
    for (int r = 0; r < R; r++) y[r] = out[r];
}

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
