// Row kernels (kernels/rowops.h): every AVX2 and AVX-512 kernel against its portable reference
// on odd sizes (C = 1, 7, 17, 129, 385; rows = 1, 3, 50) and several argument combinations, and
// every kernel bit-identical with 1 and 2 threads. A width the CPU lacks is skipped with a message.
//
// Tolerance: |avx - ref| <= 1e-6 * (|ref| + floor), floor = 1 for results built from O(1)
// terms (so cancellation cannot fail it spuriously) and 0 for softmax probabilities, which must
// match relatively. The two sides differ only in the exp approximation (relative error < 1e-7)
// and the order of double sums. Column sums of norm weight/bias gradients, the embedding
// scatter and Adam(W) must be bit-identical to the reference.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_census.h"
#include "kernels/rowops.h"
#include "trit/base.h"

#define TOL 1e-6
#define IGNORE (-100)

// The implementations under test; IMPL_REF is the oracle.
enum { IMPL_REF, IMPL_AVX2, IMPL_AVX512, IMPL_N };
static const char *const IMPL_NAME[IMPL_N] = {"reference", "avx2", "avx512"};
#define PICK(name, impl)                                                                     \
    ((impl) == IMPL_AVX512 ? trit_kernel_##name##_avx512                                     \
     : (impl) == IMPL_AVX2 ? trit_kernel_##name##_avx2 : trit_kernel_##name##_ref_f32)

static bool have_impl(int impl) {
    const trit_cpu_isa l = trit_cpu_detected_level();
    return impl == IMPL_REF || (impl == IMPL_AVX2 ? l >= TRIT_CPU_AVX2 : l >= TRIT_CPU_AVX512);
}

// Inputs shared by all kernels for one (rows, C): four (rows, C) arrays, two (C) vectors,
// targets/indices, and valid statistics for the backward kernels.
typedef struct fixture {
    int64_t rows, C;
    int variant;                // which argument combination to exercise
    float *a, *b, *c, *d;       // (rows, C)
    float *w, *bias;            // (C)
    int32_t *t32;               // (rows): targets in [0, C) or IGNORE
    int64_t *t64;               // (rows): the same
    int32_t *idx;               // (rows): embedding rows in [0, 5)
    double *nstats, *rstats;    // (rows, 2): layernorm and rmsnorm stats of a
    double *cstats;             // (rows, 2): cross-entropy stats of a
    float *soft, *logsoft;      // (rows, C): softmax and log-softmax of a
} fixture;

static float *rnd(int64_t n, uint64_t stream, float lo, float hi) {
    float *p = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    assert_non_null(p);
    trit_rng_fill_uniform(p, n, 42, stream, 0, lo, hi);
    return p;
}

// special: put GELU saturation and overflow inputs (+-30, +-1e20) into every fifth element of a.
static fixture fixture_make(int64_t rows, int64_t C, int variant, bool special) {
    fixture f = {.rows = rows, .C = C, .variant = variant};
    const int64_t n = rows * C;
    f.a = rnd(n, 1, -4.0f, 4.0f);
    f.b = rnd(n, 2, -1.0f, 1.0f);
    f.c = rnd(n, 3, -1.0f, 1.0f);
    f.d = rnd(n, 4, -1.0f, 1.0f);
    f.w = rnd(C, 5, 0.5f, 1.5f);
    f.bias = rnd(C, 6, -0.5f, 0.5f);
    if (special)
        for (int64_t i = 0; i < n; i += 5) f.a[i] = (i / 5) % 4 == 0 ? 30.0f : (i / 5) % 4 == 1 ? -30.0f : (i / 5) % 4 == 2 ? 1e20f : -1e20f;
    f.t32 = malloc(sizeof(int32_t) * (size_t)rows);
    f.t64 = malloc(sizeof(int64_t) * (size_t)rows);
    f.idx = malloc(sizeof(int32_t) * (size_t)rows);
    f.nstats = malloc(sizeof(double) * 2 * (size_t)rows);
    f.rstats = malloc(sizeof(double) * 2 * (size_t)rows);
    f.cstats = malloc(sizeof(double) * 2 * (size_t)rows);
    f.soft = malloc(sizeof(float) * (size_t)n);
    f.logsoft = malloc(sizeof(float) * (size_t)n);
    assert_true(f.t32 && f.t64 && f.idx && f.nstats && f.rstats && f.cstats && f.soft && f.logsoft);
    for (int64_t i = 0; i < rows; i++) {
        f.t32[i] = i % 3 == 2 ? IGNORE : (int32_t)((i * 7 + 3) % C);
        f.t64[i] = f.t32[i];
        f.idx[i] = (int32_t)((i * 3) % 5);
    }
    float *y = malloc(sizeof(float) * (size_t)n);
    double *loss = malloc(sizeof(double) * (size_t)rows);
    assert_true(y && loss);
    trit_kernel_norm_fwd_ref_f32(y, f.nstats, NULL, f.a, NULL, NULL, NULL, rows, C, 1e-5, true);
    trit_kernel_norm_fwd_ref_f32(y, f.rstats, NULL, f.a, NULL, NULL, NULL, rows, C, 1e-5, false);
    trit_kernel_ce_fwd_ref_f32(f.cstats, loss, f.a, f.t32, false, IGNORE, rows, C);
    trit_kernel_softmax_fwd_ref_f32(f.soft, f.a, rows, C);
    trit_kernel_log_softmax_fwd_ref_f32(f.logsoft, f.a, rows, C);
    free(y);
    free(loss);
    return f;
}

static void fixture_free(fixture *f) {
    float *fs[] = {f->a, f->b, f->c, f->d, f->w, f->bias, f->soft, f->logsoft};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) free(fs[i]);
    free(f->t32);
    free(f->t64);
    free(f->idx);
    free(f->nstats);
    free(f->rstats);
    free(f->cstats);
}

