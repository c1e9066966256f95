// The element-wise update loops of the optimizers: the hot path of a training step. Each kernel
// is a plain loop over restrict pointers on one chunk [lo, hi), so the compiler vectorizes it;
// the chunks are fixed (OPTIM_CHUNK elements) and dealt to OpenMP threads statically. The
// operation order follows torch.optim's tensor ops (add with alpha is a + alpha*b, addcdiv is
// a + (value*t1)/t2), so fp32 results agree with PyTorch to rounding.
#include "optim/optim_internal.h"

#include "kernels/rowops.h"

#include <math.h>
#include <string.h>

static void sgd_chunk(float *restrict p, const float *restrict g, int64_t lo, int64_t hi,
                      const optim_scalars *s) {
    const float neg_lr = s->neg_lr, wd = s->weight_decay;
    for (int64_t i = lo; i < hi; i++) {
        float d = g[i] + wd * p[i];
        p[i] = p[i] + neg_lr * d;
    }
}

static void momentum_chunk(float *restrict p, const float *restrict g, float *restrict buf,
                           int64_t lo, int64_t hi, const optim_scalars *s) {
    const float neg_lr = s->neg_lr, wd = s->weight_decay, mu = s->momentum;
    for (int64_t i = lo; i < hi; i++) {
        float d = g[i] + wd * p[i];
        float b = buf[i] * mu + d;
        buf[i] = b;
        p[i] = p[i] + neg_lr * b;
    }
}

static void nesterov_chunk(float *restrict p, const float *restrict g, float *restrict buf,
                           int64_t lo, int64_t hi, const optim_scalars *s) {
    const float neg_lr = s->neg_lr, wd = s->weight_decay, mu = s->momentum;
    for (int64_t i = lo; i < hi; i++) {
        float d = g[i] + wd * p[i];
        float b = buf[i] * mu + d;
        buf[i] = b;
        p[i] = p[i] + neg_lr * (d + mu * b);
    }
}

static void rmsprop_chunk(float *restrict p, const float *restrict g, float *restrict sq,
                          int64_t lo, int64_t hi, const optim_scalars *s) {
    const float neg_lr = s->neg_lr, wd = s->weight_decay;
    const float alpha = s->a, one_minus_alpha = s->one_minus_a, eps = s->eps;
    for (int64_t i = lo; i < hi; i++) {
        float d = g[i] + wd * p[i];
        float v = sq[i] * alpha + one_minus_alpha * d * d;
        sq[i] = v;
        p[i] = p[i] + neg_lr * d / (sqrtf(v) + eps);
    }
}

static void rmsprop_momentum_chunk(float *restrict p, const float *restrict g,
                                   float *restrict sq, float *restrict buf, int64_t lo,
                                   int64_t hi, const optim_scalars *s) {
    const float neg_lr = s->neg_lr, wd = s->weight_decay, mu = s->momentum;
    const float alpha = s->a, one_minus_alpha = s->one_minus_a, eps = s->eps;
    for (int64_t i = lo; i < hi; i++) {
        float d = g[i] + wd * p[i];
        float v = sq[i] * alpha + one_minus_alpha * d * d;
        sq[i] = v;
        float b = buf[i] * mu + d / (sqrtf(v) + eps);
        buf[i] = b;
        p[i] = p[i] + neg_lr * b;
    }
}

// Runs `call` (a statement using lo and hi) over the fixed chunks of [0, n).
#define FOR_CHUNKS(n, call)                                                      \
    do {                                                                         \
        const int64_t n_chunks_ = ((n) + OPTIM_CHUNK - 1) / OPTIM_CHUNK;         \
        _Pragma("omp parallel for schedule(static, 1) if ((n) >= OPTIM_PAR_MIN)") \
        for (int64_t c_ = 0; c_ < n_chunks_; c_++) {                             \
            const int64_t lo = c_ * OPTIM_CHUNK;                                 \
            const int64_t hi = lo + OPTIM_CHUNK < (n) ? lo + OPTIM_CHUNK : (n);  \
            call;                                                                \
        }                                                                        \
    } while (0)

void trit_optim_update_sgd(float *p, const float *g, int64_t n, const optim_scalars *s) {
    FOR_CHUNKS(n, sgd_chunk(p, g, lo, hi, s));
}

void trit_optim_update_momentum(float *p, const float *g, float *buf, int64_t n,
                                const optim_scalars *s, bool nesterov) {
    if (nesterov)
        FOR_CHUNKS(n, nesterov_chunk(p, g, buf, lo, hi, s));
    else
        FOR_CHUNKS(n, momentum_chunk(p, g, buf, lo, hi, s));
}

void trit_optim_update_rmsprop(float *p, const float *g, float *sq, float *buf, int64_t n,
                               const optim_scalars *s) {
    if (buf)
        FOR_CHUNKS(n, rmsprop_momentum_chunk(p, g, sq, buf, lo, hi, s));
    else
        FOR_CHUNKS(n, rmsprop_chunk(p, g, sq, lo, hi, s));
}

static trit_adam_scalars adam_scalars(const optim_scalars *s) {
    return (trit_adam_scalars){
        .step = s->neg_lr, .weight_decay = s->weight_decay, .decay_mul = s->decay_mul,
        .b1 = s->a, .omb1 = s->one_minus_a, .b2 = s->b, .omb2 = s->one_minus_b,
        .bc2_sqrt = s->bc2_sqrt, .eps = s->eps,
    };
}

// Adam (L2 decay in the gradient) or AdamW (the decoupled decay multiplies p before the Adam step,
// as torch.optim.AdamW does); neg_lr already carries the bias correction of m. The loop is the
// kernel of kernels/rowops.h (AVX-512 where available, bit-identical to its reference).
void trit_optim_update_adam(float *p, const float *g, float *m, float *v, int64_t n,
                            const optim_scalars *s, bool decoupled) {
    const trit_adam_scalars k = adam_scalars(s);
    trit_kernel_adam_f32(p, g, m, v, n, &k, decoupled);
}

// z starts at zero and the decay factor is 1, so the kernel leaves in z exactly the term it adds
// to a decayed weight.
void trit_optim_adam_direction(float *z, const float *g, float *m, float *v, int64_t n, const optim_scalars *s) {
    trit_adam_scalars k = adam_scalars(s);
    k.decay_mul = 1.0f;
    memset(z, 0, sizeof(float) * (size_t)n);
    trit_kernel_adam_f32(z, g, m, v, n, &k, true);
}

// Each block: both moments decoded into f32 rows on the stack, the same AdamW kernel as the
// fp32 path over the block, then encoded with the block's new absmax. A block is one unit of
// work, so which thread takes it changes nothing.
void trit_optim_update_adamw8bit(float *p, const float *g, const optim_q8 *q, int64_t n, const optim_scalars *s) {
    enum { B = TRIT_OPTIM_8BIT_BLOCK };
    const trit_adam_scalars k = adam_scalars(s);
    const int64_t nb = (n + B - 1) / B;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
    for (int64_t b = 0; b < nb; b++) {
        float m[B], v[B];
        const int64_t lo = b * B, len = n - lo < B ? n - lo : B;
        trit_quant_dynamic_decode_block(q->map_m, q->m + lo, q->am[b], len, m);
        trit_quant_dynamic_decode_block(q->map_v, q->v + lo, q->av[b], len, v);
        trit_kernel_adam_f32(p + lo, g + lo, m, v, len, &k, true);
        trit_quant_dynamic_encode_block(q->map_m, m, len, q->m + lo, q->am + b);
        trit_quant_dynamic_encode_block(q->map_v, v, len, q->v + lo, q->av + b);
    }
}
