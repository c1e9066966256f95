// Unary ops: gradient checks on contiguous and strided inputs, f32 vs f64, PyTorch parity,
// known values, GELU's slope against the derivative of its tanh formula (saturation included),
// extreme inputs, and bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "tritfix.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

// One op with its scalar; `lo`, `hi` keep inputs inside its smooth domain.
typedef struct unary_case {
    const char *name;
    int kind;
    double s, lo, hi;
    bool away_from_zero;  // relu: no input within 0.1 of the kink
} unary_case;

enum { U_SCALE, U_ADD_SCALAR, U_POW, U_EXP, U_LN, U_TANH, U_SIGMOID, U_RELU, U_GELU, U_SILU };

static trit_tensor *apply(trit_graph *g, const unary_case *c, trit_tensor *x) {
    switch (c->kind) {
    case U_SCALE: return trit_scale(g, x, c->s);
    case U_ADD_SCALAR: return trit_add_scalar(g, x, c->s);
    case U_POW: return trit_pow(g, x, c->s);
    case U_EXP: return trit_exp(g, x);
    case U_LN: return trit_ln(g, x);
    case U_TANH: return trit_tanh(g, x);
    case U_SIGMOID: return trit_sigmoid(g, x);
    case U_RELU: return trit_relu(g, x);
    case U_GELU: return trit_gelu(g, x);
    case U_SILU: return trit_silu(g, x);
    }
    return NULL;
}

static const unary_case CASES[] = {
    {"scale", U_SCALE, -1.7, -2, 2, false},
    {"add_scalar", U_ADD_SCALAR, 0.3, -2, 2, false},
    {"pow 2", U_POW, 2, -2, 2, false},
    {"pow 3", U_POW, 3, -2, 2, false},
    {"pow 0.5", U_POW, 0.5, 0.5, 2, false},
    {"pow 2.5", U_POW, 2.5, 0.5, 2, false},
    {"pow -1.5", U_POW, -1.5, 0.5, 2, false},
    {"pow 0", U_POW, 0, -2, 2, false},
    {"exp", U_EXP, 0, -2, 2, false},
    {"ln", U_LN, 0, 0.5, 3, false},
    {"tanh", U_TANH, 0, -3, 3, false},
    {"sigmoid", U_SIGMOID, 0, -6, 6, false},
    {"relu", U_RELU, 0, -1, 1, true},
    {"gelu", U_GELU, 0, -5, 5, false},
    {"silu", U_SILU, 0, -6, 6, false},
};

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) { return apply(g, ctx, p[0]); }

// p0: (5, 4, 3) permuted to a strided (3, 5, 4).
static trit_tensor *build_permuted(trit_graph *g, trit_tensor **p, void *ctx) {
    return apply(g, ctx, trit_permute(g, p[0], (int[]){2, 0, 1}));
}

// The op applied twice to the same parameter: its gradient must add up, not be overwritten.
static trit_tensor *build_twice(trit_graph *g, trit_tensor **p, void *ctx) {
    return trit_add(g, apply(g, ctx, p[0]), apply(g, ctx, p[0]));
}

// p0: (4, 9) sliced to columns 2..8: rows 9 apart.
static trit_tensor *build_sliced(trit_graph *g, trit_tensor **p, void *ctx) {
    return apply(g, ctx, trit_slice(g, p[0], 1, 2, 8));
}

static trit_tensor *param_for(const unary_case *c, int ndim, const int64_t *shape, uint64_t seed) {
    trit_tensor *p = tg_param(ndim, shape, c->lo, c->hi, seed);
    if (c->away_from_zero) {
        double *d = p->data;
        for (int64_t i = 0; i < trit_tensor_numel(p); i++) d[i] = d[i] < 0 ? d[i] - 0.1 : d[i] + 0.1;
    }
    return p;
}

