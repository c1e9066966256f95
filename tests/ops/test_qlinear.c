// linear with a frozen quantized weight against the same linear over the weight's decoded f32
// values (trit_dequantize), for every quantized row of the dtype table (integer codes with and
// without zero points and double-quantized scales, NF4, FP8, ternary 2-bit and base 3, q8_0,
// q4_0 and ggml's ternary blocks): forward and the input gradient, odd shapes, 1 vs 2 threads,
// bf16 and f16 activations, the f64 build, the refusal of a trainable quantized weight, and the
// arena holding no decoded copy of the weight.
//
// Tolerance. Both graphs multiply the same values (the quantized op decodes chunks of W to
// exactly the values trit_dequantize gives) and differ only in how the fp32 GEMM orders each
// sum (W is split into row chunks). A sum of n products in fp32 lies within gamma_n * sum |terms|
// of the exact value in any order (gamma_n = n u / (1 - n u), u = 2^-24), so two orders differ
// by at most 2 gamma_n sum |terms|: per output y[m, j] <= 2 gamma_{K+1} (|b_j| + sum_k |x_mk
// w_jk|), per input gradient dx[m, k] <= 2 gamma_N sum_j |dy_mj w_jk|. (In practice the bits are
// equal; the bound is what the contract promises.)
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gradcheck.h"
#include "qweight_check.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- one run: loss = sum(f(linear(x, w, b)) * r), forward and backward -----------------------

typedef struct lin_run {
    double *y;   // the kept output (rows, N)
    double *dx;  // d loss / d x (rows, K)
    trit_graph_memory mem;
} lin_run;

static double *values(const trit_tensor *t) {
    const int64_t n = trit_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = trit_tensor_get_flat(t, i);
    return v;
}

static void run_free(lin_run *r) {
    free(r->y);
    free(r->dx);
}

enum {
    RUN_GELU = 1,   // gelu(linear(...)): fused to linear + bias_gelu by the compiler
    RUN_X_ACT = 2,  // x enters as an activation (1 * x), which 16-bit policies cast, not as the parameter
};

// x0: the input's values and shape (copied into a trainable parameter, so that backward makes
// its gradient); pol NULL: a plain graph of dt; opts: RUN_*.
static void run_linear(const char *what, const trit_compute_policy *pol, trit_dtype dt, const trit_tensor *x0,
                       trit_tensor *w, trit_tensor *b, const trit_tensor *r, unsigned opts, lin_run *out) {
    trit_graph *g = pol ? trit_graph_new_policy(pol) : trit_graph_new(dt);
    trit_tensor *x = trit_tensor_new_param(dt, x0->ndim, x0->shape, "x");
    trit_tensor *rr = trit_tensor_new(dt, r->ndim, r->shape);
    assert_non_null(g);
    assert_non_null(x);
    assert_non_null(rr);
    assert_int_equal(trit_tensor_copy(x, x0), TRIT_OK);
    assert_int_equal(trit_tensor_copy(rr, r), TRIT_OK);
    trit_tensor *y = trit_linear(g, opts & RUN_X_ACT ? trit_scale(g, x, 1.0) : x, w, b);
    if (opts & RUN_GELU) y = trit_gelu(g, y);
    if (y) trit_graph_keep(g, y);
    trit_tensor *loss = y ? trit_sum(g, trit_mul(g, y, rr), 0, NULL, false) : NULL;
    if (!loss || trit_graph_compile(g, loss) != TRIT_OK) fail_msg("%s: build/compile: %s", what, trit_last_error());
    trit_graph_zero_grad(g);
    if (trit_graph_forward(g) != TRIT_OK || trit_graph_backward(g) != TRIT_OK)
        fail_msg("%s: run: %s", what, trit_last_error());
    out->y = values(y);
    out->dx = values(x->grad);
    assert_int_equal(trit_graph_memory_report(g, &out->mem), TRIT_OK);
    trit_graph_free(g);
    trit_tensor_free(x);
    trit_tensor_free(rr);
}

