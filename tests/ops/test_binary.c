// add, sub, mul, div: known answers, gradient checks over broadcasting (either side, both
// sides, 0-d), strided or stride-0 views and computed operands (stored gradients), f32 vs f64,
// PyTorch parity, and bad input.
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

typedef trit_tensor *(*bin_fn)(trit_graph *, trit_tensor *, trit_tensor *);

static const bin_fn OPS[4] = {trit_add, trit_sub, trit_mul, trit_div};
static const char *const NAMES[4] = {"add", "sub", "mul", "div"};

static trit_tensor *build_plain(trit_graph *g, trit_tensor **p, void *ctx) {
    return (*(const bin_fn *)ctx)(g, p[0], p[1]);
}

// p0: (4, 3) transposed to a strided (3, 4); p1: (4) broadcast along rows.
static trit_tensor *build_transposed(trit_graph *g, trit_tensor **p, void *ctx) {
    return (*(const bin_fn *)ctx)(g, trit_transpose(g, p[0], 0, 1), p[1]);
}

// p0: (1, 4) broadcast; p1: (3, 6) sliced to columns 1..4, a strided (3, 4) on the right.
static trit_tensor *build_sliced(trit_graph *g, trit_tensor **p, void *ctx) {
    return (*(const bin_fn *)ctx)(g, p[0], trit_slice(g, p[1], 1, 1, 5));
}

// p0: (3, 1) expanded to a stride-0 (3, 4) view; p1: (3, 4).
static trit_tensor *build_expanded(trit_graph *g, trit_tensor **p, void *ctx) {
    return (*(const bin_fn *)ctx)(g, trit_expand(g, p[0], 2, (int64_t[]){3, 4}), p[1]);
}

// The same tensor on both sides: both gradients land in one buffer.
static trit_tensor *build_self(trit_graph *g, trit_tensor **p, void *ctx) {
    return (*(const bin_fn *)ctx)(g, p[0], p[0]);
}

// Both operands computed (gelu of the parameters): their gradients live in the arena, where the
// op stores them (summed over broadcast dims) instead of adding to zeros.
static trit_tensor *build_computed(trit_graph *g, trit_tensor **p, void *ctx) {
    return (*(const bin_fn *)ctx)(g, trit_gelu(g, p[0]), trit_gelu(g, p[1]));
}

// A residual: u = gelu(p0) is read by a GELU and then by the op, whose backward is the first to
// write u's gradient; add and sub (bwd_in_place) then give u's gradient their output's buffer
// (tests/graph/test_fuse.c checks that they do), and the GELU's backward adds into it
// afterwards. The op's output goes through one more GELU: a kept output (the check's) keeps its
// own gradient. The other operand, exp(...), stays in [e^-2, e^2], a smooth divisor.
static trit_tensor *build_residual(trit_graph *g, trit_tensor **p, void *ctx) {
    trit_tensor *u = trit_gelu(g, p[0]);
    return trit_gelu(g, (*(const bin_fn *)ctx)(g, u, trit_exp(g, trit_mul(g, trit_gelu(g, u), p[1]))));
}

typedef struct shape_case {
    const char *what;
    tg_build_fn build;
    int na, nb;
    int64_t sa[4], sb[4];
} shape_case;

static const shape_case CASES[] = {
    {"same shape", build_plain, 2, 2, {3, 4}, {3, 4}},
    {"both broadcast", build_plain, 3, 2, {2, 1, 4}, {3, 1}},
    {"b broadcast", build_plain, 3, 1, {2, 3, 4}, {4}},
    {"a broadcast", build_plain, 1, 3, {4}, {2, 3, 4}},
    {"0-d b", build_plain, 2, 0, {2, 3}, {0}},
    {"0-d a", build_plain, 0, 2, {0}, {2, 3}},
    {"transposed a", build_transposed, 2, 1, {4, 3}, {4}},
    {"sliced b", build_sliced, 2, 2, {1, 4}, {3, 6}},
    {"expanded a", build_expanded, 2, 2, {3, 1}, {3, 4}},
    {"large, rows broadcast", build_plain, 2, 1, {64, 1024}, {1024}},
    {"large, columns broadcast", build_plain, 2, 2, {64, 1}, {64, 1024}},
    {"computed, same shape", build_computed, 2, 2, {3, 4}, {3, 4}},
    {"computed, both broadcast", build_computed, 3, 2, {2, 1, 4}, {3, 1}},
    {"residual, same shape", build_residual, 2, 2, {3, 4}, {3, 4}},
    {"residual, b broadcast", build_residual, 2, 1, {3, 4}, {4}},
};

