// Chooses the f32 row kernels for the CPU level in force (read on every call, so
// trit_cpu_set_level takes effect at once): AVX-512 where the CPU has it, else the reference.
#include "kernels/rowops.h"
#include "kernels/x86/rowops_x86.h"
#include "trit/base.h"

static bool use_avx512(void) {
    const trit_cpu_isa level = trit_cpu_level();
    return level == TRIT_CPU_AVX512 || level == TRIT_CPU_AMX;
}

// Calls trit_kernel_<kernel>_avx512 or trit_kernel_<kernel>_ref_f32 (same signature) with the
// arguments.
#define DISPATCH(kernel, ...)                                                                     \
    (use_avx512() ? trit_kernel_##kernel##_avx512 : trit_kernel_##kernel##_ref_f32)(__VA_ARGS__)

void trit_kernel_norm_fwd_f32(float *y, double *stats, float *s, const float *x, const float *r,
                              const float *w, const float *b, int64_t rows, int64_t C, double eps, bool center) {
    DISPATCH(norm_fwd, y, stats, s, x, r, w, b, rows, C, eps, center);
}

void trit_kernel_norm_bwd_x_f32(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                                const float *w, const double *stats, int64_t rows, int64_t C, bool center) {
    DISPATCH(norm_bwd_x, dx, dx2, x, dy, gres, w, stats, rows, C, center);
}

void trit_kernel_norm_bwd_params_f32(float *dw, float *db, const float *x, const float *dy,
                                     const double *stats, int64_t rows, int64_t C) {
    DISPATCH(norm_bwd_params, dw, db, x, dy, stats, rows, C);
}

void trit_kernel_gelu_fwd_f32(float *y, const float *x, const float *b, int64_t rows, int64_t N) {
    DISPATCH(gelu_fwd, y, x, b, rows, N);
}

void trit_kernel_gelu_bwd_f32(float *dx, float *db, const float *x, const float *b, const float *g,
                              int64_t rows, int64_t N) {
    DISPATCH(gelu_bwd, dx, db, x, b, g, rows, N);
}

void trit_kernel_softmax_fwd_f32(float *y, const float *x, int64_t rows, int64_t C) {
    DISPATCH(softmax_fwd, y, x, rows, C);
}

void trit_kernel_softmax_bwd_f32(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
    DISPATCH(softmax_bwd, dx, y, dy, rows, C);
}

void trit_kernel_log_softmax_fwd_f32(float *y, const float *x, int64_t rows, int64_t C) {
    DISPATCH(log_softmax_fwd, y, x, rows, C);
}

void trit_kernel_log_softmax_bwd_f32(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
    DISPATCH(log_softmax_bwd, dx, y, dy, rows, C);
}

void trit_kernel_ce_fwd_f32(double *stats, double *loss, const float *x, const void *targets, bool t64,
                            int64_t ignore_index, int64_t rows, int64_t V) {
    DISPATCH(ce_fwd, stats, loss, x, targets, t64, ignore_index, rows, V);
}

void trit_kernel_ce_bwd_f32(float *dx, const float *x, const double *stats, const void *targets, bool t64,
                            int64_t ignore_index, float scale, int64_t rows, int64_t V) {
    DISPATCH(ce_bwd, dx, x, stats, targets, t64, ignore_index, scale, rows, V);
}

void trit_kernel_ce_dlogits_f32(float *L, const double *stats, const void *targets, bool t64, int64_t ignore_index,
                                float scale, int64_t rows, int64_t V) {
    DISPATCH(ce_dlogits, L, stats, targets, t64, ignore_index, scale, rows, V);
}

// A row memcpy: libc's copy is already as wide as the CPU allows.
void trit_kernel_embedding_fwd_f32(float *out, const float *w, const void *idx, bool i64, int64_t n, int64_t C) {
    trit_kernel_embedding_fwd_ref_f32(out, w, idx, i64, n, C);
}

void trit_kernel_embedding_bwd_f32(float *gw, const float *go, const void *idx, bool i64, int64_t n, int64_t C) {
    DISPATCH(embedding_bwd, gw, go, idx, i64, n, C);
}

void trit_kernel_adam_f32(float *p, const float *g, float *m, float *v, int64_t n, const trit_adam_scalars *s,
                          bool decoupled) {
    DISPATCH(adam, p, g, m, v, n, s, decoupled);
}
