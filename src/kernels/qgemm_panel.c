// Packing weights into 16-row panels, the portable panel kernel (the oracle of the x86 one) and
// the entry point that splits panels among threads (see qgemm_panel.h).
#include "kernels/qgemm_panel.h"
#include "kernels/kernel_table.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

bool trit_qpanels_preferred(trit_dtype wdt) {
    if (wdt != TRIT_QINT8 && wdt != TRIT_QINT4 && wdt != TRIT_TERNARY) return false;
    return trit_kernel_find(TRIT_KERNEL_QPANEL, wdt, TRIT_F32)->needs != 0;
}

bool trit_qpanels_supported(trit_dtype wdt, int64_t K, int64_t G) {
    const int64_t step = wdt == TRIT_TERNARY ? 64 : 32;
    return (wdt == TRIT_QINT8 || wdt == TRIT_QINT4 || wdt == TRIT_TERNARY) && G > 0 && G % step == 0 && K % G == 0 &&
           G <= 131072;
}

// Dwords of codes per 64-byte step, and bits per code.
static int dwords_per_step(trit_dtype wdt) { return wdt == TRIT_QINT8 ? 1 : wdt == TRIT_QINT4 ? 2 : 4; }
static int code_bits(trit_dtype wdt) { return 8 / dwords_per_step(wdt); }
static int code_bias(trit_dtype wdt) { return wdt == TRIT_QINT8 ? 128 : wdt == TRIT_QINT4 ? 8 : 1; }

// Unbiased code of element k of a row as stored.
static int stored_code(trit_dtype wdt, const uint8_t *row, int64_t k) {
    if (wdt == TRIT_QINT8) return (int8_t)row[k];
    if (wdt == TRIT_TERNARY) return ((row[k >> 2] >> ((k & 3) * 2)) & 3) - 1;
    return ((row[k >> 1] >> ((k & 1) * 4)) & 15) - 8;
}

// Byte of a panel and bit shift at which row l's code for activation position pos goes.
static size_t panel_at(trit_dtype wdt, int l, int64_t pos, int *shift) {
    const int S = dwords_per_step(wdt);
    const int64_t dword = pos / 4;
    *shift = (int)(dword % S) * code_bits(wdt);
    return (size_t)(dword / S) * TRIT_QPANEL_STEP + (size_t)(4 * l) + (size_t)(pos % 4);
}

static void pack_panel(const trit_qpanels *p, int64_t panel, const uint8_t *w, const float *ws) {
    const trit_dtype wdt = p->wdt;
    const int64_t K = p->K, NG = K / p->G;
    const size_t row_bytes = trit_dtype_nbytes(wdt, K);
    uint8_t *dst = p->codes + (size_t)panel * p->panel_bytes;
    float *sc = p->scales + panel * NG * TRIT_QPANEL_ROWS;
    for (int l = 0; l < TRIT_QPANEL_ROWS; l++) {
        const int64_t n = panel * TRIT_QPANEL_ROWS + l;
        for (int64_t k = 0; k < K; k++) {
            int shift;
            const size_t at = panel_at(wdt, l, k, &shift);
            const int c = n < p->N ? stored_code(wdt, w + (size_t)n * row_bytes, k) : 0;
            dst[at] |= (uint8_t)((c + code_bias(wdt)) << shift);
        }
        for (int64_t g = 0; g < NG; g++) sc[g * TRIT_QPANEL_ROWS + l] = n < p->N ? ws[n * NG + g] : 0.0f;
    }
}

// The codes' bytes, then the scales' (64-byte multiples: the scales start aligned after them).
static size_t codes_bytes(const trit_qpanels *p) { return ((size_t)p->panels * p->panel_bytes + 63) / 64 * 64; }
static size_t scales_bytes(const trit_qpanels *p) {
    return (sizeof(float) * (size_t)(p->panels * (p->K / p->G) * TRIT_QPANEL_ROWS) + 63) / 64 * 64;
}

