// The seed notes' worked example, run by the engine: y = w x + b with x = 2, w = 0.5, b = 0.1,
// target t = 3 and squared loss L = (y - t)^2. Backward gives dL/dy = -3.8, dL/dw = -7.6 and
// dL/db = -3.8; one SGD step at learning rate 0.01 gives w = 0.576, b = 0.138.
#include "trit/trit.h"

#include <math.h>
#include <stdio.h>

static int fail(void) {
    fprintf(stderr, "worked_example: %s\n", trit_last_error());
    return 2;
}

int main(void) {
    trit_tensor *w = trit_tensor_new_param(TRIT_F32, 0, NULL, "w");
    trit_tensor *b = trit_tensor_new_param(TRIT_F32, 0, NULL, "b");
    trit_tensor *x = trit_tensor_new(TRIT_F32, 0, NULL), *t = trit_tensor_new(TRIT_F32, 0, NULL);
    trit_tensor_set_flat(w, 0, 0.5);
    trit_tensor_set_flat(b, 0, 0.1);
    trit_tensor_set_flat(x, 0, 2.0);
    trit_tensor_set_flat(t, 0, 3.0);

    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *y = trit_add(g, trit_mul(g, w, x), b);
    trit_tensor *loss = trit_pow(g, trit_sub(g, y, t), 2.0);
    if (trit_graph_keep(g, y) || trit_graph_compile(g, loss)) return fail();
    if (trit_graph_forward(g) || trit_graph_backward(g)) return fail();
    double dy = trit_tensor_get_flat(trit_graph_grad(g, y), 0);
    double dw = trit_tensor_get_flat(w->grad, 0), db = trit_tensor_get_flat(b->grad, 0);
    printf("forward:  y = w*x + b = %.4f, L = (y - t)^2 = %.4f\n", trit_tensor_get_flat(y, 0), trit_tensor_get_flat(loss, 0));
    printf("backward: dL/dy = %.4f, dL/dw = %.4f, dL/db = %.4f\n", dy, dw, db);

    trit_tensor *params[2] = {w, b};
    trit_optim_config sgd = trit_optim_sgd(0.0, false);
    trit_optim *opt = trit_optim_new_single(&sgd, params, 2, 0.0);
    if (!opt || trit_optim_step(opt, 0.01)) return fail();
    double w1 = trit_tensor_get_flat(w, 0), b1 = trit_tensor_get_flat(b, 0);
    printf("SGD step (lr 0.01): w = %.4f, b = %.4f\n", w1, b1);

    bool ok = fabs(dy + 3.8) < 1e-5 && fabs(dw + 7.6) < 1e-5 && fabs(db + 3.8) < 1e-5 && fabs(w1 - 0.576) < 1e-6 &&
              fabs(b1 - 0.138) < 1e-6;
    trit_optim_free(opt);
    trit_graph_free(g);
    trit_tensor_free(w);
    trit_tensor_free(b);
    trit_tensor_free(x);
    trit_tensor_free(t);
    if (!ok) fprintf(stderr, "worked_example: values differ from the seed notes' example\n");
    return ok ? 0 : 1;
}
