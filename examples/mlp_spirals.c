// MLP demo: classify points of three interleaved spiral arms (a data set the program makes)
// with a 2-64-64-3 ReLU network, cross-entropy and Adam, then report held-out accuracy.
// Usage: mlp_spirals [--steps N] [--seed S] [--check]   (--check: exit 1 below 97% accuracy)
#include "example_util.h"
#include "trit/trit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define CLASSES 3
#define HIDDEN 64

// Point i of a set: arm k = i % 3, radius t in (0, 1], angle grows with t plus noise.
static void make_spirals(float *x /* (N, 2) */, int32_t *y /* (N) */, int64_t n, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) {
        int k = (int)(i % CLASSES);
        double t = (double)(i / CLASSES + 1) / (double)(n / CLASSES + 1);
        float noise[2];
        trit_rng_fill_normal(noise, 2, seed, 11, (uint64_t)(2 * i), 0.0f, 1.0f);
        double angle = 4.0 * t + k * 2.0 * M_PI / CLASSES + 0.2 * noise[0];
        x[2 * i] = (float)(t * sin(angle));
        x[2 * i + 1] = (float)(t * cos(angle));
        y[i] = k;
        (void)noise[1];
    }
}

typedef struct mlp {
    trit_tensor *w1, *b1, *w2, *b2, *w3, *b3;
} mlp;

static trit_tensor *param(int ndim, const int64_t *shape, const char *name, int64_t fan_in, uint64_t stream) {
    trit_tensor *p = trit_tensor_new_param(TRIT_F32, ndim, shape, name);
    if (p && ndim == 2) trit_tensor_fill_normal(p, 0.0, sqrt(2.0 / (double)fan_in), 1234, stream);
    return p;
}

static trit_tensor *forward(trit_graph *g, const mlp *m, trit_tensor *x) {
    trit_tensor *h = trit_relu(g, trit_linear(g, x, m->w1, m->b1));
    h = trit_relu(g, trit_linear(g, h, m->w2, m->b2));
    return trit_linear(g, h, m->w3, m->b3);  // (N, CLASSES)
}

static double accuracy(const trit_tensor *logits /* (n, CLASSES) */, const int32_t *y /* (n) */,
                       int64_t n) {
    return (double)example_correct(logits, y, n, CLASSES) / (double)n;
}

static int fail(const char *what) { return example_fail("mlp_spirals", what); }

int main(int argc, char **argv) {
    int steps = 1500;
    uint64_t seed = 1;
    bool check = false;
    int bad = example_parse_args(argc, argv, "mlp_spirals", &steps, &seed, &check);
    if (bad) return bad;
    const int64_t NTRAIN = 1500, NTEST = 600;
    mlp m = {
        param(2, (int64_t[]){HIDDEN, 2}, "w1", 2, 1),          param(1, (int64_t[]){HIDDEN}, "b1", 0, 0),
        param(2, (int64_t[]){HIDDEN, HIDDEN}, "w2", HIDDEN, 2), param(1, (int64_t[]){HIDDEN}, "b2", 0, 0),
        param(2, (int64_t[]){CLASSES, HIDDEN}, "w3", HIDDEN, 3), param(1, (int64_t[]){CLASSES}, "b3", 0, 0),
    };
    trit_graph *train = trit_graph_new(TRIT_F32), *test = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(train, TRIT_F32, 2, (int64_t[]){NTRAIN, 2}, "x");
    trit_tensor *y = trit_graph_input(train, TRIT_I32, 1, (int64_t[]){NTRAIN}, "y");
    trit_tensor *logits = forward(train, &m, x);
    trit_tensor *loss = trit_cross_entropy(train, logits, y, -100, TRIT_REDUCE_MEAN);
    trit_tensor *xt = trit_graph_input(test, TRIT_F32, 2, (int64_t[]){NTEST, 2}, "x_test");
    trit_tensor *test_logits = forward(test, &m, xt);
    if (trit_graph_keep(train, logits) || trit_graph_compile(train, loss)) return fail("train graph");
    if (trit_graph_keep(test, test_logits) || trit_graph_compile(test, NULL)) return fail("test graph");

    int32_t *ytest = malloc(sizeof(int32_t) * NTEST);
    make_spirals(x->data, y->data, NTRAIN, seed);
    make_spirals(xt->data, ytest, NTEST, seed + 1000);

    trit_tensor *params[6] = {m.w1, m.b1, m.w2, m.b2, m.w3, m.b3};
    trit_optim_config cfg = trit_optim_adam(0.9, 0.999, 1e-8);
    trit_optim *opt = trit_optim_new_single(&cfg, params, 6, 0.0);
    trit_lr_schedule sched = {.kind = TRIT_LR_WARMUP_COSINE, .peak = 1e-2, .floor = 1e-3, .warmup_steps = 50, .total_steps = steps};
    if (!opt) return fail("optimizer");
    for (int s = 0; s < steps; s++) {
        trit_optim_zero_grad(opt);
        if (trit_graph_forward(train) || trit_graph_backward(train)) return fail("training step");
        if (trit_optim_step(opt, trit_lr_at(&sched, s))) return fail("optimizer step");
        if (s % 250 == 0 || s == steps - 1)
            printf("step %5d  loss %.4f  train acc %.3f\n", s, trit_tensor_get_flat(loss, 0),
                   accuracy(logits, y->data, NTRAIN));
    }
    if (trit_graph_forward(test)) return fail("test forward");
    double acc = accuracy(test_logits, ytest, NTEST);
    printf("held-out accuracy %.2f%% on %lld points (target >= 97%%)\n", 100 * acc, (long long)NTEST);
    trit_optim_free(opt);
    trit_graph_free(train);
    trit_graph_free(test);
    for (int i = 0; i < 6; i++) trit_tensor_free(params[i]);
    free(ytest);
    return check && acc < 0.97 ? 1 : 0;
}
