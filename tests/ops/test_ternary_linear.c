// ternary_linear (BitNet training on the integer panel kernels) against today's graph for the
// same function, linear(fake_quant(x, int8 per token), fake_quant(w, ternary), b), at every CPU
// level this machine has (the panel kernel of ref, AVX2 and AVX512-VNNI; a level the CPU lacks
// is skipped and named, tests/support/kernel_census.h): forward, dW, db, dX with dY in fp32 and
// with dY quantized per row to int8, the packing once per weight change, 1 vs 2 threads.
//
// Tolerances (u = 2^-24, gamma_n = n u / (1 - n u)):
// - forward y[m, j]: both compute sum_k fqx[m, k] fqw[j, k] + b_j over the same values (the op's
//   codes times scales are fake_quant's outputs bit for bit); the op sums exact integers and
//   rounds twice (x's scale times W's scale times the sum: 3 roundings) where the GEMM rounds
//   each of K products and adds, so each is within gamma_{K+1} (|b_j| + sum |fqx fqw|) of the
//   exact value and the two within twice that;
// - dW (N, K) = dY^T fqx: the same GEMM over the same values, split in chunks of rows: 2 gamma_rows
//   sum_m |dy_mj fqx_mk|; db the same call as linear's: equal bits; with a bf16 dW
//   (TRIT_TERNARY_DW_BF16) each product is code x bf16(dy s_x): dy s_x rounded once in fp32 and
//   once to bf16 (2^-8 relative at most), so 2^-8 + 2 u more of the same sum;
// - dX with dY fp32 (TRIT_TERNARY_DX_F32): an fp32 GEMM over fake_quant's W values: 2 gamma_N
//   sum_j |dy_mj fqw_jk|;
// - dX with int8 dY: against its own definition recomputed in double, s_dy[m] s_W sum_j
//   q_mj c_jk with q, s_dy the per-row codes of dY (trit_fake_quant_row_codes_f32): the integer
//   sum is exact, the kernel rounds s_W x sum, then s_dy x that: 2 u |value| (+ u for the add
//   into the zeroed gradient); and against the fp32 dX: each code of dY is off by at most
//   s_dy / 2 = max_j |dy_mj| / 254, so dX moves by at most s_W sum_j |c_jk| max|dy_m| / 254
//   (worst case, all errors one sign), plus the fp32 bound above. The test prints the measured
//   share of that worst case; independent uniform errors give about 1 / sqrt(3 nnz) of it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_census.h"
#include "kernels/gemm_lowp.h"
#include "ops/fake_quant.h"
#include "ops/ternary_linear.h"
#include "trit/trit.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ROWS = 70, N = 128, K = 192 };  // rows past a multiple of 4 and of the tiles

static const double U = 0x1p-24;
static double gamma_n(int64_t n) { return (double)n * U / (1.0 - (double)n * U); }

typedef struct run {
    float y[ROWS * N], dx[ROWS * K], dw[N * K], db[N];
} run;

typedef struct inputs {
    float x[ROWS * K], w[N * K], b[N], r[ROWS * N];  // r: dY (loss = sum(y * r))
} inputs;

static void make_inputs(inputs *in) {
    for (int i = 0; i < ROWS * K; i++) in->x[i] = (float)((int)(trit_rng_u32(3, 1, (uint64_t)i) % 2001) - 1000) / 700.0f;
    for (int i = 0; i < N * K; i++) in->w[i] = (float)((int)(trit_rng_u32(3, 2, (uint64_t)i) % 2001) - 1000) / 40000.0f;
    for (int i = 0; i < N; i++) in->b[i] = (float)((int)(trit_rng_u32(3, 3, (uint64_t)i) % 201) - 100) / 300.0f;
    for (int i = 0; i < ROWS * N; i++) in->r[i] = (float)((int)(trit_rng_u32(3, 4, (uint64_t)i) % 2001) - 1000) / 1000.0f;
    in->x[5 * K + 7] = 9.5f;  // one row with an outlier: its other codes are coarse
}

static trit_tensor *param_of(const char *name, int ndim, const int64_t *shape, const float *v) {
    trit_tensor *t = trit_tensor_new_param(TRIT_F32, ndim, shape, name);
    assert_non_null(t);
    memcpy(t->data, v, sizeof(float) * (size_t)trit_tensor_numel(t));
    return t;
}

