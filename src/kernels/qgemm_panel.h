// Integer matmuls over weights repacked into panels of 16 rows (the formula of qgemm.h, the same
// activations): one int32 lane per weight row, so a vector of exact group sums needs no
// horizontal reduction and its float finish is one multiply and one add per 16 outputs. The
// plain layout leaves each row's sum spread over lanes, and folding them cost more than the dot
// products at groups of 128 when several tokens share the weights.
//
// Layout. Panel p holds rows 16p .. 16p + 15 (rows past N have code 0 and scale 0). Its codes
// run in steps of 64 bytes; byte 4l + b of a step belongs to row l and pairs with activation
// byte b of a dword (4 consecutive codes of the row in natural order, whatever wdt: panels take
// activations from trit_qpanels_quantize, not qgemm.h's per-dtype orders). A step covers
// S dwords: qint8 S = 1 (code + 128); qint4 S = 2 (code + 8, the first dword's in the low
// nibble); ternary S = 4 (code + 1, dword i's in bits 2i). The scales of panel p, group g are
// 16 floats at scales + (p * K / G + g) * 16.
//
// Every implementation computes, for each output, the exact integer sum of each group, and adds
// scale x sum (one rounded product, one rounded add) in group order, times the token's scale at
// the end: the portable qgemm reference's arithmetic, so all of them give the same bits, for
// one token or a prompt.
#ifndef TRIT_KERNELS_QGEMM_PANEL_H
#define TRIT_KERNELS_QGEMM_PANEL_H

#include "kernels/qgemm.h"

enum { TRIT_QPANEL_ROWS = 16, TRIT_QPANEL_STEP = 64 };

typedef struct trit_qpanels {
    trit_dtype wdt;      // TRIT_QINT8, TRIT_QINT4 or TRIT_TERNARY
    int64_t N, K, G;     // W (N, K), groups of G codes
    int64_t panels;      // ceil(N / 16)
    size_t panel_bytes;  // codes of one panel: 16 K bits / 8 x bits per code
    uint8_t *codes;      // (panels, panel_bytes), 64-byte aligned
    float *scales;       // (panels, K / G, 16), 64-byte aligned
    bool placed;         // in the caller's storage (trit_qpanels_place), which it frees
} trit_qpanels;

// Whether this CPU has a panel kernel for wdt (AVX512-VNNI or AVX2: qint8, qint4, ternary), which
// then beats the plain-layout ones.
bool trit_qpanels_preferred(trit_dtype wdt);
// Whether panels take (wdt, K, G): qint8 or qint4 with G a multiple of 32 (ggml's q8_0 and q4_0
// blocks), ternary with G a multiple of 64, G dividing K and at most 131072. Unlike the plain
// layout (trit_qgemm_supported), groups of 32 (and ternary groups of 64) are taken: panels read
// activations in natural order, not in reordered blocks of 64 or 128. Every panel kernel sums
// the biased codes (qint4's stored 0 to 15, so ggml's code -8 too) and removes the bias with the
// group sum, except AVX2's qint8 tile, which moves the activation's sign onto the code: its
// codes must stay in [-127, 127], as trit's qint8 encoder writes them.
bool trit_qpanels_supported(trit_dtype wdt, int64_t K, int64_t G);

// W's codes as stored (trit_dtype_nbytes(wdt, K) bytes per row) and scales ws (N, K / G) into
// panels; (wdt, K, G) as trit_qpanels_supported allows. Free with trit_qpanels_free.
trit_status trit_qpanels_pack(trit_dtype wdt, int64_t N, int64_t K, int64_t G, const uint8_t *w, const float *ws,
                              trit_qpanels *out);
void trit_qpanels_free(trit_qpanels *p);
// The same packed into the caller's storage: trit_qpanels_bytes(wdt, N, K, G) zeroed bytes at
// mem, 64-byte aligned, which outlive the panels (several matrices' panels in one block, whose
// pages then hold nothing else).
size_t trit_qpanels_bytes(trit_dtype wdt, int64_t N, int64_t K, int64_t G);  // 0 if not supported
trit_status trit_qpanels_pack_at(trit_dtype wdt, int64_t N, int64_t K, int64_t G, const uint8_t *w, const float *ws,
                                 void *mem, trit_qpanels *out);

// Storage for panels of (wdt, N, K, G), zeroed, filled later in place (trit_qpanels_fill_ternary_f32).
trit_status trit_qpanels_alloc(trit_dtype wdt, int64_t N, int64_t K, int64_t G, trit_qpanels *out);
// The same shape over the caller's storage (as trit_qpanels_pack_at takes it), not zeroed here.
trit_status trit_qpanels_place(trit_dtype wdt, int64_t N, int64_t K, int64_t G, void *mem, trit_qpanels *out);
// Fills ternary panels p (N, K) from f32 values with one scale s for all of them: the code of an
// element is fake quantization's ternary rule, round-to-nearest-even of clamp(v / s, -1, 1) (so
// +-s/2 goes to 0), and every group scale is s. w is (N, K) row-major, or, when `transposed`,
// (K, N) and the panels hold its transpose (a linear layer's W for its input gradient dY W).
// N and K multiples of 16; a NaN value gets code 0. Rewrites every byte, so it can refill.
void trit_qpanels_fill_ternary_f32(trit_qpanels *p, const float *w, float s, bool transposed);

// Row n of W as f32, out (K): code x its group's scale, the values the codes were packed from
// decode to (what the dtype's own converter gives).
void trit_qpanels_row_f32(const trit_qpanels *w, int64_t n, float *out);

// x (M, K) quantized per token for w's kernels (natural order, w's groups): the codes, scales and
// group sums trit_qact_quantize gives, without its per-dtype reordering.
void trit_qpanels_quantize(const trit_qpanels *w, const float *x /* (M, K) */, int64_t M, const trit_qact *a);

// One implementation over panels p0 <= p < p1 (all M rows of x): y (M, ldy) columns
// [16 p0, min(16 p1, N)), or with acc those columns plus the product (each output's product
// rounded, then added: a gradient accumulated in place).
typedef void trit_kernel_qpanel_fn(int64_t M, int64_t p0, int64_t p1, const trit_qpanels *w, const trit_qact *x,
                                   float *y, int64_t ldy, bool acc);
trit_kernel_qpanel_fn trit_kernel_qpanel_ref, trit_kernel_qpanel_avx2, trit_kernel_qpanel_avx512vnni;

// What the entry point does to each thread's columns after their products: y += bias, then
// res += y: a linear layer's bias and a residual add, done by the thread that wrote the columns
// while they are in its cache instead of on one thread afterwards (a decoded token's matmuls
// are short enough that such serial tails showed in its time).
typedef struct trit_qpanel_epilogue {
    const float *bias;  // (N) or NULL
    float *res;         // (M, ldr) or NULL
    int64_t ldr;
    bool accumulate;    // the kernels add the product to y instead of writing it (before bias and res)
} trit_qpanel_epilogue;

// y (M, N) = x (M, K) W^T on the kernel table's choice, panels split among threads, then the
// epilogue e (NULL: none). TRIT_ERR_UNSUPPORTED (nothing written) for a w->wdt without a panel
// kernel.
trit_status trit_kernel_qgemm_panels(const trit_qpanels *w, int64_t M, const trit_qact *x, float *y, int64_t ldy,
                                     const trit_qpanel_epilogue *e);

#endif
