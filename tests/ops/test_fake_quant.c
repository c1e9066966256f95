// fake_quant: the forward equals trit_quantize then trit_dequantize (so freezing gives what
// training saw) for groups, rows and fp8; BitNet's ternary absmean rule on a worked example;
// the calibrated running absmax and its momentum, frozen in eval mode; the straight-through
// gradient, and the clipped one outside the calibrated range; bad specs refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "trit/trit.h"

enum { R = 4, K = 64, N = R * K };

typedef struct fq_graph {
    trit_graph *g;
    trit_tensor *x, *w, *y, *state;
} fq_graph;

// loss = sum(fake_quant(x) * w) over a parameter x (R, K) and a constant w, so d loss / d x = w
// under the straight-through rule.
static fq_graph build(const trit_fake_quant_spec *s, bool calibrated) {
    fq_graph f;
    const int64_t shape[2] = {R, K}, one = 1;
    f.g = trit_graph_new(TRIT_F32);
    f.x = trit_tensor_new_param(TRIT_F32, 2, shape, "x");
    f.w = trit_tensor_new(TRIT_F32, 2, shape);
    f.state = calibrated ? trit_tensor_new(TRIT_F32, 1, &one) : NULL;
    trit_tensor_fill_normal(f.x, 0.0, 1.0, 3, 1);
    trit_tensor_fill_normal(f.w, 0.0, 1.0, 3, 2);
    f.y = trit_fake_quant(f.g, f.x, s, f.state);
    trit_tensor *loss = trit_sum(f.g, trit_mul(f.g, f.y, f.w), 0, NULL, false);
    trit_graph_keep(f.g, f.y);
    assert_int_equal(trit_graph_compile(f.g, loss), TRIT_OK);
    return f;
}

static void drop(fq_graph *f) {
    trit_graph_free(f->g);
    trit_tensor_free(f->x), trit_tensor_free(f->w), trit_tensor_free(f->state);
}

static void test_matches_quantize_dequantize(void **state) {
    (void)state;
    const trit_dtype dts[4] = {TRIT_QINT8, TRIT_QINT4, TRIT_QINT2, TRIT_F8_E4M3};
    const int64_t groups[3] = {0, -1, 32};
    for (int d = 0; d < 4; d++)
        for (int gi = 0; gi < 3; gi++) {
            trit_fake_quant_spec s = {.dtype = dts[d], .group_size = groups[gi], .mode = TRIT_FQ_GROUPS};
            fq_graph f = build(&s, false);
            assert_int_equal(trit_graph_forward(f.g), TRIT_OK);
            trit_quant_spec q = trit_quant_spec_default(dts[d]);
            q.group_size = groups[gi];
            trit_tensor *qt = trit_quantize(f.x, &q), *dq = trit_dequantize(qt);
            assert_memory_equal(trit_tensor_ptr(f.y), trit_tensor_ptr(dq), sizeof(float) * N);
            trit_tensor_free(qt), trit_tensor_free(dq);
            // Straight through: d loss / d x = w exactly.
            assert_int_equal(trit_graph_backward(f.g), TRIT_OK);
            assert_memory_equal(f.x->grad->data, f.w->data, sizeof(float) * N);
            drop(&f);
        }
}

static void test_token_rows(void **state) {
    (void)state;
    trit_fake_quant_spec s = {.dtype = TRIT_QINT8, .mode = TRIT_FQ_TOKEN};
    fq_graph f = build(&s, false);
    assert_int_equal(trit_graph_forward(f.g), TRIT_OK);
    const float *x = f.x->data, *y = trit_tensor_ptr(f.y);
    for (int r = 0; r < R; r++) {
        float amax = 0;
        for (int k = 0; k < K; k++) amax = fmaxf(amax, fabsf(x[r * K + k]));
        const float sc = amax / 127.0f;
        for (int k = 0; k < K; k++) assert_true(y[r * K + k] == nearbyintf(x[r * K + k] / sc) * sc);
    }
    drop(&f);
}