static void check_op(int op) {
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const shape_case *c = &CASES[i];
        // Divisors stay in [0.5, 2] so the quotient and its slope are smooth.
        trit_tensor *p[2] = {tg_param(c->na, c->sa, -1, 1, 100 + i), tg_param(c->nb, c->sb, op == 3 ? 0.5 : -1, 2, 200 + i)};
        char what[96];
        snprintf(what, sizeof what, "%s, %s", NAMES[op], c->what);
        tg_assert_gradcheck_sampled(what, c->build, (void *)&OPS[op], 2, p);
        tg_assert_f32_close(what, c->build, (void *)&OPS[op], 2, p, 1e-5);
        tg_free_params(2, p);
    }
    trit_tensor *x = tg_param(2, (int64_t[]){3, 4}, 0.5, 2, 300);
    char what[96];
    snprintf(what, sizeof what, "%s, x with itself", NAMES[op]);
    tg_assert_gradcheck_sampled(what, build_self, (void *)&OPS[op], 1, &x);
    tg_free_params(1, &x);
}

static void test_add_grad(void **state) { (void)state; check_op(0); }
static void test_sub_grad(void **state) { (void)state; check_op(1); }
static void test_mul_grad(void **state) { (void)state; check_op(2); }
static void test_div_grad(void **state) { (void)state; check_op(3); }

// a (2, 1) = [[1], [2]] against b (3) = [10, 20, 30]: every op's (2, 3) table, in f32 and f64.
static void test_known_values(void **state) {
    (void)state;
    const double want[4][6] = {
        {11, 21, 31, 12, 22, 32},
        {-9, -19, -29, -8, -18, -28},
        {10, 20, 30, 20, 40, 60},
        {0.1, 0.05, 1.0 / 30, 0.2, 0.1, 2.0 / 30},
    };
    for (int dt = 0; dt < 2; dt++) {
        const trit_dtype d = dt ? TRIT_F64 : TRIT_F32;
        for (int op = 0; op < 4; op++) {
            trit_graph *g = trit_graph_new(d);
            trit_tensor *a = trit_graph_input(g, d, 2, (int64_t[]){2, 1}, "a");
            trit_tensor *b = trit_graph_input(g, d, 1, (int64_t[]){3}, "b");
            trit_tensor *y = OPS[op](g, a, b);
            assert_non_null(y);
            assert_int_equal(y->ndim, 2);
            assert_int_equal(y->shape[0], 2);
            assert_int_equal(y->shape[1], 3);
            trit_graph_keep(g, y);
            assert_int_equal(trit_graph_compile(g, NULL), TRIT_OK);
            for (int i = 0; i < 2; i++) trit_tensor_set_flat(a, i, i + 1);
            for (int i = 0; i < 3; i++) trit_tensor_set_flat(b, i, 10 * (i + 1));
            assert_int_equal(trit_graph_forward(g), TRIT_OK);
            for (int i = 0; i < 6; i++) assert_float_equal(trit_tensor_get_flat(y, i), want[op][i], 1e-6 * fabs(want[op][i]));
            trit_graph_free(g);
        }
    }
}

static void test_pytorch_parity(void **state) {
    (void)state;
    tf_file *f = tf_open("math.bin");
    const char *const ab[2] = {"a", "b"};
    const struct {
        const char *fcase;
        int op;
    } cases[] = {{"add_bcast", 0}, {"sub_bcast", 1}, {"mul_bcast", 2}, {"div_bcast", 3}, {"mul_scalar", 2}, {"div_same", 3}};
    double worst = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        worst = fmax(worst, tf_check_case(f, cases[i].fcase, build_plain, (void *)&OPS[cases[i].op], 2, ab, 1e-10));
    print_message("binary ops vs PyTorch (f64): max relative error %.3g\n", worst);
    tf_close(f);
}

static void test_bad_input(void **state) {
    (void)state;
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *a = trit_graph_input(g, TRIT_F64, 2, (int64_t[]){2, 3}, "a");
    trit_tensor *b = trit_graph_input(g, TRIT_F64, 1, (int64_t[]){4}, "b");
    assert_null(trit_add(g, a, b));
    assert_non_null(strstr(trit_last_error(), "(2, 3) and (4,)"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_SHAPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F64);
    a = trit_graph_input(g, TRIT_F64, 2, (int64_t[]){2, 3}, "a");
    trit_tensor *c = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){2, 3}, "c");
    assert_null(trit_mul(g, a, c));
    assert_non_null(strstr(trit_last_error(), "expected f64"));
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_DTYPE);
    trit_graph_free(g);

    g = trit_graph_new(TRIT_F32);
    a = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){2, 3}, "a");
    assert_null(trit_div(g, NULL, a));
    assert_non_null(strstr(trit_last_error(), "NULL"));
    assert_null(trit_sub(g, a, a));  // the graph keeps its first error
    assert_int_equal(trit_graph_compile(g, NULL), TRIT_ERR_INVALID);
    trit_graph_free(g);
    assert_null(trit_add(NULL, NULL, NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_values), cmocka_unit_test(test_add_grad), cmocka_unit_test(test_sub_grad),
        cmocka_unit_test(test_mul_grad),     cmocka_unit_test(test_div_grad), cmocka_unit_test(test_pytorch_parity),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
