// The portable integer matmuls (the oracle of the x86 ones), the per-token activation quantizer
// and the entry point that splits outputs among threads.
#include "kernels/qgemm.h"
#include "kernels/kernel_table.h"

#include <math.h>
#include <omp.h>

bool trit_qgemm_supported(trit_dtype wdt, int64_t K, int64_t G) {
    const int64_t step = wdt == TRIT_TERNARY ? 128 : 64;
    return (wdt == TRIT_QINT8 || wdt == TRIT_QINT4 || wdt == TRIT_TERNARY) && G > 0 && G % step == 0 && K % G == 0 &&
           G <= 131072;
}

// The code of v = x / scale: nearest even integer in [-127, 127], 0 for NaN. Adding and removing
// 1.5 * 2^23 rounds to nearest even exactly for |v| < 2^22 (here |v| <= 127.5) and, unlike
// nearbyintf on a plain x86-64 build, vectorises.
static inline int8_t act_code(float v) {
    float t = (v + 12582912.0f) - 12582912.0f;
    t = t > 127.0f ? 127.0f : t < -127.0f ? -127.0f : t;
    return (int8_t)(int)(t == t ? t : 0.0f);
}

// max |r| over n values, NaN ignored: eight running maxima (max is exact, so the order does not
// matter) instead of fmaxf, which a plain x86-64 build calls out of line.
static float row_absmax(const float *r, int64_t n) {
    float m[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int64_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (int j = 0; j < 8; j++) m[j] = fabsf(r[k + j]) > m[j] ? fabsf(r[k + j]) : m[j];
    for (; k < n; k++) m[0] = fabsf(r[k]) > m[0] ? fabsf(r[k]) : m[0];
    for (int j = 1; j < 8; j++) m[0] = m[j] > m[0] ? m[j] : m[0];
    return m[0];
}

// Group sums of a row's codes q (K) into gs (K / G).
static void group_sums(const int8_t *q, int64_t K, int64_t G, int32_t *gs) {
    for (int64_t g = 0; g < K / G; g++) {
        int32_t sum = 0;
#pragma omp simd reduction(+ : sum)
        for (int64_t k = g * G; k < (g + 1) * G; k++) sum += q[k];
        gs[g] = sum;
    }
}

// A row's scale absmax / 127 into *scale; returns the factor its codes take (0 for a zero scale).
static float row_scale(const float *r, int64_t K, float *scale) {
    const float s = row_absmax(r, K) / 127.0f;
    *scale = s;
    return s > 0 ? 1.0f / s : 0.0f;
}

void trit_kernel_qact_ref(const float *x, int64_t K, int64_t G, int8_t *q, float *scale, int32_t *gsum) {
    const float inv = row_scale(x, K, scale);
#pragma omp simd
    for (int64_t k = 0; k < K; k++) q[k] = act_code(x[k] * inv);
    group_sums(q, K, G, gsum);
}

// Below this many values one thread quantizes them all (a decoded token's row, say).
#define QACT_PARALLEL_MIN ((int64_t)1 << 15)

void trit_kernel_qact_div_ref(const float *x, int64_t K, int64_t G, int8_t *q, float *scale, int32_t *gsum) {
    const float s = row_absmax(x, K) / 127.0f;
    int bad = 0;
#pragma omp simd reduction(| : bad)
    for (int64_t k = 0; k < K; k++) {
        const float v = s != 0 ? x[k] / s : x[k] * 0.0f;  // x * 0: NaN for a NaN or Inf, as x / s gives
        bad |= v != v;
        q[k] = act_code(v);
    }
    *scale = bad ? NAN : s;
    group_sums(q, K, G, gsum);
}

void trit_qact_quantize_div(const float *x, int64_t M, int64_t K, const trit_qact *a) {
    static trit_kernel_slot slot;
    trit_kernel_qact_fn *fn =
        TRIT_KERNEL_FN_OR(trit_kernel_qact_fn, &slot, TRIT_KERNEL_QACT_DIV, TRIT_F32, TRIT_QINT8, trit_kernel_qact_div_ref);
#pragma omp parallel for schedule(static) if (M * K >= QACT_PARALLEL_MIN && !omp_in_parallel())
    for (int64_t m = 0; m < M; m++) fn(x + m * K, K, K, a->q + m * K, &a->scale[m], a->gsum + m);
}

void trit_qact_quantize(const float *x, int64_t M, int64_t K, int64_t G, trit_dtype wdt, const trit_qact *a) {
    static trit_kernel_slot slot;
    trit_kernel_qact_fn *natural =
        TRIT_KERNEL_FN_OR(trit_kernel_qact_fn, &slot, TRIT_KERNEL_QACT, TRIT_F32, TRIT_QINT8, trit_kernel_qact_ref);
    // Rows are independent, so the split among threads cannot change a code.
#pragma omp parallel for schedule(static) if (M * K >= QACT_PARALLEL_MIN && !omp_in_parallel())
    for (int64_t m = 0; m < M; m++) {
        const float *r = x + m * K;
        int8_t *q = a->q + m * K;
        if (wdt == TRIT_QINT8) {
            natural(r, K, G, q, &a->scale[m], a->gsum + m * (K / G));
            continue;
        }
        const float inv = row_scale(r, K, &a->scale[m]);
        // Written in trit_qact_pos order, one run of the block at a time, so the stores are
        // sequential and the strided reads vectorise.
        const int64_t B = wdt == TRIT_QINT4 ? 64 : 128, S = wdt == TRIT_QINT4 ? 2 : 4;
        for (int64_t b = 0; b < K; b += B)
            for (int64_t j = 0; j < S; j++)
                for (int64_t i = 0; i < B / S; i++) q[b + j * (B / S) + i] = act_code(r[b + i * S + j] * inv);
        // The reordering stays within 64- or 128-element blocks, so a group's codes are its own.
        group_sums(q, K, G, a->gsum + m * (K / G));
    }
}

static inline int code_at(trit_dtype wdt, const uint8_t *row, int64_t k) {
    if (wdt == TRIT_QINT8) return (int8_t)row[k];
    if (wdt == TRIT_TERNARY) return ((row[k >> 2] >> ((k & 3) * 2)) & 3) - 1;
    return ((row[k >> 1] >> ((k & 1) * 4)) & 15) - 8;
}

static void qgemm_ref(trit_dtype wdt, int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x,
                      const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    const size_t row_bytes = trit_dtype_nbytes(wdt, K);
    for (int64_t m = 0; m < M; m++) {
        const int8_t *q = x->q + m * K;
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * row_bytes;
            float sum = 0;
            for (int64_t g = 0; g < K / G; g++) {
                int32_t acc = 0;
                for (int64_t k = g * G; k < (g + 1) * G; k++) acc += code_at(wdt, row, k) * q[trit_qact_pos(wdt, k)];
                // Two statements, so that no compiler fuses them: the panel kernels (qgemm_panel.h) round
                // the product and the sum apart, as here, and give these bits.
                const float part = ws[n * (K / G) + g] * (float)acc;
                sum += part;
            }
            y[m * ldy + n] = x->scale[m] * sum;
        }
    }
}

