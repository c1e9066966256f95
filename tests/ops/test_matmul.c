// matmul and linear: known answers, gradient checks over transposes, broadcast batch dims,
// strided views (read in place through leading dims or copied) and computed operands (whose
// gradients the first product stores), f32 (SIMD GEMM) vs f64, PyTorch parity, and bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum {
    L_PLAIN,          // the parameters as they are
    L_T_A,            // a = transpose of p0's last two dims (column-major: GEMM reads it transposed)
    L_SLICE_B,        // b = p1 (K, 8) sliced to columns 2..2+N: rows 8 apart
    L_COPY_A,         // a = every other element of p0 (M, K, 2): no unit stride, copied first
    L_PERMUTE_A,      // a = p0 (M, B, K) permuted to (B, M, K): batch stride K, rows B*K apart
    L_EXPAND_A,       // a = p0 (1, M, K) expanded to (2, M, K): batch stride 0
    L_COMPUTED,       // a = gelu(p0), b = gelu(p1): gradients in the arena, which matmul stores
};

typedef struct mm_case {
    const char *what;
    int layout;
    bool ta, tb;
    int na, nb;
    int64_t sa[4], sb[4];
    bool twice;  // the product is formed twice from the same parameters: gradients must add up
} mm_case;

static trit_tensor *shape_a(trit_graph *g, trit_tensor *a, int layout) {
    switch (layout) {
    case L_T_A: return trit_transpose(g, a, -1, -2);
    case L_COPY_A: {
        trit_tensor *s = trit_slice(g, a, 2, 0, 1);  // (M, K, 1), strides (2K, 2, 1)
        return trit_reshape(g, s, 2, (int64_t[]){a->shape[0], a->shape[1]});
    }
    case L_PERMUTE_A: return trit_permute(g, a, (int[]){1, 0, 2});
    case L_EXPAND_A: return trit_expand(g, a, 3, (int64_t[]){2, a->shape[1], a->shape[2]});
    }
    return a;
}

static trit_tensor *build_matmul(trit_graph *g, trit_tensor **p, void *ctx) {
    const mm_case *c = ctx;
    trit_tensor *b = c->layout == L_SLICE_B ? trit_slice(g, p[1], 1, 2, 7) : p[1];
    trit_tensor *a = shape_a(g, p[0], c->layout);
    if (c->layout == L_COMPUTED) a = trit_gelu(g, a), b = trit_gelu(g, b);
    trit_tensor *y = trit_matmul(g, a, b, c->ta, c->tb);
    if (!c->twice) return y;
    // Computed operands are read by both products: the first backward stores, the second adds.
    if (c->layout != L_COMPUTED) a = shape_a(g, p[0], c->layout);
    return trit_add(g, y, trit_matmul(g, a, b, c->ta, c->tb));
}

