// Binary element-wise ops with numpy broadcasting (add, sub, mul, div), and the layout walker
// that every element-wise op and reduction here uses: operands that share one iteration shape,
// each with its own strides (0 on broadcast dims), with size-1 dims dropped and neighbouring
// dims merged wherever every operand walks them as one run.
#ifndef TRIT_OPS_BINARY_H
#define TRIT_OPS_BINARY_H

#include "ops/op_def.h"

#include <stdbool.h>

TRIT_DECLARE_REAL(const trit_op_def, trit_op_add);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_add_act);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_sub);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_mul);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_div);

// Element loops smaller than this run on the calling thread (thread start-up costs more).
#define TRIT_EW_PAR_MIN ((int64_t)1 << 15)
#define TRIT_EW_MAX_OPS 3

typedef struct trit_ew_layout {
    int ndim;  // >= 1: a 0-d or all-ones shape becomes one dim of size 1
    int nops;
    int64_t numel;
    int64_t shape[TRIT_MAX_DIMS];
    int64_t strides[TRIT_EW_MAX_OPS][TRIT_MAX_DIMS];  // per operand, in elements
} trit_ew_layout;

// Row-major strides of a contiguous tensor of `shape`.
static inline void trit_ew_contig_strides(int ndim, const int64_t *shape, int64_t *strides) {
    int64_t s = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        strides[d] = s;
        s *= shape[d];
    }
}

// Strides of a tensor of `t_ndim` dims with `t_shape` and `t_strides`, aligned to the trailing
// dims of an `ndim`-dim broadcast shape: 0 where the tensor has size 1 or no such dim.
static inline void trit_ew_bcast_strides(int t_ndim, const int64_t *t_shape, const int64_t *t_strides, int ndim,
                                         int64_t *strides) {
    for (int d = 0; d < ndim; d++) {
        int td = d - (ndim - t_ndim);
        strides[d] = td >= 0 && t_shape[td] != 1 ? t_strides[td] : 0;
    }
}

// shape: (ndim dims); strides[k]: operand k's strides aligned to shape.
static inline void trit_ew_layout_init(trit_ew_layout *l, int ndim, const int64_t *shape, int nops,
                                       const int64_t (*strides)[TRIT_MAX_DIMS]) {
    l->nops = nops;
    l->ndim = 0;
    l->numel = 1;
    for (int d = 0; d < ndim; d++) {
        l->numel *= shape[d];
        if (shape[d] == 1) continue;
        const int p = l->ndim - 1;
        bool merge = p >= 0;
        for (int k = 0; k < nops && merge; k++) merge = l->strides[k][p] == strides[k][d] * shape[d];
        if (merge) {
            l->shape[p] *= shape[d];
            for (int k = 0; k < nops; k++) l->strides[k][p] = strides[k][d];
        } else {
            l->shape[l->ndim] = shape[d];
            for (int k = 0; k < nops; k++) l->strides[k][l->ndim] = strides[k][d];
            l->ndim++;
        }
    }
    if (l->ndim == 0) {
        l->ndim = 1;
        l->shape[0] = 1;
        for (int k = 0; k < nops; k++) l->strides[k][0] = 0;
    }
}

// Rows are all dims but the last; off[k] receives operand k's offset of the row's first element.
static inline int64_t trit_ew_rows(const trit_ew_layout *l) { return l->numel / l->shape[l->ndim - 1]; }

static inline void trit_ew_row_offsets(const trit_ew_layout *l, int64_t row, int64_t *off) {
    for (int k = 0; k < l->nops; k++) off[k] = 0;
    for (int d = l->ndim - 2; d >= 0; d--) {
        const int64_t i = row % l->shape[d];
        row /= l->shape[d];
        for (int k = 0; k < l->nops; k++) off[k] += i * l->strides[k][d];
    }
}

#endif
