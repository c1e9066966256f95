// Fusion: the compiler's rewrites (bias+GELU, also after a LoRA sum; residual add+LayerNorm, chunked classifier)
// give the same loss and gradients as the unfused graph, and happen only where they may; the
// fused bias+GELU's backward writes its input's gradient in place of its output's, and a residual add
// its stream's.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "graph/graph_internal.h"

#include <math.h>
#include <string.h>

enum { B = 3, T = 5, C = 8, V = 11, NP = 8 };

typedef struct run {
    trit_graph *g;
    trit_tensor *loss, *ln_out, *logits;
} run;

// x -> [s = x + mlp(x); ln(s)] -> classifier; the mlp has linear+bias -> gelu.
static run build(trit_dtype dt, trit_tensor **p, const int32_t *targets, bool fuse, bool keep_logits) {
    run r;
    r.g = trit_graph_new(dt);
    trit_graph_set_fusion(r.g, fuse);
    trit_tensor *x = trit_graph_input(r.g, dt, 3, (int64_t[]){B, T, C}, "x");
    trit_tensor *tg = trit_graph_input(r.g, TRIT_I32, 2, (int64_t[]){B, T}, "t");
    trit_tensor *h = trit_gelu(r.g, trit_linear(r.g, x, p[0], p[1]));          // bias + gelu
    trit_tensor *s = trit_add(r.g, x, trit_linear(r.g, h, p[2], NULL));         // residual add
    r.ln_out = trit_layernorm(r.g, s, p[3], p[4], 1e-5);                         // add + layernorm
    trit_tensor *s2 = trit_add(r.g, s, r.ln_out);                               // s is used again
    r.logits = trit_linear(r.g, s2, p[5], p[6]);                                 // classifier
    r.loss = trit_cross_entropy(r.g, r.logits, tg, -1, TRIT_REDUCE_MEAN);
    if (keep_logits) trit_graph_keep(r.g, r.logits);
    assert_int_equal(trit_graph_compile(r.g, r.loss), TRIT_OK);
    trit_tensor_fill_normal(x, 0, 1, 3, 1);
    memcpy(tg->data, targets, sizeof(int32_t) * B * T);
    trit_graph_zero_grad(r.g);
    assert_int_equal(trit_graph_forward(r.g), TRIT_OK);
    assert_int_equal(trit_graph_backward(r.g), TRIT_OK);
    return r;
}

static trit_tensor **make_params(trit_dtype dt) {
    static const int64_t shapes[7][2] = {{2 * C, C}, {2 * C, 1}, {C, 2 * C}, {C, 1}, {C, 1}, {V, C}, {V, 1}};
    static trit_tensor *p[2][7];
    int k = dt == TRIT_F64;
    for (int i = 0; i < 7; i++) {
        int nd = shapes[i][1] == 1 ? 1 : 2;
        p[k][i] = tg_param(nd, shapes[i], -0.5, 0.5, (uint64_t)(10 + i));
        if (dt == TRIT_F32) {
            trit_tensor *c = tg_clone(p[k][i], TRIT_F32);
            trit_tensor_free(p[k][i]);
            p[k][i] = c;
        }
    }
    return p[k];
}

static double max_diff(const trit_tensor *a, const trit_tensor *b) {
    double d = 0, s = 1e-30;
    for (int64_t i = 0; i < trit_tensor_numel(a); i++) {
        d = fmax(d, fabs(trit_tensor_get_flat(a, i) - trit_tensor_get_flat(b, i)));
        s = fmax(s, fabs(trit_tensor_get_flat(b, i)));
    }
    return d / s;
}