static const mm_case MATMUL_CASES[] = {
    {"2-d", L_PLAIN, false, false, 2, 2, {3, 4}, {4, 5}, false},
    {"batched", L_PLAIN, false, false, 3, 3, {2, 3, 4}, {2, 4, 5}, false},
    {"b shared (folded)", L_PLAIN, false, false, 3, 2, {2, 3, 4}, {4, 5}, false},
    {"b shared, transposed (folded)", L_PLAIN, false, true, 3, 2, {2, 3, 4}, {5, 4}, false},
    {"a shared", L_PLAIN, false, false, 2, 3, {3, 4}, {2, 4, 5}, false},
    {"both broadcast", L_PLAIN, false, false, 4, 4, {2, 1, 3, 4}, {1, 3, 4, 5}, false},
    {"trans_a", L_PLAIN, true, false, 3, 2, {2, 4, 3}, {4, 5}, false},
    {"trans_a, trans_b", L_PLAIN, true, true, 2, 3, {4, 3}, {2, 5, 4}, false},
    {"transposed view a", L_T_A, false, false, 3, 2, {2, 4, 3}, {4, 5}, false},
    {"transposed view a, trans_a", L_T_A, true, true, 2, 2, {3, 4}, {5, 4}, false},
    {"sliced b", L_SLICE_B, false, false, 2, 2, {3, 4}, {4, 8}, false},
    {"sliced b, trans_b", L_SLICE_B, false, true, 2, 2, {3, 5}, {4, 8}, false},
    {"a copied", L_COPY_A, false, false, 3, 2, {3, 4, 2}, {4, 5}, false},
    {"permuted batch a", L_PERMUTE_A, false, false, 3, 2, {3, 2, 4}, {4, 5}, false},
    {"expanded batch a", L_EXPAND_A, false, false, 3, 3, {1, 3, 4}, {2, 4, 5}, false},
    {"large (blocked SIMD GEMM in f32)", L_PLAIN, false, false, 3, 2, {4, 128, 64}, {64, 96}, false},
    {"large, batched, trans_b", L_PLAIN, false, true, 3, 3, {2, 96, 80}, {2, 120, 80}, false},
    {"twice: b shared (folded)", L_PLAIN, false, false, 3, 2, {2, 3, 4}, {4, 5}, true},
    {"twice: b shared, transposed (folded)", L_PLAIN, false, true, 3, 2, {2, 3, 4}, {5, 4}, true},
    {"twice: a shared", L_PLAIN, false, false, 2, 3, {3, 4}, {2, 4, 5}, true},
    {"twice: trans_a, trans_b", L_PLAIN, true, true, 3, 3, {2, 4, 3}, {2, 5, 4}, true},
    {"twice: transposed view a", L_T_A, false, false, 3, 2, {2, 4, 3}, {4, 5}, true},
    // The first writer of a computed operand's gradient stores it: over batches sharing it, it
    // is summed from zeros instead.
    {"computed: a shared", L_COMPUTED, false, false, 2, 3, {3, 4}, {2, 4, 5}, false},
    {"computed: b shared (folded)", L_COMPUTED, false, false, 3, 2, {2, 3, 4}, {4, 5}, false},
    {"computed: batched, trans_a, trans_b", L_COMPUTED, true, true, 3, 3, {2, 4, 3}, {2, 5, 4}, false},
    {"computed: both broadcast", L_COMPUTED, false, false, 4, 4, {2, 1, 3, 4}, {1, 3, 4, 5}, false},
    {"twice: computed, a shared", L_COMPUTED, false, false, 2, 3, {3, 4}, {2, 4, 5}, true},
};

static void test_matmul_grad(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof MATMUL_CASES / sizeof MATMUL_CASES[0]; i++) {
        const mm_case *c = &MATMUL_CASES[i];
        trit_tensor *p[2] = {tg_param(c->na, c->sa, -1, 1, 500 + i), tg_param(c->nb, c->sb, -1, 1, 600 + i)};
        tg_assert_gradcheck_sampled(c->what, build_matmul, (void *)c, 2, p);
        tg_assert_f32_close(c->what, build_matmul, (void *)c, 2, p, 1e-5);
        tg_free_params(2, p);
    }
}

// ---- linear -----------------------------------------------------------------------------

enum { LL_PLAIN, LL_SLICE_X, LL_PERMUTE_X, LL_T_W, LL_STRIDED_B, LL_COMPUTED };

typedef struct lin_case {
    const char *what;
    int layout;
    int nx;
    int64_t sx[3], sw[2], sb;  // sb == 0: no bias
    bool twice;
} lin_case;

static trit_tensor *build_linear(trit_graph *g, trit_tensor **p, void *ctx) {
    const lin_case *c = ctx;
    trit_tensor *x = p[0], *w = p[1], *b = c->sb ? p[2] : NULL;
    if (c->layout == LL_SLICE_X) x = trit_slice(g, x, -1, 2, 6);            // (2, 3, 8) -> rows 8 apart
    if (c->layout == LL_PERMUTE_X) x = trit_permute(g, x, (int[]){1, 0, 2});  // rows do not stack: copied
    if (c->layout == LL_T_W) w = trit_transpose(g, w, 0, 1);                // (K, N) -> column-major (N, K)
    if (c->layout == LL_STRIDED_B) b = trit_reshape(g, trit_slice(g, b, 1, 1, 2), 1, (int64_t[]){c->sw[0]});
    if (c->layout == LL_COMPUTED) x = trit_gelu(g, x), w = trit_gelu(g, w), b = b ? trit_gelu(g, b) : NULL;
    trit_tensor *y = trit_linear(g, x, w, b);
    return c->twice ? trit_add(g, y, trit_linear(g, x, w, b)) : y;
}