// A kernel call: writes (or adds into) of[0 .. nf) and od[0 .. nd), laid out as it likes.
typedef void (*call_fn)(const fixture *f, float *of, double *od, int impl);

typedef struct kernel_case {
    const char *name;
    call_fn call;
    int64_t nf_per_elem, nf_per_col, nd_per_row;  // output sizes: * rows * C, * C, * rows
    double floor;                                 // < 0: must be bit-identical
    int variants;
} kernel_case;

static bool same_bits(const void *x, const void *y, size_t n) { return n == 0 || memcmp(x, y, n) == 0; }

// Runs `call` at (impl, threads) on outputs preset to the same random values.
static void run(const kernel_case *k, const fixture *f, int impl, int threads, float *of, int64_t nf, double *od,
                int64_t nd) {
    trit_rng_fill_uniform(of, nf, 7, 9, 0, -1.0f, 1.0f);
    for (int64_t i = 0; i < nd; i++) od[i] = 0.25 * (double)i;
    omp_set_num_threads(threads);
    k->call(f, of, od, impl);
}

static void check_close(const kernel_case *k, const fixture *f, int impl, const char *what, int64_t i, double got,
                        double want) {
    if (k->floor < 0 ? memcmp(&got, &want, sizeof got) == 0 : fabs(got - want) <= TOL * (fabs(want) + k->floor))
        return;
    if (isnan(got) && isnan(want)) return;
    fail_msg("%s (variant %d, rows %lld, C %lld): %s[%lld] %s %.9g vs reference %.9g", k->name, f->variant,
             (long long)f->rows, (long long)f->C, what, (long long)i, IMPL_NAME[impl], got, want);
}

static void check_case(const kernel_case *k, int64_t rows, int64_t C, int variant) {
    fixture f = fixture_make(rows, C, variant, variant == 1 && strncmp(k->name, "gelu", 4) == 0);
    const int64_t nf = k->nf_per_elem * rows * C + k->nf_per_col * C, nd = k->nd_per_row * rows;
    float *of[IMPL_N][2] = {{0}};
    double *od[IMPL_N][2] = {{0}};
    for (int v = 0; v < IMPL_N; v++) {
        if (!have_impl(v)) continue;
        for (int t = 0; t < 2; t++) {
            of[v][t] = malloc(sizeof(float) * (size_t)(nf + 1));
            od[v][t] = malloc(sizeof(double) * (size_t)(nd + 1));
            assert_true(of[v][t] && od[v][t]);
            run(k, &f, v, t + 1, of[v][t], nf, od[v][t], nd);
        }
        if (!same_bits(of[v][0], of[v][1], sizeof(float) * (size_t)nf) ||
            !same_bits(od[v][0], od[v][1], sizeof(double) * (size_t)nd))
            fail_msg("%s (%s, variant %d, rows %lld, C %lld): 1 and 2 threads differ", k->name, IMPL_NAME[v],
                     variant, (long long)rows, (long long)C);
        if (v == IMPL_REF) continue;
        for (int64_t i = 0; i < nf; i++) check_close(k, &f, v, "float out", i, of[v][0][i], of[IMPL_REF][0][i]);
        for (int64_t i = 0; i < nd; i++) check_close(k, &f, v, "double out", i, od[v][0][i], od[IMPL_REF][0][i]);
    }
    for (int v = 0; v < IMPL_N; v++)
        for (int t = 0; t < 2; t++) {
            free(of[v][t]);
            free(od[v][t]);
        }
    fixture_free(&f);
}

// ---- the calls -----------------------------------------------------------------------------------

static void call_norm_fwd(const fixture *f, float *of, double *od, int impl) {
    const int64_t n = f->rows * f->C;
    const int v = f->variant;
    const float *r = v == 1 || v == 3 ? f->b : NULL, *w = v != 2 ? f->w : NULL, *b = v == 0 || v == 1 ? f->bias : NULL;
    const bool center = v != 3;
    float *s = r ? of + n : NULL;
    PICK(norm_fwd, impl)(of, od, s, f->a, r, w, b, f->rows, f->C, 1e-5,
                                                                        center);
}

// Variant 4 stores (dx = d, dx2 = d) over outputs filled with NaN: every one must be written.
static void call_norm_bwd_x(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    const int64_t n = f->rows * f->C;
    const int v = f->variant;
    const bool center = v != 3, store = v == 4;
    const double *st = center ? f->nstats : f->rstats;
    float *dx2 = v == 1 || store ? of + n : NULL;
    const float *gres = v == 1 || store ? f->c : NULL, *w = v != 2 ? f->w : NULL;
    if (store) memset(of, 0xff, sizeof(float) * (size_t)(2 * n));
    PICK(norm_bwd_x, impl)(of, dx2, f->a, f->b, gres, w, st, f->rows, f->C, center, store);
    for (int64_t i = 0; store && i < 2 * n; i++)
        if (!isfinite(of[i])) fail_msg("norm_bwd_x (%s, store): output %lld left unwritten", IMPL_NAME[impl], (long long)i);
}