static void compare(trit_dtype dt, double tol) {
    int32_t targets[B * T];
    for (int i = 0; i < B * T; i++) targets[i] = i % 4 == 3 ? -1 : (int32_t)((i * 7) % V);
    trit_tensor **p = make_params(dt);
    run plain = build(dt, p, targets, false, false);
    trit_tensor *grads[7];
    for (int i = 0; i < 7; i++) grads[i] = tg_clone(p[i]->grad, dt);
    double loss0 = trit_tensor_get_flat(plain.loss, 0);
    assert_int_equal(trit_graph_count_op(plain.g, "cross_entropy"), 1);
    for (int i = 0; i < 7; i++) trit_tensor_fill(p[i]->grad, 0);

    run fused = build(dt, p, targets, true, false);
    assert_int_equal(trit_graph_count_op(fused.g, "bias_gelu"), 1);
    assert_int_equal(trit_graph_count_op(fused.g, "add_layernorm"), 1);
    assert_int_equal(trit_graph_count_op(fused.g, "classifier_ce"), 1);
    assert_int_equal(trit_graph_count_op(fused.g, "cross_entropy"), 0);
    assert_int_equal(trit_graph_count_op(fused.g, "layernorm"), 0);
    // bias_gelu is its input's only reader, so backward writes that input's gradient over its
    // output's (one buffer for both), and the gradients below still match the unfused graph's.
    int shared = 0;
    for (int i = 0; i < fused.g->n_nodes; i++) {
        const trit_node *n = &fused.g->nodes[i];
        if (strcmp(n->def->name, "bias_gelu") != 0) continue;
        const trit_value *in = &fused.g->values[n->in[0]], *out = &fused.g->values[n->out];
        assert_non_null(in->grad);
        shared += in->grad->data == out->grad->data && in->grad_shared;
    }
    assert_int_equal(shared, 1);
    double l1 = trit_tensor_get_flat(fused.loss, 0);
    assert_true(fabs(l1 - loss0) <= tol * fabs(loss0));
    for (int i = 0; i < 7; i++) {
        double d = max_diff(p[i]->grad, grads[i]);
        if (d > tol) fail_msg("param %d grad differs by %.3g", i, d);
    }
    trit_graph_free(plain.g);
    trit_graph_free(fused.g);
    tg_free_params(7, grads);
    tg_free_params(7, p);
}

// A residual u + f(u), u read by f first: the add's backward is the first to write u's gradient,
// so u's gradient takes the add's output gradient buffer (no copy), and f's backward adds into it;
// for mul, which is not in place, the two stay apart. tests/ops/test_binary.c gradchecks both.
static void test_residual_add_shares_gradient(void **state) {
    (void)state;
    trit_tensor *(*const ops[2])(trit_graph *, trit_tensor *, trit_tensor *) = {trit_add, trit_mul};
    for (int k = 0; k < 2; k++) {
        trit_tensor *p = tg_param(2, (int64_t[]){3, 4}, -1, 1, 400);
        trit_graph *g = trit_graph_new(TRIT_F64);
        trit_tensor *u = trit_gelu(g, p);
        trit_tensor *r = ops[k](g, u, trit_tanh(g, u));
        assert_int_equal(trit_graph_compile(g, tg_weighted_sum(g, trit_gelu(g, r))), TRIT_OK);
        int found = 0;
        for (int i = 0; i < g->n_nodes; i++) {
            const trit_node *n = &g->nodes[i];
            if (g->values[n->out].t != r) continue;
            const trit_value *in = &g->values[n->in[0]], *out = &g->values[n->out];
            assert_true(in->grad && out->grad);
            assert_int_equal(in->grad->data == out->grad->data, k == 0);
            found++;
        }
        assert_int_equal(found, 1);
        trit_graph_free(g);
        trit_tensor_free(p);
    }
}

// out = (u - p1 + tanh(p2)) * exp(u), u = tanh(p0): the add is the only reader of both its
// inputs, so both gradients take its output's gradient buffer (no copy). Both are then pinned:
// the sub below, u's last reader, would otherwise write u's gradient over that buffer in place,
// and exp's backward add into it while tanh(p2)'s gradient still waits there to be read.
static trit_tensor *two_branches(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    trit_tensor *b = trit_tanh(g, p[2]), *u = trit_tanh(g, p[0]), *v = trit_exp(g, u);
    return trit_mul(g, trit_add(g, trit_sub(g, u, p[1]), b), v);
}