// ---- bounds --------------------------------------------------------------------------------

// Per element magnitudes of the two sums, from the decoded weight wd (N, K), x (rows, K), bias
// (N) or NULL and r = d loss / d y (rows, N): ty[m, j] = |b_j| + sum_k |x_mk w_jk|, tdx[m, k] =
// sum_j |r_mj w_jk|.
static void magnitudes(const trit_tensor *wd, const trit_tensor *x, const trit_tensor *b, const trit_tensor *r,
                       double *ty, double *tdx) {
    const int64_t N = wd->shape[0], K = wd->shape[1], rows = trit_tensor_numel(x) / K;
    for (int64_t m = 0; m < rows; m++) {
        for (int64_t k = 0; k < K; k++) tdx[m * K + k] = 0;
        for (int64_t j = 0; j < N; j++) {
            double s = b ? fabs(trit_tensor_get_flat(b, j)) : 0;
            const double rv = fabs(trit_tensor_get_flat(r, m * N + j));
            for (int64_t k = 0; k < K; k++) {
                const double wv = fabs(trit_tensor_get_flat(wd, j * K + k));
                s += fabs(trit_tensor_get_flat(x, m * K + k)) * wv;
                tdx[m * K + k] += rv * wv;
            }
            ty[m * N + j] = s;
        }
    }
}

// |a - ref| <= coef * mag elementwise; returns the largest |a - ref| / (coef * mag).
static double check_within(const char *what, const double *a, const double *ref, const double *mag, double coef,
                           int64_t n) {
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs(a[i] - ref[i]), tol = coef * mag[i] + 1e-30;
        if (!(d <= tol)) fail_msg("%s: element %lld is %.9g, expected %.9g within %.3g", what, (long long)i, a[i], ref[i], tol);
        if (d / tol > worst) worst = d / tol;
    }
    return worst;
}

// ---- the formats and shapes --------------------------------------------------------------

typedef struct qcase {
    qw_format f;
    int64_t rows, K, N;
    bool bias, leading;  // leading: x is (2, rows / 2, K), rows even
} qcase;

static const qcase CASES[] = {
    {{TRIT_QINT8, TRIT_QGROUP_CHANNEL, false, 0}, 7, 37, 33, true, false},  // K odd (blocks of 1)
    {{TRIT_QINT8, 32, true, 16}, 33, 96, 7, false, false},
    {{TRIT_QINT8, TRIT_QGROUP_TENSOR, false, 0}, 1, 37, 33, true, false},
    {{TRIT_QINT4, 32, false, 0}, 1, 96, 33, true, false},
    {{TRIT_QINT4, 32, true, 16}, 33, 96, 7, true, false},
    {{TRIT_QINT4, TRIT_QGROUP_CHANNEL, true, 0}, 34, 38, 7, true, true},  // K = 38: not a multiple of 4 or 32
    {{TRIT_QINT2, 64, false, 0}, 7, 128, 33, false, false},
    {{TRIT_QINT2, 32, true, 16}, 1, 96, 33, true, false},
    {{TRIT_NF4, 64, false, 256}, 33, 128, 33, true, false},  // QLoRA: NF4 blocks of 64, double-quantized scales
    {{TRIT_NF4, TRIT_QGROUP_CHANNEL, false, 0}, 7, 70, 7, false, false},
    {{TRIT_F8_E4M3, TRIT_QGROUP_CHANNEL, false, 0}, 7, 37, 33, true, false},
    {{TRIT_F8_E5M2, TRIT_QGROUP_TENSOR, false, 0}, 33, 37, 7, true, false},
    {{TRIT_F8_E4M3, 16, false, 16}, 1, 48, 33, false, false},
    {{TRIT_TERNARY, TRIT_QGROUP_TENSOR, false, 0}, 7, 100, 33, true, false},
    {{TRIT_TERNARY, 64, false, 0}, 33, 128, 7, false, false},
    {{TRIT_TERNARY_B3, TRIT_QGROUP_TENSOR, false, 0}, 7, 192, 33, true, false},
    {{TRIT_TERNARY_B3, 64, false, 16}, 1, 128, 33, false, false},
    {{TRIT_Q8_0, 0, false, 0}, 33, 96, 7, true, false},
    {{TRIT_Q4_0, 0, false, 0}, 7, 64, 33, true, false},
    {{TRIT_TQ2_0, 0, false, 0}, 7, 256, 7, true, false},
    {{TRIT_TQ1_0, 0, false, 0}, 1, 256, 7, false, false},
    // Three row chunks of the decoded weight (1100 x 768 f32 is 3.2 MB against 2 MB a chunk).
    {{TRIT_QINT4, 128, false, 0}, 33, 768, 1100, true, false},
};