// tw NULL: today's graph over fake_quant nodes; else the op on tw. `passes` forward/backward
// pairs (micro-batches of one step: the gradients add up).
static void run_graph(const inputs *in, trit_ternary_weight *tw, int passes, run *out) {
    const int64_t xs[2] = {ROWS, K}, ws[2] = {N, K}, bs[1] = {N}, rs[2] = {ROWS, N};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = param_of("x", 2, xs, in->x), *w = param_of("w", 2, ws, in->w), *b = param_of("b", 1, bs, in->b);
    trit_tensor *r = trit_tensor_new(TRIT_F32, 2, rs);
    memcpy(r->data, in->r, sizeof in->r);
    trit_tensor *y;
    if (tw) {
        y = trit_ternary_linear(g, x, w, b, tw);
    } else {
        const trit_fake_quant_spec a = {.dtype = TRIT_QINT8, .mode = TRIT_FQ_TOKEN};
        const trit_fake_quant_spec t = {.dtype = TRIT_QINT2, .mode = TRIT_FQ_TERNARY};
        y = trit_linear(g, trit_fake_quant(g, x, &a, NULL), trit_fake_quant(g, w, &t, NULL), b);
    }
    trit_graph_keep(g, y);
    trit_tensor *loss = trit_sum(g, trit_mul(g, y, r), 0, NULL, false);
    if (!loss || trit_graph_compile(g, loss) != TRIT_OK) fail_msg("compile: %s", trit_last_error());
    trit_graph_zero_grad(g);
    for (int p = 0; p < passes; p++)
        if (trit_graph_forward(g) != TRIT_OK || trit_graph_backward(g) != TRIT_OK) fail_msg("run: %s", trit_last_error());
    memcpy(out->y, y->data, sizeof out->y);
    memcpy(out->dx, x->grad->data, sizeof out->dx);
    memcpy(out->dw, w->grad->data, sizeof out->dw);
    memcpy(out->db, b->grad->data, sizeof out->db);
    trit_graph_free(g);
    trit_tensor_free(x);
    trit_tensor_free(w);
    trit_tensor_free(b);
    trit_tensor_free(r);
}

// The fake-quantized operands in double: fqx (ROWS, K), and W's codes and scale.
typedef struct fq_ops {
    double fqx[ROWS * K];
    int c[N * K];
    double sw;
} fq_ops;

static void fake_quantized(const inputs *in, fq_ops *f) {
    int8_t q[K];
    for (int m = 0; m < ROWS; m++) {
        float s;
        trit_fake_quant_row_codes_f32(in->x + m * K, K, q, &s);
        for (int k = 0; k < K; k++) f->fqx[m * K + k] = (double)((float)q[k] * s);
    }
    const float sw = trit_fake_quant_ternary_scale_f32(in->w, N * K);
    f->sw = sw;
    for (int i = 0; i < N * K; i++) {
        const float v = in->w[i] / sw;
        f->c[i] = (v > 0.5f) - (v < -0.5f);
    }
}

// Returns the largest |dW - dW_ref| over its sum of magnitudes; bf16: the bound of a bf16 dW.
static double check_forward_and_dw(const inputs *in, const fq_ops *f, const run *a, const run *o, bool bf16) {
    const double fqw1 = (double)(float)f->sw;  // |fqw| of a nonzero code
    for (int m = 0; m < ROWS; m++)
        for (int j = 0; j < N; j++) {
            double mag = fabs(in->b[j]);
            for (int k = 0; k < K; k++) mag += fabs(f->fqx[m * K + k] * f->c[j * K + k]) * fqw1;
            const double d = fabs((double)o->y[m * N + j] - a->y[m * N + j]), bound = 2 * gamma_n(K + 1) * mag;
            if (d > bound) fail_msg("y[%d, %d]: %.9g vs %.9g, bound %.3g", m, j, o->y[m * N + j], a->y[m * N + j], bound);
        }
    double worst = 0;
    for (int j = 0; j < N; j++) {
        assert_true(o->db[j] == a->db[j]);
        for (int k = 0; k < K; k++) {
            double mag = 0;
            for (int m = 0; m < ROWS; m++) mag += fabs((double)in->r[m * N + j] * f->fqx[m * K + k]);
            const double d = fabs((double)o->dw[j * K + k] - a->dw[j * K + k]);
            const double bound = (2 * gamma_n(ROWS) + (bf16 ? 0x1p-8 + 2 * U : 0)) * mag;
            if (d > bound) fail_msg("dw[%d, %d]: %.9g vs %.9g, bound %.3g", j, k, o->dw[j * K + k], a->dw[j * K + k], bound);
            if (mag > 0) worst = fmax(worst, d / mag);
        }
    }
    return worst;
}