static void call_norm_bwd_params(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    float *db = f->variant == 1 ? NULL : of + f->C;
    PICK(norm_bwd_params, impl)(of, db, f->a, f->b, f->nstats,
                                                                                      f->rows, f->C);
}

static void call_gelu_fwd(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    const float *b = f->variant == 0 ? f->bias : NULL;
    PICK(gelu_fwd, impl)(of, f->a, b, f->rows, f->C);
}

// Variants: 0 dx + db with bias; 1 dx only, no bias (saturated inputs); 2 db only; 3 dx with bias.
static void call_gelu_bwd(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    const int v = f->variant;
    float *dx = v == 2 ? NULL : of, *db = v == 0 || v == 2 ? of + f->rows * f->C : NULL;
    const float *b = v == 1 ? NULL : f->bias;
    PICK(gelu_bwd, impl)(dx, db, f->a, b, f->b, f->rows, f->C);
}

static void call_softmax_fwd(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    PICK(softmax_fwd, impl)(of, f->a, f->rows, f->C);
}

static void call_softmax_bwd(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    PICK(softmax_bwd, impl)(of, f->soft, f->b, f->rows, f->C);
}

static void call_log_softmax_fwd(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    PICK(log_softmax_fwd, impl)(of, f->a, f->rows, f->C);
}

static void call_log_softmax_bwd(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    PICK(log_softmax_bwd, impl)(of, f->logsoft, f->b, f->rows,
                                                                                      f->C);
}

static void call_ce_fwd(const fixture *f, float *of, double *od, int impl) {
    (void)of;
    const bool t64 = f->variant == 1;
    const void *t = t64 ? (const void *)f->t64 : (const void *)f->t32;
    PICK(ce_fwd, impl)(od, od + 2 * f->rows, f->a, t, t64, IGNORE,
                                                                    f->rows, f->C);
}

static void call_ce_bwd(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    const bool t64 = f->variant == 1;
    const void *t = t64 ? (const void *)f->t64 : (const void *)f->t32;
    PICK(ce_bwd, impl)(of, f->a, f->cstats, t, t64, IGNORE, 0.37f,
                                                                    f->rows, f->C);
}

// In place on a copy of the logits (the float outputs).
static void call_ce_dlogits(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    const bool t64 = f->variant == 1;
    const void *t = t64 ? (const void *)f->t64 : (const void *)f->t32;
    memcpy(of, f->a, sizeof(float) * (size_t)(f->rows * f->C));
    PICK(ce_dlogits, impl)(of, f->cstats, t, t64, IGNORE, 0.37f, f->rows, f->C, false);
}

// The table is (5, C) at the front of the float outputs.
static void call_embedding_bwd(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    PICK(embedding_bwd, impl)(of, f->b, f->idx, false, f->rows,
                                                                                  f->C);
}

// p, m, v are the float outputs (3 * rows * C), g is fixture b; v must be >= 0.
static void call_adam(const fixture *f, float *of, double *od, int impl) {
    (void)od;
    const int64_t n = f->rows * f->C;
    float *p = of, *m = of + n, *v = of + 2 * n;
    for (int64_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    const trit_adam_scalars s = {.step = -1e-3f / 0.1f, .weight_decay = 0.01f, .decay_mul = 1.0f - 1e-3f * 0.1f,
                                 .b1 = 0.9f, .omb1 = 0.1f, .b2 = 0.95f, .omb2 = 0.05f, .bc2_sqrt = 0.2236068f,
                                 .eps = 1e-8f};
    PICK(adam, impl)(p, f->b, m, v, n, &s, f->variant == 0);
}

static const kernel_case CASES[] = {
    {"norm_fwd", call_norm_fwd, 2, 0, 2, 1.0, 4},
    {"norm_bwd_x", call_norm_bwd_x, 2, 0, 0, 1.0, 5},
    {"norm_bwd_params", call_norm_bwd_params, 0, 2, 0, -1, 2},
    {"gelu_fwd", call_gelu_fwd, 1, 0, 0, 1.0, 2},
    {"gelu_bwd", call_gelu_bwd, 1, 1, 0, 1.0, 4},
    {"softmax_fwd", call_softmax_fwd, 1, 0, 0, 0.0, 1},
    {"softmax_bwd", call_softmax_bwd, 1, 0, 0, 1.0, 1},
    {"log_softmax_fwd", call_log_softmax_fwd, 1, 0, 0, 1.0, 1},
    {"log_softmax_bwd", call_log_softmax_bwd, 1, 0, 0, 1.0, 1},
    {"ce_fwd", call_ce_fwd, 0, 0, 3, 1.0, 2},
    {"ce_bwd", call_ce_bwd, 1, 0, 0, 1.0, 2},
    {"embedding_bwd", call_embedding_bwd, 0, 5, 0, -1, 1},
    {"adam", call_adam, 3, 0, 0, -1, 2},
    {"ce_dlogits", call_ce_dlogits, 1, 0, 0, 1.0, 2},
};

// Names the widths this CPU cannot run (their checks are left out, not passed).
// Every width the CPU's own flags allow must be run; the others are named as skipped.
static void say_skipped(void) {
    census c = {.what = "row kernel widths"};
    for (int v = IMPL_REF; v < IMPL_N; v++) {
        const uint32_t needs = v == IMPL_REF ? 0 : v == IMPL_AVX2 ? TRIT_FEAT_AVX2 : TRIT_FEAT_AVX2 | TRIT_FEAT_AVX512;
        census_count(&c, IMPL_NAME[v], needs, census_cpu_features());
        if (have_impl(v)) census_ran(&c);
    }
    census_check(&c);
}

static void check_kernel(const kernel_case *k) {
    say_skipped();
    static const int64_t Cs[] = {1, 7, 17, 129, 385}, Rs[] = {1, 3, 50};
    const int saved = omp_get_max_threads();
    for (int v = 0; v < k->variants; v++)
        for (size_t ci = 0; ci < sizeof Cs / sizeof Cs[0]; ci++)
            for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++) check_case(k, Rs[ri], Cs[ci], v);
    omp_set_num_threads(saved);
}

