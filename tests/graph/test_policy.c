// Compute policies: which combinations a graph accepts, that an all-f32 policy is the f32 graph
// bit for bit, and that bf16/f16 activations and lower matmul precisions stay close to f32
// (stated tolerances) while the matmul inputs are really stored in 16 bits.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "graph/graph_internal.h"
#include "gradcheck.h"
#include "trit/trit.h"

#include <math.h>
#include <string.h>

enum { B = 24, I = 40, H = 72, O = 9, NP = 4 };

typedef struct run {
    double loss;
    float grads[NP][H * I];
    int casts;
    size_t arena;
} run;

// loss = mse(linear(gelu(linear(x, w1, b1)), w2, b2), t) with fixed data; parameters stored in
// pdt (f32, or bf16 for training without master weights), or f32 holding bf16-rounded values.
static void run_mlp_params(const trit_compute_policy *pol, trit_dtype pdt, bool rounded, run *r) {
    trit_tensor *p[NP] = {
        trit_tensor_new_param(pdt, 2, (int64_t[]){H, I}, "w1"), trit_tensor_new_param(pdt, 1, (int64_t[]){H}, "b1"),
        trit_tensor_new_param(pdt, 2, (int64_t[]){O, H}, "w2"), trit_tensor_new_param(pdt, 1, (int64_t[]){O}, "b2")};
    for (int i = 0; i < NP; i++) {
        trit_tensor_fill_normal(p[i], 0, 0.3, 5, (uint64_t)i);
        float *d = p[i]->data;
        if (rounded)
            for (int64_t j = 0; j < trit_tensor_numel(p[i]); j++) d[j] = trit_bf16_to_f32(trit_f32_to_bf16(d[j]));
    }
    trit_graph *g = pol ? trit_graph_new_policy(pol) : trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){B, I}, "x");
    trit_tensor *t = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){B, O}, "t");
    trit_tensor *y = trit_linear(g, trit_gelu(g, trit_linear(g, x, p[0], p[1])), p[2], p[3]);
    trit_tensor *loss = trit_mse(g, y, t, TRIT_REDUCE_MEAN);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    trit_rng_fill_normal(x->data, B * I, 9, 1, 0, 0, 1);
    trit_rng_fill_normal(t->data, B * O, 9, 2, 0, 0, 1);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    r->loss = trit_tensor_get_flat(loss, 0);
    for (int i = 0; i < NP; i++) memcpy(r->grads[i], p[i]->grad->data, trit_tensor_nbytes(p[i]->grad));
    r->casts = trit_graph_count_op(g, "cast");
    trit_graph_memory m;
    trit_graph_memory_report(g, &m);
    r->arena = m.arena_bytes;
    trit_graph_free(g);
    for (int i = 0; i < NP; i++) trit_tensor_free(p[i]);
}

static void run_mlp(const trit_compute_policy *pol, run *r) { run_mlp_params(pol, TRIT_F32, false, r); }

// Largest |a - b| over the largest |b|, over every gradient.
static double grad_diff(const run *a, const run *b) {
    static const int n[NP] = {H * I, H, O * H, O};
    double worst = 0;
    for (int i = 0; i < NP; i++) {
        double d = 0, m = 0;
        for (int j = 0; j < n[i]; j++) {
            d = fmax(d, fabs((double)a->grads[i][j] - b->grads[i][j]));
            m = fmax(m, fabs((double)b->grads[i][j]));
        }
        worst = fmax(worst, d / m);
    }
    return worst;
}

static void test_policy_combinations(void **state) {
    (void)state;
    const trit_compute_policy bad[] = {
        {TRIT_F32, TRIT_I8, TRIT_MATMUL_HIGHEST}, {TRIT_BF16, TRIT_BF16, TRIT_MATMUL_HIGHEST},
        {TRIT_F64, TRIT_BF16, TRIT_MATMUL_HIGHEST}, {TRIT_F64, TRIT_F64, TRIT_MATMUL_MEDIUM},
        {TRIT_F32, TRIT_F32, (trit_matmul_precision)7}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_null(trit_graph_new_policy(&bad[i]));
        assert_non_null(strstr(trit_last_error(), "not supported"));
    }
    const trit_compute_policy ok = {TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM};
    trit_graph *g = trit_graph_new_policy(&ok);
    assert_int_equal(trit_graph_dtype(g), TRIT_F32);
    assert_int_equal(trit_graph_policy(g).activation, TRIT_BF16);
    trit_graph_free(g);
}

static void test_f32_policy_is_the_f32_graph(void **state) {
    (void)state;
    static run a, b;
    const trit_compute_policy p = {TRIT_F32, TRIT_F32, TRIT_MATMUL_HIGHEST};
    run_mlp(NULL, &a);
    run_mlp(&p, &b);
    assert_true(a.loss == b.loss);
    assert_memory_equal(a.grads, b.grads, sizeof a.grads);
    assert_int_equal(b.casts, 0);
}

