// Optimizer steps computed by hand, the GPT-2 decay rule, skipping of frozen and grad-less
// parameters, and the errors of bad configs and bad parameters.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "trit/optim.h"

// A 1-D f32 parameter with values v and a grad with values g (g may be NULL for no grad).
static trit_tensor *param1(int64_t n, const float *v, const float *g) {
    trit_tensor *t = trit_tensor_new(TRIT_F32, 1, &n);
    assert_non_null(t);
    memcpy(t->data, v, (size_t)n * sizeof(float));
    if (g) {
        t->grad = trit_tensor_new(TRIT_F32, 1, &n);
        assert_non_null(t->grad);
        memcpy(t->grad->data, g, (size_t)n * sizeof(float));
    }
    t->flags |= TRIT_FLAG_PARAM;
    return t;
}

static float at(const trit_tensor *t, int64_t i) { return ((const float *)t->data)[i]; }

static void test_sgd_by_hand(void **state) {
    (void)state;
    // d = g + wd p = (0.6, 0.3, -0.7); p - 0.1 d = (0.94, -2.03, 3.07)
    trit_tensor *p = param1(3, (float[]){1, -2, 3}, (float[]){0.5f, 0.5f, -1});
    trit_optim_config cfg = trit_optim_sgd(0.0, false);
    trit_optim *o = trit_optim_new_single(&cfg, &p, 1, 0.1);
    assert_non_null(o);
    assert_int_equal(trit_optim_num_state(o), 0);
    assert_int_equal(trit_optim_step(o, 0.1), TRIT_OK);
    assert_float_equal(at(p, 0), 0.94f, 1e-6);
    assert_float_equal(at(p, 1), -2.03f, 1e-6);
    assert_float_equal(at(p, 2), 3.07f, 1e-6);
    assert_int_equal(trit_optim_get_step(o), 1);
    trit_optim_free(o);
    trit_tensor_free(p);
}

static void test_momentum_and_nesterov_by_hand(void **state) {
    (void)state;
    // g = 1, mu = 0.9, lr = 0.1. Momentum: buf 1 then 1.9, p 0.9 then 0.71.
    // Nesterov: update d + mu buf = 1.9 then 1 + 0.9 * 1.9 = 2.71, p 0.81 then 0.539.
    const float want[2][2] = {{0.9f, 0.71f}, {0.81f, 0.539f}};
    for (int nesterov = 0; nesterov < 2; nesterov++) {
        trit_tensor *p = param1(1, (float[]){1}, (float[]){1});
        trit_optim_config cfg = trit_optim_sgd(0.9, nesterov);
        trit_optim *o = trit_optim_new_single(&cfg, &p, 1, 0.0);
        assert_non_null(o);
        for (int s = 0; s < 2; s++) {
            assert_int_equal(trit_optim_step(o, 0.1), TRIT_OK);
            assert_float_equal(at(p, 0), want[nesterov][s], 1e-6);
        }
        trit_optim_state_buf b;
        assert_int_equal(trit_optim_get_state(o, 0, &b), TRIT_OK);
        assert_int_equal(b.dtype, TRIT_F32);
        assert_float_equal(((float *)b.data)[0], 1.9f, 1e-6);
        trit_optim_free(o);
        trit_tensor_free(p);
    }
}

static void test_adam_and_adamw_first_step(void **state) {
    (void)state;
    // With bias correction the first Adam step is lr * g / (|g| + eps) = lr * sign(g).
    // AdamW first scales p by 1 - lr wd = 0.999.
    for (int w = 0; w < 2; w++) {
        trit_tensor *p = param1(2, (float[]){1, -1}, (float[]){0.25f, -4});
        trit_optim_config cfg = w ? trit_optim_adamw(0.9, 0.999, 1e-8)
                                  : trit_optim_adam(0.9, 0.999, 1e-8);
        trit_optim *o = trit_optim_new_single(&cfg, &p, 1, w ? 0.1 : 0.0);
        assert_non_null(o);
        assert_int_equal(trit_optim_step(o, 0.01), TRIT_OK);
        float keep = w ? 0.999f : 1.0f;
        assert_float_equal(at(p, 0), keep * 1 - 0.01f, 1e-6);
        assert_float_equal(at(p, 1), keep * -1 + 0.01f, 1e-6);
        trit_optim_free(o);
        trit_tensor_free(p);
    }
}

static void test_rmsprop_first_step(void **state) {
    (void)state;
    // v = (1 - alpha) g^2 = 0.01 g^2, so p -= lr g / (0.1 |g| + eps) = 10 lr sign(g).
    trit_tensor *p = param1(2, (float[]){1, 1}, (float[]){2, -0.5f});
    trit_optim_config cfg = trit_optim_rmsprop(0.99, 1e-8, 0.0);
    trit_optim *o = trit_optim_new_single(&cfg, &p, 1, 0.0);
    assert_non_null(o);
    assert_int_equal(trit_optim_step(o, 0.01), TRIT_OK);
    assert_float_equal(at(p, 0), 0.9f, 1e-6);
    assert_float_equal(at(p, 1), 1.1f, 1e-6);
    trit_optim_free(o);
    trit_tensor_free(p);
}