// x (rows, K) or (2, rows / 2, K) and r (rows, N) or (2, rows / 2, N) for case c.
static void case_inputs(const qcase *c, uint64_t seed, trit_tensor **x, trit_tensor **r) {
    const int64_t xs2[2] = {c->rows, c->K}, xs3[3] = {2, c->rows / 2, c->K};
    const int64_t rs2[2] = {c->rows, c->N}, rs3[3] = {2, c->rows / 2, c->N};
    *x = qw_tensor(c->leading ? 3 : 2, c->leading ? xs3 : xs2, -1.0, 1.0, seed + 1, false);
    *r = qw_tensor(c->leading ? 3 : 2, c->leading ? rs3 : rs2, -1.0, 1.0, seed + 2, false);
}

typedef struct case_run {
    trit_tensor *wq, *wd, *b, *x, *r;
    lin_run q, d;  // with the quantized weight, with its decoded values
} case_run;

static void case_run_free(case_run *cr) {
    trit_tensor_free(cr->wq);
    trit_tensor_free(cr->wd);
    trit_tensor_free(cr->b);
    trit_tensor_free(cr->x);
    trit_tensor_free(cr->r);
    run_free(&cr->q);
    run_free(&cr->d);
}

static void case_make(const qcase *c, uint64_t seed, case_run *cr) {
    memset(cr, 0, sizeof *cr);
    cr->wq = qw_make(&c->f, c->N, c->K, seed, &cr->wd);
    cr->b = c->bias ? qw_tensor(1, &c->N, -1.0, 1.0, seed + 3, true) : NULL;
    case_inputs(c, seed, &cr->x, &cr->r);
}

// Forward and input gradient of every format against the decoded weight.
static void test_formats(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const qcase *c = &CASES[i];
        char name[96], what[160];
        qw_format_name(&c->f, name, sizeof name);
        case_run cr;
        case_make(c, 100 + i, &cr);
        snprintf(what, sizeof what, "%s, x (%lld, %lld), N %lld", name, (long long)c->rows, (long long)c->K,
                 (long long)c->N);
        run_linear(what, NULL, TRIT_F32, cr.x, cr.wq, cr.b, cr.r, 0, &cr.q);
        run_linear(what, NULL, TRIT_F32, cr.x, cr.wd, cr.b, cr.r, 0, &cr.d);
        double *ty = malloc(sizeof(double) * (size_t)(c->rows * c->N)), *tdx = malloc(sizeof(double) * (size_t)(c->rows * c->K));
        magnitudes(cr.wd, cr.x, cr.b, cr.r, ty, tdx);
        const double ey = check_within(what, cr.q.y, cr.d.y, ty, 2 * qw_gamma(c->K + 1), c->rows * c->N);
        const double ex = check_within(what, cr.q.dx, cr.d.dx, tdx, 2 * qw_gamma(c->N), c->rows * c->K);
        printf("  %-32s y %.2g, dx %.2g of the bound\n", what, ey, ex);
        free(ty);
        free(tdx);
        case_run_free(&cr);
    }
}