#define KERNEL_TEST(i, name) \
    static void test_##name(void **state) { (void)state; check_kernel(&CASES[i]); }
KERNEL_TEST(0, norm_fwd)
KERNEL_TEST(1, norm_bwd_x)
KERNEL_TEST(2, norm_bwd_params)
KERNEL_TEST(3, gelu_fwd)
KERNEL_TEST(4, gelu_bwd)
KERNEL_TEST(5, softmax_fwd)
KERNEL_TEST(6, softmax_bwd)
KERNEL_TEST(7, log_softmax_fwd)
KERNEL_TEST(8, log_softmax_bwd)
KERNEL_TEST(9, ce_fwd)
KERNEL_TEST(10, ce_bwd)
KERNEL_TEST(11, embedding_bwd)
KERNEL_TEST(12, adam)
KERNEL_TEST(13, ce_dlogits)

// With bf16, each row's dlogits are the f32 ones rounded by trit_f32_to_bf16, packed into the
// row's first half, at every width and thread count; past V halves the row is left as it was.
// Rows longer than the in-place rounding's 1024-value blocks, and rows ignored, are included.
static void test_ce_dlogits_bf16(void **state) {
    (void)state;
    enum { ROWS = 7, MAXV = 2500 };
    static const int64_t Vs[] = {1, 7, 1024, 1031, MAXV};
    float *L = malloc(sizeof(float) * ROWS * MAXV), *want = malloc(sizeof(float) * ROWS * MAXV);
    float *got = malloc(sizeof(float) * ROWS * MAXV);
    double stats[2 * ROWS];
    int32_t t[ROWS];
    assert_non_null(L);
    assert_non_null(want);
    assert_non_null(got);
    const int saved = omp_get_max_threads();
    int checked = 0;
    for (size_t vi = 0; vi < sizeof Vs / sizeof Vs[0]; vi++) {
        const int64_t V = Vs[vi];
        trit_rng_fill_normal(L, ROWS * V, 3, (uint64_t)vi, 0, 0.0f, 4.0f);
        for (int i = 0; i < ROWS; i++) {
            t[i] = i == 2 ? IGNORE : (int32_t)((i * 131 + 5) % V);
            double m = -INFINITY, s = 0;
            for (int64_t j = 0; j < V; j++) m = fmax(m, L[i * V + j]);
            for (int64_t j = 0; j < V; j++) s += exp(L[i * V + j] - m);
            stats[2 * i] = m, stats[2 * i + 1] = log(s);
        }
        for (int impl = IMPL_REF; impl < IMPL_N; impl++) {
            if (!have_impl(impl)) continue;
            for (int threads = 1; threads <= 2; threads++) {
                omp_set_num_threads(threads);
                memcpy(want, L, sizeof(float) * (size_t)(ROWS * V));
                memcpy(got, L, sizeof(float) * (size_t)(ROWS * V));
                PICK(ce_dlogits, impl)(want, stats, t, false, IGNORE, 0.37f, ROWS, V, false);
                PICK(ce_dlogits, impl)(got, stats, t, false, IGNORE, 0.37f, ROWS, V, true);
                for (int i = 0; i < ROWS; i++) {
                    const uint16_t *h = (const uint16_t *)(got + i * V);
                    for (int64_t j = 0; j < V; j++)
                        if (h[j] != trit_f32_to_bf16(want[i * V + j]))
                            fail_msg("ce_dlogits bf16 (%s, V=%lld): row %d value %lld is 0x%04x, want 0x%04x",
                                     IMPL_NAME[impl], (long long)V, i, (long long)j, h[j],
                                     trit_f32_to_bf16(want[i * V + j]));
                    if (t[i] == IGNORE) continue;  // zeros throughout, either way
                    for (int64_t j = (V + 1) / 2; j < V; j++)  // untouched past the bf16 half
                        assert_memory_equal(&got[i * V + j], &want[i * V + j], sizeof(float));
                }
                checked++;
            }
        }
    }
    omp_set_num_threads(saved);
    assert_true(checked >= 10);  // the reference at least, on every V and thread count
    free(L);
    free(want);
    free(got);
}