static void test_gradients(void **state) {
    (void)state;
    const struct {
        const char *what;
        tg_build_fn build;
        int ndim;
        int64_t shape[3];
    } layouts[] = {
        {"contiguous", build_plain, 3, {3, 4, 5}},
        {"permuted", build_permuted, 3, {5, 4, 3}},
        {"sliced", build_sliced, 2, {4, 9}},
        {"0-d", build_plain, 0, {0}},
        {"large", build_plain, 2, {128, 300}},
        {"used twice", build_twice, 2, {3, 4}},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        for (size_t l = 0; l < sizeof layouts / sizeof layouts[0]; l++) {
            trit_tensor *p = param_for(&CASES[i], layouts[l].ndim, layouts[l].shape, 10 * i + l);
            char what[96];
            snprintf(what, sizeof what, "%s, %s", CASES[i].name, layouts[l].what);
            tg_assert_gradcheck_sampled(what, layouts[l].build, (void *)&CASES[i], 1, &p);
            tg_assert_f32_close(what, layouts[l].build, (void *)&CASES[i], 1, &p, 1e-5);
            tg_free_params(1, &p);
        }
    }
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *f = tf_open("math.bin");
    const char *const x[1] = {"x"};
    const struct {
        const char *fcase;
        unary_case c;
    } cases[] = {
        {"scale", {"", U_SCALE, 1.7, 0, 0, false}},
        {"add_scalar", {"", U_ADD_SCALAR, -0.3, 0, 0, false}},
        {"pow3", {"", U_POW, 3, 0, 0, false}},
        {"pow2_5", {"", U_POW, 2.5, 0, 0, false}},
        {"pow_m1_5", {"", U_POW, -1.5, 0, 0, false}},
        {"exp", {"", U_EXP, 0, 0, 0, false}},
        {"ln", {"", U_LN, 0, 0, 0, false}},
        {"tanh", {"", U_TANH, 0, 0, 0, false}},
        {"sigmoid", {"", U_SIGMOID, 0, 0, 0, false}},
        {"relu", {"", U_RELU, 0, 0, 0, false}},
        {"gelu", {"", U_GELU, 0, 0, 0, false}},
        {"silu", {"", U_SILU, 0, 0, 0, false}},
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        worst = fmax(worst, tf_check_case(f, cases[i].fcase, build_plain, (void *)&cases[i].c, 1, x, 1e-10));
    print_message("unary ops vs PyTorch (f64): max relative error %.3g\n", worst);
    tf_close(f);
}

// Values and slopes of op at the n points xs, from one graph of `dt`: loss = sum(op(x)).
static void eval_op(trit_dtype dt, const unary_case *c, int n, const double *xs, double *y, double *dy) {
    trit_tensor *x = trit_tensor_new(dt, 1, (int64_t[]){n});
    x->flags |= TRIT_FLAG_PARAM;
    for (int i = 0; i < n; i++) trit_tensor_set_flat(x, i, xs[i]);
    trit_graph *g = trit_graph_new(dt);
    trit_tensor *out = apply(g, c, x);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, trit_sum(g, out, 0, NULL, false)), TRIT_OK);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    for (int i = 0; i < n; i++) {
        y[i] = trit_tensor_get_flat(out, i);
        dy[i] = trit_tensor_get_flat(x->grad, i);
    }
    trit_graph_free(g);
    trit_tensor_free(x);
}

static void test_known_values(void **state) {
    (void)state;
    const double xs[3] = {-1, 0, 2};
    const struct {
        unary_case c;
        double y[3], dy[3];
    } k[] = {
        {{"", U_SCALE, 3, 0, 0, false}, {-3, 0, 6}, {3, 3, 3}},
        {{"", U_ADD_SCALAR, 0.5, 0, 0, false}, {-0.5, 0.5, 2.5}, {1, 1, 1}},
        {{"", U_POW, 2, 0, 0, false}, {1, 0, 4}, {-2, 0, 4}},
        {{"", U_POW, 0, 0, 0, false}, {1, 1, 1}, {0, 0, 0}},
        {{"", U_EXP, 0, 0, 0, false}, {exp(-1), 1, exp(2)}, {exp(-1), 1, exp(2)}},
        {{"", U_TANH, 0, 0, 0, false}, {tanh(-1), 0, tanh(2)}, {1 - tanh(1) * tanh(1), 1, 1 - tanh(2) * tanh(2)}},
        {{"", U_SIGMOID, 0, 0, 0, false}, {1 / (1 + exp(1)), 0.5, 1 / (1 + exp(-2))},
         {exp(-1) / ((1 + exp(-1)) * (1 + exp(-1))), 0.25, exp(-2) / ((1 + exp(-2)) * (1 + exp(-2)))}},
        {{"", U_RELU, 0, 0, 0, false}, {0, 0, 2}, {0, 0, 1}},
        {{"", U_SILU, 0, 0, 0, false}, {-1 / (1 + exp(1)), 0, 2 / (1 + exp(-2))},
         {1 / (1 + exp(1)) * (1 - 1 / (1 + exp(-1))), 0.5, 1 / (1 + exp(-2)) * (1 + 2 / (1 + exp(2)))}},
    };
    for (int dt = 0; dt < 2; dt++) {
        for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
            double y[3], dy[3];
            eval_op(dt ? TRIT_F64 : TRIT_F32, &k[i].c, 3, xs, y, dy);
            const double tol = dt ? 1e-14 : 1e-6;
            for (int j = 0; j < 3; j++) {
                assert_float_equal(y[j], k[i].y[j], tol * fmax(1, fabs(k[i].y[j])));
                assert_float_equal(dy[j], k[i].dy[j], tol * fmax(1, fabs(k[i].dy[j])));
            }
        }
    }
    // ln at 1 and e; pow's documented domain: a negative base with a fractional power is NaN.
    double y[3], dy[3];
    const unary_case ln = {"", U_LN, 0, 0, 0, false}, pw = {"", U_POW, 0.5, 0, 0, false};
    const double e = exp(1.0);
    eval_op(TRIT_F64, &ln, 2, (const double[]){1, e}, y, dy);
    assert_float_equal(y[0], 0, 1e-15);
    assert_float_equal(y[1], 1, 1e-15);
    assert_float_equal(dy[1], 1 / e, 1e-15);
    trit_tensor *x = trit_tensor_new(TRIT_F64, 1, (int64_t[]){2});
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *out = apply(g, &pw, x);
    trit_graph_keep(g, out);
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
    trit_tensor_set_flat(x, 0, -4);
    trit_tensor_set_flat(x, 1, 4);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_true(isnan(trit_tensor_get_flat(out, 0)));
    assert_float_equal(trit_tensor_get_flat(out, 1), 2, 1e-15);
    trit_graph_free(g);
    trit_tensor_free(x);
}