// The same graph with 1 and 2 threads gives the same bits (the chunked case: GEMMs and decoding
// both split among threads).
static void test_threads(void **state) {
    (void)state;
    const int saved = omp_get_max_threads();
    const qcase *cases[2] = {&CASES[sizeof CASES / sizeof CASES[0] - 1], &CASES[8]};
    for (int i = 0; i < 2; i++) {
        case_run cr;
        case_make(cases[i], 7 + i, &cr);
        lin_run one, two;
        omp_set_num_threads(1);
        run_linear("1 thread", NULL, TRIT_F32, cr.x, cr.wq, cr.b, cr.r, 0, &one);
        omp_set_num_threads(2);
        run_linear("2 threads", NULL, TRIT_F32, cr.x, cr.wq, cr.b, cr.r, 0, &two);
        const int64_t ny = cases[i]->rows * cases[i]->N, nx = cases[i]->rows * cases[i]->K;
        assert_memory_equal(one.y, two.y, sizeof(double) * (size_t)ny);
        assert_memory_equal(one.dx, two.dx, sizeof(double) * (size_t)nx);
        run_free(&one);
        run_free(&two);
        case_run_free(&cr);
    }
    omp_set_num_threads(saved);
}

// Under bf16 and f16 activations: W is decoded into the activation dtype, which is what the
// decoded f32 weight becomes in the same graph (bf16 at medium precision: rounded by the GEMM's
// packing; f16: a cast copy), so the two graphs multiply the same values (bound as above, the
// magnitudes those of 16-bit roundings: x 1.01). Against fp32, bf16's tolerance: each product's
// operands are rounded to bf16 (relative error 2^-9 each), so a sum moves by at most (2^-8 +
// 2^-18) sum |terms| on top of the two orders' 2 gamma.
static void test_lowp(void **state) {
    (void)state;
    const qcase c = {{TRIT_NF4, 64, false, 256}, 33, 192, 65, true, false};
    case_run cr;
    case_make(&c, 31, &cr);
    double *ty = malloc(sizeof(double) * (size_t)(c.rows * c.N)), *tdx = malloc(sizeof(double) * (size_t)(c.rows * c.K));
    magnitudes(cr.wd, cr.x, cr.b, cr.r, ty, tdx);
    lin_run f32;
    run_linear("fp32", NULL, TRIT_F32, cr.x, cr.wd, cr.b, cr.r, 0, &f32);
    // bf16 with x a parameter (read in f32, rounded by the GEMM's packing: W decoded in f32) and
    // with x an activation (cast to bf16: W decoded into bf16), then f16 (x cast: W in f16).
    const trit_compute_policy pols[2] = {{TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM}, {TRIT_F32, TRIT_F16, TRIT_MATMUL_HIGHEST}};
    for (int p = 0; p < 3; p++) {
        const char *what = p == 0 ? "bf16" : p == 1 ? "bf16, x an activation" : "f16";
        const unsigned opts = p == 1 ? RUN_X_ACT : 0;
        lin_run q, d;
        run_linear(what, &pols[p / 2], TRIT_F32, cr.x, cr.wq, cr.b, cr.r, opts, &q);
        run_linear(what, &pols[p / 2], TRIT_F32, cr.x, cr.wd, cr.b, cr.r, opts, &d);
        check_within(what, q.y, d.y, ty, 1.01 * 2 * qw_gamma(c.K + 1), c.rows * c.N);
        check_within(what, q.dx, d.dx, tdx, 1.01 * 2 * qw_gamma(c.N), c.rows * c.K);
        // No cast copy of the quantized weight (f16 casts the trainable x, bf16 at medium reads it as it is).
        assert_int_equal(q.mem.param_copy_bytes, p < 2 ? 0 : (size_t)(c.rows * c.K) * 2);
        if (p < 2) {
            check_within("bf16 vs fp32", q.y, f32.y, ty, 0x1p-8 + 0x1p-18 + 1.01 * 2 * qw_gamma(c.K + 1), c.rows * c.N);
            check_within("bf16 vs fp32 (dx)", q.dx, f32.dx, tdx, 0x1p-8 + 0x1p-18 + 1.01 * 2 * qw_gamma(c.N), c.rows * c.K);
        }
        run_free(&q);
        run_free(&d);
    }
    // gelu(linear(x, W, b)) under bf16: the compiler moves the bias into bias_gelu, which reads the
    // linear's output in bf16, so the quantized forward writes a 16-bit output. The two graphs'
    // pre-activations differ by the orders' bound before rounding to bf16 and then by at most one
    // bf16 step (2^-8 relative); gelu's slope is below 1.13, so outputs stay within 1.13 (2^-8 +
    // 2 gamma) (|b| + sum |x w|). The input gradient is only required to be close (gelu' of inputs
    // one bf16 step apart, times bf16 operands): 2^-6 of sum |dy w|.
    lin_run q, d;
    run_linear("bf16 gelu", &pols[0], TRIT_F32, cr.x, cr.wq, cr.b, cr.r, RUN_GELU, &q);
    run_linear("bf16 gelu", &pols[0], TRIT_F32, cr.x, cr.wd, cr.b, cr.r, RUN_GELU, &d);
    check_within("bf16 gelu", q.y, d.y, ty, 1.13 * (0x1p-8 + 1.01 * 2 * qw_gamma(c.K + 1)), c.rows * c.N);
    check_within("bf16 gelu (dx)", q.dx, d.dx, tdx, 0x1p-6, c.rows * c.K);
    run_free(&q);
    run_free(&d);
    run_free(&f32);
    free(ty);
    free(tdx);
    case_run_free(&cr);
}