void trit_kernel_qgemm_q8_ref(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x,
                              const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    qgemm_ref(TRIT_QINT8, M, n0, n1, K, G, x, w, ws, y, ldy);
}

void trit_kernel_qgemm_q4_ref(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x,
                              const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    qgemm_ref(TRIT_QINT4, M, n0, n1, K, G, x, w, ws, y, ldy);
}

void trit_kernel_qgemm_t2_ref(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const trit_qact *x,
                              const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    qgemm_ref(TRIT_TERNARY, M, n0, n1, K, G, x, w, ws, y, ldy);
}

// Outputs are split in blocks of 16 rows of W, so a block's codes stay in L1 while every
// activation row passes over them.
enum { N_BLOCK = 16 };

trit_status trit_kernel_qgemm(trit_dtype wdt, int64_t M, int64_t N, int64_t K, int64_t G, const trit_qact *x,
                              const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    static trit_kernel_slot slots[3];  // qint8, qint4, ternary: a slot remembers one key
    const int k = wdt == TRIT_QINT8 ? 0 : wdt == TRIT_QINT4 ? 1 : wdt == TRIT_TERNARY ? 2 : -1;
    trit_kernel_qgemm_fn *fn = k < 0 ? NULL : TRIT_KERNEL_FN(trit_kernel_qgemm_fn, &slots[k], TRIT_KERNEL_QGEMM, wdt, TRIT_F32);
    if (!fn)
        return k < 0 ? trit_error(TRIT_ERR_UNSUPPORTED, "qgemm: weights of dtype %s have no integer kernel (qint8, "
                                  "qint4 and ternary do)", trit_dtype_name(wdt))
                     : TRIT_ERR_UNSUPPORTED;  // the lookup's message stands
    const int64_t blocks = (N + N_BLOCK - 1) / N_BLOCK;
#pragma omp parallel for schedule(static) if (blocks > 1 && M * N * K > 32768)
    for (int64_t b = 0; b < blocks; b++) {
        const int64_t n0 = b * N_BLOCK, n1 = n0 + N_BLOCK < N ? n0 + N_BLOCK : N;
        fn(M, n0, n1, K, G, x, w, ws, y, ldy);
    }
    return TRIT_OK;
}

// ---- weight-only NF4 ------------------------------------------------------------------------