// Adam over more than four chunks, so the chunk loop really runs on two threads.
static void test_adam_large(void **state) {
    (void)state;
    check_case(&CASES[12], 1, 100003, 0);
    check_case(&CASES[12], 1, 100003, 1);
}

// GELU values and slopes against closed forms in double at known points (the reference is
// checked too, so both sides cannot drift together), including saturation and overflow guards.
static void test_gelu_known_values(void **state) {
    (void)state;
    const float x[] = {0.0f, 1.0f, -1.0f, 0.5f, -3.0f, 5.0f, 12.0f, -12.0f, 1e20f, -1e20f, 40.0f, -40.0f};
    enum { N = sizeof x / sizeof x[0] };
    float y[IMPL_N][N], d[IMPL_N][N], one[N];
    for (int i = 0; i < N; i++) one[i] = 1.0f;
    say_skipped();
    for (int v = 0; v < IMPL_N; v++) {
        if (!have_impl(v)) continue;
        memset(d[v], 0, sizeof d[v]);
        PICK(gelu_fwd, v)(y[v], x, NULL, 1, N);
        PICK(gelu_bwd, v)(d[v], NULL, x, NULL, one, 1, N);
        for (int i = 0; i < N; i++) {
            const double xd = x[i], k = 0.79788456080286535588, u = k * (xd + 0.044715 * xd * xd * xd);
            const double th = fabs(xd) < 1e10 ? tanh(u) : (xd > 0 ? 1.0 : -1.0);
            const double want_y = 0.5 * xd * (1 + th);
            const double want_d = fabs(xd) < 1e10 ? 0.5 * (1 + th) + 0.5 * xd * (1 - th * th) * k * (1 + 3 * 0.044715 * xd * xd)
                                                  : (xd > 0 ? 1.0 : 0.0);
            if (fabs(y[v][i] - want_y) > 3e-7 * (fabs(want_y) + 1e-30) + 1e-30 || fabs(d[v][i] - want_d) > 1e-6)
                fail_msg("gelu %s at %g: value %.9g (want %.9g), slope %.9g (want %.9g)", IMPL_NAME[v],
                         (double)x[i], (double)y[v][i], want_y, (double)d[v][i], want_d);
        }
    }
}

// Adam and AdamW against torch.optim's update written out in double, three steps from zero
// state: the float kernels (reference and each vector width) within 2e-6 relative (1e-8 absolute
// for p, 1e-7 for m, whose sums can cancel), and the reference's double build within 1e-12 of the
// same update on its (float-rounded) scalars and gradients. The square root of v is the only
// root in the update, so taking 1/sqrt there would be off by orders of magnitude.
static void torch_adam(double *p, double *m, double *v, const double *g, int n, const trit_adam_scalars *s,
                       bool decoupled) {
    for (int i = 0; i < n; i++) {
        if (decoupled) p[i] *= s->decay_mul;
        const double d = decoupled ? g[i] : g[i] + (double)s->weight_decay * p[i];
        m[i] = (double)s->b1 * m[i] + (double)s->omb1 * d;
        v[i] = (double)s->b2 * v[i] + (double)s->omb2 * d * d;
        p[i] += (double)s->step * m[i] / (sqrt(v[i]) / (double)s->bc2_sqrt + (double)s->eps);
    }
}

static void test_adam_known_values(void **state) {
    (void)state;
    enum { N = 37, STEPS = 3 };
    const double lr = 1e-2, b1 = 0.9, b2 = 0.99, eps = 1e-8, wd = 0.1;
    say_skipped();
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        double p[N], m[N] = {0}, v[N] = {0}, pr[N], mr[N] = {0}, vr[N] = {0}, pd[N], md[N] = {0}, vd[N] = {0};
        float pf[IMPL_N][N], mf[IMPL_N][N], vf[IMPL_N][N];
        for (int i = 0; i < N; i++) p[i] = pr[i] = pd[i] = sin(1.0 + i);
        for (int k = 0; k < IMPL_N; k++)
            for (int i = 0; i < N; i++) pf[k][i] = (float)p[i], mf[k][i] = 0, vf[k][i] = 0;
        for (int t = 1; t <= STEPS; t++) {
            double g[N], gr[N];
            float gf[N];
            for (int i = 0; i < N; i++) g[i] = 0.5 * cos(3.0 * i + t), gf[i] = (float)g[i], gr[i] = gf[i];
            const double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
            const trit_adam_scalars exact = {.step = -lr / bc1, .weight_decay = decoupled ? 0 : wd,
                                             .decay_mul = decoupled ? 1 - lr * wd : 1, .b1 = b1, .omb1 = 1 - b1,
                                             .b2 = b2, .omb2 = 1 - b2, .bc2_sqrt = sqrt(bc2), .eps = eps};
            // torch.optim's update in double; the kernels' scalars are these rounded to float.
            for (int i = 0; i < N; i++) {
                if (decoupled) p[i] *= 1 - lr * wd;
                const double d = decoupled ? g[i] : g[i] + wd * p[i];
                m[i] = b1 * m[i] + (1 - b1) * d;
                v[i] = b2 * v[i] + (1 - b2) * d * d;
                p[i] -= lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + eps);
            }
            torch_adam(pr, mr, vr, gr, N, &exact, decoupled);  // the same on the kernels' inputs
            for (int k = 0; k < IMPL_N; k++)
                if (have_impl(k)) PICK(adam, k)(pf[k], gf, mf[k], vf[k], N, &exact, decoupled);
            trit_kernel_adam_ref_f64(pd, gr, md, vd, N, &exact, decoupled);
        }
        for (int i = 0; i < N; i++) {
            if (fabs(pd[i] - pr[i]) > 1e-12 || fabs(md[i] - mr[i]) > 1e-12 || fabs(vd[i] - vr[i]) > 1e-12)
                fail_msg("adam%s double build element %d: p %.15g m %.15g v %.15g, want %.15g %.15g %.15g",
                         decoupled ? "w" : "", i, pd[i], md[i], vd[i], pr[i], mr[i], vr[i]);
            for (int k = 0; k < IMPL_N; k++) {
                if (!have_impl(k)) continue;
                const double dp = fabs(pf[k][i] - p[i]), dm = fabs(mf[k][i] - m[i]), dv = fabs(vf[k][i] - v[i]);
                if (dp > 2e-6 * fabs(p[i]) + 1e-8 || dm > 2e-6 * fabs(m[i]) + 1e-7 || dv > 2e-6 * v[i] + 1e-12)
                    fail_msg("adam%s %s element %d: p %.9g m %.9g v %.9g, torch's update gives %.9g %.9g %.9g",
                             decoupled ? "w" : "", IMPL_NAME[k], i, (double)pf[k][i], (double)mf[k][i],
                             (double)vf[k][i], p[i], m[i], v[i]);
            }
        }
    }
}