static void test_add_gives_both_inputs_its_gradient(void **state) {
    (void)state;
    trit_tensor *p[3];
    for (int i = 0; i < 3; i++) p[i] = tg_param(2, (int64_t[]){3, 4}, -1, 1, 410 + (uint64_t)i);
    tg_assert_gradcheck("add of two branches", two_branches, NULL, 3, p);
    trit_graph *g = trit_graph_new(TRIT_F64);
    tg_run(g, tg_weighted_sum(g, two_branches(g, p, NULL)));
    int adds = 0, subs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const trit_node *n = &g->nodes[i];
        const trit_value *a = &g->values[n->in[0]], *out = &g->values[n->out];
        if (strcmp(n->def->name, "add") == 0) {
            const trit_value *b = &g->values[n->in[1]];
            assert_ptr_equal(a->grad->data, out->grad->data);
            assert_ptr_equal(b->grad->data, out->grad->data);
            assert_true(a->grad_pinned && b->grad_pinned);
            adds++;
        } else if (strcmp(n->def->name, "sub") == 0) {
            assert_ptr_not_equal(a->grad->data, out->grad->data);  // its output's buffer is pinned
            subs++;
        }
    }
    assert_int_equal(adds, 1);
    assert_int_equal(subs, 1);
    trit_graph_free(g);
    tg_free_params(3, p);
}

static void test_fused_matches_unfused_f64(void **state) {
    (void)state;
    compare(TRIT_F64, 1e-12);
}

static void test_fused_matches_unfused_f32(void **state) {
    (void)state;
    compare(TRIT_F32, 1e-5);
}

static void test_kept_logits_are_not_fused_away(void **state) {
    (void)state;
    int32_t targets[B * T] = {0};
    trit_tensor **p = make_params(TRIT_F64);
    run r = build(TRIT_F64, p, targets, true, true);
    assert_int_equal(trit_graph_count_op(r.g, "classifier_ce"), 0);
    assert_int_equal(trit_graph_count_op(r.g, "cross_entropy"), 1);
    // The kept logits are real: the loss is their cross-entropy against class 0.
    double lse_sum = 0;
    for (int row = 0; row < B * T; row++) {
        double m = -INFINITY, s = 0;
        for (int v = 0; v < V; v++) m = fmax(m, trit_tensor_get_flat(r.logits, row * V + v));
        for (int v = 0; v < V; v++) s += exp(trit_tensor_get_flat(r.logits, row * V + v) - m);
        lse_sum += m + log(s) - trit_tensor_get_flat(r.logits, row * V);
    }
    assert_float_equal(trit_tensor_get_flat(r.loss, 0), lse_sum / (B * T), 1e-12);
    trit_graph_free(r.g);
    tg_free_params(7, p);
}

// A LoRA-shaped MLP input, gelu(add_act(linear(x, W, b), linear(x, A) B^T)): the bias moves to
// a bias_gelu after the sum (f64: the same loss and gradients up to the sum's order, 1e-12);
// under bf16 activations the sum, read only by bias_gelu, is stored in bf16: x W^T + l rounded
// once. Its reference: x and W rounded to bf16 as the medium-precision GEMM reads them (products
// exact), summed in double with l; the f32 sum is within 2^-24 C sum|x w| of that, so the stored
// value is within half a bf16 ulp (2^-8 |s|: bf16 keeps 8 significant bits) plus that of the
// reference.
static trit_graph *lora_mlp(const trit_compute_policy *pol, trit_dtype dt, trit_tensor **p, bool fuse, trit_tensor **sum,
                            trit_tensor **parts, double *loss_out) {
    trit_graph *g = pol ? trit_graph_new_policy(pol) : trit_graph_new(dt);
    trit_graph_set_fusion(g, fuse);
    trit_tensor *x = trit_graph_input(g, dt, 3, (int64_t[]){B, T, C}, "x");
    trit_tensor *y = trit_linear(g, x, p[0], p[1]);                              // (B, T, 2C)
    trit_tensor *l = trit_linear(g, trit_linear(g, x, p[2], NULL), p[3], NULL);  // (B, T, 2C), rank 2
    *sum = trit_add_act(g, y, l);
    trit_tensor *loss = trit_mean(g, trit_gelu(g, *sum), 0, NULL, false);
    if (parts) trit_graph_keep(g, parts[0] = x), trit_graph_keep(g, parts[1] = l);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    trit_tensor_fill_normal(x, 0, 1, 3, 1);
    trit_graph_zero_grad(g);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_OK);
    *loss_out = trit_tensor_get_flat(loss, 0);
    return g;
}