static trit_status shape(trit_dtype wdt, int64_t N, int64_t K, int64_t G, trit_qpanels *out) {
    memset(out, 0, sizeof *out);
    if (N <= 0 || !trit_qpanels_supported(wdt, K, G))
        return trit_error(TRIT_ERR_INVALID, "qgemm panels: cannot pack %s (%lld, %lld) in groups of %lld",
                          trit_dtype_name(wdt), (long long)N, (long long)K, (long long)G);
    out->wdt = wdt, out->N = N, out->K = K, out->G = G;
    out->panels = (N + TRIT_QPANEL_ROWS - 1) / TRIT_QPANEL_ROWS;
    out->panel_bytes = (size_t)(TRIT_QPANEL_ROWS * K) * (size_t)code_bits(wdt) / 8;
    return TRIT_OK;
}

size_t trit_qpanels_bytes(trit_dtype wdt, int64_t N, int64_t K, int64_t G) {
    trit_qpanels p;
    return shape(wdt, N, K, G, &p) == TRIT_OK ? codes_bytes(&p) + scales_bytes(&p) : 0;
}

trit_status trit_qpanels_alloc(trit_dtype wdt, int64_t N, int64_t K, int64_t G, trit_qpanels *out) {
    trit_status s = shape(wdt, N, K, G, out);
    if (s != TRIT_OK) return s;
    out->codes = trit_aligned_alloc(codes_bytes(out));
    out->scales = trit_aligned_alloc(scales_bytes(out));
    if (!out->codes || !out->scales) {
        trit_qpanels_free(out);
        return trit_error(TRIT_ERR_NOMEM, "qgemm panels: out of memory for %lld x %lld codes", (long long)N,
                          (long long)K);
    }
    return TRIT_OK;
}

trit_status trit_qpanels_place(trit_dtype wdt, int64_t N, int64_t K, int64_t G, void *mem, trit_qpanels *out) {
    trit_status s = shape(wdt, N, K, G, out);
    if (s != TRIT_OK) return s;
    if (!mem || (uintptr_t)mem % 64) {
        memset(out, 0, sizeof *out);
        return trit_error(TRIT_ERR_INVALID, "qgemm panels: storage must be 64-byte aligned");
    }
    out->codes = mem;
    out->scales = (float *)((char *)mem + codes_bytes(out));
    out->placed = true;
    return TRIT_OK;
}

// Fake quantization's ternary code of w is the nearest even integer of RN(w / s) clamped to
// [-1, 1]: 1 iff RN(w / s) > 0.5, i.e. iff w / s passes the midpoint 0.5 + 2^-25 between 0.5 and
// the next float (a tie rounds to the even 0.5, then to code 0). s (0.5 + 2^-25) is exact in
// double (24 bits times 25), so the code is a comparison with the smallest float above it, with
// no division: 1 iff w >= t, -1 iff w <= -t (a NaN compares false: code 0).
static float ternary_threshold(float s) {
    const double thr = (double)s * (0.5 + 0x1p-25);
    float t = (float)thr;
    if ((double)t <= thr) t = nextafterf(t, INFINITY);
    return t;
}

// One 64-byte step of panel p: the 16 x 16 block whose row l (a panel row) at position 16 st + q
// is w[(16 p + l) * ldw + 16 st + q], or, transposed, w[(16 st + q) * ldw + 16 p + l]. Byte 4 l + b
// holds positions 4 i + b in bits 2 i (qgemm_panel.h's ternary layout), codes biased by 1.
static void fill_step(uint8_t *dst, const float *w, int64_t ldw, float t, int64_t p, int64_t st, bool transposed) {
    uint8_t c[16][16];  // [block row][block column], biased codes
    for (int a = 0; a < 16; a++) {
        const float *row = transposed ? w + (16 * st + a) * ldw + 16 * p : w + (16 * p + a) * ldw + 16 * st;
        for (int b = 0; b < 16; b++) c[a][b] = (uint8_t)(1 + (row[b] >= t) - (row[b] <= -t));
    }
    for (int l = 0; l < 16; l++)
        for (int b = 0; b < 4; b++) {
            // panel row l, positions 4 i + b: c[l][4 i + b], or transposed c[4 i + b][l]
            const uint8_t c0 = transposed ? c[b][l] : c[l][b], c1 = transposed ? c[4 + b][l] : c[l][4 + b];
            const uint8_t c2 = transposed ? c[8 + b][l] : c[l][8 + b], c3 = transposed ? c[12 + b][l] : c[l][12 + b];
            dst[4 * l + b] = (uint8_t)(c0 | c1 << 2 | c2 << 4 | c3 << 6);
        }
}

