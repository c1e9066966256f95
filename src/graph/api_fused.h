// Graph constructors for the fused ops of ops/fused.h. Internal: models use the unfused ops and
// the compiler substitutes these (graph/fuse.c); tests and benchmarks call them directly.
#ifndef TRIT_GRAPH_API_FUSED_H
#define TRIT_GRAPH_API_FUSED_H

#include "trit/ops.h"

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