// Tolerances: bf16 keeps 8 significant bits (relative step 2^-8 = 3.9e-3), f16 11 bits; the
// loss and gradients of this small MLP stay within a few steps of fp32.
static void test_low_precision_close_to_f32(void **state) {
    (void)state;
    static run ref, r;
    run_mlp(NULL, &ref);
    const struct {
        trit_compute_policy p;
        double loss_tol, grad_tol;
        int casts;
    } cases[] = {
        // 16-bit activations: x, w1 and w2 are cast (under bf16 at medium precision the GEMM
        // rounds the f32 weights while packing, so only x is); the GELU output is written in 16 bits.
        {{TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM}, 1e-2, 3e-2, 1},
        {{TRIT_F32, TRIT_F16, TRIT_MATMUL_HIGHEST}, 2e-3, 5e-3, 3},
        {{TRIT_F32, TRIT_F32, TRIT_MATMUL_MEDIUM}, 1e-2, 3e-2, 0},
        {{TRIT_F32, TRIT_F32, TRIT_MATMUL_HIGH}, 1e-4, 1e-4, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_mlp(&cases[i].p, &r);
        const double dl = fabs(r.loss - ref.loss) / ref.loss, dg = grad_diff(&r, &ref);
        printf("  activation %s, matmul %s: loss %.6f (f32 %.6f, rel %.1e), worst gradient rel %.1e, %d casts\n",
               trit_dtype_name(cases[i].p.activation), trit_matmul_precision_name(cases[i].p.matmul), r.loss, ref.loss,
               dl, dg, r.casts);
        assert_true(dl <= cases[i].loss_tol);
        assert_true(dg <= cases[i].grad_tol);
        assert_true(dl > 0 || cases[i].p.matmul == TRIT_MATMUL_HIGH);  // a real change, not the f32 path
        assert_int_equal(r.casts, cases[i].casts);
    }
}

// Parameters stored in bf16 (no master copy) with f32 gradients: the same numbers as f32
// parameters holding the bf16-rounded values, up to the GEMMs' summation order. The biases
// enter their ops through casts the builder inserts; the weights are read as bf16 directly.
static void test_bf16_parameters(void **state) {
    (void)state;
    static run lowp, ref;
    run_mlp_params(NULL, TRIT_BF16, false, &lowp);
    run_mlp_params(NULL, TRIT_F32, true, &ref);
    const double dl = fabs(lowp.loss - ref.loss) / ref.loss, dg = grad_diff(&lowp, &ref);
    printf("  bf16 parameters: loss rel %.1e, worst gradient rel %.1e, %d casts\n", dl, dg, lowp.casts);
    assert_true(dl < 1e-5 && dg < 1e-5);
    assert_int_equal(lowp.casts, 2);  // the two biases
}

// Fusion with 16-bit parameters: the norm's weight and bias enter through casts made after the
// residual add, so add+layernorm must not be fused ahead of them; fused and unfused agree.
static double fused_block_loss(bool fuse) {
    trit_tensor *p[4] = {trit_tensor_new_param(TRIT_BF16, 2, (int64_t[]){6, 5}, "w"),
                         trit_tensor_new_param(TRIT_BF16, 1, (int64_t[]){6}, "b"),
                         trit_tensor_new_param(TRIT_BF16, 1, (int64_t[]){6}, "lw"),
                         trit_tensor_new_param(TRIT_BF16, 1, (int64_t[]){6}, "lb")};
    for (int i = 0; i < 4; i++) trit_tensor_fill_normal(p[i], i == 2 ? 1 : 0, i >= 2 ? 0.1 : 1, 1, (uint64_t)i);
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_graph_set_fusion(g, fuse);
    trit_tensor *x = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){3, 5}, "x");
    trit_tensor *r = trit_graph_input(g, TRIT_F32, 2, (int64_t[]){3, 6}, "r");
    trit_tensor *y = trit_layernorm(g, trit_add(g, trit_gelu(g, trit_linear(g, x, p[0], p[1])), r), p[2], p[3], 1e-5);
    trit_tensor *loss = trit_sum(g, trit_mul(g, y, y), 0, NULL, false);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    for (int i = 0; i < 15; i++) ((float *)x->data)[i] = (float)(i % 4) - 1.5f;
    for (int i = 0; i < 18; i++) ((float *)r->data)[i] = (float)(i % 3) * 0.5f;
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    const double v = trit_tensor_get_flat(loss, 0);
    trit_graph_free(g);
    for (int i = 0; i < 4; i++) trit_tensor_free(p[i]);
    return v;
}

static void test_fusion_with_bf16_parameters(void **state) {
    (void)state;
    const double a = fused_block_loss(false), b = fused_block_loss(true);
    assert_true(a > 1.0);
    assert_true(fabs(a - b) <= 1e-6 * a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_combinations),
        cmocka_unit_test(test_f32_policy_is_the_f32_graph),
        cmocka_unit_test(test_low_precision_close_to_f32),
        cmocka_unit_test(test_bf16_parameters),
        cmocka_unit_test(test_fusion_with_bf16_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
