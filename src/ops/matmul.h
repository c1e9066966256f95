// Matrix products: batched matmul with optional transposes and broadcast batch dims, and
// linear (x w^T + b as one GEMM over all leading rows). Both run on R(trit_kernel_gemm); a
// quantized weight of linear is read through decoded chunks (ops/qweight.h), or by the
// decoder's integer kernels in qlinear.
#ifndef TRIT_OPS_MATMUL_H
#define TRIT_OPS_MATMUL_H

#include "ops/op_def.h"

#include <stdbool.h>

typedef struct trit_matmul_attr {
    bool trans_a, trans_b;
} trit_matmul_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_matmul);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_linear);
// linear over a quantized weight on the decoder's kernels, for inference (ops/qlinear.c).
TRIT_DECLARE_REAL(const trit_op_def, trit_op_qlinear);

// How a stored (rows, cols) matrix with element strides (sr, sc) is handed to GEMM: row-major
// with leading dim ld (*flip = false), or as the transpose of a row-major (cols, rows) matrix
// with leading dim ld (*flip = true). False when neither fits; the caller copies it first.
static inline bool trit_gemm_layout(int64_t rows, int64_t cols, int64_t sr, int64_t sc, bool *flip, int64_t *ld) {
    const int64_t r1 = rows > 1 ? rows : 1, c1 = cols > 1 ? cols : 1;
    if ((cols <= 1 || sc == 1) && (rows <= 1 || sr >= c1)) {
        *flip = false;
        *ld = rows <= 1 ? c1 : sr;
        return true;
    }
    if ((rows <= 1 || sr == 1) && (cols <= 1 || sc >= r1)) {
        *flip = true;
        *ld = cols <= 1 ? r1 : sc;
        return true;
    }
    return false;
}

// x (..., K) seen as one (rows, K) GEMM operand: the leading dims must collapse into rows with
// one uniform stride. *rows receives their product.
static inline bool trit_gemm_rows(const trit_tensor *x, int64_t *rows, bool *flip, int64_t *ld) {
    const int last = x->ndim - 1;
    const int64_t K = x->ndim > 0 ? x->shape[last] : 1, sk = x->ndim > 0 ? x->strides[last] : 1;
    int64_t n = 1, rs = 0, expect = -1;
    for (int d = last - 1; d >= 0; d--) {
        n *= x->shape[d];
        if (x->shape[d] == 1) continue;
        if (expect < 0) rs = x->strides[d];
        else if (x->strides[d] != expect) return false;
        expect = (expect < 0 ? rs : expect) * x->shape[d];
    }
    *rows = n;
    return trit_gemm_layout(n, K, rs, sk, flip, ld);
}

#endif