static const lin_case LINEAR_CASES[] = {
    {"bias", LL_PLAIN, 3, {2, 3, 4}, {5, 4}, 5, false},
    {"no bias", LL_PLAIN, 2, {6, 4}, {3, 4}, 0, false},
    {"1-d x", LL_PLAIN, 1, {4}, {3, 4}, 3, false},
    {"sliced x", LL_SLICE_X, 3, {2, 3, 8}, {5, 4}, 5, false},
    {"permuted x (copied)", LL_PERMUTE_X, 3, {3, 2, 4}, {5, 4}, 5, false},
    {"transposed w", LL_T_W, 2, {6, 4}, {4, 5}, 5, false},
    {"strided b", LL_STRIDED_B, 2, {6, 4}, {5, 4}, 5, false},
    {"large (blocked SIMD GEMM in f32)", LL_PLAIN, 3, {8, 64, 96}, {80, 96}, 80, false},
    {"twice: bias", LL_PLAIN, 3, {2, 3, 4}, {5, 4}, 5, true},
    {"twice: transposed w", LL_T_W, 2, {6, 4}, {4, 5}, 5, true},
    {"computed x, w, b", LL_COMPUTED, 3, {2, 3, 4}, {5, 4}, 5, false},
    {"twice: computed x, w, b", LL_COMPUTED, 3, {2, 3, 4}, {5, 4}, 5, true},
};

static void test_linear_grad(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof LINEAR_CASES / sizeof LINEAR_CASES[0]; i++) {
        const lin_case *c = &LINEAR_CASES[i];
        const int64_t bshape[2] = {c->sw[0], 3};  // strided b: column 1 of a (N, 3) parameter
        trit_tensor *p[3] = {tg_param(c->nx, c->sx, -1, 1, 700 + i), tg_param(2, c->sw, -1, 1, 800 + i),
                             c->layout == LL_STRIDED_B ? tg_param(2, bshape, -1, 1, 900 + i)
                             : c->sb                   ? tg_param(1, &c->sb, -1, 1, 900 + i)
                                                       : NULL};
        const int n = c->sb ? 3 : 2;
        tg_assert_gradcheck_sampled(c->what, build_linear, (void *)c, n, p);
        tg_assert_f32_close(c->what, build_linear, (void *)c, n, p, 1e-5);
        tg_free_params(n, p);
    }
}

// ---- known answers, parity, bad input -------------------------------------------------

