// AdamW8bit: the state layout (u8 codes with an absmax per block of 256 for tensors of 4096
// values or more, fp32 below); one step against a float64 reference that decodes, updates and
// encodes the same way (the same codes but where the f64 value sits on a rounding tie); the
// first step equal to fp32 AdamW's (a zero state decodes exactly); small tensors stepped as
// AdamW steps them; 1 and 2 threads give the same bits; a copied state continues identically;
// bf16 parameters without master weights.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { B = TRIT_OPTIM_8BIT_BLOCK, MAP = TRIT_DYNAMIC_MAP_SIZE };

static trit_tensor *param(trit_dtype dt, int64_t n, const char *name, uint64_t seed) {
    trit_tensor *p = trit_tensor_new_param(dt, 2, (int64_t[]){1, n}, name);
    trit_tensor_fill_normal(p, 0, 1, seed, 1);
    p->grad = trit_tensor_new(TRIT_F32, 2, (int64_t[]){1, n});
    trit_tensor_fill_normal(p->grad, 0, 0.1, seed, 2);
    return p;
}

static void test_layout(void **state) {
    (void)state;
    const int64_t sizes[4] = {4095, 4096, 5000, 7};
    trit_tensor *ps[4];
    for (int i = 0; i < 4; i++) ps[i] = param(TRIT_F32, sizes[i], i == 3 ? "" : "w", (uint64_t)i);
    const trit_optim_config c = trit_optim_adamw8bit(0.9, 0.999, 1e-8);
    assert_string_equal(trit_optim_kind_name(c.kind), "adamw8bit");
    trit_optim *o = trit_optim_new_single(&c, ps, 4, 0.0);
    assert_non_null(o);
    assert_int_equal(trit_optim_num_state(o), 8);
    for (int i = 0; i < 8; i++) {
        trit_optim_state_buf b;
        assert_int_equal(trit_optim_get_state(o, i, &b), TRIT_OK);
        const int64_t n = sizes[i / 2];
        const bool q8 = n >= TRIT_OPTIM_8BIT_MIN_SIZE;
        assert_int_equal(b.count, n);
        assert_int_equal(b.ndim, 2);
        assert_int_equal(b.shape[1], n);
        assert_int_equal(b.dtype, q8 ? TRIT_U8 : TRIT_F32);
        assert_int_equal(b.num_scales, q8 ? (n + B - 1) / B : 0);
        assert_true(q8 == (b.scales != NULL));
        assert_non_null(strstr(b.name, i % 2 ? "exp_avg_sq" : "exp_avg"));
    }
    trit_optim_free(o);
    for (int i = 0; i < 4; i++) trit_tensor_free(ps[i]);
}

// ---- float64 reference ---------------------------------------------------------------------

static int nearest_f64(const float *map, double v) {
    int c = 0;
    while (c < MAP - 1 && map[c + 1] <= v) c++;
    if (c < MAP - 1 && (double)map[c + 1] - v < v - map[c]) c++;
    return c;
}

// Whether v lies within a relative 1e-5 of the gap of a midpoint between two map values, where
// the f32 path may round to the other side.
static bool near_tie(const float *map, double v) {
    for (int c = 0; c + 1 < MAP; c++) {
        const double mid = ((double)map[c] + map[c + 1]) / 2, gap = (double)map[c + 1] - map[c];
        if (fabs(v - mid) < 1e-5 * gap) return true;
    }
    return false;
}

typedef struct ref_state {
    double *m, *v, *p;
    uint8_t *cm, *cv;
    double *am, *av;
} ref_state;