// The vectorized exp, seen through the cross-entropy backward with stats (max 0, lse 0) and
// scale 1, so dx[j] = exp(x[j]): relative error < 2e-7 against double exp on 2^20 points
// spread over [-87.3, 88.7] (normal float results), and the special values.
static void check_exp_accuracy(int impl) {
    enum { N = 1 << 20, NS = 6 };
    const float specials[NS] = {-INFINITY, INFINITY, NAN, -200.0f, 200.0f, 0.0f};
    const float want_s[NS] = {0.0f, INFINITY, NAN, 0.0f, INFINITY, 1.0f};
    const int64_t V = N + NS + 1;
    float *x = malloc(sizeof(float) * (size_t)V), *dx = calloc((size_t)V, sizeof(float));
    assert_true(x && dx);
    for (int64_t j = 0; j < N; j++) x[j] = (float)(-87.3 + (88.7 + 87.3) * (double)j / (N - 1));
    for (int j = 0; j < NS; j++) x[N + j] = specials[j];
    x[V - 1] = 0.0f;
    const int64_t target = V - 1;
    const double stats[2] = {0.0, 0.0};
    PICK(ce_bwd, impl)(dx, x, stats, &target, true, IGNORE, 1.0f, 1, V);
    double worst = 0;
    for (int64_t j = 0; j < N; j++) {
        const double e = exp((double)x[j]), rel = fabs((double)dx[j] - e) / e;
        if (rel > worst) worst = rel;
    }
    printf("  exp (%s): max relative error %.3g over [-87.3, 88.7]\n", IMPL_NAME[impl], worst);
    assert_true(worst < 2e-7);
    for (int j = 0; j < NS; j++) {
        const float got = dx[N + j];
        if (!(isnan(want_s[j]) ? isnan(got) : got == want_s[j]))
            fail_msg("exp %s(%g) = %g, want %g", IMPL_NAME[impl], (double)specials[j], (double)got, (double)want_s[j]);
    }
    assert_true(dx[V - 1] == 0.0f);  // exp(0) - 1 at the target
    free(x);
    free(dx);
}

// The x86 exps agree with each other bit for bit (same polynomial; 2^n applied with one
// rounding either way), subnormal results included.
static void test_exp_accuracy(void **state) {
    (void)state;
    say_skipped();
    for (int v = IMPL_AVX2; v < IMPL_N; v++)
        if (have_impl(v)) check_exp_accuracy(v);
    if (!have_impl(IMPL_AVX512)) return;
    enum { N = 4096 };
    float x[N], e[2][N];
    for (int j = 0; j < N; j++) x[j] = -104.0f + 193.0f * (float)j / (N - 1);
    for (int v = 0; v < 2; v++) {  // dx = exp(x) - onehot(0)
        const int64_t target = 0;
        memset(e[v], 0, sizeof e[v]);
        PICK(ce_bwd, v ? IMPL_AVX512 : IMPL_AVX2)(e[v], x, (const double[2]){0.0, 0.0}, &target, true, IGNORE, 1.0f,
                                                    1, N);
    }
    assert_memory_equal(e[0], e[1], sizeof e[0]);
}

