// Graph constructors for the fused ops. Cheap argument checks happen here, shape and dtype
// checks in each op's infer.
#include "graph/api_fused.h"

#include "graph/graph_internal.h"
#include "ops/fused.h"

#include <math.h>

trit_tensor *trit_bias_gelu(trit_graph *g, trit_tensor *h, trit_tensor *b) {
    trit_tensor *in[2] = {h, b};
    return TRIT_APPLY(g, trit_op_bias_gelu, 2, in, NULL);
}

trit_tensor *trit_add_layernorm(trit_graph *g, trit_tensor *x, trit_tensor *r, trit_tensor *w, trit_tensor *b,
                                double eps) {
    if (!(eps >= 0 && isfinite(eps))) {
        trit_error(TRIT_ERR_INVALID, "add_layernorm: eps must be finite and >= 0, got %g (PyTorch's default is 1e-5)", eps);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_add_layernorm_attr a = {.eps = eps, .has_weight = w != NULL, .has_bias = b != NULL};
    trit_tensor *in[4] = {x, r};
    int n = 2;
    if (w) in[n++] = w;
    if (b) in[n++] = b;
    return TRIT_APPLY(g, trit_op_add_layernorm, n, in, &a);
}

trit_tensor *trit_classifier_ce_chunked(trit_graph *g, trit_tensor *x, trit_tensor *W, trit_tensor *b,
                                        trit_tensor *targets, int64_t ignore_index, trit_reduction red,
                                        int64_t chunk_rows) {
    if (red != TRIT_REDUCE_MEAN && red != TRIT_REDUCE_SUM) {
        trit_error(TRIT_ERR_INVALID, "classifier_ce: reduction must be TRIT_REDUCE_MEAN or TRIT_REDUCE_SUM, got %d", (int)red);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    if (chunk_rows < 0) {
        trit_error(TRIT_ERR_INVALID, "classifier_ce: chunk_rows must be >= 0 (0 chooses), got %lld", (long long)chunk_rows);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_classifier_attr a = {
        .ignore_index = ignore_index, .reduction = (int)red, .has_bias = b != NULL, .chunk_rows = chunk_rows};
    trit_tensor *in[4] = {x, W, targets, b};
    return TRIT_APPLY(g, trit_op_classifier_ce, b ? 4 : 3, in, &a);
}

trit_tensor *trit_classifier_ce(trit_graph *g, trit_tensor *x, trit_tensor *W, trit_tensor *b, trit_tensor *targets,
                                int64_t ignore_index, trit_reduction red) {
    return trit_classifier_ce_chunked(g, x, W, b, targets, ignore_index, red, 0);
}