// One AdamW8bit step in float64 over n values: decode, torch.optim.AdamW's update, encode.
static void ref_step(ref_state *r, const float *g, int64_t n, double lr, double wd, double b1, double b2, double eps,
                     int64_t t, const float *ms, const float *mu) {
    const double bc1 = 1 - pow(b1, (double)t), bc2 = 1 - pow(b2, (double)t);
    for (int64_t blk = 0; blk * B < n; blk++) {
        const int64_t lo = blk * B, hi = lo + B < n ? lo + B : n;
        double amx = 0, avx = 0;
        for (int64_t i = lo; i < hi; i++) {
            const double m = ms[r->cm[i]] * r->am[blk], v = mu[r->cv[i]] * r->av[blk];
            r->m[i] = b1 * m + (1 - b1) * g[i];
            r->v[i] = b2 * v + (1 - b2) * (double)g[i] * g[i];
            r->p[i] = r->p[i] * (1 - lr * wd) - lr / bc1 * r->m[i] / (sqrt(r->v[i]) / sqrt(bc2) + eps);
            amx = fmax(amx, fabs(r->m[i]));
            avx = fmax(avx, r->v[i]);
        }
        r->am[blk] = amx;
        r->av[blk] = avx;
        for (int64_t i = lo; i < hi; i++) {
            r->cm[i] = (uint8_t)nearest_f64(ms, r->m[i] / amx);
            r->cv[i] = (uint8_t)nearest_f64(mu, r->v[i] / avx);
        }
    }
}

static void test_step_vs_f64(void **state) {
    (void)state;
    enum { N = 20 * B + 77 };
    const double lr = 1e-2, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
    trit_tensor *p = param(TRIT_F32, N, "w", 7);
    const trit_optim_config c = trit_optim_adamw8bit(b1, b2, eps);
    trit_optim *o = trit_optim_new_single(&c, &p, 1, wd);
    assert_non_null(o);
    trit_optim_state_buf sm, sv;
    assert_int_equal(trit_optim_get_state(o, 0, &sm), TRIT_OK);
    assert_int_equal(trit_optim_get_state(o, 1, &sv), TRIT_OK);
    float ms[MAP], mu[MAP];
    trit_quant_dynamic_map(true, ms);
    trit_quant_dynamic_map(false, mu);
    // A state as after some steps: random codes and scales, a few blocks of zeros.
    const int64_t nb = sm.num_scales;
    uint8_t *cm = sm.data, *cv = sv.data;
    for (int64_t i = 0; i < N; i++) {
        cm[i] = (uint8_t)trit_rng_u32(1, 1, (uint64_t)i);
        cv[i] = (uint8_t)trit_rng_u32(1, 2, (uint64_t)i);
    }
    ref_state r = {.m = calloc(N, sizeof(double)), .v = calloc(N, sizeof(double)), .p = calloc(N, sizeof(double)),
                   .cm = malloc(N), .cv = malloc(N), .am = calloc((size_t)nb, sizeof(double)),
                   .av = calloc((size_t)nb, sizeof(double))};
    for (int64_t b = 0; b < nb; b++) {
        sm.scales[b] = b == 3 ? 0.0f : 0.05f * trit_rng_uniform(1, 3, (uint64_t)b);
        sv.scales[b] = b == 3 ? 0.0f : 0.002f * trit_rng_uniform(1, 4, (uint64_t)b);
        r.am[b] = sm.scales[b];
        r.av[b] = sv.scales[b];
    }
    memcpy(r.cm, cm, N);
    memcpy(r.cv, cv, N);
    const float *p32 = p->data, *g = p->grad->data;
    for (int64_t i = 0; i < N; i++) r.p[i] = p32[i];
    assert_int_equal(trit_optim_set_step(o, 4), TRIT_OK);
    assert_int_equal(trit_optim_step(o, lr), TRIT_OK);
    ref_step(&r, g, N, lr, wd, b1, b2, eps, 5, ms, mu);

    int ties = 0;
    for (int64_t i = 0; i < N; i++) {
        const int64_t b = i / B;
        const bool tm = near_tie(ms, r.m[i] / r.am[b]), tv = near_tie(mu, r.v[i] / r.av[b]);
        ties += tm + tv;
        if ((cm[i] != r.cm[i] && !(tm && abs(cm[i] - r.cm[i]) == 1)) ||
            (cv[i] != r.cv[i] && !(tv && abs(cv[i] - r.cv[i]) == 1)))
            fail_msg("element %lld: codes (%d, %d), the f64 reference has (%d, %d)", (long long)i, cm[i], cv[i],
                     r.cm[i], r.cv[i]);
        if (fabs(p32[i] - r.p[i]) > 1e-6 * fabs(r.p[i]) + 1e-7 * lr)
            fail_msg("element %lld: p = %.9g, reference %.9g", (long long)i, (double)p32[i], r.p[i]);
    }
    assert_true(ties <= 2);
    for (int64_t b = 0; b < nb; b++) {
        assert_true(fabs(sm.scales[b] - r.am[b]) <= 1e-6 * r.am[b]);
        assert_true(fabs(sv.scales[b] - r.av[b]) <= 1e-6 * r.av[b]);
    }
    free(r.m), free(r.v), free(r.p), free(r.cm), free(r.cv), free(r.am), free(r.av);
    trit_optim_free(o);
    trit_tensor_free(p);
}

