// Flash (tiled) causal attention against the straightforward op as the oracle: forward output
// and all three input gradients on sizes that are not multiples of the tile, in f32 and f64;
// finite-difference gradients with strided input views; thread-count independence; causality;
// memory that grows linearly in T; bf16 inputs and output, widened or on the bf16 pair kernels;
// bad input.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "attn_check.h"
#include "gradcheck.h"
#include "kernels/flash_bf16.h"
#include "ops/flash_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// ---- flash against the straightforward op -------------------------------------------------

// max |a - b| / max |b| over one array.
static double rel_diff(const double *a, const double *b, int64_t n) {
    double d = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        m = fmax(m, fabs(b[i]));
    }
    return m > 0 ? d / m : d;
}

static void compare_case(int64_t B, int64_t T, int64_t hs, int H, trit_dtype dt, double tol) {
    static const char *names[4] = {"out", "dq", "dk", "dv"};
    int64_t s[3] = {B, T, hs * H};
    uint64_t seed = (uint64_t)(T * 1000 + hs * 10 + H);
    trit_tensor *p[3] = {tg_param(3, s, -2, 2, seed), tg_param(3, s, -2, 2, seed + 1), tg_param(3, s, -1, 1, seed + 2)};
    ta_result f = ta_run(trit_flash_attention, dt, p, H, 0);
    ta_result o = ta_run(trit_attention, dt, p, H, 0);
    double worst = 0;
    for (int j = 0; j < 4; j++) {
        double e = rel_diff(f.v[j], o.v[j], f.n);
        if (!(e <= tol))
            fail_msg("%s B=%lld T=%lld hs=%lld H=%d: %s differs from the straightforward op by %.3g > %.3g",
                     dt == TRIT_F32 ? "f32" : "f64", (long long)B, (long long)T, (long long)hs, H, names[j], e, tol);
        worst = fmax(worst, e);
    }
    print_message("%s B=%lld T=%3lld hs=%2lld H=%d: max rel diff %.3g\n", dt == TRIT_F32 ? "f32" : "f64",
                  (long long)B, (long long)T, (long long)hs, H, worst);
    ta_result_free(&f);
    ta_result_free(&o);
    tg_free_params(3, p);
}

static void test_matches_plain(void **state) {
    (void)state;
    const int64_t Ts[] = {1, 7, 33, 100, 257}, hss[] = {8, 16, 64};
    for (int a = 0; a < 5; a++)
        for (int b = 0; b < 3; b++) {
            if (Ts[a] == 257 && hss[b] == 64) continue;  // enough with the smaller heads
            const int H = b == 1 ? 3 : 2;
            compare_case(2, Ts[a], hss[b], H, TRIT_F32, 1e-5);
            compare_case(2, Ts[a], hss[b], H, TRIT_F64, 1e-12);
        }
}

// The f32 op on the portable kernels too (the SIMD level is a run-time choice).
static void test_matches_plain_portable(void **state) {
    (void)state;
    const trit_cpu_isa level = trit_cpu_level();
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_REF), TRIT_OK);
    compare_case(2, 33, 16, 3, TRIT_F32, 1e-5);
    compare_case(2, 100, 64, 2, TRIT_F32, 1e-5);
    compare_case(1, 257, 8, 2, TRIT_F32, 1e-5);
    assert_int_equal(trit_cpu_set_level(level), TRIT_OK);
}

// ---- finite differences with strided views ------------------------------------------------

// q, k, v as column slices of one fused (B, T, 3C) tensor (rows 3C apart, read in place), and
// v also transposed from (B, C, T) in a second case (not unit-stride: the constructor copies).
static trit_tensor *build_fused(trit_graph *g, trit_tensor **p, void *ctx) {
    const int64_t C = *(int64_t *)ctx;
    trit_tensor *q = trit_slice(g, p[0], 2, 0, C);
    trit_tensor *k = trit_slice(g, p[0], 2, C, 2 * C);
    trit_tensor *v = trit_slice(g, p[0], 2, 2 * C, 3 * C);
    return trit_flash_attention(g, q, k, v, 2);
}

static trit_tensor *build_transposed(trit_graph *g, trit_tensor **p, void *ctx) {
    (void)ctx;
    trit_tensor *q = trit_transpose(g, p[0], 0, 1);  // (T, B, C) -> (B, T, C), rows B*C apart
    trit_tensor *v = trit_transpose(g, p[2], 1, 2);  // (B, C, T) -> (B, T, C)
    return trit_flash_attention(g, q, p[1], v, 2);
}