// The f64 build (the reference path) decodes into doubles: the same values, f64 sums, so the two
// orders differ by 2 gamma_n with u = 2^-53 (here 1e-12 of the magnitudes covers it).
static void test_f64(void **state) {
    (void)state;
    const qcase c = {{TRIT_QINT4, 32, true, 16}, 34, 96, 33, true, true};
    case_run cr;
    case_make(&c, 41, &cr);
    trit_tensor *b64 = trit_tensor_new(TRIT_F64, 1, &c.N);
    trit_tensor *wd64 = trit_tensor_new(TRIT_F64, 2, cr.wd->shape);
    assert_int_equal(trit_tensor_copy(b64, cr.b), TRIT_OK);
    assert_int_equal(trit_tensor_copy(wd64, cr.wd), TRIT_OK);
    b64->flags |= TRIT_FLAG_PARAM;
    wd64->flags |= TRIT_FLAG_PARAM | TRIT_FLAG_FROZEN;
    double *ty = malloc(sizeof(double) * (size_t)(c.rows * c.N)), *tdx = malloc(sizeof(double) * (size_t)(c.rows * c.K));
    magnitudes(cr.wd, cr.x, cr.b, cr.r, ty, tdx);
    lin_run q, d;
    run_linear("f64", NULL, TRIT_F64, cr.x, cr.wq, b64, cr.r, 0, &q);
    run_linear("f64", NULL, TRIT_F64, cr.x, wd64, b64, cr.r, 0, &d);
    check_within("f64", q.y, d.y, ty, 1e-12, c.rows * c.N);
    check_within("f64 (dx)", q.dx, d.dx, tdx, 1e-12, c.rows * c.K);
    run_free(&q);
    run_free(&d);
    free(ty);
    free(tdx);
    trit_tensor_free(b64);
    trit_tensor_free(wd64);
    case_run_free(&cr);
}