// GELU backward with dx the incoming gradient itself (the planner's in-place case) stores
// g * gelu'(x + b) over g, bit for bit what it adds into a zeroed dx, with and without the bias
// and its gradient, for every implementation.
static void test_gelu_bwd_in_place(void **state) {
    (void)state;
    say_skipped();
    enum { ROWS = 3, N = 129 };
    float *x = rnd(ROWS * N, 81, -3, 3), *b = rnd(N, 82, -1, 1), *g = rnd(ROWS * N, 83, -1, 1);
    float dx[ROWS * N], in_place[ROWS * N], db[N], db2[N];
    for (int impl = 0; impl < IMPL_N; impl++)
        for (int v = 0; have_impl(impl) && v < 3; v++) {
            const float *bias = v == 0 ? NULL : b;
            float *dbp = v == 2 ? db : NULL, *dbp2 = v == 2 ? db2 : NULL;
            memset(dx, 0, sizeof dx), memset(db, 0, sizeof db), memset(db2, 0, sizeof db2);
            memcpy(in_place, g, sizeof in_place);
            PICK(gelu_bwd, impl)(dx, dbp, x, bias, g, ROWS, N);
            PICK(gelu_bwd, impl)(in_place, dbp2, x, bias, in_place, ROWS, N);
            assert_memory_equal(dx, in_place, sizeof dx);
            assert_memory_equal(db, db2, sizeof db);
            assert_memory_not_equal(dx, g, sizeof dx);
        }
    free(x), free(b), free(g);
}

// Attention of one query over n cached keys: every implementation, for f32 keys and values and
// for f16 ones (the same values rounded to f16), against attention
// computed here in double from its definition (scores, softmax, weighted sum of values), on key
// counts around the vector widths and head sizes that are not multiples of 8 or 16 or that take
// several 64-column passes; the f64 reference must agree to 1e-12. Key and value rows are padded
// with sentinels no implementation may read into the result. Scores reach +-10, so the softmax
// is far from uniform. Tolerance: a probability left in p is exp of a score difference, so its
// relative error is bounded by the two scores' f32 summation errors, hs u scale sum_d |q_d k_dj|
// each (u = 2^-24; the standard bound of a recursive sum), plus 1e-6 for exp; an output, a convex
// combination of values in [-1, 1], is within twice the largest of those, plus 1e-6.
// The f16 kernel gets the same keys and values rounded to f16 (and the definition is evaluated
// on the rounded values).
#define PICK_F16(impl)                                                                     \
    ((impl) == IMPL_AVX512 ? trit_kernel_attend_f16_avx512                                 \
     : (impl) == IMPL_AVX2 ? trit_kernel_attend_f16_avx2 : trit_kernel_attend_f16_ref_f32)

static uint16_t *to_f16(float *x, int64_t n) {  // x rounded to f16 in place; its f16 codes
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
    assert_non_null(h);
    for (int64_t i = 0; i < n; i++) {
        h[i] = trit_f32_to_f16(x[i]);
        x[i] = trit_f16_to_f32(h[i]);
    }
    return h;
}

static void check_attend(int impl, int64_t n, int64_t hs, bool f16) {
    // Keys in whole blocks (rowops.h): positions past n in the last block are sentinels.
    const int64_t nk = (n + TRIT_ATTEND_KEY_BLOCK - 1) / TRIT_ATTEND_KEY_BLOCK * TRIT_ATTEND_KEY_BLOCK, ldv = hs + 3;
    float *q = rnd(hs, 71, -1, 1), *kt = rnd(hs * nk, 72, -1, 1), *v = rnd(n * ldv, 73, -1, 1);
    float *y = malloc(sizeof(float) * (size_t)hs), *p = malloc(sizeof(float) * (size_t)n);
    double *s = malloc(sizeof(double) * (size_t)n), *yd = malloc(sizeof(double) * (size_t)hs);
    double *pd = malloc(sizeof(double) * (size_t)n), *qd = malloc(sizeof(double) * (size_t)hs);
    double *ktd = malloc(sizeof(double) * (size_t)(hs * nk)), *vd = malloc(sizeof(double) * (size_t)(n * ldv));
    assert_true(y && p && s && yd && pd && qd && ktd && vd);
    const float sentinel = f16 ? 60000.0f : 1e30f;
    for (int64_t d = 0; d < hs; d++) {
        q[d] *= 4.0f;
        for (int64_t j = n; j < nk; j++) kt[trit_attend_key_at(d, j, hs)] = sentinel;  // past the last key
    }
    for (int64_t j = 0; j < n; j++)
        for (int64_t d = hs; d < ldv; d++) v[j * ldv + d] = sentinel;
    uint16_t *kt16 = f16 ? to_f16(kt, hs * nk) : NULL, *v16 = f16 ? to_f16(v, n * ldv) : NULL;
    const double scale = 1.0 / sqrt((double)hs);
    double mx = -INFINITY, sum = 0, worst = 0;  // worst: the largest score error bound
    for (int64_t j = 0; j < n; j++) {
        double abs_sum = 0;
        s[j] = 0;
        for (int64_t d = 0; d < hs; d++) {
            s[j] += (double)q[d] * (double)kt[trit_attend_key_at(d, j, hs)];
            abs_sum += fabs((double)q[d] * (double)kt[trit_attend_key_at(d, j, hs)]);
        }
        s[j] *= scale;
        mx = fmax(mx, s[j]);
        worst = fmax(worst, (double)hs * 0x1p-24 * scale * abs_sum);
    }
    const double tol_p = 2 * worst + 1e-6, tol_y = 2 * tol_p + 1e-6;
    for (int64_t j = 0; j < n; j++) sum += exp(s[j] - mx);
    if (f16)
        PICK_F16(impl)(y, p, q, kt16, v16, ldv, n, hs, (float)scale);
    else
        PICK(attend, impl)(y, p, q, kt, v, ldv, n, hs, (float)scale);
    for (int64_t i = 0; i < hs; i++) qd[i] = q[i];
    for (int64_t i = 0; i < hs * nk; i++) ktd[i] = kt[i];
    for (int64_t i = 0; i < n * ldv; i++) vd[i] = v[i];
    trit_kernel_attend_ref_f64(yd, pd, qd, ktd, vd, ldv, n, hs, scale);
    for (int64_t j = 0; j < n; j++) {
        const double want = exp(s[j] - mx);
        if (!(fabs(p[j] - want) <= tol_p * want))
            fail_msg("%s attend%s n=%lld hs=%lld: p[%lld] = %.9g, want %.9g", IMPL_NAME[impl], f16 ? " f16" : "",
                     (long long)n, (long long)hs, (long long)j, p[j], want);
    }
    for (int64_t d = 0; d < hs; d++) {
        double want = 0;
        for (int64_t j = 0; j < n; j++) want += exp(s[j] - mx) / sum * (double)v[j * ldv + d];
        if (!(fabs(y[d] - want) <= tol_y) || !(fabs(yd[d] - want) <= 1e-12))
            fail_msg("%s attend%s n=%lld hs=%lld: y[%lld] = %.9g (f64 reference %.15g), want %.15g", IMPL_NAME[impl],
                     f16 ? " f16" : "", (long long)n, (long long)hs, (long long)d, y[d], yd[d], want);
    }
    free(q), free(kt), free(v), free(y), free(p), free(s), free(yd), free(pd), free(qd), free(ktd), free(vd);
    free(kt16), free(v16);
}