static void test_gradients(void **state) {
    (void)state;
    int64_t C = 8, s[3] = {2, 70, 3 * 8};
    trit_tensor *p[1] = {tg_param(3, s, -1.5, 1.5, 21)};
    tg_assert_gradcheck("flash attention of a fused qkv", build_fused, &C, 1, p);
    tg_assert_f32_close("flash attention of a fused qkv", build_fused, &C, 1, p, 1e-5);
    tg_free_params(1, p);

    int64_t sq[3] = {67, 2, 12}, sk[3] = {2, 67, 12}, sv[3] = {2, 12, 67};
    trit_tensor *pt[3] = {tg_param(3, sq, -1, 1, 22), tg_param(3, sk, -1, 1, 23), tg_param(3, sv, -1, 1, 24)};
    tg_assert_gradcheck("flash attention of transposed views", build_transposed, NULL, 3, pt);
    tg_assert_f32_close("flash attention of transposed views", build_transposed, NULL, 3, pt, 1e-5);
    tg_free_params(3, pt);
}

// ---- 16-bit inputs ---------------------------------------------------------------------------

typedef struct lowp_run {
    float *out;   // (B, T, C) the attention output, widened when it is bf16
    float *grad;  // (B, T, 3C) the gradient of the fused qkv parameter
} lowp_run;

// Attention over q, k, v sliced from one fused qkv (B, T, 3C), the gradient taken into the
// parameter x64. With w64 NULL the qkv is x64 rounded to bf16; otherwise it is a linear's output
// linear(x64, w64), as the GPT makes it. With lowp the op reads the bf16 slices (a bf16 linear
// output, or the cast) and writes bf16; otherwise it runs in f32 on the same values widened.
static lowp_run run_qkv(const trit_tensor *x64, const trit_tensor *w64, int H, bool lowp, int threads) {
    const int64_t B = x64->shape[0], T = x64->shape[1], Cin = x64->shape[2], C = (w64 ? w64->shape[0] : Cin) / 3;
    trit_tensor *x = tg_clone(x64, TRIT_F32), *w = w64 ? tg_clone(w64, TRIT_F32) : NULL;
    const trit_compute_policy bf16 = {TRIT_F32, TRIT_BF16, TRIT_MATMUL_HIGHEST};
    trit_graph *g = lowp ? trit_graph_new_policy(&bf16) : trit_graph_new(TRIT_F32);
    trit_tensor *qkv = w ? trit_linear(g, x, w, NULL) : x;
    if (!w || !lowp) qkv = trit_cast(g, qkv, TRIT_BF16);
    if (!lowp) qkv = trit_cast(g, qkv, TRIT_F32);
    trit_tensor *y = trit_flash_attention(g, trit_slice(g, qkv, 2, 0, C), trit_slice(g, qkv, 2, C, 2 * C),
                                          trit_slice(g, qkv, 2, 2 * C, 3 * C), H);
    assert_non_null(y);
    // A kept value stays f32, so the bf16 output is kept through a cast to bf16 (its only reader).
    trit_tensor *seen = lowp ? trit_cast(g, y, TRIT_BF16) : y;
    trit_graph_keep(g, seen);
    trit_threads_set(threads);
    tg_run(g, tg_weighted_sum(g, lowp ? trit_cast(g, seen, TRIT_F32) : y));
    assert_int_equal(y->dtype, lowp ? TRIT_BF16 : TRIT_F32);
    lowp_run r = {malloc(sizeof(float) * (size_t)(B * T * C)), malloc(sizeof(float) * (size_t)(B * T * Cin))};
    assert_true(r.out && r.grad);
    for (int64_t i = 0; i < B * T * C; i++)
        r.out[i] = lowp ? trit_bf16_to_f32(((const uint16_t *)seen->data)[i]) : ((const float *)y->data)[i];
    memcpy(r.grad, x->grad->data, sizeof(float) * (size_t)(B * T * Cin));
    trit_graph_free(g);
    trit_tensor_free(x);
    trit_tensor_free(w);
    return r;
}