// dX with dY fp32: the fp32 GEMM's bound against linear's dX.
static void check_dx_f32(const inputs *in, const fq_ops *f, const run *a, const run *o) {
    for (int m = 0; m < ROWS; m++)
        for (int k = 0; k < K; k++) {
            double mag = 0;
            for (int j = 0; j < N; j++) mag += fabs((double)in->r[m * N + j] * f->c[j * K + k]) * (float)f->sw;
            const double d = fabs((double)o->dx[m * K + k] - a->dx[m * K + k]), bound = 2 * gamma_n(N) * mag;
            if (d > bound) fail_msg("dx[%d, %d]: %.9g vs %.9g, bound %.3g", m, k, o->dx[m * K + k], a->dx[m * K + k], bound);
        }
}

// dX with int8 dY: against its definition in double, and against the fp32 dX within the bound
// the rounding of dY implies. Returns the largest share of that bound seen.
static double check_dx_int8(const inputs *in, const fq_ops *f, const run *a, const run *o) {
    double worst = 0;
    int8_t q[N];
    for (int m = 0; m < ROWS; m++) {
        float s;
        assert_true(trit_fake_quant_row_codes_f32(in->r + m * N, N, q, &s));
        double amax = 0;
        for (int j = 0; j < N; j++) amax = fmax(amax, fabs(in->r[m * N + j]));
        for (int k = 0; k < K; k++) {
            int64_t isum = 0, nnz = 0;
            double mag = 0;
            for (int j = 0; j < N; j++) {
                isum += (int64_t)q[j] * f->c[j * K + k];
                nnz += f->c[j * K + k] != 0;
                mag += fabs((double)in->r[m * N + j] * f->c[j * K + k]) * (float)f->sw;
            }
            const double want = (double)s * (double)(float)f->sw * (double)isum, got = o->dx[m * K + k];
            if (fabs(got - want) > 3 * U * fabs(want))
                fail_msg("int8 dx[%d, %d]: %.9g, definition %.9g", m, k, got, want);
            const double quant = (double)(float)f->sw * (double)nnz * amax / 254;
            const double d = fabs(got - a->dx[m * K + k]), bound = quant + 2 * gamma_n(N) * mag;
            if (d > bound) fail_msg("int8 dx[%d, %d]: %.9g vs fp32 %.9g, bound %.3g", m, k, got, a->dx[m * K + k], bound);
            worst = fmax(worst, d / bound);
        }
    }
    return worst;
}

