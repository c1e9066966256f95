// Compile under allocation failure: the n-th allocation the library makes fails, for every n
// until compile needs no more, and each time compile reports TRIT_ERR_NOMEM and leaves nothing
// behind, so the same graph compiled again (allocations restored) runs and gives the results of
// a graph that never failed. Allocations are intercepted with the linker's --wrap (the library is
// linked statically); the ASan build's leak checker sees anything a failed compile drops.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <stdlib.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);

static long countdown = -1;  // allocations left before one fails; -1: none fails

static bool fail_now(void) {
    if (countdown < 0) return false;
    return countdown-- == 0;
}

void *__wrap_malloc(size_t n) { return fail_now() ? NULL : __real_malloc(n); }
void *__wrap_calloc(size_t n, size_t size) { return fail_now() ? NULL : __real_calloc(n, size); }
void *__wrap_realloc(void *p, size_t n) { return fail_now() ? NULL : __real_realloc(p, n); }
void *__wrap_aligned_alloc(size_t align, size_t n) { return fail_now() ? NULL : __real_aligned_alloc(align, n); }

enum { B = 6, C = 16, F = 48 };

typedef struct net {
    trit_tensor *w1, *b1, *w2, *ln_w, *ln_b;
    trit_graph *g;
    trit_tensor *x, *loss;
} net;

static trit_tensor *param(int ndim, int64_t d0, int64_t d1, uint64_t stream) {
    const int64_t s[2] = {d0, d1};
    trit_tensor *t = trit_tensor_new_param(TRIT_F32, ndim, s, "p");
    assert_non_null(t);
    assert_int_equal(trit_tensor_fill_normal(t, 0.0, 0.3, 1, stream), TRIT_OK);
    return t;
}

// x -> layernorm -> linear -> gelu -> dropout -> linear -> + x -> layernorm -> mean: fusion,
// saved memory, a recomputed stretch, an input gradient and a view of a parameter all take part.
static void build(net *n) {
    n->g = trit_graph_new(TRIT_F32);
    const int64_t s[2] = {B, C};
    n->x = trit_graph_input(n->g, TRIT_F32, 2, s, "x");
    assert_int_equal(trit_graph_input_requires_grad(n->g, n->x), TRIT_OK);
    const int mark = trit_graph_mark(n->g);
    trit_tensor *h = trit_layernorm(n->g, n->x, n->ln_w, n->ln_b, 1e-5);
    h = trit_gelu(n->g, trit_linear(n->g, h, n->w1, n->b1));
    h = trit_dropout(n->g, h, 0.1);
    h = trit_linear(n->g, h, trit_transpose(n->g, n->w2, 0, 1), NULL);
    h = trit_add(n->g, n->x, h);
    assert_int_equal(trit_graph_recompute_since(n->g, mark, h), TRIT_OK);
    h = trit_layernorm(n->g, h, n->ln_w, n->ln_b, 1e-5);
    n->loss = trit_mean(n->g, h, 0, NULL, false);
    assert_non_null(n->loss);
}

static float run(net *n) {
    for (int64_t i = 0; i < B * C; i++) ((float *)n->x->data)[i] = (float)((i * 37) % 11) / 5.0f - 1.0f;
    trit_tensor *ps[5] = {n->w1, n->b1, n->w2, n->ln_w, n->ln_b};
    for (int i = 0; i < 5; i++)
        if (ps[i]->grad) memset(ps[i]->grad->data, 0, trit_tensor_nbytes(ps[i]->grad));
    trit_graph_set_rng(n->g, 3, 1);
    assert_int_equal(trit_graph_forward(n->g), TRIT_OK);
    assert_int_equal(trit_graph_backward(n->g), TRIT_OK);
    return *(const float *)n->loss->data + ((const float *)n->w1->grad->data)[5] +
           ((const float *)trit_graph_grad(n->g, n->x)->data)[7];
}

static void test_every_failure_point(void **state) {
    (void)state;
    net n = {.w1 = param(2, F, C, 1), .b1 = param(1, F, 0, 2), .w2 = param(2, F, C, 3), .ln_w = param(1, C, 0, 4),
             .ln_b = param(1, C, 0, 5)};
    build(&n);
    assert_int_equal(trit_graph_compile(n.g, n.loss), TRIT_OK);
    const float want = run(&n);
    trit_graph_free(n.g);
    long points = 0;
    for (long k = 0;; k++) {
        build(&n);
        countdown = k;
        trit_status s = trit_graph_compile(n.g, n.loss);
        const bool failed = countdown < 0;  // the k-th allocation was reached and failed
        countdown = -1;
        if (!failed) {
            assert_int_equal(s, TRIT_OK);
            assert_true(run(&n) == want);
            trit_graph_free(n.g);
            break;
        }
        assert_int_equal(s, TRIT_ERR_NOMEM);
        assert_int_equal(trit_graph_compile(n.g, n.loss), TRIT_OK);  // the retry starts clean
        assert_true(run(&n) == want);
        trit_graph_free(n.g);
        points++;
    }
    print_message("compile failed cleanly at each of its %ld allocations\n", points);
    assert_true(points > 20);
    trit_tensor *ps[5] = {n.w1, n.b1, n.w2, n.ln_w, n.ln_b};
    for (int i = 0; i < 5; i++) trit_tensor_free(ps[i]);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_every_failure_point)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
