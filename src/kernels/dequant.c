// Fast decoding of side-scaled codes (kernels/dequant.h). Per group: its scale s and zero point
// zp once, then, for packed codes, a table of the 16 or 4 values a code can take in this group,
// each computed by the converter's own expression (((float)c - zp) * s, codebook[c] * s), so a
// look-up gives the converter's bits.
#include "kernels/dequant.h"
#include "kernels/kernel_table.h"

#include <stdint.h>

// The scale, zero point and end (exclusive element index) of the group holding element k; a
// NULL info is scale 1, zero point 0 and one group.
static void group_of(const trit_quant_info *q, int64_t k, float *s, float *zp, int64_t *end) {
    if (!q) {
        *s = 1.0f, *zp = 0.0f, *end = INT64_MAX;
        return;
    }
    const int64_t g = k / q->group_size;
    *s = trit_quant_info_scale(q, g);
    *zp = q->zero_points ? q->zero_points[g] : 0.0f;
    *end = (g + 1) * q->group_size;
}

// The group's values of every code of a `bits`-wide format (4 or 2): tab (1 << bits).
static void code_table(trit_dtype dt, float s, float zp, float *tab) {
    switch (dt) {
    case TRIT_QINT4:
        for (int c = 0; c < 16; c++) tab[c] = ((float)(c - 8) - zp) * s;
        return;
    case TRIT_NF4:
        for (int c = 0; c < 16; c++) tab[c] = trit_nf4_values[c] * s;
        return;
    case TRIT_QINT2:
        for (int c = 0; c < 4; c++) tab[c] = ((float)(c - 2) - zp) * s;
        return;
    default:  // 2-bit ternary: stored c + 1, no zero point
        for (int c = 0; c < 4; c++) tab[c] = (float)(c - 1) * s;
        return;
    }
}

// out[a, b) from packed codes p (element 0 of p in the low bits of p[0]), `bits` 4 or 2: whole
// bytes at a time, single codes at a ragged head or tail.
static void packed_run(float *out, const uint8_t *p, int64_t a, int64_t b, int bits, const float *tab) {
    const int per = 8 / bits;
    const unsigned mask = (1u << bits) - 1;
    int64_t i = a;
    for (; i < b && i % per != 0; i++) out[i] = tab[(p[i / per] >> ((i % per) * bits)) & mask];
    if (bits == 4) {
        for (; i + 2 <= b; i += 2) {
            const unsigned v = p[i / 2];
            out[i] = tab[v & 15u];
            out[i + 1] = tab[v >> 4];
        }
    } else {
        for (; i + 4 <= b; i += 4) {
            const unsigned v = p[i / 4];
            out[i] = tab[v & 3u];
            out[i + 1] = tab[(v >> 2) & 3u];
            out[i + 2] = tab[(v >> 4) & 3u];
            out[i + 3] = tab[v >> 6];
        }
    }
    for (; i < b; i++) out[i] = tab[(p[i / per] >> ((i % per) * bits)) & mask];
}

// out[a, b) from base-3 ternary codes p, a and b multiples of 64: each block of 64 is 13 bytes,
// the first 12 holding 5 codes (sum of (c + 1) 3^i), the last 4.
static void base3_run(float *out, const uint8_t *p, int64_t a, int64_t b, const float *tab) {
    for (int64_t blk = a / 64; blk < b / 64; blk++) {
        const uint8_t *q = p + blk * 13;
        float *o = out + blk * 64;
        for (int j = 0; j < 13; j++) {
            unsigned v = q[j];
            for (int d = 0; d < (j < 12 ? 5 : 4); d++, v /= 3) o[5 * j + d] = tab[v % 3];
        }
    }
}

void trit_kernel_dequant_ref(trit_dtype dt, float *out, const uint8_t *codes, int64_t n, float s, const float *tab) {
    if (dt == TRIT_NF4) {
        packed_run(out, codes, 0, n, 4, tab);
        return;
    }
    for (int64_t k = 0; k < n; k++) out[k] = tab[codes[k]] * s;
}

// The run kernel for NF4 and FP8 codes (one slot per dtype: a slot remembers one key).
static trit_kernel_dequant_fn *run_kernel(trit_dtype dt) {
    static trit_kernel_slot slots[3];
    const int k = dt == TRIT_NF4 ? 0 : dt == TRIT_F8_E4M3 ? 1 : 2;
    return TRIT_KERNEL_FN_OR(trit_kernel_dequant_fn, &slots[k], TRIT_KERNEL_DEQUANT, dt, TRIT_F32,
                             trit_kernel_dequant_ref);
}

static int packed_bits(trit_dtype dt) {
    switch (dt) {
    case TRIT_QINT4:
    case TRIT_NF4: return 4;
    case TRIT_QINT2:
    case TRIT_TERNARY: return 2;
    default: return 0;
    }
}

void trit_kernel_dequant_f32(trit_dtype dt, float *out, const void *codes, int64_t n, const trit_quant_info *q,
                             int64_t first) {
    const int bits = packed_bits(dt);
    const bool byte_codes = dt == TRIT_QINT8 || dt == TRIT_F8_E4M3 || dt == TRIT_F8_E5M2;
    // Base 3 in whole blocks (a tensor's rows and groups always are).
    const bool base3 = dt == TRIT_TERNARY_B3 && n % 64 == 0 && (!q || q->group_size % 64 == 0);
    if (!bits && !byte_codes && !base3) {
        const trit_dtype_traits *tr = trit_dtype_traits_of(dt);
        if (tr && tr->to_f32) tr->to_f32(out, codes, n, q, first);
        return;
    }
    const uint8_t *p = codes;
    const float *fp8 = dt == TRIT_F8_E4M3 ? trit_fp8_table(TRIT_FP8_E4M3)
                       : dt == TRIT_F8_E5M2 ? trit_fp8_table(TRIT_FP8_E5M2) : NULL;
    trit_kernel_dequant_fn *run = dt == TRIT_NF4 || fp8 ? run_kernel(dt) : NULL;
    for (int64_t i = 0; i < n;) {
        float s, zp, tab[16];
        int64_t end;
        group_of(q, first + i, &s, &zp, &end);
        const int64_t stop = end - first < n ? end - first : n;
        if (base3) {
            code_table(TRIT_TERNARY, s, zp, tab);
            base3_run(out, p, i, stop, tab);
        } else if (run && dt == TRIT_NF4 && i % 2 == 0) {  // a group of NF4 starts on a byte
            code_table(dt, s, zp, tab);
            run(dt, out + i, p + i / 2, stop - i, s, tab);
        } else if (bits) {
            code_table(dt, s, zp, tab);
            packed_run(out, p, i, stop, bits, tab);
        } else if (fp8) {
            run(dt, out + i, p + i, stop - i, s, fp8);
        } else {
            const int8_t *c = (const int8_t *)p;
#pragma omp simd
            for (int64_t k = i; k < stop; k++) out[k] = ((float)c[k] - zp) * s;
        }
        i = stop;
    }
}