static void check_level(trit_cpu_isa level, const inputs *in, const fq_ops *f) {
    assert_int_equal(trit_cpu_set_level(level), TRIT_OK);
    run *ref = malloc(sizeof *ref), *o = malloc(sizeof *o), *o2 = malloc(sizeof *o2);
    assert_non_null(ref);
    assert_non_null(o);
    assert_non_null(o2);
    run_graph(in, NULL, 1, ref);
    trit_ternary_weight tw;
    assert_int_equal(trit_ternary_weight_init(&tw, N, K, TRIT_TERNARY_DX_F32), TRIT_OK);
    run_graph(in, &tw, 1, o);
    check_forward_and_dw(in, f, ref, o, false);
    check_dx_f32(in, f, ref, o);
    assert_true(tw.scale == (float)f->sw);
    trit_ternary_weight_free(&tw);

    assert_int_equal(trit_ternary_weight_init(&tw, N, K, TRIT_TERNARY_DX_INT8), TRIT_OK);
    run_graph(in, &tw, 1, o);
    check_forward_and_dw(in, f, ref, o, false);
    const double share = check_dx_int8(in, f, ref, o);
    print_message("  %s: int8 dY moved dX by at most %.3g of its worst-case bound\n", trit_cpu_level_name(level), share);
    assert_int_equal(tw.fills, 1);
    // A bf16 dW: the forward and dX unchanged, dW within its bound and rounded (not the fp32 one).
    tw.dw = TRIT_TERNARY_DW_BF16;
    run_graph(in, &tw, 1, o2);
    assert_memory_equal(o->y, o2->y, sizeof o->y);
    assert_memory_equal(o->dx, o2->dx, sizeof o->dx);
    const double rel = check_forward_and_dw(in, f, ref, o2, true);
    print_message("  %s: bf16 dW off by at most %.3g of its sum of magnitudes (bound 2^-8 = %.3g)\n",
                  trit_cpu_level_name(level), rel, 0x1p-8);
    assert_true(rel > 1e-5);  // the products were rounded to bf16
    // AUTO: the bf16 dW where the GEMM multiplies bf16 natively, the fp32 one elsewhere.
    run *o3 = malloc(sizeof *o3);
    assert_non_null(o3);
    tw.dw = TRIT_TERNARY_DW_AUTO;
    run_graph(in, &tw, 1, o3);
    const bool native = trit_kernel_gemm_mixed_bf16_native();
    assert_memory_equal(o3->dw, native ? o2->dw : o->dw, sizeof o->dw);
    print_message("  %s: AUTO takes the %s dW\n", trit_cpu_level_name(level), native ? "bf16" : "fp32");
    free(o3);
    tw.dw = TRIT_TERNARY_DW_F32;
    // Two micro-batches of one step: one packing; the gradients are the sums of two passes.
    run_graph(in, &tw, 2, o2);
    assert_int_equal(tw.fills, 1);
    for (int i = 0; i < ROWS * K; i++) assert_true(o2->dx[i] == 2 * o->dx[i]);
    trit_ternary_weight_free(&tw);
    // 1 and 2 threads: the same bits.
    assert_int_equal(trit_ternary_weight_init(&tw, N, K, TRIT_TERNARY_DX_INT8), TRIT_OK);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    run_graph(in, &tw, 1, o2);
    omp_set_num_threads(threads);
    assert_memory_equal(o->y, o2->y, sizeof o->y);
    assert_memory_equal(o->dx, o2->dx, sizeof o->dx);
    assert_memory_equal(o->dw, o2->dw, sizeof o->dw);
    trit_ternary_weight_free(&tw);
    free(ref);
    free(o);
    free(o2);
}

static void test_against_fake_quantized_linear(void **state) {
    (void)state;
    inputs *in = malloc(sizeof *in);
    fq_ops *f = malloc(sizeof *f);
    assert_non_null(in);
    assert_non_null(f);
    make_inputs(in);
    fake_quantized(in, f);
    const struct {
        trit_cpu_isa level;
        const char *name;
        uint32_t needs;
    } levels[] = {
        {TRIT_CPU_REF, "ternary panels, portable", 0},
        {TRIT_CPU_AVX2, "ternary panels, AVX2", TRIT_FEAT_AVX2},
        {TRIT_CPU_AVX512, "ternary panels, AVX512-VNNI", TRIT_FEAT_AVX512 | TRIT_FEAT_AVX512_VNNI},
    };
    census cen = {.what = "ternary training kernels"};
    const trit_cpu_isa was = trit_cpu_level();
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (!census_count(&cen, levels[i].name, levels[i].needs, census_level_features())) continue;
        check_level(levels[i].level, in, f);
        census_ran(&cen);
    }
    trit_cpu_set_level(was);
    census_check(&cen);
    free(in);
    free(f);
}

// The packing refills on the first forward after the weight is marked stale, and only then;
// the panels decode to fake_quant's ternary values.
static void test_fill_follows_the_weight(void **state) {
    (void)state;
    inputs *in = malloc(sizeof *in);
    assert_non_null(in);
    make_inputs(in);
    trit_ternary_weight tw;
    assert_int_equal(trit_ternary_weight_init(&tw, N, K, TRIT_TERNARY_DX_INT8), TRIT_OK);
    assert_true(tw.stale);
    trit_ternary_weight_fill(&tw, in->w);
    const trit_fake_quant_spec t = {.dtype = TRIT_QINT2, .mode = TRIT_FQ_TERNARY};
    float *fq = malloc(sizeof(float) * N * K), row[K], col[N];
    assert_non_null(fq);
    trit_fake_quant_rows_f32(in->w, fq, 1, N * K, &t);  // one group: the whole matrix
    for (int n = 0; n < N; n++) {
        trit_qpanels_row_f32(&tw.w, n, row);
        assert_memory_equal(row, fq + n * K, sizeof row);
    }
    for (int k = 0; k < K; k++) {
        trit_qpanels_row_f32(&tw.wt, k, col);
        for (int n = 0; n < N; n++) assert_true(col[n] == fq[n * K + k]);
    }
    for (int i = 0; i < N * K; i++) in->w[i] = -in->w[i];
    tw.stale = true;
    trit_ternary_weight_fill(&tw, in->w);
    assert_int_equal(tw.fills, 2);
    trit_qpanels_row_f32(&tw.w, 3, row);
    for (int k = 0; k < K; k++) assert_true(row[k] == -fq[3 * K + k]);
    trit_ternary_weight_free(&tw);
    free(fq);
    free(in);
}