// A quantized weight that is a trainable parameter is refused where the op is built, with the
// reason and the remedy.
static void test_refuses_trainable(void **state) {
    (void)state;
    const qw_format f = {TRIT_QINT4, 32, false, 0};
    trit_tensor *wd, *wq = qw_make(&f, 8, 64, 5, &wd);
    wq->flags &= ~(uint32_t)TRIT_FLAG_FROZEN;
    trit_tensor *x = qw_tensor(2, (int64_t[]){3, 64}, -1, 1, 6, true);
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *y = trit_linear(g, x, wq, NULL);
    assert_non_null(strstr(trit_last_error(), "'wq'"));
    tg_expect_graph_error(g, y, TRIT_ERR_DTYPE, "quantized weights get no gradient: freeze it");
    // matmul takes no quantized operand, and says where one goes.
    wq->flags |= TRIT_FLAG_FROZEN;
    g = trit_graph_new(TRIT_F32);
    tg_expect_graph_error(g, trit_matmul(g, x, wq, false, true), TRIT_ERR_DTYPE, "taken as linear's weight");
    // A frozen one, or a constant (no PARAM flag), is taken.
    wq->flags &= ~(uint32_t)TRIT_FLAG_PARAM;
    g = trit_graph_new(TRIT_F32);
    assert_non_null(trit_linear(g, x, wq, NULL));
    trit_graph_free(g);
    trit_tensor_free(wq);
    trit_tensor_free(wd);
    trit_tensor_free(x);
}

// A training graph x -> linear(x, W) with W (2048, 1024) qint4 frozen and x trainable (under
// bf16, x enters as an activation, so W's chunks are decoded into bf16): the arena
// (activations, activation gradients, saved tensors and the largest op scratch) holds the
// decoded chunk (at most 2 MB) but never a decoded copy of W (8 MB in f32, 4 MB in bf16), no
// cast copy is made, and the only parameter gradient is x's.
static void test_memory(void **state) {
    (void)state;
    const int64_t N = 2048, K = 1024, M = 8;
    const qw_format f = {TRIT_QINT4, 128, false, 0};
    trit_tensor *wd, *wq = qw_make(&f, N, K, 9, &wd);
    trit_tensor *x = qw_tensor(2, (int64_t[]){M, K}, -1, 1, 10, false), *r = qw_tensor(2, (int64_t[]){M, N}, -1, 1, 11, false);
    const trit_compute_policy bf16 = {TRIT_F32, TRIT_BF16, TRIT_MATMUL_MEDIUM};
    for (int p = 0; p < 2; p++) {
        lin_run q;
        run_linear("memory", p ? &bf16 : NULL, TRIT_F32, x, wq, NULL, r, p ? RUN_X_ACT : 0, &q);
        const size_t act = (size_t)(M * K + 2 * M * N) * sizeof(float);  // x's copy in bf16, y, dy and the like
        printf("  %s: arena %zu bytes (decoded W in f32 would be %lld), param copies %zu, grads %zu\n",
               p ? "bf16" : "fp32", q.mem.arena_bytes, (long long)(N * K * 4), q.mem.param_copy_bytes, q.mem.grad_bytes);
        assert_true(q.mem.arena_bytes < (size_t)(N * K) * (p ? 2 : 4));
        assert_true(q.mem.arena_bytes <= ((size_t)2 << 20) + 4 * act + 4096);
        assert_int_equal(q.mem.param_copy_bytes, 0);
        assert_int_equal(q.mem.grad_bytes, (size_t)(M * K) * sizeof(float));
        run_free(&q);
    }
    trit_tensor_free(wq);
    trit_tensor_free(wd);
    trit_tensor_free(x);
    trit_tensor_free(r);
}

// ---- qlinear: the decoder's kernels, for inference -----------------------------------------

typedef struct kcase {
    qw_format f;
    int64_t K, N;
    bool kernel;  // a kernel takes it (else the decoded path: trit_linear's result within the orders' bound)
} kcase;

