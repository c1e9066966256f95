// Quantized weights as matmul operands: the checks infer makes and the chunked products
// (ops/qweight.h). A chunk is a run of W's rows decoded into scratch, then one GEMM: forward
// writes the chunk's output columns, backward adds the chunk's rows' share of dx = dy W. Each
// product is one parallel region (threads own disjoint outputs and decode what they read), not
// a region per chunk: on two cores shared with other work, a dozen fork/joins per product cost
// more than the products.
#include "ops/qweight.h"

#include "kernels/dequant.h"

#include <omp.h>
#include <string.h>

// Elements decoded through a float buffer at a time for dtypes other than f32: a multiple of
// every block size of the dtype table (1, 2, 4, 32, 64, 256).
enum { PIECE = 256 };
// Below this many multiply-adds a product runs on one thread (the GEMM's own threshold).
#define QW_PAR_WORK ((int64_t)1 << 19)

// The side-scaled dtypes, which need their quant info (fp8 alone has a meaning without: scale 1).
static bool needs_scales(trit_dtype dt) {
    return dt == TRIT_QINT8 || dt == TRIT_QINT4 || dt == TRIT_QINT2 || dt == TRIT_NF4 || dt == TRIT_TERNARY ||
           dt == TRIT_TERNARY_B3;
}

trit_status R(trit_qw_check)(const trit_tensor *w, const char *op, const char *what) {
    char ws[128];
    const char *dt = trit_dtype_name(w->dtype);
    const trit_dtype_traits *tr = trit_dtype_traits_of(w->dtype);
    trit_tensor_shape_str(w, ws, sizeof ws);
    if ((w->flags & TRIT_FLAG_PARAM) && !(w->flags & TRIT_FLAG_FROZEN))
        return trit_error(TRIT_ERR_DTYPE, "%s: %s '%s' %s is %s, a quantized dtype, and a trainable parameter; quantized "
                          "weights get no gradient: freeze it (flags |= TRIT_FLAG_FROZEN) and train an adapter beside it, "
                          "or train an f32 copy (trit_dequantize)", op, what, w->name, ws, dt);
    const int64_t blk = trit_dtype_block(w->dtype);
    if (!tr || !tr->to_f32 || w->ndim != 2 || (w->shape[1] > 1 && w->strides[1] != 1) || w->offset % blk != 0 ||
        w->strides[0] % blk != 0)
        return trit_error(TRIT_ERR_SHAPE, "%s: expected the %s %s '%s' to be a 2-D (N, K) matrix of whole rows of blocks, "
                          "got %s; pass the quantized tensor itself, not a view of it", op, dt, what, w->name, ws);
    if (needs_scales(w->dtype) && !w->quant)
        return trit_error(TRIT_ERR_INVALID, "%s: the %s %s '%s' has no scales (quant info); make it with trit_quantize "
                          "or give it its trit_quant_info", op, dt, what, w->name);
    return TRIT_OK;
}

// Rows of W per chunk when decoded into dt: as many as TRIT_QW_CHUNK_BYTES holds, a multiple of
// 256 (or of 16, below 256), at least one, at most N.
static int64_t chunk_rows(const trit_tensor *w, trit_dtype dt) {
    const int64_t N = w->shape[0], K = w->shape[1];
    const size_t row = (size_t)(K > 0 ? K : 1) * trit_dtype_size(dt);
    int64_t r = (int64_t)(TRIT_QW_CHUNK_BYTES / row);
    r = r >= 256 ? r / 256 * 256 : r >= 16 ? r / 16 * 16 : 1;
    return r < N ? r : N > 0 ? N : 1;
}

size_t R(trit_qw_scratch_bytes)(const trit_tensor *w, trit_dtype dt) {
    const size_t b = (size_t)chunk_rows(w, dt) * (size_t)w->shape[1] * trit_dtype_size(dt);
    return (b + 63) / 64 * 64;
}

void R(trit_qw_decode)(const trit_tensor *w, int64_t row, int64_t k0, int64_t n, void *dst, trit_dtype dt) {
    const int64_t first = w->offset + row * w->strides[0] + k0;
    const char *codes = (const char *)w->data + trit_dtype_nbytes(w->dtype, first);
    if (dt == TRIT_F32) {
        trit_kernel_dequant_f32(w->dtype, dst, codes, n, w->quant, first);
        return;
    }
    float buf[PIECE];
    for (int64_t j = 0; j < n; j += PIECE) {
        const int64_t m = n - j < PIECE ? n - j : PIECE;
        trit_kernel_dequant_f32(w->dtype, buf, codes + trit_dtype_nbytes(w->dtype, j), m, w->quant, first + j);
        if (dt == TRIT_F64) {
            for (int64_t i = 0; i < m; i++) ((double *)dst)[j + i] = buf[i];
        } else if (dt == TRIT_BF16) {
            trit_f32_to_bf16_n((uint16_t *)dst + j, buf, m);
        } else {
            trit_f32_to_f16_n((uint16_t *)dst + j, buf, m);
        }
    }
}

