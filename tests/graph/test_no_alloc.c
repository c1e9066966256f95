// A compiled training step allocates nothing: after a warm-up step (which lets the OpenMP
// runtime and the kernels' per-thread packing buffers settle), forward, backward, clipping and
// the AdamW update leave the C heap exactly as they found it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <malloc.h>
#include <stdlib.h>

#include "sanitizer.h"

static void test_training_step_allocates_nothing(void **state) {
    (void)state;
#ifdef TEST_UNDER_ASAN
    skip();  // the sanitizer's allocator does not keep glibc's heap statistics
#endif
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2;
    c.dropout = 0.1;
    trit_gpt *m = trit_gpt_new(&c, 3);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build_train(m, 4, 64, &gg), TRIT_OK);
    int n = trit_gpt_num_tensors(m);
    trit_tensor **params = calloc((size_t)n, sizeof *params);
    for (int i = 0; i < n; i++) params[i] = trit_gpt_tensor(m, i);
    trit_optim_config oc = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *opt = trit_optim_new_gpt2(&oc, params, n, 0.1);
    int32_t *x = gg.idx->data, *y = gg.targets->data;
    for (int i = 0; i < 4 * 64; i++) {
        x[i] = i % 65;
        y[i] = (i * 7) % 65;
    }
    size_t before = 0;
    for (int step = 0; step < 3; step++) {
        if (step == 1) before = mallinfo2().uordblks;
        trit_graph_set_rng(gg.graph, 1, (uint64_t)step);
        trit_optim_zero_grad(opt);
        assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
        assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
        double norm;
        assert_int_equal(trit_optim_clip_grads(opt, 1.0, &norm), TRIT_OK);
        assert_int_equal(trit_optim_step(opt, 1e-3), TRIT_OK);
    }
    assert_int_equal(mallinfo2().uordblks, before);
    trit_optim_free(opt);
    free(params);
    trit_gpt_graph_free(&gg);
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_training_step_allocates_nothing)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