static const kcase KCASES[] = {
    {{TRIT_QINT8, TRIT_QGROUP_CHANNEL, false, 0}, 128, 33, true},
    {{TRIT_QINT4, 64, false, 0}, 128, 33, true},
    {{TRIT_QINT4, 128, false, 16}, 256, 7, true},
    {{TRIT_TERNARY, TRIT_QGROUP_TENSOR, false, 0}, 256, 33, true},
    {{TRIT_NF4, 64, false, 256}, 128, 33, true},  // kernel for up to 4 rows
    {{TRIT_F8_E4M3, TRIT_QGROUP_CHANNEL, false, 0}, 48, 33, true},
    {{TRIT_F8_E5M2, 16, false, 0}, 48, 7, true},
    {{TRIT_QINT4, 64, true, 0}, 128, 33, false},  // zero points: no kernel
    {{TRIT_Q8_0, 0, false, 0}, 64, 7, false},
    {{TRIT_QINT2, 64, false, 0}, 128, 7, false},
};

// y (rows, N) of an inference graph: qlinear (quantized) or linear.
static double *infer(const char *what, bool q, const trit_tensor *x, trit_tensor *w, trit_tensor *b) {
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *y = q ? trit_qlinear(g, (trit_tensor *)x, w, b) : trit_linear(g, (trit_tensor *)x, w, b);
    if (!y || trit_graph_compile(g, NULL) != TRIT_OK || trit_graph_forward(g) != TRIT_OK)
        fail_msg("%s: %s", what, trit_last_error());
    double *v = values(y);
    trit_graph_free(g);
    return v;
}

// Against trit_linear over the decoded weight. x quantized per row to int8 codes of its absmax /
// 127 moves each x_k by at most s_m (0.5 + 2^-13) (rounding of x_k / s_m included), so an output
// moves by at most that times sum_k |w_k| (integer kernels); NF4's kernels compute as a bf16
// compute dtype (2^-8 of each product) or in 14-bit fixed point (codebook and x within 2^-14 of
// their largest value), so sum_k 2^-8 |x_k w_k| + 2^-14 (|w_k| max|x| + |x_k| max|w|); FP8 decodes
// exactly. On top, both sides' fp32 rounding: 4 gamma_{K+2} of the magnitudes.
static void test_kernels(void **state) {
    (void)state;
    const int64_t rows_list[3] = {1, 7, 33};
    for (size_t i = 0; i < sizeof KCASES / sizeof KCASES[0]; i++) {
        const kcase *c = &KCASES[i];
        char name[96], what[160];
        qw_format_name(&c->f, name, sizeof name);
        trit_tensor *wd, *wq = qw_make(&c->f, c->N, c->K, 300 + i, &wd);
        trit_tensor *b = qw_tensor(1, &c->N, -1, 1, 301 + i, false);
        for (int ri = 0; ri < 3; ri++) {
            const int64_t rows = rows_list[ri], K = c->K, N = c->N;
            trit_tensor *x = qw_tensor(2, (int64_t[]){rows, K}, -1, 1, 302 + i, false);
            snprintf(what, sizeof what, "qlinear %s, x (%lld, %lld)", name, (long long)rows, (long long)K);
            double *yq = infer(what, true, x, wq, b), *yd = infer(what, false, x, wd, b);
            const bool int8 = c->kernel && (c->f.dt == TRIT_QINT8 || c->f.dt == TRIT_QINT4 || c->f.dt == TRIT_TERNARY);
            const bool nf4 = c->kernel && c->f.dt == TRIT_NF4 && rows <= 4;
            double worst = 0, maxdiff = 0;
            for (int64_t m = 0; m < rows; m++) {
                double xmax = 0;
                for (int64_t k = 0; k < K; k++) xmax = fmax(xmax, fabs(trit_tensor_get_flat(x, m * K + k)));
                for (int64_t j = 0; j < N; j++) {
                    double mag = fabs(trit_tensor_get_flat(b, j)), sw = 0, wmax = 0, sxw = 0, sx = 0;
                    for (int64_t k = 0; k < K; k++) {
                        const double wv = fabs(trit_tensor_get_flat(wd, j * K + k)), xv = fabs(trit_tensor_get_flat(x, m * K + k));
                        mag += xv * wv, sw += wv, sxw += xv * wv, sx += xv, wmax = fmax(wmax, wv);
                    }
                    double tol = 0;
                    if (int8) tol += sw * xmax / 127 * (0.5 + 0x1p-13);
                    if (nf4) tol += 0x1p-8 * sxw + 0x1p-14 * (sw * xmax + sx * wmax);
                    tol += 4 * qw_gamma(K + 2) * (mag + tol) + 1e-30;
                    const double d = fabs(yq[m * N + j] - yd[m * N + j]);
                    if (!(d <= tol)) fail_msg("%s: y[%lld, %lld] is %.9g, decoded %.9g, allowed %.3g", what, (long long)m,
                                              (long long)j, yq[m * N + j], yd[m * N + j], tol);
                    worst = fmax(worst, d / tol), maxdiff = fmax(maxdiff, d);
                }
            }
            printf("  %-42s %.2g of the bound\n", what, worst);
            if (int8) assert_true(maxdiff > 0);  // the int8 activations were used, not the decoded path
            free(yq);
            free(yd);
            trit_tensor_free(x);
        }
        trit_tensor_free(wq);
        trit_tensor_free(wd);
        trit_tensor_free(b);
    }
}