void trit_qpanels_fill_ternary_f32(trit_qpanels *p, const float *w, float s, bool transposed) {
    const int64_t steps = p->K / 16, ldw = transposed ? p->N : p->K, NG = p->K / p->G;
    const float t = ternary_threshold(s);
#pragma omp parallel for schedule(static) if (p->N * p->K >= (1 << 16) && !omp_in_parallel())
    for (int64_t q = 0; q < p->panels; q++) {
        uint8_t *panel = p->codes + (size_t)q * p->panel_bytes;
        for (int64_t st = 0; st < steps; st++) fill_step(panel + st * TRIT_QPANEL_STEP, w, ldw, t, q, st, transposed);
        for (int64_t i = 0; i < NG * TRIT_QPANEL_ROWS; i++) p->scales[q * NG * TRIT_QPANEL_ROWS + i] = s;
    }
}

// Packs W into panels over mem (trit_qpanels_place), or over storage of their own when mem is NULL;
// either is zero, and codes are or-ed in.
static trit_status pack(trit_dtype wdt, int64_t N, int64_t K, int64_t G, const uint8_t *w, const float *ws, void *mem,
                        trit_qpanels *out) {
    memset(out, 0, sizeof *out);
    if (!w || !ws) return trit_error(TRIT_ERR_INVALID, "qgemm panels: NULL codes or scales");
    trit_status s = mem ? trit_qpanels_place(wdt, N, K, G, mem, out) : trit_qpanels_alloc(wdt, N, K, G, out);
    if (s != TRIT_OK) return s;
#pragma omp parallel for schedule(static) if (N * K >= (1 << 20) && !omp_in_parallel())
    for (int64_t p = 0; p < out->panels; p++) pack_panel(out, p, w, ws);
    return TRIT_OK;
}

trit_status trit_qpanels_pack(trit_dtype wdt, int64_t N, int64_t K, int64_t G, const uint8_t *w, const float *ws,
                              trit_qpanels *out) {
    return pack(wdt, N, K, G, w, ws, NULL, out);
}

trit_status trit_qpanels_pack_at(trit_dtype wdt, int64_t N, int64_t K, int64_t G, const uint8_t *w, const float *ws,
                                 void *mem, trit_qpanels *out) {
    if (!mem) {
        memset(out, 0, sizeof *out);
        return trit_error(TRIT_ERR_INVALID, "qgemm panels: NULL storage");
    }
    return pack(wdt, N, K, G, w, ws, mem, out);
}

void trit_qpanels_free(trit_qpanels *p) {
    if (!p) return;
    if (!p->placed) {
        trit_aligned_free(p->codes);
        trit_aligned_free(p->scales);
    }
    memset(p, 0, sizeof *p);
}

void trit_qpanels_quantize(const trit_qpanels *w, const float *x, int64_t M, const trit_qact *a) {
    trit_qact_quantize(x, M, w->K, w->G, TRIT_QINT8, a);  // qint8's order is the natural one
}

// The biased code of row l at activation position pos.
static int panel_code(const trit_qpanels *w, const uint8_t *panel, int l, int64_t pos) {
    int shift;
    const uint8_t byte = panel[panel_at(w->wdt, l, pos, &shift)];
    return (byte >> shift) & ((1 << code_bits(w->wdt)) - 1);
}

void trit_qpanels_row_f32(const trit_qpanels *w, int64_t n, float *out) {
    const int64_t K = w->K, G = w->G, NG = K / G, p = n / TRIT_QPANEL_ROWS;
    const int l = (int)(n % TRIT_QPANEL_ROWS), bias = code_bias(w->wdt);
    const uint8_t *panel = w->codes + (size_t)p * w->panel_bytes;
    for (int64_t g = 0; g < NG; g++) {
        const float s = w->scales[(p * NG + g) * TRIT_QPANEL_ROWS + l];
        for (int64_t pos = g * G; pos < (g + 1) * G; pos++) out[pos] = (float)(panel_code(w, panel, l, pos) - bias) * s;
    }
}