// The bf16 op computes on f32 copies of each (batch, head) pair: its output is the f32 op's
// output rounded once to bf16, exactly; its gradients differ only through backward reading that
// rounded output (D = rowsum(dO * O)), within 5e-3 of their largest; any thread count gives the
// same bits.
static void test_bf16_inputs(void **state) {
    (void)state;
    const int64_t shapes[][4] = {{2, 37, 16, 3}, {3, 70, 8, 2}, {1, 1, 32, 1}, {2, 129, 64, 2}};
    for (int c = 0; c < 4; c++) {
        const int64_t B = shapes[c][0], T = shapes[c][1], hs = shapes[c][2], H = shapes[c][3], C = hs * H;
        trit_tensor *w = tg_param(3, (int64_t[]){B, T, 3 * C}, -2, 2, (uint64_t)(40 + c));
        lowp_run lo = run_qkv(w, NULL, (int)H, true, 2), lo1 = run_qkv(w, NULL, (int)H, true, 1);
        lowp_run f = run_qkv(w, NULL, (int)H, false, 2);
        for (int64_t i = 0; i < B * T * C; i++)
            if (lo.out[i] != trit_bf16_to_f32(trit_f32_to_bf16(f.out[i])))
                fail_msg("T=%lld hs=%lld: output %lld is %.9g, the f32 op's rounded to bf16 %.9g", (long long)T,
                         (long long)hs, (long long)i, lo.out[i], trit_bf16_to_f32(trit_f32_to_bf16(f.out[i])));
        double d = 0, m = 0;
        for (int64_t i = 0; i < B * T * 3 * C; i++) {
            d = fmax(d, fabs((double)lo.grad[i] - f.grad[i]));
            m = fmax(m, fabs((double)f.grad[i]));
        }
        print_message("bf16 B=%lld T=%3lld hs=%2lld H=%lld: gradient max diff %.3g of max %.3g\n", (long long)B,
                      (long long)T, (long long)hs, (long long)H, d, m);
        assert_true(m > 0 && d <= 5e-3 * m);
        assert_memory_equal(lo.out, lo1.out, sizeof(float) * (size_t)(B * T * C));
        assert_memory_equal(lo.grad, lo1.grad, sizeof(float) * (size_t)(B * T * 3 * C));
        lowp_run all[3] = {lo, lo1, f};
        for (int i = 0; i < 3; i++) free(all[i].out), free(all[i].grad);
        tg_free_params(1, &w);
    }
    trit_threads_set(0);
}

static double max_diff(const float *a, const float *b, int64_t n, double *largest) {
    double d = 0;
    *largest = 0;
    for (int64_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        *largest = fmax(*largest, fabs((double)b[i]));
    }
    return d;
}

// bf16 q, k, v from a linear's bf16 output, on the bf16 pair kernels (where the CPU has them;
// otherwise the widened path runs and the bounds hold all the more): the matmuls take bf16
// operands, so the probabilities and score gradients are rounded to bf16 as well. Against the f32 op on the same values the
// output is within 1e-2 and the input gradient within 2e-2 of their largest; 1 and 2 threads
// give the same bits.
static void test_bf16_pair_kernels(void **state) {
    (void)state;
    print_message("bf16 pair kernels %s\n", trit_kernel_flash_bf16() ? "run" : "absent: the widened path runs");
    const int64_t shapes[][4] = {{2, 37, 16, 3}, {1, 130, 64, 2}, {2, 64, 8, 2}, {1, 1, 32, 1}, {1, 257, 64, 1}};
    for (int c = 0; c < 5; c++) {
        const int64_t B = shapes[c][0], T = shapes[c][1], hs = shapes[c][2], H = shapes[c][3], C = hs * H, Cin = 24;
        trit_tensor *x = tg_param(3, (int64_t[]){B, T, Cin}, -1, 1, (uint64_t)(60 + c));
        trit_tensor *w = tg_param(2, (int64_t[]){3 * C, Cin}, -0.5, 0.5, (uint64_t)(70 + c));
        lowp_run lo = run_qkv(x, w, (int)H, true, 2), lo1 = run_qkv(x, w, (int)H, true, 1);
        lowp_run f = run_qkv(x, w, (int)H, false, 2);
        double mo, mg;
        const double dout = max_diff(lo.out, f.out, B * T * C, &mo), dg = max_diff(lo.grad, f.grad, B * T * Cin, &mg);
        print_message("bf16 B=%lld T=%3lld hs=%2lld H=%lld: output max diff %.3g of %.3g, gradient %.3g of %.3g\n",
                      (long long)B, (long long)T, (long long)hs, (long long)H, dout, mo, dg, mg);
        assert_true(mo > 0 && dout <= 1e-2 * mo);
        assert_true(mg > 0 && dg <= 2e-2 * mg);
        assert_memory_equal(lo.out, lo1.out, sizeof(float) * (size_t)(B * T * C));
        assert_memory_equal(lo.grad, lo1.grad, sizeof(float) * (size_t)(B * T * Cin));
        lowp_run all[3] = {lo, lo1, f};
        for (int i = 0; i < 3; i++) free(all[i].out), free(all[i].grad);
        tg_free_params(1, &x);
        tg_free_params(1, &w);
    }
    trit_threads_set(0);
}

// ---- threads, causality, known answers ----------------------------------------------------