// From a fresh (zero) state, step 1 decodes exactly: the parameters move as fp32 AdamW moves
// them, bit for bit; from step 2 on, the quantized moments make a small difference.
// Parameters under 4096 values are AdamW's throughout.
static void test_first_step_and_small_tensors(void **state) {
    (void)state;
    const int64_t sizes[2] = {9000, 1000};
    trit_tensor *a[2], *b[2];
    for (int i = 0; i < 2; i++) {
        a[i] = param(TRIT_F32, sizes[i], "w", 20 + (uint64_t)i);
        b[i] = param(TRIT_F32, sizes[i], "w", 20 + (uint64_t)i);
    }
    const trit_optim_config c8 = trit_optim_adamw8bit(0.9, 0.95, 1e-8), c32 = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *o8 = trit_optim_new_gpt2(&c8, a, 2, 0.1), *o32 = trit_optim_new_gpt2(&c32, b, 2, 0.1);
    assert_non_null(o8);
    assert_non_null(o32);
    for (int s = 1; s <= 5; s++) {
        assert_int_equal(trit_optim_step(o8, 1e-3), TRIT_OK);
        assert_int_equal(trit_optim_step(o32, 1e-3), TRIT_OK);
        assert_memory_equal(a[1]->data, b[1]->data, sizeof(float) * 1000);
        const float *x = a[0]->data, *y = b[0]->data;
        if (s == 1) assert_memory_equal(x, y, sizeof(float) * 9000);
        // Every step moves a weight by about lr; the 8-bit moments change that by a fraction on
        // average, and no weight runs away (v is never decoded below (1 - beta2) g^2).
        double worst = 0, mean = 0;
        for (int64_t i = 0; i < 9000; i++) worst = fmax(worst, fabs(x[i] - y[i])), mean += fabs(x[i] - y[i]) / 9000;
        if (s > 1) assert_true(worst > 0 && worst < 2.0 * s * 1e-3 && mean < 0.05 * s * 1e-3);
    }
    trit_optim_free(o8);
    trit_optim_free(o32);
    for (int i = 0; i < 2; i++) trit_tensor_free(a[i]), trit_tensor_free(b[i]);
}

enum { NT = 200 * B + 13 };  // parallel (over OPTIM_PAR_MIN), with a short last block

// Parameters, codes and scales after 3 steps with `threads` threads.
static void run_threads(int threads, float *p_out, uint8_t *codes, float *scales) {
    omp_set_num_threads(threads);
    trit_tensor *p = param(TRIT_F32, NT, "w", 31);
    const trit_optim_config c = trit_optim_adamw8bit(0.9, 0.95, 1e-8);
    trit_optim *o = trit_optim_new_single(&c, &p, 1, 0.1);
    for (int s = 0; s < 3; s++) {
        trit_tensor_fill_normal(p->grad, 0, 0.1, 40 + (uint64_t)s, 2);
        assert_int_equal(trit_optim_step(o, 1e-3), TRIT_OK);
    }
    memcpy(p_out, p->data, sizeof(float) * NT);
    for (int k = 0; k < 2; k++) {
        trit_optim_state_buf b;
        assert_int_equal(trit_optim_get_state(o, k, &b), TRIT_OK);
        memcpy(codes + k * NT, b.data, NT);
        memcpy(scales + k * (NT / B + 1), b.scales, sizeof(float) * (size_t)b.num_scales);
    }
    trit_optim_free(o);
    trit_tensor_free(p);
}

static void test_thread_count_independent(void **state) {
    (void)state;
    static float p1[NT], p2[NT], s1[2 * (NT / B + 1)], s2[2 * (NT / B + 1)];
    static uint8_t c1[2 * NT], c2[2 * NT];
    const int saved = omp_get_max_threads();
    run_threads(1, p1, c1, s1);
    run_threads(2, p2, c2, s2);
    omp_set_num_threads(saved);
    assert_memory_equal(p1, p2, sizeof p1);
    assert_memory_equal(c1, c2, sizeof c1);
    assert_memory_equal(s1, s2, sizeof s1);
}

