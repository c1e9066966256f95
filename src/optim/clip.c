// Gradient clipping by global L2 norm. The sum of squares is taken over fixed blocks (their
// bounds depend only on the tensor's size), each block accumulated in double by one thread, and
// the block sums added in index order: the norm has the same bits for any thread count.
#include "optim/optim_internal.h"

#include <math.h>

#define CLIP_BLOCK 4096       // smallest block, in elements
#define CLIP_MAX_BLOCKS 256   // per tensor, so the partial sums fit on the stack
#define CLIP_LANES 8

// Sum of g[lo..hi)^2 in double, CLIP_LANES interleaved accumulators combined pairwise.
static double sumsq_block(const float *restrict g, int64_t lo, int64_t hi) {
    double acc[CLIP_LANES] = {0};
    int64_t i = lo;
    for (; i + CLIP_LANES <= hi; i += CLIP_LANES)
        for (int j = 0; j < CLIP_LANES; j++) acc[j] += (double)g[i + j] * (double)g[i + j];
    for (int j = 0; i < hi; i++, j++) acc[j] += (double)g[i] * (double)g[i];
    for (int w = CLIP_LANES / 2; w >= 1; w /= 2)
        for (int j = 0; j < w; j++) acc[j] += acc[j + w];
    return acc[0];
}

static double sumsq_tensor(const float *g, int64_t n) {
    int64_t n_blocks = (n + CLIP_BLOCK - 1) / CLIP_BLOCK;
    if (n_blocks > CLIP_MAX_BLOCKS) n_blocks = CLIP_MAX_BLOCKS;
    if (n_blocks <= 1) return sumsq_block(g, 0, n);
    const int64_t per = (n + n_blocks - 1) / n_blocks;
    double part[CLIP_MAX_BLOCKS];
#pragma omp parallel for schedule(static)
    for (int64_t b = 0; b < n_blocks; b++) {
        int64_t lo = b * per, hi = lo + per < n ? lo + per : n;
        part[b] = lo < hi ? sumsq_block(g, lo, hi) : 0.0;
    }
    double s = 0.0;
    for (int64_t b = 0; b < n_blocks; b++) s += part[b];
    return s;
}

static bool counted(const trit_tensor *p) {
    return p && !(p->flags & TRIT_FLAG_FROZEN) && p->grad;
}

static trit_status check_list(trit_tensor *const *params, int num_params, const char *who) {
    if (num_params < 0 || (num_params > 0 && !params))
        return trit_error(TRIT_ERR_INVALID, "%s: params is NULL or num_params < 0 (%d)", who,
                          num_params);
    for (int i = 0; i < num_params; i++) {
        if (!params[i]) return trit_error(TRIT_ERR_INVALID, "%s: params[%d] is NULL", who, i);
        if (!counted(params[i])) continue;
        trit_status st = trit_optim_check_param(params[i], who, i);
        if (st != TRIT_OK) return st;
    }
    return TRIT_OK;
}

static trit_status norm_of(trit_tensor *const *params, int num_params, double *norm,
                           const char *who) {
    if (!norm) return trit_error(TRIT_ERR_INVALID, "%s: norm output is NULL", who);
    trit_status st = check_list(params, num_params, who);
    if (st != TRIT_OK) return st;
    double s = 0.0;
    for (int i = 0; i < num_params; i++)
        if (counted(params[i]))
            s += sumsq_tensor(trit_tensor_ptr(params[i]->grad), trit_tensor_numel(params[i]));
    *norm = sqrt(s);
    if (!isfinite(*norm))
        return trit_error(TRIT_ERR_NUMERIC, "%s: gradient norm is %g: a NaN or Inf reached the "
                          "gradients (lower the lr, check the loss, or use a loss scaler that "
                          "skips such steps)", who, *norm);
    return TRIT_OK;
}

trit_status trit_optim_grad_norm(trit_tensor *const *params, int num_params, double *norm) {
    return norm_of(params, num_params, norm, "grad_norm");
}

static void scale_grad(float *restrict g, int64_t n, float coef) {
#pragma omp parallel for schedule(static, 8192) if (n >= 32768)
    for (int64_t i = 0; i < n; i++) g[i] *= coef;
}

trit_status trit_optim_clip_grad_norm(trit_tensor *const *params, int num_params, double max_norm,
                                      double *norm) {
    if (!(max_norm > 0.0 && isfinite(max_norm)))
        return trit_error(TRIT_ERR_INVALID,
                          "clip_grad_norm: max_norm must be finite and > 0, got %g (1.0 is usual)",
                          max_norm);
    trit_status st = norm_of(params, num_params, norm, "clip_grad_norm");
    if (st != TRIT_OK) return st;
    // torch computes this factor in fp32 from its fp32 norm.
    float coef = (float)max_norm / ((float)*norm + 1e-6f);
    if (!(coef < 1.0f)) return TRIT_OK;
    for (int i = 0; i < num_params; i++)
        if (counted(params[i]))
            scale_grad(trit_tensor_ptr(params[i]->grad), trit_tensor_numel(params[i]), coef);
    return TRIT_OK;
}