static void test_gpt2_rule_and_lr_scale(void **state) {
    (void)state;
    trit_tensor *emb = trit_tensor_new(TRIT_F32, 2, (int64_t[]){4, 3});
    trit_tensor *ln = param1(3, (float[]){1, 1, 1}, NULL);
    trit_tensor *conv = trit_tensor_new(TRIT_F32, 4, (int64_t[]){2, 1, 1, 1});
    trit_tensor *bias = param1(1, (float[]){0}, NULL);
    trit_tensor *ps[4] = {emb, ln, conv, bias}, *d[4], *nd[4];
    int n_d = -1, n_nd = -1;
    assert_int_equal(trit_optim_split_decay(ps, 4, d, &n_d, nd, &n_nd), TRIT_OK);
    assert_int_equal(n_d, 2);
    assert_int_equal(n_nd, 2);
    assert_ptr_equal(d[0], emb);
    assert_ptr_equal(d[1], conv);
    assert_ptr_equal(nd[0], ln);
    assert_ptr_equal(nd[1], bias);
    assert_true(trit_optim_wants_decay(emb));
    assert_false(trit_optim_wants_decay(bias));

    // lr_scale: a group at 0.5 moves half as far under plain SGD.
    trit_tensor *a = param1(1, (float[]){1}, (float[]){1}), *b = param1(1, (float[]){1}, (float[]){1});
    trit_optim_group g[2] = {{&a, 1, 1.0, 0.0, false}, {&b, 1, 0.5, 0.0, false}};
    trit_optim_config cfg = trit_optim_sgd(0.0, false);
    trit_optim *o = trit_optim_new(&cfg, g, 2);
    assert_non_null(o);
    assert_int_equal(trit_optim_step(o, 0.2), TRIT_OK);
    assert_float_equal(at(a, 0), 0.8f, 1e-7);
    assert_float_equal(at(b, 0), 0.9f, 1e-7);
    trit_optim_free(o);
    for (int i = 0; i < 4; i++) trit_tensor_free(ps[i]);
    trit_tensor_free(a);
    trit_tensor_free(b);
}

static void test_frozen_and_gradless_are_skipped(void **state) {
    (void)state;
    trit_tensor *live = param1(2, (float[]){1, 2}, (float[]){1, 1});
    trit_tensor *nograd = param1(2, (float[]){1, 2}, NULL);
    trit_tensor *later = param1(2, (float[]){1, 2}, (float[]){1, 1});
    trit_tensor *frozen = param1(2, (float[]){1, 2}, (float[]){1, 1});
    frozen->flags |= TRIT_FLAG_FROZEN;
    trit_tensor *ps[4] = {live, nograd, later, frozen};
    trit_optim_config cfg = trit_optim_adamw(0.9, 0.999, 1e-8);
    trit_optim *o = trit_optim_new_single(&cfg, ps, 4, 0.0);
    assert_non_null(o);
    // Frozen at creation: no state. The other three get exp_avg and exp_avg_sq.
    assert_int_equal(trit_optim_num_state(o), 6);
    later->flags |= TRIT_FLAG_FROZEN;  // frozen after creation: kept, but skipped
    assert_int_equal(trit_optim_step(o, 0.1), TRIT_OK);
    assert_float_equal(at(live, 0), 0.9f, 1e-6);
    for (int i = 1; i < 4; i++) {
        assert_true(at(ps[i], 0) == 1.0f);
        assert_true(at(ps[i], 1) == 2.0f);
    }
    later->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
    assert_int_equal(trit_optim_step(o, 0.1), TRIT_OK);
    assert_true(at(later, 0) < 1.0f);
    // Unfreezing a parameter that has no state is refused, and nothing moves.
    frozen->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
    float before = at(live, 0);
    assert_int_equal(trit_optim_step(o, 0.1), TRIT_ERR_STATE);
    assert_true(at(live, 0) == before);
    trit_optim_zero_grad(o);
    assert_true(((float *)live->grad->data)[0] == 0.0f);
    trit_optim_free(o);
    for (int i = 0; i < 4; i++) trit_tensor_free(ps[i]);
}

static void expect_bad_config(trit_optim_config cfg, const char *word) {
    assert_int_equal(trit_optim_config_check(&cfg), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), word));
    trit_tensor *p = param1(1, (float[]){1}, (float[]){1});
    assert_null(trit_optim_new_single(&cfg, &p, 1, 0.0));
    trit_tensor_free(p);
}