static void test_thread_count_independent(void **state) {
    (void)state;
    int64_t s[3] = {2, 150, 96};
    trit_tensor *p[3] = {tg_param(3, s, -2, 2, 31), tg_param(3, s, -2, 2, 32), tg_param(3, s, -1, 1, 33)};
    ta_result a = ta_run(trit_flash_attention, TRIT_F32, p, 3, 1);
    ta_result b = ta_run(trit_flash_attention, TRIT_F32, p, 3, 2);
    for (int j = 0; j < 4; j++) assert_memory_equal(a.v[j], b.v[j], sizeof(double) * (size_t)a.n);
    ta_result_free(&a);
    ta_result_free(&b);
    tg_free_params(3, p);
}

// Changing q, k and v at position t0 leaves every output before t0 bit-identical, whether t0
// is in the first tile, mid-tile or at a tile start.
static void test_causal(void **state) {
    (void)state;
    const int64_t t0s[] = {5, 64, 101};
    for (int i = 0; i < 3; i++) {
        ta_check_causal(trit_flash_attention, TRIT_F32, 2, 150, 32, 2, t0s[i]);
        ta_check_causal(trit_flash_attention, TRIT_F64, 2, 150, 32, 2, t0s[i]);
    }
}

static void test_known_answers(void **state) {
    (void)state;
    // q = 0: every visible key scores the same, so out_t = mean(v_0 .. v_t), over several tiles.
    const int64_t T = 130;
    int64_t s[3] = {1, T, 1};
    trit_graph *g = trit_graph_new(TRIT_F64);
    trit_tensor *in[3];
    trit_tensor *out = ta_input_graph(g, trit_flash_attention, s, 1, in);
    double *q = in[0]->data, *k = in[1]->data, *v = in[2]->data;
    for (int64_t i = 0; i < T; i++) {
        q[i] = 0;
        k[i] = 0.5 * (double)i;
        v[i] = (double)(i + 1);
    }
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    for (int64_t i = 0; i < T; i++) assert_float_equal(((double *)out->data)[i], (double)(i + 2) / 2.0, 1e-12);
    trit_graph_free(g);

    // Huge growing scores: each query picks its own position, so out = v, and the running max
    // is replaced at every key tile. Without it, exp overflows and the output is NaN.
    const int64_t T1 = 100;
    int64_t s1[3] = {1, T1, 1};
    g = trit_graph_new(TRIT_F32);
    out = ta_input_graph(g, trit_flash_attention, s1, 1, in);
    for (int64_t i = 0; i < T1; i++) {
        ((float *)in[0]->data)[i] = ((float *)in[1]->data)[i] = 100.0f * (float)(i + 1);
        ((float *)in[2]->data)[i] = (float)(i + 7);
    }
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    for (int64_t i = 0; i < T1; i++) assert_true(((float *)out->data)[i] == (float)(i + 7));
    trit_graph_free(g);
}

// ---- memory -------------------------------------------------------------------------------

// Bytes the op keeps (saved) and borrows (scratch) for a (B, T, C) input.
static void op_bytes(const trit_op_def *def, int64_t B, int64_t T, int64_t C, int H, size_t *saved, size_t *scratch) {
    int64_t s[3] = {B, T, C};
    trit_tensor *q = trit_tensor_new(def == &trit_op_flash_attention_f32 ? TRIT_F32 : TRIT_F64, 3, s);
    trit_flash_attention_attr a = {.n_head = H};
    trit_op_call c = {.n_in = 3, .in = {q, q, q}, .attr = &a};
    *saved = def->saved_bytes(&c);
    *scratch = def->scratch_bytes(&c);
    trit_tensor_free(q);
}

static void test_memory_linear_in_T(void **state) {
    (void)state;
    size_t s1, k1, s2, k2;
    op_bytes(&trit_op_flash_attention_f32, 2, 1024, 384, 6, &s1, &k1);
    op_bytes(&trit_op_flash_attention_f32, 2, 4096, 384, 6, &s2, &k2);
    assert_int_equal(s1, sizeof(float) * 2 * 6 * 1024);  // one log-sum-exp per (b, h, t)
    assert_int_equal(s2, 4 * s1);
    // Tiles are fixed; backward packs the queries and output gradients of one head per thread.
    assert_true(k2 <= 4 * k1 + 65536);
}

// ---- bad input ----------------------------------------------------------------------------

static void test_bad_input(void **state) {
    (void)state;
    ta_check_bad_input(trit_flash_attention);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_plain),
        cmocka_unit_test(test_matches_plain_portable),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_bf16_inputs),
        cmocka_unit_test(test_bf16_pair_kernels),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_causal),
        cmocka_unit_test(test_known_answers),
        cmocka_unit_test(test_memory_linear_in_T),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
