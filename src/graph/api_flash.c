// Graph constructor for the tiled (flash) causal attention.
#include "graph/graph_internal.h"
#include "ops/flash_attention.h"
#include "trit/ops.h"

trit_tensor *trit_flash_attention(trit_graph *g, trit_tensor *q, trit_tensor *k, trit_tensor *v, int n_head) {
    trit_tensor *in[3] = {q, k, v};
    if (n_head < 1) {
        trit_error(TRIT_ERR_INVALID, "flash_attention: n_head must be >= 1, got %d", n_head);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    // Views with unit-stride rows (e.g. slices of a fused qkv) are read in place; others are copied.
    for (int i = 0; i < 3; i++)
        if (in[i] && !trit_flash_attention_layout_ok(in[i]) && !(in[i] = trit_contiguous(g, in[i]))) return NULL;
    trit_flash_attention_attr a = {.n_head = n_head};
    return TRIT_APPLY(g, trit_op_flash_attention, 3, in, &a);
}