// A second optimizer given the first's codes, scales and step continues with the same bits (what
// a checkpoint restores).
static void test_copied_state_continues(void **state) {
    (void)state;
    trit_tensor *a = param(TRIT_F32, 6000, "w", 50), *b = param(TRIT_F32, 6000, "w", 50);
    const trit_optim_config c = trit_optim_adamw8bit(0.9, 0.95, 1e-8);
    trit_optim *oa = trit_optim_new_single(&c, &a, 1, 0.1), *ob = trit_optim_new_single(&c, &b, 1, 0.1);
    for (int s = 0; s < 3; s++) assert_int_equal(trit_optim_step(oa, 1e-3), TRIT_OK);
    memcpy(b->data, a->data, sizeof(float) * 6000);
    for (int k = 0; k < 2; k++) {
        trit_optim_state_buf sa, sb;
        assert_int_equal(trit_optim_get_state(oa, k, &sa), TRIT_OK);
        assert_int_equal(trit_optim_get_state(ob, k, &sb), TRIT_OK);
        memcpy(sb.data, sa.data, (size_t)sa.count);
        memcpy(sb.scales, sa.scales, sizeof(float) * (size_t)sa.num_scales);
    }
    assert_int_equal(trit_optim_set_step(ob, trit_optim_get_step(oa)), TRIT_OK);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(trit_optim_step(oa, 1e-3), TRIT_OK);
        assert_int_equal(trit_optim_step(ob, 1e-3), TRIT_OK);
    }
    assert_memory_equal(a->data, b->data, sizeof(float) * 6000);
    trit_optim_free(oa);
    trit_optim_free(ob);
    trit_tensor_free(a);
    trit_tensor_free(b);
}

// bf16 parameters (no master weights): each chunk widened, stepped, rounded. With nearest
// rounding the first step gives the f32 result rounded; the moments never read p (decoupled
// decay), so the codes and scales stay those of an f32 parameter with the same gradients.
static void test_bf16_params(void **state) {
    (void)state;
    enum { N = 10000 };
    trit_tensor *lp = param(TRIT_BF16, N, "w", 60), *fp = trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){1, N}, "w");
    assert_int_equal(trit_tensor_copy(fp, lp), TRIT_OK);
    fp->grad = trit_tensor_contiguous(lp->grad);
    const trit_optim_config c = trit_optim_adamw8bit(0.9, 0.95, 1e-8);
    trit_optim *a = trit_optim_new_single(&c, &lp, 1, 0.1), *b = trit_optim_new_single(&c, &fp, 1, 0.1);
    assert_non_null(a);
    assert_non_null(b);
    trit_optim_set_rounding(a, false, 0);
    for (int s = 0; s < 3; s++) {
        assert_int_equal(trit_optim_step(a, 1e-2), TRIT_OK);
        assert_int_equal(trit_optim_step(b, 1e-2), TRIT_OK);
        if (s == 0) {
            trit_tensor *r = trit_tensor_new(TRIT_BF16, 2, (int64_t[]){1, N});
            assert_int_equal(trit_tensor_copy(r, fp), TRIT_OK);
            assert_memory_equal(r->data, lp->data, trit_tensor_nbytes(r));
            trit_tensor_free(r);
        }
    }
    for (int k = 0; k < 2; k++) {
        trit_optim_state_buf sa, sb;
        assert_int_equal(trit_optim_get_state(a, k, &sa), TRIT_OK);
        assert_int_equal(trit_optim_get_state(b, k, &sb), TRIT_OK);
        assert_int_equal(sa.dtype, TRIT_U8);
        assert_memory_equal(sa.data, sb.data, N);
        assert_memory_equal(sa.scales, sb.scales, sizeof(float) * (size_t)sa.num_scales);
    }
    trit_optim_free(a);
    trit_optim_free(b);
    trit_tensor_free(lp);
    trit_tensor_free(fp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_step_vs_f64),
        cmocka_unit_test(test_first_step_and_small_tensors),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_copied_state_continues),
        cmocka_unit_test(test_bf16_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