// ---- GELU: the slope is the exact derivative of 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))) --

// The formula as written, for central differences near the origin (where 1 + tanh does not cancel).
static long double gelu_ref(long double x) {
    const long double c = sqrtl(2.0L / acosl(-1.0L)), u = c * (x + 0.044715L * x * x * x);
    return 0.5L * x * (1 + tanhl(u));
}

// 1 + tanh u = 2 / (1 + e^{-2u}), without cancellation for negative u.
static long double one_plus_tanh(long double u) {
    return u < 0 ? 2 * expl(2 * u) / (1 + expl(2 * u)) : 2 / (1 + expl(-2 * u));
}

// The same value, accurate where 1 + tanh u is tiny (large negative x).
static long double gelu_value_ref(long double x) {
    const long double c = sqrtl(2.0L / acosl(-1.0L)), u = c * (x + 0.044715L * x * x * x);
    return 0.5L * x * one_plus_tanh(u);
}

// The analytic derivative of that formula, written independently of the library's form:
// 0.5 (1 + tanh u) + 0.5 x sech^2(u) u'(x), with sech u = 2 / (e^u + e^{-u}); sech^2 is 0 once
// cosh overflows long double.
static long double gelu_slope_ref(long double x) {
    const long double c = sqrtl(2.0L / acosl(-1.0L)), u = c * (x + 0.044715L * x * x * x);
    const long double ch = fabsl(u) > 11000 ? INFINITY : (expl(u) + expl(-u)) / 2;
    const long double sech2 = isinf(ch) ? 0 : 1 / (ch * ch);
    const long double tail = sech2 == 0 ? 0 : 0.5L * x * sech2 * c * (1 + 3 * 0.044715L * x * x);
    return 0.5L * one_plus_tanh(u) + tail;
}