// qlinear gives the same bits with 1 and 2 threads, and a backward through it is an error that
// names trit_linear.
static void test_kernels_threads_and_backward(void **state) {
    (void)state;
    const int saved = omp_get_max_threads();
    for (size_t i = 0; i < 5; i++) {
        const kcase *c = &KCASES[i];
        trit_tensor *wd, *wq = qw_make(&c->f, c->N, c->K, 400 + i, &wd);
        trit_tensor *x = qw_tensor(2, (int64_t[]){i == 4 ? 3 : 40, c->K}, -1, 1, 401 + i, false);
        omp_set_num_threads(1);
        double *one = infer("1 thread", true, x, wq, NULL);
        omp_set_num_threads(2);
        double *two = infer("2 threads", true, x, wq, NULL);
        assert_memory_equal(one, two, sizeof(double) * (size_t)(x->shape[0] * c->N));
        free(one);
        free(two);
        trit_tensor_free(x);
        trit_tensor_free(wq);
        trit_tensor_free(wd);
    }
    omp_set_num_threads(saved);
    trit_tensor *wd, *wq = qw_make(&KCASES[0].f, 8, 128, 9, &wd);
    trit_tensor *x = qw_tensor(2, (int64_t[]){3, 128}, -1, 1, 10, true);
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *loss = trit_sum(g, trit_qlinear(g, x, wq, NULL), 0, NULL, false);
    assert_int_equal(trit_graph_compile(g, loss), TRIT_OK);
    assert_int_equal(trit_graph_forward(g), TRIT_OK);
    assert_int_equal(trit_graph_backward(g), TRIT_ERR_STATE);
    assert_non_null(strstr(trit_last_error(), "build the layer with trit_linear"));
    trit_graph_free(g);
    // A float weight is refused with a pointer to trit_linear.
    g = trit_graph_new(TRIT_F32);
    tg_expect_graph_error(g, trit_qlinear(g, x, wd, NULL), TRIT_ERR_DTYPE, "use trit_linear");
    trit_tensor_free(x);
    trit_tensor_free(wq);
    trit_tensor_free(wd);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_formats),           cmocka_unit_test(test_threads),
        cmocka_unit_test(test_lowp),              cmocka_unit_test(test_f64),
        cmocka_unit_test(test_refuses_trainable), cmocka_unit_test(test_memory),
        cmocka_unit_test(test_kernels),           cmocka_unit_test(test_kernels_threads_and_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
