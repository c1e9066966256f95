// Shape ops: views that share storage (reshape, permute, slice, expand) and the contiguous copy.
#ifndef TRIT_OPS_VIEW_H
#define TRIT_OPS_VIEW_H

#include "ops/op_def.h"

typedef struct trit_view_attr {
    int kind;  // TRIT_VIEW_*
    int ndim;
    int64_t shape[TRIT_MAX_DIMS];
    int perm[TRIT_MAX_DIMS];
    int dim;
    int64_t start, stop, step;
} trit_view_attr;

// SELECT takes index `start` of dim `dim` and drops that dim.
enum { TRIT_VIEW_RESHAPE, TRIT_VIEW_PERMUTE, TRIT_VIEW_SLICE, TRIT_VIEW_EXPAND, TRIT_VIEW_SELECT };

TRIT_DECLARE_REAL(const trit_op_def, trit_op_view);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_contiguous);

#endif
