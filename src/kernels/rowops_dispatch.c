// Chooses the f32 row kernels for the CPU level in force (read on every call, so
// trit_cpu_set_level takes effect at once): AVX-512 where the CPU has it, else the reference.
#include "kernels/rowops.h"
#include "kernels/x86/rowops_x86.h"
#include "trit/base.h"

static bool use_avx512(void) {
    const trit_cpu_isa level = trit_cpu_level();
    return level == TRIT_CPU_AVX512 || level == TRIT_CPU_AMX;
}

void trit_kernel_norm_fwd_f32(float *y, double *stats, float *s, const float *x, const float *r,
                              const float *w, const float *b, int64_t rows, int64_t C, double eps, bool center) {
    if (use_avx512())
        trit_kernel_norm_fwd_avx512(y, stats, s, x, r, w, b, rows, C, eps, center);
    else
        trit_kernel_norm_fwd_ref_f32(y, stats, s, x, r, w, b, rows, C, eps, center);
}

void trit_kernel_norm_bwd_x_f32(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                                const float *w, const double *stats, int64_t rows, int64_t C, bool center) {
    if (use_avx512())
        trit_kernel_norm_bwd_x_avx512(dx, dx2, x, dy, gres, w, stats, rows, C, center);
    else
        trit_kernel_norm_bwd_x_ref_f32(dx, dx2, x, dy, gres, w, stats, rows, C, center);
}

void trit_kernel_norm_bwd_params_f32(float *dw, float *db, const float *x, const float *dy,
                                     const double *stats, int64_t rows, int64_t C) {
    if (use_avx512())
        trit_kernel_norm_bwd_params_avx512(dw, db, x, dy, stats, rows, C);
    else
        trit_kernel_norm_bwd_params_ref_f32(dw, db, x, dy, stats, rows, C);
}

void trit_kernel_gelu_fwd_f32(float *y, const float *x, const float *b, int64_t rows, int64_t N) {
    if (use_avx512())
        trit_kernel_gelu_fwd_avx512(y, x, b, rows, N);
    else
        trit_kernel_gelu_fwd_ref_f32(y, x, b, rows, N);
}

void trit_kernel_gelu_bwd_f32(float *dx, float *db, const float *x, const float *b, const float *g,
                              int64_t rows, int64_t N) {
    if (use_avx512())
        trit_kernel_gelu_bwd_avx512(dx, db, x, b, g, rows, N);
    else
        trit_kernel_gelu_bwd_ref_f32(dx, db, x, b, g, rows, N);
}

void trit_kernel_softmax_fwd_f32(float *y, const float *x, int64_t rows, int64_t C) {
    if (use_avx512())
        trit_kernel_softmax_fwd_avx512(y, x, rows, C);
    else
        trit_kernel_softmax_fwd_ref_f32(y, x, rows, C);
}

void trit_kernel_softmax_bwd_f32(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
    if (use_avx512())
        trit_kernel_softmax_bwd_avx512(dx, y, dy, rows, C);
    else
        trit_kernel_softmax_bwd_ref_f32(dx, y, dy, rows, C);
}

void trit_kernel_log_softmax_fwd_f32(float *y, const float *x, int64_t rows, int64_t C) {
    if (use_avx512())
        trit_kernel_log_softmax_fwd_avx512(y, x, rows, C);
    else
        trit_kernel_log_softmax_fwd_ref_f32(y, x, rows, C);
}

void trit_kernel_log_softmax_bwd_f32(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
    if (use_avx512())
        trit_kernel_log_softmax_bwd_avx512(dx, y, dy, rows, C);
    else
        trit_kernel_log_softmax_bwd_ref_f32(dx, y, dy, rows, C);
}

void trit_kernel_ce_fwd_f32(double *stats, double *loss, const float *x, const void *targets, bool t64,
                            int64_t ignore_index, int64_t rows, int64_t V) {
    if (use_avx512())
        trit_kernel_ce_fwd_avx512(stats, loss, x, targets, t64, ignore_index, rows, V);
    else
        trit_kernel_ce_fwd_ref_f32(stats, loss, x, targets, t64, ignore_index, rows, V);
}

void trit_kernel_ce_bwd_f32(float *dx, const float *x, const double *stats, const void *targets, bool t64,
                            int64_t ignore_index, float scale, int64_t rows, int64_t V) {
    if (use_avx512())
        trit_kernel_ce_bwd_avx512(dx, x, stats, targets, t64, ignore_index, scale, rows, V);
    else
        trit_kernel_ce_bwd_ref_f32(dx, x, stats, targets, t64, ignore_index, scale, rows, V);
}

void trit_kernel_ce_dlogits_f32(float *L, const double *stats, const void *targets, bool t64, int64_t ignore_index,
                                float scale, int64_t rows, int64_t V) {
    if (use_avx512())
        trit_kernel_ce_dlogits_avx512(L, stats, targets, t64, ignore_index, scale, rows, V);
    else
        trit_kernel_ce_dlogits_ref_f32(L, stats, targets, t64, ignore_index, scale, rows, V);
}

// A row memcpy: libc's copy is already as wide as the CPU allows.
void trit_kernel_embedding_fwd_f32(float *out, const float *w, const void *idx, bool i64, int64_t n, int64_t C) {
    trit_kernel_embedding_fwd_ref_f32(out, w, idx, i64, n, C);
}

void trit_kernel_embedding_bwd_f32(float *gw, const float *go, const void *idx, bool i64, int64_t n, int64_t C) {
    if (use_avx512())
        trit_kernel_embedding_bwd_avx512(gw, go, idx, i64, n, C);
    else
        trit_kernel_embedding_bwd_ref_f32(gw, go, idx, i64, n, C);
}

void trit_kernel_adam_f32(float *p, const float *g, float *m, float *v, int64_t n, const trit_adam_scalars *s,
                          bool decoupled) {
    if (use_avx512())
        trit_kernel_adam_avx512(p, g, m, v, n, s, decoupled);
    else
        trit_kernel_adam_ref_f32(p, g, m, v, n, s, decoupled);
}