static void test_attend(void **state) {
    (void)state;
    say_skipped();
    const int64_t ns[] = {1, 2, 7, 16, 17, 63, 64, 65, 100, 257}, hss[] = {1, 8, 17, 48, 64, 80, 129};
    for (int impl = 0; impl < IMPL_N; impl++)
        for (size_t i = 0; have_impl(impl) && i < sizeof ns / sizeof ns[0]; i++)
            for (size_t j = 0; j < sizeof hss / sizeof hss[0]; j++)
                for (int f16 = 0; f16 < 2; f16++) check_attend(impl, ns[i], hss[j], f16);
}

// The f32 entry points follow trit_cpu_set_level: the reference's bits at TRIT_CPU_REF, the AVX2
// kernel's at TRIT_CPU_AVX2, the AVX-512 kernel's at TRIT_CPU_AVX512.
static void test_dispatch(void **state) {
    (void)state;
    say_skipped();
    fixture f = fixture_make(3, 129, 0, false);
    const int64_t n = 3 * 129;
    float *want = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
    assert_true(want && got);
    const trit_cpu_isa levels[IMPL_N] = {TRIT_CPU_REF, TRIT_CPU_AVX2, TRIT_CPU_AVX512};
    for (int l = 0; l < IMPL_N; l++) {
        if (!have_impl(l)) continue;
        assert_int_equal(trit_cpu_set_level(levels[l]), TRIT_OK);
        PICK(softmax_fwd, l)(want, f.a, 3, 129);
        trit_kernel_softmax_fwd_f32(got, f.a, 3, 129);
        assert_memory_equal(want, got, sizeof(float) * (size_t)n);
        PICK(attend, l)(want, want + 3, f.a, f.b, f.c, 3, 100, 3, 0.25f);  // kt (2, 3, 64) of b, v (100, 3) of c
        trit_kernel_attend_f32(got, got + 3, f.a, f.b, f.c, 3, 100, 3, 0.25f);
        assert_memory_equal(want, got, sizeof(float) * 103);
        PICK(gelu_fwd, l)(want, f.a, f.bias, 3, 129);
        trit_kernel_gelu_fwd_f32(got, f.a, f.bias, 3, 129);
        assert_memory_equal(want, got, sizeof(float) * (size_t)n);
    }
    trit_cpu_set_level(trit_cpu_detected_level());
    free(want);
    free(got);
    fixture_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm_fwd),        cmocka_unit_test(test_norm_bwd_x),
        cmocka_unit_test(test_norm_bwd_params), cmocka_unit_test(test_gelu_fwd),
        cmocka_unit_test(test_gelu_bwd),        cmocka_unit_test(test_softmax_fwd),
        cmocka_unit_test(test_softmax_bwd),     cmocka_unit_test(test_log_softmax_fwd),
        cmocka_unit_test(test_log_softmax_bwd), cmocka_unit_test(test_ce_fwd),
        cmocka_unit_test(test_ce_bwd),          cmocka_unit_test(test_embedding_bwd),
        cmocka_unit_test(test_adam),            cmocka_unit_test(test_adam_large),
        cmocka_unit_test(test_ce_dlogits),      cmocka_unit_test(test_ce_dlogits_bf16),
        cmocka_unit_test(test_gelu_known_values), cmocka_unit_test(test_adam_known_values),
        cmocka_unit_test(test_exp_accuracy),
        cmocka_unit_test(test_gelu_bwd_in_place), cmocka_unit_test(test_attend),
        cmocka_unit_test(test_dispatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