// The fill's compare with a threshold is fake quantization's rounding of w / s exactly, where it
// is decided: the 512 floats from 256 below s/2 upwards, both signs, for several scales; s/2
// itself is the tie (quotient exactly 0.5: code 0). Mutation seen failing: >= t made > t.
static void test_fill_rounds_as_fake_quant(void **state) {
    (void)state;
    const float scales[4] = {0.0123f, 1.0f / 3.0f, 7.77e-4f, 1e-5f};
    enum { RN = 16, RK = 64 };
    float w[RN * RK], row[RK];
    for (int si = 0; si < 4; si++) {
        const float sc = scales[si];
        float lo = 0.5f * sc;
        for (int i = 0; i < RN * RK / 4; i++) lo = nextafterf(lo, 0.0f);
        for (int i = 0; i < RN * RK; i++) {  // upwards from 256 floats below s/2, alternating signs
            w[i] = i % 2 ? -lo : lo;
            if (i % 2) lo = nextafterf(lo, 1.0f);
        }
        trit_qpanels p;
        assert_int_equal(trit_qpanels_alloc(TRIT_TERNARY, RN, RK, RK, &p), TRIT_OK);
        trit_qpanels_fill_ternary_f32(&p, w, sc, false);
        int ties = 0;
        for (int n = 0; n < RN; n++) {
            trit_qpanels_row_f32(&p, n, row);
            for (int k = 0; k < RK; k++) {
                float v = w[n * RK + k] / sc;  // fake_quant's arithmetic (fq_int_span)
                v = v > 1 ? 1 : v < -1 ? -1 : v;
                const float code = ((v + 12582912.0f) - 12582912.0f) + 0.0f;
                ties += fabsf(v) == 0.5f;
                if (row[k] != code * sc) fail_msg("s %g, w %a: panel %g, fake_quant %g", sc, w[n * RK + k], row[k], code * sc);
            }
        }
        assert_true(ties > 0);  // the range holds the quotients that round to the tie
        trit_qpanels_free(&p);
    }
}

static void test_refusals(void **state) {
    (void)state;
    trit_ternary_weight tw;
    assert_int_equal(trit_ternary_weight_init(&tw, 100, 64, TRIT_TERNARY_DX_INT8), TRIT_ERR_SHAPE);
    assert_non_null(strstr(trit_last_error(), "multiples of 64"));
    assert_int_equal(trit_ternary_weight_init(&tw, 64, 64, TRIT_TERNARY_DX_INT8), TRIT_OK);
    const int64_t xs[2] = {4, 64}, ws[2] = {64, 128};
    trit_graph *g = trit_graph_new(TRIT_F32);
    trit_tensor *x = trit_tensor_new(TRIT_F32, 2, xs), *w = trit_tensor_new_param(TRIT_F32, 2, ws, "w");
    assert_null(trit_ternary_linear(g, x, w, NULL, &tw));  // w (64, 128), state for (64, 64)
    assert_non_null(strstr(trit_last_error(), "as its ternary state was made for"));
    trit_graph_free(g);
    g = trit_graph_new(TRIT_F64);
    assert_null(trit_ternary_linear(g, x, w, NULL, &tw));
    assert_non_null(strstr(trit_last_error(), "float graphs only"));
    trit_graph_free(g);
    trit_tensor_free(x);
    trit_tensor_free(w);
    trit_ternary_weight_free(&tw);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_fake_quantized_linear),
        cmocka_unit_test(test_fill_follows_the_weight),
        cmocka_unit_test(test_fill_rounds_as_fake_quant),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
