// The f32 row kernels' entry points: each takes the kernel table's choice for the features
// usable now (a change of level by trit_cpu_set_level is seen at the next call).
#include "kernels/rowops.h"
#include "kernels/kernel_table.h"
#include "trit/base.h"

#include <string.h>

// Calls the table's choice for kernel `name` (key TRIT_KERNEL_<ID>, f32 -> f32) with the
// arguments; each entry point remembers its choice in its own slot.
#define DISPATCH(ID, name, ...)                                                                   \
    do {                                                                                          \
        static trit_kernel_slot slot;                                                             \
        TRIT_KERNEL_FN_OR(trit_kernel_##name##_fn, &slot, TRIT_KERNEL_##ID, TRIT_F32, TRIT_F32,      \
                          trit_kernel_##name##_ref_f32)                                           \
        (__VA_ARGS__);                                                                            \
    } while (0)

void trit_kernel_norm_fwd_f32(float *y, double *stats, float *s, const float *x, const float *r,
                              const float *w, const float *b, int64_t rows, int64_t C, double eps, bool center) {
    DISPATCH(NORM_FWD, norm_fwd, y, stats, s, x, r, w, b, rows, C, eps, center);
}

void trit_kernel_norm_bwd_x_f32(float *dx, float *dx2, const float *x, const float *dy, const float *gres,
                                const float *w, const double *stats, int64_t rows, int64_t C, bool center,
                                bool store) {
    DISPATCH(NORM_BWD_X, norm_bwd_x, dx, dx2, x, dy, gres, w, stats, rows, C, center, store);
}

void trit_kernel_norm_bwd_params_f32(float *dw, float *db, const float *x, const float *dy,
                                     const double *stats, int64_t rows, int64_t C) {
    DISPATCH(NORM_BWD_PARAMS, norm_bwd_params, dw, db, x, dy, stats, rows, C);
}

void trit_kernel_gelu_fwd_f32(float *y, const float *x, const float *b, int64_t rows, int64_t N) {
    DISPATCH(GELU_FWD, gelu_fwd, y, x, b, rows, N);
}

void trit_kernel_gelu_bwd_f32(float *dx, float *db, const float *x, const float *b, const float *g,
                              int64_t rows, int64_t N) {
    DISPATCH(GELU_BWD, gelu_bwd, dx, db, x, b, g, rows, N);
}

void trit_kernel_softmax_fwd_f32(float *y, const float *x, int64_t rows, int64_t C) {
    DISPATCH(SOFTMAX_FWD, softmax_fwd, y, x, rows, C);
}

void trit_kernel_softmax_bwd_f32(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
    DISPATCH(SOFTMAX_BWD, softmax_bwd, dx, y, dy, rows, C);
}

void trit_kernel_log_softmax_fwd_f32(float *y, const float *x, int64_t rows, int64_t C) {
    DISPATCH(LOG_SOFTMAX_FWD, log_softmax_fwd, y, x, rows, C);
}

void trit_kernel_log_softmax_bwd_f32(float *dx, const float *y, const float *dy, int64_t rows, int64_t C) {
    DISPATCH(LOG_SOFTMAX_BWD, log_softmax_bwd, dx, y, dy, rows, C);
}

void trit_kernel_ce_fwd_f32(double *stats, double *loss, const float *x, const void *targets, bool t64,
                            int64_t ignore_index, int64_t rows, int64_t V) {
    DISPATCH(CE_FWD, ce_fwd, stats, loss, x, targets, t64, ignore_index, rows, V);
}

void trit_kernel_ce_bwd_f32(float *dx, const float *x, const double *stats, const void *targets, bool t64,
                            int64_t ignore_index, float scale, int64_t rows, int64_t V) {
    DISPATCH(CE_BWD, ce_bwd, dx, x, stats, targets, t64, ignore_index, scale, rows, V);
}

void trit_kernel_ce_dlogits_f32(float *L, const double *stats, const void *targets, bool t64, int64_t ignore_index,
                                float scale, int64_t rows, int64_t V, bool bf16) {
    DISPATCH(CE_DLOGITS, ce_dlogits, L, stats, targets, t64, ignore_index, scale, rows, V, bf16);
}

// x (n): see rowops.h.
void trit_row_to_bf16_in_place(float *x, int64_t n) {
    enum { BLOCK = 1024 };
    uint16_t block[BLOCK];
    for (int64_t i = 0; i < n; i += BLOCK) {
        const int64_t m = n - i < BLOCK ? n - i : BLOCK;
        trit_f32_to_bf16_n(block, x + i, m);
        memcpy((uint16_t *)x + i, block, sizeof(uint16_t) * (size_t)m);  // below x + i: read already
    }
}

void trit_kernel_embedding_fwd_f32(float *out, const float *w, const void *idx, bool i64, int64_t n, int64_t C) {
    DISPATCH(EMBEDDING_FWD, embedding_fwd, out, w, idx, i64, n, C);
}

void trit_kernel_embedding_bwd_f32(float *gw, const float *go, const void *idx, bool i64, int64_t n, int64_t C) {
    DISPATCH(EMBEDDING_BWD, embedding_bwd, gw, go, idx, i64, n, C);
}

void trit_kernel_adam_f32(float *p, const float *g, float *m, float *v, int64_t n, const trit_adam_scalars *s,
                          bool decoupled) {
    DISPATCH(ADAM, adam, p, g, m, v, n, s, decoupled);
}

void trit_kernel_attend_f32(float *y, float *p, const float *q, const float *kt, const float *v, int64_t ldv,
                            int64_t n, int64_t hs, float scale) {
    DISPATCH(ATTEND, attend, y, p, q, kt, v, ldv, n, hs, scale);
}

void trit_kernel_attend_f16(float *y, float *p, const float *q, const uint16_t *kt, const uint16_t *v, int64_t ldv,
                            int64_t n, int64_t hs, float scale) {
    static trit_kernel_slot slot;
    TRIT_KERNEL_FN_OR(trit_kernel_attend_f16_fn, &slot, TRIT_KERNEL_ATTEND, TRIT_F16, TRIT_F32,
                      trit_kernel_attend_f16_ref_f32)
    (y, p, q, kt, v, ldv, n, hs, scale);
}