static void test_known_values(void **state) {
    (void)state;
    // [[1, 2], [3, 4]] @ [[5, 6], [7, 8]] = [[19, 22], [43, 50]]; with trans_a: [[26, 30], [38, 44]].
    const double want[2][4] = {{19, 22, 43, 50}, {26, 30, 38, 44}};
    for (int dt = 0; dt < 2; dt++) {
        for (int ta = 0; ta < 2; ta++) {
            const trit_dtype d = dt ? TRIT_F64 : TRIT_F32;
            trit_graph *g = trit_graph_new(d);
            trit_tensor *a = trit_graph_input(g, d, 2, (int64_t[]){2, 2}, "a");
            trit_tensor *b = trit_graph_input(g, d, 2, (int64_t[]){2, 2}, "b");
            trit_tensor *y = trit_matmul(g, a, b, ta != 0, false);
            trit_tensor *w = trit_linear(g, a, b, NULL);  // a b^T = [[17, 23], [39, 53]]
            trit_graph_keep(g, y);
            trit_graph_keep(g, w);
            assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
            for (int i = 0; i < 4; i++) {
                trit_tensor_set_flat(a, i, i + 1);
                trit_tensor_set_flat(b, i, i + 5);
            }
            assert_int_equal(trit_graph_forward(g), TRIT_OK);
            const double lw[4] = {17, 23, 39, 53};
            for (int i = 0; i < 4; i++) {
                assert_float_equal(trit_tensor_get_flat(y, i), want[ta][i], 0);
                assert_float_equal(trit_tensor_get_flat(w, i), lw[i], 0);
            }
            trit_graph_free(g);
        }
    }
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *f = tf_open("math.bin");
    const char *const ab[2] = {"a", "b"}, *const xwb[3] = {"x", "w", "b"};
    const mm_case plain = {"", L_PLAIN, false, false, 0, 0, {0}, {0}, false},
                  tt = {"", L_PLAIN, true, true, 0, 0, {0}, {0}, false},
                  ta = {"", L_PLAIN, true, false, 0, 0, {0}, {0}, false};
    const lin_case bias = {"", LL_PLAIN, 0, {0}, {5, 4}, 5, false}, nobias = {"", LL_PLAIN, 0, {0}, {3, 4}, 0, false};
    double worst = tf_check_case(f, "matmul_bcast", build_matmul, (void *)&plain, 2, ab, 1e-10);
    worst = fmax(worst, tf_check_case(f, "matmul_tt", build_matmul, (void *)&tt, 2, ab, 1e-10));
    worst = fmax(worst, tf_check_case(f, "matmul_ta", build_matmul, (void *)&ta, 2, ab, 1e-10));
    worst = fmax(worst, tf_check_case(f, "linear_bias", build_linear, (void *)&bias, 3, xwb, 1e-10));
    worst = fmax(worst, tf_check_case(f, "linear_nobias", build_linear, (void *)&nobias, 2, xwb, 1e-10));
    print_message("matmul/linear vs PyTorch (f64): max relative error %.3g\n", worst);
    tf_close(f);
}

static void expect_error(trit_tensor *y, trit_graph *g, const char *msg, trit_status code) {
    tg_expect_graph_error(g, y, code, msg);
}

static void test_bad_input(void **state) {
    (void)state;
    trit_graph *g;
#define IN(name, ...) trit_graph_input(g, TRIT_F32, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), (int64_t[]){__VA_ARGS__}, name)
    g = trit_graph_new(TRIT_F32);
    expect_error(trit_matmul(g, IN("a", 2, 3), IN("b", 4, 5), false, false), g, "inner dims differ", TRIT_ERR_SHAPE);
    g = trit_graph_new(TRIT_F32);
    expect_error(trit_matmul(g, IN("a", 2, 3, 4), IN("b", 3, 4, 5), false, false), g, "do not broadcast", TRIT_ERR_SHAPE);
    g = trit_graph_new(TRIT_F32);
    expect_error(trit_matmul(g, IN("a", 4), IN("b", 4, 5), false, false), g, "at least 2 dims", TRIT_ERR_SHAPE);
    g = trit_graph_new(TRIT_F32);
    expect_error(trit_matmul(g, IN("a", 2, 4), NULL, false, false), g, "NULL", TRIT_ERR_INVALID);
    g = trit_graph_new(TRIT_F32);
    trit_tensor *i = trit_graph_input(g, TRIT_I32, 2, (int64_t[]){4, 5}, "i");
    expect_error(trit_matmul(g, IN("a", 2, 4), i, false, false), g, "expected b to be f32", TRIT_ERR_DTYPE);
    g = trit_graph_new(TRIT_F32);
    expect_error(trit_linear(g, IN("x", 2, 4), IN("w", 4, 5), NULL), g, "expected x (..., K) and w (N, K)", TRIT_ERR_SHAPE);
    g = trit_graph_new(TRIT_F32);
    expect_error(trit_linear(g, IN("x", 2, 4), IN("w", 5, 4), IN("b", 4)), g, "expected b (5,)", TRIT_ERR_SHAPE);
    g = trit_graph_new(TRIT_F32);
    expect_error(trit_linear(g, NULL, IN("w", 5, 4), NULL), g, "NULL", TRIT_ERR_INVALID);
#undef IN
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values), cmocka_unit_test(test_matmul_grad), cmocka_unit_test(test_linear_grad),
        cmocka_unit_test(test_pytorch_parity), cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