void trit_nf4_act_order(const float *x, int64_t M, int64_t K, float *out) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t k = 0; k < K; k++) out[m * K + trit_qact_pos(TRIT_QINT4, k)] = x[m * K + k];
}

void trit_kernel_nf4_ref(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x, const uint8_t *w,
                         const float *ws, float *y, int64_t ldy) {
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * (size_t)(K / 2);
            float sum = 0;
            for (int64_t g = 0; g < K / G; g++) {
                float acc = 0;
                for (int64_t k = g * G; k < (g + 1) * G; k++)
                    acc += trit_nf4_values[(row[k >> 1] >> ((k & 1) * 4)) & 15] *
                           x[m * K + trit_qact_pos(TRIT_QINT4, k)];
                sum += ws[n * (K / G) + g] * acc;
            }
            y[m * ldy + n] = sum;
        }
}

// A weight-only kernel (NF4, FP8) over N, one call per thread on a contiguous share of whole
// N_BLOCKs: a kernel may prepare its activations once per call (the bf16 NF4 kernel converts
// them), and the share is the same as a static loop over the blocks would give.
static void weight_only_split(trit_kernel_nf4_fn *fn, int64_t M, int64_t N, int64_t K, int64_t G, const float *x,
                              const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    const int64_t blocks = (N + N_BLOCK - 1) / N_BLOCK;
#pragma omp parallel if (blocks > 1 && M * N * K > 32768)
    {
        const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
        const int64_t b0 = blocks * t / nt, b1 = blocks * (t + 1) / nt;
        const int64_t n0 = b0 * N_BLOCK, n1 = b1 * N_BLOCK < N ? b1 * N_BLOCK : N;
        if (n0 < n1) fn(M, n0, n1, K, G, x, w, ws, y, ldy);
    }
}

void trit_kernel_nf4_gemm(int64_t M, int64_t N, int64_t K, int64_t G, const float *x, const uint8_t *w, const float *ws,
                          float *y, int64_t ldy) {
    static trit_kernel_slot slot;
    weight_only_split(TRIT_KERNEL_FN_OR(trit_kernel_nf4_fn, &slot, TRIT_KERNEL_WGEMM, TRIT_NF4, TRIT_F32, trit_kernel_nf4_ref),
                      M, N, K, G, x, w, ws, y, ldy);
}

// ---- weight-only FP8 ------------------------------------------------------------------------

bool trit_fp8_gemm_supported(trit_dtype wdt, int64_t K, int64_t G) {
    return (wdt == TRIT_F8_E4M3 || wdt == TRIT_F8_E5M2) && G > 0 && G % 16 == 0 && K % G == 0;
}

static void fp8_ref(trit_fp8_kind kind, int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                    const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    const float *value = trit_fp8_table(kind);
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = n0; n < n1; n++) {
            const uint8_t *row = w + (size_t)n * (size_t)K;
            float sum = 0;
            for (int64_t g = 0; g < K / G; g++) {
                float acc = 0;
                for (int64_t k = g * G; k < (g + 1) * G; k++) acc += value[row[k]] * x[m * K + k];
                sum += ws[n * (K / G) + g] * acc;
            }
            y[m * ldy + n] = sum;
        }
}

void trit_kernel_fp8_e4m3_ref(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                              const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    fp8_ref(TRIT_FP8_E4M3, M, n0, n1, K, G, x, w, ws, y, ldy);
}

void trit_kernel_fp8_e5m2_ref(int64_t M, int64_t n0, int64_t n1, int64_t K, int64_t G, const float *x,
                              const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    fp8_ref(TRIT_FP8_E5M2, M, n0, n1, K, G, x, w, ws, y, ldy);
}

trit_status trit_kernel_fp8_gemm(trit_dtype wdt, int64_t M, int64_t N, int64_t K, int64_t G, const float *x,
                                 const uint8_t *w, const float *ws, float *y, int64_t ldy) {
    static trit_kernel_slot slots[2];  // e4m3, e5m2
    const int k = wdt == TRIT_F8_E4M3 ? 0 : wdt == TRIT_F8_E5M2 ? 1 : -1;
    trit_kernel_fp8_fn *fn = k < 0 ? NULL : TRIT_KERNEL_FN(trit_kernel_fp8_fn, &slots[k], TRIT_KERNEL_WGEMM, wdt, TRIT_F32);
    if (!fn)
        return k < 0 ? trit_error(TRIT_ERR_UNSUPPORTED, "fp8 gemm: weights of dtype %s are not fp8 (f8_e4m3 or "
                                  "f8_e5m2)", trit_dtype_name(wdt))
                     : TRIT_ERR_UNSUPPORTED;
    weight_only_split(fn, M, N, K, G, x, w, ws, y, ldy);
    return TRIT_OK;
}