void trit_kernel_qpanel_ref(int64_t M, int64_t p0, int64_t p1, const trit_qpanels *w, const trit_qact *x, float *y,
                            int64_t ldy, bool acc) {
    const int64_t K = w->K, G = w->G, NG = K / G;
    const int bias = code_bias(w->wdt);
    for (int64_t m = 0; m < M; m++)
        for (int64_t p = p0; p < p1; p++) {
            const uint8_t *panel = w->codes + (size_t)p * w->panel_bytes;
            for (int l = 0; l < TRIT_QPANEL_ROWS && p * TRIT_QPANEL_ROWS + l < w->N; l++) {
                float sum = 0;
                for (int64_t g = 0; g < NG; g++) {
                    int64_t acc = -(int64_t)bias * x->gsum[m * NG + g];  // biased partial sums can pass 2^31
                    for (int64_t pos = g * G; pos < (g + 1) * G; pos++)
                        acc += panel_code(w, panel, l, pos) * x->q[m * K + pos];
                    const float part = w->scales[(p * NG + g) * TRIT_QPANEL_ROWS + l] * (float)acc;
                    sum += part;  // apart from the product: no fused multiply-add
                }
                float *out = &y[m * ldy + p * TRIT_QPANEL_ROWS + l];
                const float v = x->scale[m] * sum;
                *out = acc ? *out + v : v;
            }
        }
}

// The epilogue over columns [n0, n1) of every row.
static void finish(const trit_qpanel_epilogue *e, int64_t M, int64_t n0, int64_t n1, float *y, int64_t ldy) {
    for (int64_t m = 0; m < M; m++) {
        float *ym = y + m * ldy, *rm = e->res ? e->res + m * e->ldr : NULL;
        if (e->bias)
            for (int64_t n = n0; n < n1; n++) ym[n] += e->bias[n];
        if (rm)
            for (int64_t n = n0; n < n1; n++) rm[n] += ym[n];
    }
}

trit_status trit_kernel_qgemm_panels(const trit_qpanels *w, int64_t M, const trit_qact *x, float *y, int64_t ldy,
                                     const trit_qpanel_epilogue *e) {
    static trit_kernel_slot slots[3];  // qint8, qint4, ternary: a slot remembers one key
    const trit_dtype wdt = w->wdt;
    const int k = wdt == TRIT_QINT8 ? 0 : wdt == TRIT_QINT4 ? 1 : wdt == TRIT_TERNARY ? 2 : -1;
    trit_kernel_qpanel_fn *fn = k < 0 ? NULL : TRIT_KERNEL_FN(trit_kernel_qpanel_fn, &slots[k], TRIT_KERNEL_QPANEL, wdt, TRIT_F32);
    if (!fn)
        return k < 0 ? trit_error(TRIT_ERR_UNSUPPORTED, "qgemm panels: weights of dtype %s have no panel kernel "
                                  "(qint8, qint4 and ternary do)", trit_dtype_name(wdt))
                     : TRIT_ERR_UNSUPPORTED;
    // Each thread takes one contiguous run of panels, so one token streams each run once.
    const bool par = w->panels > 1 && M * w->N * w->K > 32768 && !omp_in_parallel();
#pragma omp parallel if (par)
    {
        const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const int64_t p0 = w->panels * t / nt, p1 = w->panels * (t + 1) / nt;
        fn(M, p0, p1, w, x, y, ldy, e && e->accumulate);
        const int64_t n0 = p0 * TRIT_QPANEL_ROWS, n1 = p1 * TRIT_QPANEL_ROWS < w->N ? p1 * TRIT_QPANEL_ROWS : w->N;
        if (e && (e->bias || e->res)) finish(e, M, n0, n1, y, ldy);
    }
    return TRIT_OK;
}
