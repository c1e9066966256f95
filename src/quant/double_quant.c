// Double quantization (QLoRA / bitsandbytes): the per-group scales are themselves quantized to
// int8 after subtracting their mean, in blocks with one f32 scale each, which takes NF4 with
// blocks of 64 from 4.5 to about 4.127 bits per parameter.
#include "trit/quant.h"

#include <math.h>
#include <stdlib.h>

trit_status trit_quant_double(trit_quant_info *q, int64_t block) {
    if (!q || block <= 0) return trit_error(TRIT_ERR_INVALID, "double quantization: need a quant info and a block > 0");
    if (q->qscales) return trit_error(TRIT_ERR_STATE, "double quantization: the scales are already quantized");
    const int64_t G = q->num_groups, nb = (G + block - 1) / block;
    int8_t *codes = malloc((size_t)G);
    float *s2 = malloc(sizeof(float) * (size_t)nb);
    if (!codes || !s2) {
        free(codes), free(s2);
        return trit_error(TRIT_ERR_NOMEM, "double quantization: out of memory for %lld scales", (long long)G);
    }
    double sum = 0;
    for (int64_t g = 0; g < G; g++) sum += q->scales[g];
    const float mean = (float)(sum / (double)G);
    for (int64_t b = 0; b < nb; b++) {
        const int64_t lo = b * block, hi = lo + block < G ? lo + block : G;
        float amax = 0;
        for (int64_t g = lo; g < hi; g++) amax = fmaxf(amax, fabsf(q->scales[g] - mean));
        s2[b] = amax / 127.0f;
        for (int64_t g = lo; g < hi; g++) {
            const double c = s2[b] > 0 ? nearbyint((double)(q->scales[g] - mean) / s2[b]) : 0.0;
            codes[g] = (int8_t)(c < -127 ? -127 : c > 127 ? 127 : c);
        }
    }
    free(q->scales);
    q->scales = NULL;
    q->qscales = codes;
    q->scales2 = s2;
    q->scales_mean = mean;
    q->dq_block = block;
    return TRIT_OK;
}
