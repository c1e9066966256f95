// Fused ops: the same math as a short chain of unfused ops, in fewer passes over memory. The
// graph compiler substitutes them for the unfused patterns (graph/fuse.c); the unfused ops stay
// the oracle their tests compare against.
//
//   bias_gelu(h, b)             = gelu(h + b)                 h: (..., N), b: (N)
//   add_layernorm(x, r, [w, b]) = stack(s, layernorm(s)), s = x + r    x, r: (..., C) -> (2, ..., C)
//   classifier_ce(x, W, t, [b]) = cross_entropy(linear(x, W, b), t)    scalar; logits never stored
#ifndef TRIT_OPS_FUSED_H
#define TRIT_OPS_FUSED_H

#include "ops/op_def.h"
#include "trit/ops.h"

// Inputs x, r, then w if has_weight, then b if has_bias (so 2, 3 or 4 inputs).
// out[0] = x + r, out[1] = layernorm(x + r) with biased variance and eps inside the sqrt.
typedef struct trit_add_layernorm_attr {
    double eps;
    bool has_weight, has_bias;
} trit_add_layernorm_attr;

// Inputs x (..., C), W (V, C), targets (...) i32/i64, then bias (V) if has_bias.
// The logits are computed chunk_rows rows at a time in scratch (0 = chosen from V).
typedef struct trit_classifier_attr {
    int64_t ignore_index;  // rows whose target equals this contribute nothing
    int reduction;         // trit_reduction: TRIT_REDUCE_MEAN (over non-ignored rows) or _SUM
    bool has_bias;
    int64_t chunk_rows;
} trit_classifier_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_bias_gelu);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_add_layernorm);
TRIT_DECLARE_REAL(const trit_op_def, trit_op_classifier_ce);

// Graph constructors of the fused ops (in their op files). Internal: models use the unfused ops
// and the compiler substitutes these; tests and benchmarks call them directly.

// gelu(h + b) (tanh form). h: (..., N), b: (N). out: h's shape.
trit_tensor *trit_bias_gelu(trit_graph *g, trit_tensor *h, trit_tensor *b);

// s = x + r and layernorm(s) over the last dim. x, r: (..., C), same shape; w, b: (C) or NULL.
// out: (2, ..., C) with out[0] = s and out[1] = layernorm(s).
trit_tensor *trit_add_layernorm(trit_graph *g, trit_tensor *x, trit_tensor *r, trit_tensor *w, trit_tensor *b,
                                double eps);

// cross_entropy(linear(x, W, b), targets) without storing the logits. x: (..., C), W: (V, C),
// b: (V) or NULL, targets: (...) i32 or i64. Scalar result.
trit_tensor *trit_classifier_ce(trit_graph *g, trit_tensor *x, trit_tensor *W, trit_tensor *b, trit_tensor *targets,
                                int64_t ignore_index, trit_reduction red);
// The same with the number of rows whose logits are held at once (0 chooses from V).
trit_tensor *trit_classifier_ce_chunked(trit_graph *g, trit_tensor *x, trit_tensor *W, trit_tensor *b,
                                        trit_tensor *targets, int64_t ignore_index, trit_reduction red,
                                        int64_t chunk_rows);

#endif