// Columns [k0, k0 + kc) of rows [n0, n0 + nr) of w decoded into dst (nr, kc) of dt.
static void decode_block(const trit_tensor *w, int64_t n0, int64_t nr, int64_t k0, int64_t kc, void *dst, trit_dtype dt) {
    const size_t row_bytes = (size_t)kc * trit_dtype_size(dt);
    for (int64_t r = 0; r < nr; r++) R(trit_qw_decode)(w, n0 + r, k0, kc, (char *)dst + (size_t)r * row_bytes, dt);
}

// [lo, hi) of thread t of nt over n items in whole units (the last range ends at n).
static void share(int64_t n, int64_t unit, int t, int nt, int64_t *lo, int64_t *hi) {
    const int64_t units = (n + unit - 1) / unit;
    *lo = units * t / nt * unit;
    *hi = units * (t + 1) / nt * unit;
    *lo = *lo < n ? *lo : n;
    *hi = *hi < n ? *hi : n;
}

// Each output of both products is computed by one GEMM call, whose sum order depends on the
// reduction length alone, so splitting the outputs among threads (one parallel region per
// product, the GEMMs then single-threaded inside it) changes nothing but who computes them.

void R(trit_qw_gemm_xwt)(const trit_op_call *c, int64_t M, trit_mm_ref x, bool xt, int64_t ldx, const trit_tensor *w,
                         void *y, trit_dtype ydt, int64_t ldy, bool accumulate, const real *bias, void *scratch) {
    const int64_t N = w->shape[0], K = w->shape[1];
    const trit_dtype dt = trit_qw_decode_dtype(x.dt);
    const int64_t rows = chunk_rows(w, dt);
    const size_t es = trit_dtype_size(dt);
#ifdef TRIT_REAL_F64
    (void)bias;
#endif
    // Threads split W's rows (y's columns) in units of 16; each decodes chunks of its own rows
    // into its own part of the scratch (rows / nt rows of it, so at most `rows` threads).
    const int threads = omp_get_max_threads() < rows ? omp_get_max_threads() : (int)rows;
#pragma omp parallel num_threads(threads) if (M * N * K >= QW_PAR_WORK)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t per = rows / nt, lo, hi;
        per = per >= 16 ? per / 16 * 16 : per > 0 ? per : 1;
        share(N, 16, t, nt, &lo, &hi);
        void *mem = (char *)scratch + (size_t)t * (size_t)per * (size_t)K * es;  // (per, K)
        for (int64_t n0 = lo; n0 < hi; n0 += per) {
            const int64_t nr = hi - n0 < per ? hi - n0 : per;
            decode_block(w, n0, nr, 0, K, mem, dt);
            if (ydt == TRIT_REAL_DTYPE) {
                trit_op_gemm(c, xt, true, M, nr, K, x, ldx, (trit_mm_ref){mem, dt}, K, (real *)y + n0, ldy, accumulate);
                continue;
            }
#ifndef TRIT_REAL_F64
            const trit_gemm_operand a = {x.p, x.dt, ldx, xt}, b = {mem, dt, K, true};
            trit_kernel_gemm_mixed(M, nr, K, &a, &b, (uint16_t *)y + n0, ydt, ldy, accumulate, c->ctx->matmul,
                                   bias ? bias + n0 : NULL);
#endif
        }
    }
}

void R(trit_qw_gemm_dyw)(const trit_op_call *c, int64_t M, trit_mm_ref dy, int64_t lddy, const trit_tensor *w, real *dx,
                         int64_t lddx, trit_dtype dt, void *scratch) {
    const int64_t N = w->shape[0], K = w->shape[1];
    const int64_t rows = chunk_rows(w, dt), blk = trit_dtype_block(w->dtype);
    const size_t es = trit_dtype_size(dt);
    // Threads split dx's columns (W's, in whole blocks and units of 16): each adds, chunk after
    // chunk of W's rows (the same chunks whatever the thread count), dy[:, chunk] W[chunk, its
    // columns], decoded into its band of the scratch (rows, its columns).
#pragma omp parallel if (M * N * K >= QW_PAR_WORK)
    {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        int64_t k0, k1;
        share(K, blk > 16 ? blk : 16, t, nt, &k0, &k1);
        void *mem = (char *)scratch + (size_t)rows * (size_t)k0 * es;  // (rows, k1 - k0)
        for (int64_t n0 = 0; n0 < N && k0 < k1; n0 += rows) {
            const int64_t nr = N - n0 < rows ? N - n0 : rows;
            decode_block(w, n0, nr, k0, k1 - k0, mem, dt);
            trit_op_gemm(c, false, false, M, k1 - k0, nr, trit_mm_at(dy, n0), lddy, (trit_mm_ref){mem, dt}, k1 - k0,
                         dx + k0, lddx, true);
        }
    }
}