static void test_gelu_slope(void **state) {
    (void)state;
    enum { N = 2400 + 14 };
    static double xs[N], y[N], dy[N];
    for (int i = 0; i < 2400; i++) xs[i] = -12 + 0.01 * i + 0.00123;  // across the curve, off the grid
    const double big[14] = {-20, 20, -100, 100, -1e3, 1e3, -1e10, 1e10, -1e30, 1e30, -1e150, 1e150, -1e300, 1e300};
    memcpy(xs + 2400, big, sizeof big);
    const unary_case gelu = {"gelu", U_GELU, 0, 0, 0, false};
    eval_op(TRIT_F64, &gelu, N, xs, y, dy);
    double worst_slope = 0, worst_value = 0, worst_fd = 0;
    for (int i = 0; i < N; i++) {
        assert_true(isfinite(y[i]) && isfinite(dy[i]));
        const long double x = xs[i], want = gelu_slope_ref(x), v = gelu_value_ref(x);
        const double es = (double)(fabsl((long double)dy[i] - want) / (fabsl(want) + 1e-300L));
        const double ev = (double)(fabsl((long double)y[i] - v) / (fabsl(v) + 1e-300L));
        if (fabsl(want) > 1e-290L) worst_slope = fmax(worst_slope, es);
        if (fabsl(v) > 1e-290L) worst_value = fmax(worst_value, ev);
        if (fabsl(want) <= 1e-290L) assert_true(fabs(dy[i]) <= 1e-280);
        if (fabs(xs[i]) < 12) {  // central differences of the formula itself, in long double
            const long double h = 1e-6L, fd = (gelu_ref(x + h) - gelu_ref(x - h)) / (2 * h);
            worst_fd = fmax(worst_fd, (double)(fabsl(fd - want) / fmaxl(fabsl(want), 1e-3L)));
        }
    }
    print_message("gelu f64: slope rel err %.3g, value rel err %.3g, reference slope vs differences %.3g\n",
                  worst_slope, worst_value, worst_fd);
    assert_true(worst_fd < 1e-8);       // the reference slope is the formula's derivative
    assert_true(worst_slope < 1e-12);   // and the library's slope matches it everywhere
    assert_true(worst_value < 1e-13);
    for (int i = 2400; i < N; i++) assert_float_equal(dy[i], xs[i] > 0 ? 1 : 0, 0);  // saturated

    // f32: close to the reference in the curved part, finite and saturated at the extremes.
    const double f32x[10] = {-3.5, -0.7, 0.01, 1.3, 4.2, -1e20, 1e20, -3e38, 3e38, -9.5};
    double y32[10], dy32[10];
    eval_op(TRIT_F32, &gelu, 10, f32x, y32, dy32);
    for (int i = 0; i < 10; i++) {
        assert_true(isfinite(y32[i]) && isfinite(dy32[i]));
        const long double want = gelu_slope_ref(f32x[i]);
        assert_true(fabsl((long double)dy32[i] - want) <= 2e-6L * fmaxl(1, fabsl(want)));
        const long double v = gelu_value_ref(f32x[i]);
        assert_true(fabsl((long double)y32[i] - v) <= 2e-6L * fmaxl(1, fabsl(v)));
    }
    assert_float_equal(y32[6], 1e20, 1e14);
    assert_float_equal(dy32[6], 1, 0);
    assert_float_equal(dy32[5], 0, 0);
}

// Far outside the usual range every op stays finite where the math is.
static void test_extremes(void **state) {
    (void)state;
    const double xs[4] = {-1000, -80, 80, 1000};
    double y[4], dy[4];
    const unary_case sig = {"", U_SIGMOID, 0, 0, 0, false}, silu = {"", U_SILU, 0, 0, 0, false},
                     th = {"", U_TANH, 0, 0, 0, false};
    for (int dt = 0; dt < 2; dt++) {
        const trit_dtype d = dt ? TRIT_F64 : TRIT_F32;
        eval_op(d, &sig, 4, xs, y, dy);
        for (int i = 0; i < 4; i++) assert_true(isfinite(y[i]) && isfinite(dy[i]) && y[i] >= 0 && y[i] <= 1);
        assert_float_equal(y[3], 1, 0);
        assert_float_equal(y[0], 0, 0);
        eval_op(d, &silu, 4, xs, y, dy);
        for (int i = 0; i < 4; i++) assert_true(isfinite(y[i]) && isfinite(dy[i]));
        assert_float_equal(y[3], 1000, 0);
        assert_float_equal(dy[3], 1, 0);
        assert_float_equal(dy[0], 0, 0);
        eval_op(d, &th, 4, xs, y, dy);
        for (int i = 0; i < 4; i++) assert_true(isfinite(y[i]) && isfinite(dy[i]));
    }
}

static void test_bad_input(void **state) {
    (void)state;
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *i = trit_graph_input(g, TRIT_I32, 1, (int64_t[]){4}, "idx");
    assert_null(trit_exp(g, i));
    assert_non_null(strstr(trit_last_error(), "exp: expected a f32 input"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_DTYPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 1, (int64_t[]){4}, "x");
    assert_null(trit_pow(g, x, NAN));
    assert_non_null(strstr(trit_last_error(), "finite"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    assert_null(trit_gelu(g, NULL));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values), cmocka_unit_test(test_gradients), cmocka_unit_test(test_pytorch_parity),
        cmocka_unit_test(test_gelu_slope),   cmocka_unit_test(test_extremes),  cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
