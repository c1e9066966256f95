// AVX-512 row kernels behind the dispatching entry points of kernels/rowops.h (same contracts).
// Compiled with AVX-512 flags; call only after run-time dispatch has confirmed CPU and OS support.
// The embedding forward has no AVX-512 version: it is a row memcpy, which libc already vectorizes.
#ifndef TRIT_KERNELS_ROWOPS_X86_H
#define TRIT_KERNELS_ROWOPS_X86_H

#include "kernels/rowops.h"

void trit_kernel_norm_fwd_avx512(float *y, double *stats, float *s, const float *x, const float *r,
                                 const float *w, const float *b, int64_t rows, int64_t C, double eps, bool center);
void trit_kernel_norm_bwd_x_avx512(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                                   const float *w, const double *stats, int64_t rows, int64_t C, bool center);
void trit_kernel_norm_bwd_params_avx512(float *dw, float *db, const float *x, const float *dy,
                                        const double *stats, int64_t rows, int64_t C);
void trit_kernel_gelu_fwd_avx512(float *y, const float *x, const float *b, int64_t rows, int64_t N);
void trit_kernel_gelu_bwd_avx512(float *dx, float *db, const float *x, const float *b, const float *g,
                                 int64_t rows, int64_t N);
void trit_kernel_softmax_fwd_avx512(float *y, const float *x, int64_t rows, int64_t C);
void trit_kernel_softmax_bwd_avx512(float *dx, const float *y, const float *dy, int64_t rows, int64_t C);
void trit_kernel_log_softmax_fwd_avx512(float *y, const float *x, int64_t rows, int64_t C);
void trit_kernel_log_softmax_bwd_avx512(float *dx, const float *y, const float *dy, int64_t rows, int64_t C);
void trit_kernel_ce_fwd_avx512(double *stats, double *loss, const float *x, const void *targets, bool t64,
                               int64_t ignore_index, int64_t rows, int64_t V);
void trit_kernel_ce_bwd_avx512(float *dx, const float *x, const double *stats, const void *targets, bool t64,
                               int64_t ignore_index, float scale, int64_t rows, int64_t V);
void trit_kernel_ce_dlogits_avx512(float *L, const double *stats, const void *targets, bool t64,
                                   int64_t ignore_index, float scale, int64_t rows, int64_t V);
void trit_kernel_embedding_bwd_avx512(float *gw, const float *go, const void *idx, bool i64, int64_t n,
                                      int64_t C);
void trit_kernel_adam_avx512(float *p, const float *g, float *m, float *v, int64_t n, const trit_adam_scalars *s,
                             bool decoupled);

#endif
