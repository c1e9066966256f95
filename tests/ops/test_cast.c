// cast: forward rounds to nearest even into the target dtype (NaN kept, ties to even), backward
// is the identity on the gradient (checked exactly: a finite-difference check would only
// measure the forward's rounding steps).
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "trit/trit.h"

#include <math.h>
#include <string.h>

// bf16 and f16 values: RNE ties, NaN and inf kept; the gradient of a bf16 value reaches the f32
// parameter unchanged.
static void test_cast_values_and_grad(void **state) {
    (void)state;
    const float vals[6] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, NAN, INFINITY, -2.5f, 65519.0f};
    trit_tensor *w = trit_tensor_new_param(TRIT_F32, 1, (int64_t[]){6}, "w");
    memcpy(w->data, vals, sizeof vals);
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *b = trit_cast(g, w, TRIT_BF16), *h = trit_cast(g, w, TRIT_F16);
    assert_ptr_equal(trit_cast(g, w, TRIT_F32), w);  // casting to its own dtype is the value itself
    trit_tensor *wts = trit_tensor_new(TRIT_F32, 1, (int64_t[]){6});
    for (int i = 0; i < 6; i++) ((float *)wts->data)[i] = i < 2 ? (float)(i + 2) : 0.0f;
    trit_tensor *loss = trit_sum(g, trit_mul(g, trit_slice(g, trit_cast(g, b, TRIT_F32), 0, 0, 2),
                                              trit_slice(g, wts, 0, 0, 2)), 0, NULL, false);
    trit_graph_keep(g, b);
    trit_graph_keep(g, h);
    tg_run(g, loss);
    const uint16_t *bb = b->data, *hh = h->data;
    assert_int_equal(bb[0], 0x3f80);  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1)
    assert_int_equal(bb[1], 0x3f82);  // 1 + 3 * 2^-8: tie, to even (1 + 2^-6)
    assert_true(isnan(trit_bf16_to_f32(bb[2])) && isinf(trit_bf16_to_f32(bb[3])));
    assert_int_equal(bb[4], 0xc020);
    assert_int_equal(hh[5], 0x7bff);  // 65519 rounds down to the largest f16, 65504
    assert_true(isnan(trit_f16_to_f32(hh[2])));
    const float *gw = w->grad->data;
    assert_true(gw[0] == 2.0f && gw[1] == 3.0f && gw[2] == 0.0f);
    trit_graph_free(g);
    trit_tensor_free(wts);
    trit_tensor_free(w);
}

static void test_cast_bad_dtype(void **state) {
    (void)state;
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 1, (int64_t[]){4}, "x");
    tg_expect_graph_error(g, trit_cast(g, x, TRIT_I32), TRIT_ERR_DTYPE, "cast: converts between");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cast_values_and_grad),
        cmocka_unit_test(test_cast_bad_dtype),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
