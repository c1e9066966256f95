// A frozen quantized token table: the embedding lookup gives exactly the decoded table's rows
// (f32 and f64 builds), and the tied head (linear over the same table, then cross-entropy)
// trains an adapter through it: fused by the compiler into classifier_ce (the logits never
// stored whole), chunked by hand, or left unfused, it matches the same graph over the decoded
// f32 table. A trainable quantized table is refused by both ops.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "qweight_check.h"
#include "ops/fused.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const qw_format FORMATS[] = {
    {TRIT_QINT8, TRIT_QGROUP_CHANNEL, false, 0}, {TRIT_QINT4, 32, true, 16}, {TRIT_QINT2, 64, false, 0},
    {TRIT_NF4, 64, false, 256},                  {TRIT_F8_E4M3, 32, false, 0}, {TRIT_F8_E5M2, TRIT_QGROUP_TENSOR, false, 0},
    {TRIT_TERNARY, TRIT_QGROUP_TENSOR, false, 0}, {TRIT_TERNARY_B3, 64, false, 0}, {TRIT_Q8_0, 0, false, 0},
    {TRIT_Q4_0, 0, false, 0},
};

// Indices (2, 9) into V rows, with repeats.
static trit_tensor *indices(int64_t V) {
    int64_t vals[18];
    for (int i = 0; i < 18; i++) vals[i] = (i * 7 + 3) % V;
    vals[5] = vals[2];
    return tg_indices(TRIT_I64, 2, (int64_t[]){2, 9}, vals);
}

// Row i of the lookup is row idx[i] of the decoded table, bit for bit (the op decodes with the
// values trit_dequantize gives); in f64 the same values widened.
static void test_lookup(void **state) {
    (void)state;
    const int64_t V = 40, C = 128;
    trit_tensor *idx = indices(V);
    for (size_t f = 0; f < sizeof FORMATS / sizeof FORMATS[0]; f++) {
        char name[96];
        qw_format_name(&FORMATS[f], name, sizeof name);
        trit_tensor *wd, *wq = qw_make(&FORMATS[f], V, C, 50 + f, &wd);
        for (int d = 0; d < 2; d++) {
            trit_graph *g = trit_graph_new(d ? TRIT_F64 : TRIT_F32);
            trit_tensor *out = trit_embedding(g, wq, idx);
            if (!out || trit_graph_compile(g, NULL) != TRIT_OK || trit_graph_forward(g) != TRIT_OK)
                fail_msg("%s: %s", name, trit_last_error());
            assert_int_equal(out->dtype, d ? TRIT_F64 : TRIT_F32);
            for (int64_t i = 0; i < 18; i++) {
                const int64_t row = trit_tensor_get_flat(idx, i);
                for (int64_t k = 0; k < C; k++) {
                    const double got = trit_tensor_get_flat(out, i * C + k), want = trit_tensor_get_flat(wd, row * C + k);
                    if (got != want)
                        fail_msg("%s (%s): row %lld element %lld is %.9g, the decoded table holds %.9g", name,
                                 d ? "f64" : "f32", (long long)i, (long long)k, got, want);
                }
            }
            trit_graph_free(g);
        }
        trit_tensor_free(wq);
        trit_tensor_free(wd);
    }
    trit_tensor_free(idx);
}

// ---- the tied head ---------------------------------------------------------------------------

enum { HEAD_UNFUSED, HEAD_FUSED, HEAD_CHUNKED };

typedef struct head_run {
    double loss;
    double *grad;  // the adapter's gradient (C, C)
    int nodes;
} head_run;

// loss = cross_entropy(linear(linear(embedding(w, idx), A), w), targets): the adapter A is the
// only trainable parameter. pol NULL: fp32.
static void run_head(const char *what, const trit_compute_policy *pol, trit_tensor *w, const trit_tensor *A0,
                     trit_tensor *idx, trit_tensor *targets, int mode, head_run *out) {
    trit_graph *g = pol ? trit_graph_new_policy(pol) : trit_graph_new(TRIT_F32);
    trit_tensor *A = trit_tensor_new_param(TRIT_F32, 2, A0->shape, "A");
    assert_int_equal(trit_tensor_copy(A, A0), TRIT_OK);
    trit_graph_set_fusion(g, mode == HEAD_FUSED);
    trit_tensor *h = trit_linear(g, trit_embedding(g, w, idx), A, NULL), *loss;
    if (mode == HEAD_CHUNKED) loss = trit_classifier_ce_chunked(g, h, w, NULL, targets, -1, TRIT_REDUCE_MEAN, 32);
    else loss = trit_cross_entropy(g, trit_linear(g, h, w, NULL), targets, -1, TRIT_REDUCE_MEAN);
    if (!loss || trit_graph_compile(g, loss) != TRIT_OK) fail_msg("%s: build/compile: %s", what, trit_last_error());
    trit_graph_zero_grad(g);
    if (trit_graph_forward(g) != TRIT_OK || trit_graph_backward(g) != TRIT_OK) fail_msg("%s: run: %s", what, trit_last_error());
    out->loss = trit_tensor_get_flat(loss, 0);
    const int64_t n = trit_tensor_numel(A);
    out->grad = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) out->grad[i] = trit_tensor_get_flat(A->grad, i);
    trit_graph_memory mem;
    assert_int_equal(trit_graph_memory_report(g, &mem), TRIT_OK);
    out->nodes = mem.num_nodes;
    trit_graph_free(g);
    trit_tensor_free(A);
}