static trit_tensor **lora_params(trit_dtype dt) {
    static const int64_t shapes[4][2] = {{2 * C, C}, {2 * C, 1}, {2, C}, {2 * C, 2}};
    static trit_tensor *p[4];
    for (int i = 0; i < 4; i++) {
        p[i] = tg_param(shapes[i][1] == 1 ? 1 : 2, shapes[i], -0.5, 0.5, (uint64_t)(30 + i));
        if (dt == TRIT_F32) {
            trit_tensor *c = tg_clone(p[i], TRIT_F32);
            trit_tensor_free(p[i]);
            p[i] = c;
        }
    }
    return p;
}

static void test_lora_sum_fuses_bias_gelu(void **state) {
    (void)state;
    trit_tensor **p = lora_params(TRIT_F64), *sum, *grads[4];
    double loss0, loss1;
    trit_graph *plain = lora_mlp(NULL, TRIT_F64, p, false, &sum, NULL, &loss0);
    for (int i = 0; i < 4; i++) grads[i] = tg_clone(p[i]->grad, TRIT_F64), trit_tensor_fill(p[i]->grad, 0);
    trit_graph *fused = lora_mlp(NULL, TRIT_F64, p, true, &sum, NULL, &loss1);
    assert_int_equal(trit_graph_count_op(plain, "bias_gelu"), 0);
    assert_int_equal(trit_graph_count_op(fused, "bias_gelu"), 1);
    assert_int_equal(trit_graph_count_op(fused, "gelu"), 0);
    assert_true(fabs(loss1 - loss0) <= 1e-12 * fabs(loss0));
    for (int i = 0; i < 4; i++) assert_true(max_diff(p[i]->grad, grads[i]) <= 1e-12);
    trit_graph_free(plain);
    trit_graph_free(fused);
    tg_free_params(4, grads);
    tg_free_params(4, p);
    // bf16 activations: the sum in bf16, the rounding of y + l (y, l kept in f32 to recompute it).
    p = lora_params(TRIT_F32);
    const trit_compute_policy pol = trit_precision_policy(TRIT_PRECISION_BF16, TRIT_MATMUL_HIGHEST);
    trit_tensor *parts[2];
    trit_graph *g = lora_mlp(&pol, TRIT_F32, p, true, &sum, parts, &loss1);
    assert_int_equal(trit_graph_count_op(g, "bias_gelu"), 1);
    assert_int_equal(sum->dtype, TRIT_BF16);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);  // the sum lives until backward reads it
    const float *x = trit_tensor_ptr(parts[0]), *l = trit_tensor_ptr(parts[1]), *w = trit_tensor_ptr(p[0]);
    const uint16_t *got = trit_tensor_ptr(sum);
    for (int64_t r = 0; r < B * T; r++)
        for (int64_t o = 0; o < 2 * C; o++) {
            double ref = l[r * 2 * C + o], mag = 0;
            for (int64_t k = 0; k < C; k++) {
                const double xw = (double)trit_bf16_to_f32(trit_f32_to_bf16(x[r * C + k])) *
                                  trit_bf16_to_f32(trit_f32_to_bf16(w[o * C + k]));
                ref += xw, mag += fabs(xw);
            }
            const double v = trit_bf16_to_f32(got[r * 2 * C + o]);
            assert_true(fabs(v - ref) <= 0x1p-8 * fabs(ref) + 0x1p-24 * C * (mag + fabs(l[r * 2 * C + o])));
        }
    trit_graph_free(g);
    tg_free_params(4, p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fused_matches_unfused_f64),
        cmocka_unit_test(test_fused_matches_unfused_f32),
        cmocka_unit_test(test_kept_logits_are_not_fused_away),
        cmocka_unit_test(test_lora_sum_fuses_bias_gelu),
        cmocka_unit_test(test_residual_add_shares_gradient),
        cmocka_unit_test(test_add_gives_both_inputs_its_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
