// N-d strided copy and accumulate, used by views, contiguous copies and broadcast gradients.
#include "base/real.h"
#include "kernels/strided.h"

#include <stdbool.h>
#include <string.h>

// Calls body(dst_off, src_off, n) for each run along the innermost dim.
#define STRIDED_LOOP(BODY)                                                                  \
    do {                                                                                    \
        if (ndim == 0) {                                                                    \
            int64_t doff = 0, soff = 0, n = 1, ds = 0, ss = 0;                              \
            BODY;                                                                           \
            break;                                                                          \
        }                                                                                   \
        for (int d = 0; d < ndim; d++)                                                      \
            if (shape[d] == 0) return;                                                      \
        int64_t idx[8] = {0};                                                               \
        const int64_t n = shape[ndim - 1], ds = dst_strides[ndim - 1], ss = src_strides[ndim - 1]; \
        for (;;) {                                                                          \
            int64_t doff = 0, soff = 0;                                                     \
            for (int d = 0; d < ndim - 1; d++) {                                            \
                doff += idx[d] * dst_strides[d];                                            \
                soff += idx[d] * src_strides[d];                                            \
            }                                                                               \
            BODY;                                                                           \
            int d = ndim - 2;                                                               \
            while (d >= 0 && ++idx[d] == shape[d]) idx[d--] = 0;                            \
            if (d < 0) break;                                                               \
        }                                                                                   \
    } while (0)

void R(trit_kernel_strided_copy)(real *dst, const int64_t *dst_strides, const real *src,
                                 const int64_t *src_strides, int ndim, const int64_t *shape) {
    STRIDED_LOOP({
        if (ds == 1 && ss == 1) memcpy(dst + doff, src + soff, sizeof(real) * (size_t)n);
        else
            for (int64_t i = 0; i < n; i++) dst[doff + i * ds] = src[soff + i * ss];
    });
}

void R(trit_kernel_strided_add)(real *dst, const int64_t *dst_strides, const real *src,
                                const int64_t *src_strides, int ndim, const int64_t *shape) {
    STRIDED_LOOP({
        for (int64_t i = 0; i < n; i++) dst[doff + i * ds] += src[soff + i * ss];
    });
}