// The heads differ from the decoded-table graph only in the order fp32 sums their logits and the
// gradient's products (under bf16 too: both graphs multiply the same bf16 values, whose products
// are exact in fp32); agreement to 1e-5 of the largest magnitude (loss, gradient) is asked.
static void check_heads(const char *label, const trit_compute_policy *pol, trit_tensor *wq, trit_tensor *wd,
                        const trit_tensor *A, trit_tensor *idx, trit_tensor *tg) {
    const int64_t n = trit_tensor_numel(A);
    head_run ref, runs[3];
    run_head("decoded table", pol, wd, A, idx, tg, HEAD_UNFUSED, &ref);
    const char *names[3] = {"quantized, unfused", "quantized, fused", "quantized, chunks of 32 rows"};
    double gmax = 0;
    for (int64_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(ref.grad[i]));
    assert_true(gmax > 0);
    for (int m = 0; m < 3; m++) {
        run_head(names[m], pol, wq, A, idx, tg, m, &runs[m]);
        double worst = 0;
        for (int64_t i = 0; i < n; i++) worst = fmax(worst, fabs(runs[m].grad[i] - ref.grad[i]));
        printf("  %s %-30s loss %.9g (decoded %.9g), max |grad diff| %.3g of %.3g\n", label, names[m], runs[m].loss,
               ref.loss, worst, gmax);
        assert_true(fabs(runs[m].loss - ref.loss) <= 1e-5 * fabs(ref.loss));
        assert_true(worst <= 1e-5 * gmax);
    }
    // The compiler replaced linear + cross_entropy by one classifier_ce node.
    assert_int_equal(runs[HEAD_FUSED].nodes, runs[HEAD_UNFUSED].nodes - 1);
    for (int m = 0; m < 3; m++) free(runs[m].grad);
    free(ref.grad);
}

static void test_tied_head(void **state) {
    (void)state;
    const int64_t V = 300, C = 64, rows = 80;
    const qw_format f = {TRIT_NF4, 64, false, 256};
    trit_tensor *wd, *wq = qw_make(&f, V, C, 61, &wd);
    trit_tensor *A = qw_tensor(2, (int64_t[]){C, C}, -0.3, 0.3, 62, false);
    int64_t iv[80], tv[80];
    for (int i = 0; i < rows; i++) iv[i] = (i * 37 + 11) % V, tv[i] = (i * 53 + 5) % V;
    trit_tensor *idx = tg_indices(TRIT_I64, 2, (int64_t[]){2, 40}, iv), *tg = tg_indices(TRIT_I64, 2, (int64_t[]){2, 40}, tv);
    const trit_compute_policy bf16 = {TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM};
    check_heads("fp32", NULL, wq, wd, A, idx, tg);
    check_heads("bf16", &bf16, wq, wd, A, idx, tg);
    trit_tensor_free(wq);
    trit_tensor_free(wd);
    trit_tensor_free(A);
    trit_tensor_free(idx);
    trit_tensor_free(tg);
}

static void test_refuses_trainable(void **state) {
    (void)state;
    const qw_format f = {TRIT_NF4, 64, false, 0};
    trit_tensor *wd, *wq = qw_make(&f, 16, 64, 71, &wd);
    wq->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
    trit_tensor *idx = indices(16), *x = qw_tensor(3, (int64_t[]){2, 9, 64}, -1, 1, 72, true);
    trit_graph *g = trit_graph_new(TRIT_F32);
    tg_expect_graph_error(g, trit_embedding(g, wq, idx), TRIT_ERR_DTYPE, "embedding: weight 'wq'");
    g = trit_graph_new(TRIT_F32);
    tg_expect_graph_error(g, trit_classifier_ce(g, x, wq, NULL, idx, -1, TRIT_REDUCE_MEAN), TRIT_ERR_DTYPE,
                          "quantized weights get no gradient: freeze it");
    trit_tensor_free(wq);
    trit_tensor_free(wd);
    trit_tensor_free(idx);
    trit_tensor_free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_tied_head),
        cmocka_unit_test(test_refuses_trainable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