static void test_ternary_absmean(void **state) {
    (void)state;
    trit_graph *g = trit_graph_new(TRIT_F32);
    const int64_t n = 4;
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 1, &n, "w");
    trit_fake_quant_spec s = {.dtype = TRIT_QINT2, .mode = TRIT_FQ_TERNARY};
    trit_tensor *y = trit_fake_quant(g, x, &s, NULL);
    trit_graph_keep(g, y);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    const float w[4] = {0.5f, -0.1f, 0.02f, -0.9f};  // mean |w| = 0.38
    memcpy(x->data, w, sizeof w);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const float *v = trit_tensor_ptr(y), s38 = (0.5f + 0.1f + 0.02f + 0.9f) / 4;
    assert_true(fabsf(v[0] - s38) < 1e-7f && v[1] == 0 && v[2] == 0 && fabsf(v[3] + s38) < 1e-7f);
    memset(x->data, 0, sizeof w);  // all zero: scale clamps at 1e-5, codes 0
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_true(v[0] == 0 && v[3] == 0);
    trit_graph_free(g);
}

static void test_calibration_and_clipped_ste(void **state) {
    (void)state;
    trit_fake_quant_spec s = {.dtype = TRIT_QINT8, .mode = TRIT_FQ_CALIBRATED, .clip_ste = true, .momentum = 0.9};
    fq_graph f = build(&s, true);
    float *x = f.x->data, *r = f.state->data;
    float amax1 = 0;
    for (int i = 0; i < N; i++) amax1 = fmaxf(amax1, fabsf(x[i]));
    assert_int_equal(trit_graph_forward(f.g), TRIT_OK);
    assert_true(*r == amax1);  // first step: the batch absmax
    for (int i = 0; i < N; i++) x[i] *= 0.5f;
    assert_int_equal(trit_graph_forward(f.g), TRIT_OK);
    const float r2 = 0.9f * amax1 + 0.1f * (0.5f * amax1);
    assert_true(fabsf(*r - r2) <= 1e-6f * r2);
    trit_graph_set_training(f.g, false);
    for (int i = 0; i < N; i++) x[i] *= 4.0f;  // now up to 2 amax1: beyond the calibrated range
    assert_int_equal(trit_graph_forward(f.g), TRIT_OK);
    assert_true(fabsf(*r - r2) <= 1e-6f * r2);  // eval does not update
    const float *y = trit_tensor_ptr(f.y);
    for (int i = 0; i < N; i++) assert_true(fabsf(y[i]) <= *r * 1.0001f);  // saturated at the range
    trit_graph_zero_grad(f.g);
    assert_int_equal(trit_graph_backward(f.g), TRIT_OK);
    const float *gx = f.x->grad->data, *w = f.w->data;
    int clipped = 0;
    for (int i = 0; i < N; i++) {
        const bool out = fabsf(x[i]) > *r;
        clipped += out;
        assert_true(gx[i] == (out ? 0.0f : w[i]));
    }
    assert_true(clipped > 0);
    drop(&f);
}

static void test_bad_specs(void **state) {
    (void)state;
    trit_graph *g = trit_graph_new(TRIT_F32);
    const int64_t shape[2] = {4, 48};
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, shape, "x");
    trit_fake_quant_spec s = {.dtype = TRIT_NF4, .mode = TRIT_FQ_GROUPS};
    assert_null(trit_fake_quant(g, x, &s, NULL));
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F32);
    x = trit_graph_input(g, TRIT_F32, 2, shape, "x");
    s = (trit_fake_quant_spec){.dtype = TRIT_QINT4, .group_size = 32, .mode = TRIT_FQ_GROUPS};
    assert_null(trit_fake_quant(g, x, &s, NULL));  // 32 does not divide 48
    s = (trit_fake_quant_spec){.dtype = TRIT_QINT8, .mode = TRIT_FQ_CALIBRATED, .momentum = 0.9};
    assert_null(trit_fake_quant(g, x, &s, NULL));  // no state tensor
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_quantize_dequantize),
        cmocka_unit_test(test_token_rows),
        cmocka_unit_test(test_ternary_absmean),
        cmocka_unit_test(test_calibration_and_clipped_ste),
        cmocka_unit_test(test_bad_specs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
