// CNN demo: tell the orientation of a bar (0, 45, 90 or 135 degrees) in a noisy 16x16 image
// the program draws, with conv-relu-maxpool twice and a linear classifier; reports held-out
// accuracy. Usage: cnn_bars [--steps N] [--seed S] [--check]   (--check: exit 1 below 95%)
#include "example_util.h"
#include "trit/trit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

#define S 16
#define CLASSES 4
#define BATCH 32

// Image i: a bar of random length, position and orientation class, on Gaussian noise.
static void draw(float *img /* (S, S) */, int32_t *label, uint64_t seed, uint64_t i) {
    float u[4], noise[S * S];
    trit_rng_fill_uniform(u, 4, seed, 21, 4 * i, 0.0f, 1.0f);
    trit_rng_fill_normal(noise, S * S, seed, 22, (uint64_t)S * S * i, 0.0f, 0.3f);
    int k = (int)(u[0] * CLASSES) % CLASSES;
    double angle = k * M_PI / 4, cx = 4 + u[1] * (S - 8), cy = 4 + u[2] * (S - 8), half = 3 + u[3] * 3;
    memcpy(img, noise, sizeof noise);
    for (double t = -half; t <= half; t += 0.25) {
        int px = (int)lround(cx + t * cos(angle)), py = (int)lround(cy - t * sin(angle));
        if (px >= 0 && px < S && py >= 0 && py < S) img[py * S + px] = 1.0f + noise[py * S + px];
    }
    *label = k;
}

typedef struct cnn {
    trit_tensor *c1w, *c1b, *c2w, *c2b, *fw, *fb;
} cnn;

static trit_tensor *param(int ndim, const int64_t *shape, const char *name, int64_t fan_in, uint64_t stream) {
    trit_tensor *p = trit_tensor_new_param(TRIT_F32, ndim, shape, name);
    if (p && fan_in) trit_tensor_fill_normal(p, 0.0, sqrt(2.0 / (double)fan_in), 77, stream);
    return p;
}

static trit_tensor *forward(trit_graph *g, const cnn *m, trit_tensor *x /* (B, 1, S, S) */, int64_t b) {
    trit_tensor *h = trit_maxpool2d(g, trit_relu(g, trit_conv2d(g, x, m->c1w, m->c1b, 1, 1)), 2, 2, 0);  // (B, 8, 8, 8)
    h = trit_maxpool2d(g, trit_relu(g, trit_conv2d(g, h, m->c2w, m->c2b, 1, 1)), 2, 2, 0);              // (B, 16, 4, 4)
    h = trit_reshape(g, h, 2, (int64_t[]){b, 16 * 4 * 4});
    return trit_linear(g, h, m->fw, m->fb);  // (B, CLASSES)
}

static int fail(const char *what) { return example_fail("cnn_bars", what); }

int main(int argc, char **argv) {
    int steps = 400;
    uint64_t seed = 5;
    bool check = false;
    int bad = example_parse_args(argc, argv, "cnn_bars", &steps, &seed, &check);
    if (bad) return bad;
    cnn m = {
        param(4, (int64_t[]){8, 1, 3, 3}, "conv1.weight", 9, 1),   param(1, (int64_t[]){8}, "conv1.bias", 0, 0),
        param(4, (int64_t[]){16, 8, 3, 3}, "conv2.weight", 72, 2), param(1, (int64_t[]){16}, "conv2.bias", 0, 0),
        param(2, (int64_t[]){CLASSES, 256}, "fc.weight", 256, 3),  param(1, (int64_t[]){CLASSES}, "fc.bias", 0, 0),
    };
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 4, (int64_t[]){BATCH, 1, S, S}, "x");
    trit_tensor *y = trit_graph_input(g, TRIT_I32, 1, (int64_t[]){BATCH}, "y");
    trit_tensor *logits = forward(g, &m, x, BATCH);
    trit_tensor *loss = trit_cross_entropy(g, logits, y, -100, TRIT_REDUCE_MEAN);
    if (trit_graph_keep(g, logits) || trit_graph_compile(g, loss)) return fail("graph");

    trit_tensor *params[6] = {m.c1w, m.c1b, m.c2w, m.c2b, m.fw, m.fb};
    trit_optim_config cfg = trit_optim_adam(0.9, 0.999, 1e-8);
    trit_optim *opt = trit_optim_new_single(&cfg, params, 6, 0.0);
    if (!opt) return fail("optimizer");
    float *xd = x->data;
    int32_t *yd = y->data;
    for (int s = 0; s < steps; s++) {
        for (int b = 0; b < BATCH; b++) draw(xd + b * S * S, yd + b, seed, (uint64_t)s * BATCH + b);
        trit_optim_zero_grad(opt);
        if (trit_graph_forward(g) || trit_graph_backward(g)) return fail("training step");
        if (trit_optim_step(opt, 2e-3)) return fail("optimizer step");
        if (s % 100 == 0 || s == steps - 1) printf("step %4d  loss %.4f\n", s, trit_tensor_get_flat(loss, 0));
    }
    // Held-out images come from another seed; eval mode.
    trit_graph_set_training(g, false);
    int64_t right = 0, total = 0;
    for (int batch = 0; batch < 32; batch++) {
        for (int b = 0; b < BATCH; b++) draw(xd + b * S * S, yd + b, seed + 999, (uint64_t)batch * BATCH + b);
        if (trit_graph_forward(g)) return fail("eval");
        right += example_correct(logits, yd, BATCH, CLASSES);
        total += BATCH;
    }
    double acc = (double)right / (double)total;
    printf("held-out accuracy %.2f%% on %lld images (target >= 95%%)\n", 100 * acc, (long long)total);
    trit_optim_free(opt);
    trit_graph_free(g);
    for (int i = 0; i < 6; i++) trit_tensor_free(params[i]);
    return check && acc < 0.95 ? 1 : 0;
}
