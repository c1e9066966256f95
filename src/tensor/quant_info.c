// Quantization side data: per-group scales, optional zero points and double-quantized scales.
#include "trit/tensor.h"

#include <stdlib.h>

trit_quant_info *trit_quant_info_new(int64_t numel, int64_t group_size, bool zero_points, int64_t dq_block) {
    if (numel <= 0 || group_size <= 0 || numel % group_size != 0 || dq_block < 0) {
        trit_error(TRIT_ERR_INVALID, "trit_quant_info_new: group size %lld must be > 0 and divide the %lld elements "
                   "(dq_block %lld must be >= 0)", (long long)group_size, (long long)numel, (long long)dq_block);
        return NULL;
    }
    trit_quant_info *q = calloc(1, sizeof *q);
    if (!q) goto oom;
    q->group_size = group_size;
    q->num_groups = numel / group_size;
    q->dq_block = dq_block;
    const size_t g = (size_t)q->num_groups;
    if (dq_block > 0) {
        q->qscales = calloc(g, sizeof *q->qscales);
        q->scales2 = calloc((g + (size_t)dq_block - 1) / (size_t)dq_block, sizeof *q->scales2);
        if (!q->qscales || !q->scales2) goto oom;
    } else if (!(q->scales = calloc(g, sizeof *q->scales))) {
        goto oom;
    }
    if (zero_points && !(q->zero_points = calloc(g, sizeof *q->zero_points))) goto oom;
    return q;
oom:
    trit_quant_info_free(q);
    trit_error(TRIT_ERR_NOMEM, "trit_quant_info_new: out of memory for %lld groups", (long long)(numel / group_size));
    return NULL;
}

void trit_quant_info_free(trit_quant_info *q) {
    if (!q) return;
    free(q->scales);
    free(q->zero_points);
    free(q->qscales);
    free(q->scales2);
    free(q);
}

float trit_quant_info_scale(const trit_quant_info *q, int64_t g) {
    if (q->qscales) return (float)q->qscales[g] * q->scales2[g / q->dq_block] + q->scales_mean;
    return q->scales[g];
}

size_t trit_quant_info_bytes(const trit_quant_info *q) {
    if (!q) return 0;
    const size_t G = (size_t)q->num_groups;
    const size_t scales = q->qscales ? G + 4 * (size_t)((q->num_groups + q->dq_block - 1) / q->dq_block) : 4 * G;
    return scales + (q->zero_points ? 4 * G : 0);
}
