// Element-wise loops over arbitrary strides (views, broadcasting). Compiled for float and double
// from kernels/ref/strided.c. Strides are in elements; a 0 stride repeats an element.
#ifndef TRIT_KERNELS_STRIDED_H
#define TRIT_KERNELS_STRIDED_H

#include <stdint.h>

// dst[idx] = src[idx] for every index of shape (ndim dims).
void trit_kernel_strided_copy_f32(float *dst, const int64_t *dst_strides, const float *src,
                                  const int64_t *src_strides, int ndim, const int64_t *shape);
void trit_kernel_strided_copy_f64(double *dst, const int64_t *dst_strides, const double *src,
                                  const int64_t *src_strides, int ndim, const int64_t *shape);
// dst[idx] += src[idx]; a 0 stride in dst sums the repeated elements into one (broadcast backward).
void trit_kernel_strided_add_f32(float *dst, const int64_t *dst_strides, const float *src,
                                 const int64_t *src_strides, int ndim, const int64_t *shape);
void trit_kernel_strided_add_f64(double *dst, const int64_t *dst_strides, const double *src,
                                 const int64_t *src_strides, int ndim, const int64_t *shape);

#endif