static void test_bad_configs(void **state) {
    (void)state;
    expect_bad_config(trit_optim_adam(1.0, 0.999, 1e-8), "betas");
    expect_bad_config(trit_optim_adamw(0.9, -0.1, 1e-8), "betas");
    expect_bad_config(trit_optim_adamw(NAN, 0.999, 1e-8), "betas");
    expect_bad_config(trit_optim_adam(0.9, 0.999, 0.0), "eps");
    expect_bad_config(trit_optim_rmsprop(0.99, -1e-8, 0.0), "eps");
    expect_bad_config(trit_optim_adamw(0.9, 0.999, 1e-50), "an fp32 normal");  // 0 in the fp32 update
    expect_bad_config(trit_optim_rmsprop(1.0, 1e-8, 0.0), "alpha");
    expect_bad_config(trit_optim_sgd(-0.9, false), "momentum");
    expect_bad_config(trit_optim_sgd(0.0, true), "Nesterov");
    assert_int_equal(trit_optim_config_check(NULL), TRIT_ERR_INVALID);

    trit_tensor *p = param1(1, (float[]){1}, (float[]){1});
    trit_optim_config cfg = trit_optim_sgd(0.0, false);
    trit_optim *o = trit_optim_new_single(&cfg, &p, 1, 0.0);
    assert_non_null(o);
    assert_int_equal(trit_optim_step(o, -1e-3), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "lr"));
    assert_int_equal(trit_optim_step(o, NAN), TRIT_ERR_INVALID);
    assert_int_equal(trit_optim_step(o, INFINITY), TRIT_ERR_INVALID);
    assert_true(at(p, 0) == 1.0f);
    assert_int_equal(trit_optim_get_step(o), 0);
    assert_int_equal(trit_optim_set_group(o, 0, -1.0, 0.0), TRIT_ERR_INVALID);
    assert_int_equal(trit_optim_set_group(o, 1, 1.0, 0.0), TRIT_ERR_RANGE);
    assert_int_equal(trit_optim_step(NULL, 0.1), TRIT_ERR_INVALID);
    trit_optim_free(o);
    // Negative decay or lr scale in a group.
    assert_null(trit_optim_new_single(&cfg, &p, 1, -0.1));
    assert_non_null(strstr(trit_last_error(), "weight_decay"));
    trit_optim_group g = {&p, 1, -1.0, 0.0, false};
    assert_null(trit_optim_new(&cfg, &g, 1));
    assert_null(trit_optim_new(&cfg, NULL, 1));
    assert_null(trit_optim_new(&cfg, &g, 0));
    trit_tensor_free(p);
}

static void test_bad_params(void **state) {
    (void)state;
    trit_optim_config cfg = trit_optim_adamw(0.9, 0.999, 1e-8);
    trit_tensor *p = param1(3, (float[]){1, 2, 3}, (float[]){1, 1, 1});
    // NULL list and NULL entries.
    assert_null(trit_optim_new_single(&cfg, NULL, 2, 0.0));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    trit_tensor *with_null[2] = {p, NULL};
    assert_null(trit_optim_new_single(&cfg, with_null, 2, 0.0));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    // The same parameter twice.
    trit_tensor *twice[2] = {p, p};
    assert_null(trit_optim_new_single(&cfg, twice, 2, 0.0));
    // Not f32.
    trit_tensor *d = trit_tensor_new(TRIT_F64, 1, (int64_t[]){3});
    assert_null(trit_optim_new_single(&cfg, &d, 1, 0.0));
    assert_non_null(strstr(trit_last_error(), "f32"));
    // Grad of the wrong shape at creation.
    trit_tensor *bad = param1(3, (float[]){1, 2, 3}, NULL);
    bad->grad = trit_tensor_new(TRIT_F32, 2, (int64_t[]){3, 1});
    assert_null(trit_optim_new_single(&cfg, &bad, 1, 0.0));
    assert_non_null(strstr(trit_last_error(), "shape"));

    // Grad replaced by a wrong one after creation: the whole step is refused before any update.
    trit_tensor *ps[2] = {p, d};
    trit_tensor_free(d);
    ps[1] = param1(2, (float[]){5, 6}, (float[]){1, 1});
    trit_optim *o = trit_optim_new_single(&cfg, ps, 2, 0.0);
    assert_non_null(o);
    trit_tensor *good_grad = ps[1]->grad;
    ps[1]->grad = bad->grad;
    assert_int_equal(trit_optim_step(o, 0.1), TRIT_ERR_SHAPE);
    assert_true(at(p, 0) == 1.0f);
    trit_tensor *g64 = trit_tensor_new(TRIT_F64, 1, (int64_t[]){2});
    ps[1]->grad = g64;
    assert_int_equal(trit_optim_step(o, 0.1), TRIT_ERR_DTYPE);
    ps[1]->grad = good_grad;
    assert_int_equal(trit_optim_step(o, 0.1), TRIT_OK);
    assert_true(at(p, 0) < 1.0f);
    trit_optim_free(o);
    trit_tensor_free(g64);
    trit_tensor_free(ps[1]);
    trit_tensor_free(bad);
    trit_tensor_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_by_hand),
        cmocka_unit_test(test_momentum_and_nesterov_by_hand),
        cmocka_unit_test(test_adam_and_adamw_first_step),
        cmocka_unit_test(test_rmsprop_first_step),
        cmocka_unit_test(test_gpt2_rule_and_lr_scale),
        cmocka_unit_test(test_frozen_and_gradless_are_skipped),
        cmocka_unit_test(test_bad_configs),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
