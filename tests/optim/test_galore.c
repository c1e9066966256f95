// GaLore and Q-GaLore: the state layout; GaLore at full rank equals AdamW bit for bit, across
// refreshes, when the gradient's singular vectors on the projected side are coordinate axes (the
// basis is then a permutation, exactly in f32 since the SVD runs in double, which Adam's
// element-wise arithmetic commutes with). For a general gradient it cannot: Adam is not invariant
// under the basis's rotation, so full-rank GaLore is Adam in the rotated frame. At lower rank,
// the basis is the top singular subspace and the step equals a float64 reference that projects
// with that basis; refreshes happen at step 0 and every T steps, not between; Q-GaLore's int4
// basis, int8 weight grid and its skip rule (the gap doubles while the last five refreshes'
// leading vectors agree); a rank larger than the matrix is refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/trit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static trit_tensor *matrix(int64_t rows, int64_t cols, const char *name, uint64_t seed) {
    trit_tensor *p = trit_tensor_new_param(TRIT_F32, 2, (int64_t[]){rows, cols}, name);
    trit_tensor_fill_normal(p, 0, 0.5, seed, 1);
    p->grad = trit_tensor_new(TRIT_F32, 2, (int64_t[]){rows, cols});
    return p;
}

static float *fp(trit_tensor *t) { return trit_tensor_ptr(t); }

static trit_optim *one_group(const trit_optim_config *c, trit_tensor **ps, int n, double wd) {
    trit_optim_group g = {.params = ps, .num_params = n, .lr_scale = 1.0, .weight_decay = wd, .low_rank = true};
    return trit_optim_new(c, &g, 1);
}

static trit_optim_state_buf state_of(const trit_optim *o, int i) {
    trit_optim_state_buf b;
    assert_int_equal(trit_optim_get_state(o, i, &b), TRIT_OK);
    return b;
}

// ---- layout ----------------------------------------------------------------------------------

static void test_layout(void **state) {
    (void)state;
    trit_tensor *ps[3] = {matrix(16, 40, "wide", 1), matrix(40, 16, "tall", 2),
                          trit_tensor_new_param(TRIT_F32, 1, (int64_t[]){40}, "bias")};
    ps[2]->grad = trit_tensor_new(TRIT_F32, 1, (int64_t[]){40});
    trit_optim_config c = trit_optim_galore(4, 10, 0.25);
    assert_string_equal(trit_optim_kind_name(c.kind), "galore");
    trit_optim *o = one_group(&c, ps, 3, 0.0);
    assert_non_null(o);
    assert_int_equal(trit_optim_num_state(o), 3 + 3 + 2);
    const int64_t shapes[8][2] = {{4, 40}, {4, 40}, {16, 4}, {40, 4}, {40, 4}, {4, 16}, {40, 0}, {40, 0}};
    const char *names[8] = {"wide.exp_avg", "wide.exp_avg_sq", "wide.galore_basis", "tall.exp_avg",
                            "tall.exp_avg_sq", "tall.galore_basis", "bias.exp_avg", "bias.exp_avg_sq"};
    for (int i = 0; i < 8; i++) {
        const trit_optim_state_buf b = state_of(o, i);
        assert_string_equal(b.name, names[i]);
        assert_int_equal(b.dtype, TRIT_F32);
        assert_int_equal(b.shape[0], shapes[i][0]);
        if (shapes[i][1]) assert_int_equal(b.shape[1], shapes[i][1]);
        assert_int_equal(b.count, shapes[i][0] * (shapes[i][1] ? shapes[i][1] : 1));
    }
    trit_optim_free(o);
    // Q-GaLore: an int4 basis with a scale per 256 values and an f64 schedule.
    c = trit_optim_qgalore(4, 10, 0.25);
    o = one_group(&c, ps, 2, 0.0);
    assert_non_null(o);
    assert_int_equal(trit_optim_num_state(o), 8);
    trit_optim_state_buf b = state_of(o, 2);
    assert_int_equal(b.dtype, TRIT_QINT4);
    assert_int_equal(b.count, 64);
    assert_int_equal(b.num_scales, 1);
    b = state_of(o, 3);
    assert_string_equal(b.name, "wide.galore_sched");
    assert_int_equal(b.dtype, TRIT_F64);
    trit_optim_free(o);
    for (int i = 0; i < 3; i++) trit_tensor_free(ps[i]);
}

// ---- full rank equals AdamW --------------------------------------------------------------------

// Sylvester's Hadamard sign: rows of H are orthogonal.
static float hsign(int64_t i, int64_t j) { return __builtin_popcountll((uint64_t)(i & j)) % 2 ? -1.0f : 1.0f; }

// g (rows, cols) whose singular vectors on the smaller side are coordinate axes: for rows < cols,
// row i = d_i * H[i] / sqrt(cols) (orthogonal rows, so g g^T is diagonal); else the same by
// columns. d_i decrease with i and change every step, so the order of the axes stays.
static void axis_grad(float *g, int64_t rows, int64_t cols, int step) {
    const bool wide = rows < cols;
    const int64_t len = wide ? cols : rows;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) {
            const int64_t k = wide ? i : j, a = wide ? i : j, b = wide ? j : i;
            const float d = (float)(40 - 2 * k) * (1.0f + 0.01f * (float)((step * 7 + (int)k) % 5));
            g[i * cols + j] = d * hsign(a, b) / sqrtf((float)len);
        }
}

static void full_rank_case(int64_t rows, int64_t cols) {
    trit_tensor *a = matrix(rows, cols, "w", 3), *b = matrix(rows, cols, "w", 3);
    const int64_t r = rows < cols ? rows : cols;
    trit_optim_config cg = trit_optim_galore(r, 2, 1.0), ca = trit_optim_adamw(0.9, 0.999, 1e-8);
    trit_optim *og = one_group(&cg, &a, 1, 0.1), *oa = one_group(&ca, &b, 1, 0.1);
    assert_non_null(og);
    assert_non_null(oa);
    for (int step = 0; step < 7; step++) {
        axis_grad(fp(a->grad), rows, cols, step);
        axis_grad(fp(b->grad), rows, cols, step);
        assert_int_equal(trit_optim_step(og, 1e-2), TRIT_OK);
        assert_int_equal(trit_optim_step(oa, 1e-2), TRIT_OK);
        // The basis is a signed permutation: every entry rounds to -1, 0 or 1.
        const trit_optim_state_buf basis = state_of(og, 2);
        for (int64_t i = 0; i < basis.count; i++) {
            const float x = ((float *)basis.data)[i];
            assert_true(fabsf(x) == 1.0f || fabsf(x) < 1e-6f);
        }
        assert_memory_equal(fp(a), fp(b), sizeof(float) * (size_t)(rows * cols));
    }
    trit_optim_free(og);
    trit_optim_free(oa);
    trit_tensor_free(a);
    trit_tensor_free(b);
}

static void test_full_rank_equals_adamw(void **state) {
    (void)state;
    full_rank_case(16, 64);  // left projection
    full_rank_case(32, 8);   // right projection
}

// ---- a low rank against float64 ---------------------------------------------------------------

// The largest eigenvalue of (I - P P^T) A A^T (I - P P^T) (power iteration), where A = g (rows,
// cols), P: (rows, r); and each column's Rayleigh quotient and eigen-residual.
static double rest_eigen(const float *g, const float *P, int64_t rows, int64_t cols, int64_t r) {
    double *x = malloc(sizeof(double) * (size_t)rows), *y = malloc(sizeof(double) * (size_t)cols), lam = 0;
    for (int64_t i = 0; i < rows; i++) x[i] = 1.0 + 0.01 * (double)i;
    for (int it = 0; it < 500; it++) {
        for (int64_t k = 0; k < r; k++) {  // x -= P P^T x
            double d = 0;
            for (int64_t i = 0; i < rows; i++) d += P[i * r + k] * x[i];
            for (int64_t i = 0; i < rows; i++) x[i] -= d * P[i * r + k];
        }
        for (int64_t j = 0; j < cols; j++) {
            y[j] = 0;
            for (int64_t i = 0; i < rows; i++) y[j] += g[i * cols + j] * x[i];
        }
        double nx = 0;
        for (int64_t i = 0; i < rows; i++) {
            x[i] = 0;
            for (int64_t j = 0; j < cols; j++) x[i] += g[i * cols + j] * y[j];
            nx += x[i] * x[i];
        }
        lam = sqrt(nx);
        for (int64_t i = 0; i < rows; i++) x[i] /= lam;
    }
    free(x);
    free(y);
    return lam;
}

static double rayleigh(const float *g, const float *P, int64_t rows, int64_t cols, int64_t r, int64_t k,
                       double *residual) {
    double *y = calloc((size_t)cols, sizeof(double)), *z = calloc((size_t)rows, sizeof(double)), q = 0, res = 0;
    for (int64_t j = 0; j < cols; j++)
        for (int64_t i = 0; i < rows; i++) y[j] += g[i * cols + j] * P[i * r + k];
    for (int64_t i = 0; i < rows; i++) {
        for (int64_t j = 0; j < cols; j++) z[i] += g[i * cols + j] * y[j];
        q += z[i] * P[i * r + k];
    }
    for (int64_t i = 0; i < rows; i++) res += (z[i] - q * P[i * r + k]) * (z[i] - q * P[i * r + k]);
    *residual = sqrt(res);
    free(y);
    free(z);
    return q;
}

static void test_low_rank_against_f64(void **state) {
    (void)state;
    enum { ROWS = 24, COLS = 40, R = 5, STEPS = 4 };
    const double lr = 3e-3, wd = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8, scale = 0.25;
    trit_tensor *w = matrix(ROWS, COLS, "w", 5);
    trit_optim_config c = trit_optim_galore(R, 2, scale);
    trit_optim *o = one_group(&c, &w, 1, wd);
    assert_non_null(o);
    double W[ROWS * COLS], M[R * COLS] = {0}, V[R * COLS] = {0}, P[ROWS * R];
    for (int i = 0; i < ROWS * COLS; i++) W[i] = fp(w)[i];
    float before[ROWS * R];
    for (int t = 1; t <= STEPS; t++) {
        trit_tensor_fill_normal(w->grad, 0, 1, 100 + (uint64_t)t, 0);
        const float *g = fp(w->grad);
        memcpy(before, state_of(o, 2).data, sizeof before);
        assert_int_equal(trit_optim_step(o, lr), TRIT_OK);
        const float *basis = state_of(o, 2).data;
        // Refreshed on steps 1 and 3 (0 and 2 done before them), kept on 2 and 4.
        assert_true((memcmp(before, basis, sizeof before) != 0) == (t % 2 == 1));
        if (t % 2 == 1) {  // the basis: orthonormal top-R left singular vectors of this gradient
            double res, prev = INFINITY;
            for (int k = 0; k < R; k++) {
                const double q = rayleigh(g, basis, ROWS, COLS, R, k, &res);
                assert_true(res < 1e-4 * q);
                assert_true(q <= prev);
                prev = q;
                for (int l = 0; l < R; l++) {
                    double d = 0;
                    for (int i = 0; i < ROWS; i++) d += (double)basis[i * R + k] * basis[i * R + l];
                    assert_true(fabs(d - (k == l)) < 1e-6);
                }
            }
            assert_true(rest_eigen(g, basis, ROWS, COLS, R) <= prev * (1 + 1e-6));
        }
        for (int i = 0; i < ROWS * R; i++) P[i] = basis[i];
        const double bc1 = 1 - pow(b1, t), bc2 = 1 - pow(b2, t);
        double Z[R * COLS];
        for (int k = 0; k < R; k++)
            for (int j = 0; j < COLS; j++) {
                double rg = 0;
                for (int i = 0; i < ROWS; i++) rg += P[i * R + k] * g[i * COLS + j];
                double *m = &M[k * COLS + j], *v = &V[k * COLS + j];
                *m = b1 * *m + (1 - b1) * rg;
                *v = b2 * *v + (1 - b2) * rg * rg;
                Z[k * COLS + j] = -lr / bc1 * *m / (sqrt(*v) / sqrt(bc2) + eps);
            }
        for (int i = 0; i < ROWS; i++)
            for (int j = 0; j < COLS; j++) {
                double d = 0;
                for (int k = 0; k < R; k++) d += P[i * R + k] * Z[k * COLS + j];
                W[i * COLS + j] = W[i * COLS + j] * (1 - lr * wd) + scale * d;
            }
    }
    // The f32 path rounds the weight twice a step (decay, update; |w| < 2, so half an ulp is at
    // most 1.2e-7): 4 steps, under 1e-6. The products add R or ROWS f32 terms to steps of about
    // scale * lr = 7.5e-4, errors near 1e-10, and Adam's quotient is well-conditioned unless a
    // projected gradient is within rounding of 0 (none here).
    for (int i = 0; i < ROWS * COLS; i++) assert_true(fabs(fp(w)[i] - W[i]) < 1e-6);
    trit_optim_free(o);
    trit_tensor_free(w);
}

// ---- refresh schedule --------------------------------------------------------------------------

static void test_refresh_schedule(void **state) {
    (void)state;
    trit_tensor *w = matrix(12, 20, "w", 7);
    trit_optim_config c = trit_optim_galore(3, 3, 0.25);
    trit_optim *o = one_group(&c, &w, 1, 0.0);
    float before[12 * 3];
    int refreshes[10] = {0};
    for (int t = 0; t < 10; t++) {
        trit_tensor_fill_normal(w->grad, 0, 1, 200 + (uint64_t)t, 0);
        memcpy(before, state_of(o, 2).data, sizeof before);
        assert_int_equal(trit_optim_step(o, 1e-3), TRIT_OK);
        refreshes[t] = memcmp(before, state_of(o, 2).data, sizeof before) != 0;
    }
    const int want[10] = {1, 0, 0, 1, 0, 0, 1, 0, 0, 1};
    assert_memory_equal(refreshes, want, sizeof want);
    trit_optim_free(o);
    trit_tensor_free(w);
}

// ---- Q-GaLore ----------------------------------------------------------------------------------

// Runs `steps` Q-GaLore steps with gap 1 on a (16, 32) matrix; same_dir: a gradient of one fixed
// rank-1 direction (consecutive bases agree, cosine 1) plus little noise, else independent noise.
// refreshed[t]: whether step t changed the basis codes; returns the final gap.
static double qgalore_run(bool same_dir, int steps, int *refreshed) {
    enum { ROWS = 16, COLS = 32, N = ROWS * COLS };
    trit_tensor *w = matrix(ROWS, COLS, "w", 9);
    trit_optim_config c = trit_optim_qgalore(4, 1, 0.25);
    trit_optim *o = one_group(&c, &w, 1, 0.0);
    assert_non_null(o);
    trit_optim_set_rounding(o, true, 77);
    uint8_t before[N];
    for (int t = 0; t < steps; t++) {
        trit_tensor_fill_normal(w->grad, 0, same_dir ? 0.01 : 1.0, 300 + (uint64_t)t, 0);
        float *g = fp(w->grad);
        for (int i = 0; same_dir && i < ROWS; i++)
            for (int j = 0; j < COLS; j++) g[i * COLS + j] += (float)((i + 1) * (j % 3 + 1)) * (t % 2 ? 1.0f : 1.5f);
        const trit_optim_state_buf b = state_of(o, 2);
        const size_t bytes = trit_dtype_nbytes(b.dtype, b.count);
        memcpy(before, b.data, bytes);
        const float scale0 = b.scales[0];
        assert_int_equal(trit_optim_step(o, 1e-3), TRIT_OK);
        refreshed[t] = memcmp(before, b.data, bytes) != 0 || scale0 != b.scales[0];
        // The weights sit on the int8 grid of each group of 256: integers times absmax / 127.
        for (int lo = 0; lo < N; lo += TRIT_QGALORE_GROUP) {
            float amax = 0;
            for (int i = lo; i < lo + TRIT_QGALORE_GROUP; i++) amax = fmaxf(amax, fabsf(fp(w)[i]));
            for (int i = lo; i < lo + TRIT_QGALORE_GROUP; i++) {
                const float q = fp(w)[i] / (amax / 127.0f);
                assert_true(fabsf(q - nearbyintf(q)) < 1e-3f);
            }
        }
    }
    const double gap = ((const double *)state_of(o, 3).data)[0];
    trit_optim_free(o);
    trit_tensor_free(w);
    return gap;
}

static void test_qgalore_skip_rule(void **state) {
    (void)state;
    int refreshed[20];
    // Agreeing bases: refreshes at 0..5 fill the queue (the first has nothing to compare with),
    // so the gap doubles at step 5 (to 2) and at each refresh after: 6 (4), 8 (8), 16 (16).
    double gap = qgalore_run(true, 20, refreshed);
    const int want[20] = {1, 1, 1, 1, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0};
    for (int t = 0; t < 20; t++) {
        if (want[t] == 0) assert_int_equal(refreshed[t], 0);
    }
    assert_true(gap == 16.0);
    // Independent gradients: leading vectors in 16 dimensions agree by |cos| ~ 0.2 < 0.4, every
    // step refreshes.
    gap = qgalore_run(false, 12, refreshed);
    assert_true(gap == 1.0);
    for (int t = 0; t < 12; t++) assert_int_equal(refreshed[t], 1);
}

// ---- bad input ---------------------------------------------------------------------------------

static void test_rank_too_large(void **state) {
    (void)state;
    trit_tensor *w = matrix(16, 40, "h.0.mlp.c_proj.weight", 1);
    trit_optim_config c = trit_optim_galore(17, 200, 0.25);
    assert_null(one_group(&c, &w, 1, 0.0));
    assert_non_null(strstr(trit_last_error(), "rank 17 is larger than parameter 0 'h.0.mlp.c_proj.weight' (16 x 40)"));
    c.galore_rank = 0;
    assert_null(one_group(&c, &w, 1, 0.0));
    assert_non_null(strstr(trit_last_error(), "rank and update gap must be >= 1"));
    // Without low_rank the matrix is AdamW's and any rank is accepted.
    c.galore_rank = 17;
    trit_optim *o = trit_optim_new_single(&c, &w, 1, 0.0);
    assert_non_null(o);
    assert_int_equal(trit_optim_num_state(o), 2);
    trit_optim_free(o);
    trit_tensor_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_full_rank_equals_adamw),
        cmocka_unit_test(test_low_rank_against_f64),
        cmocka_unit_test(test_refresh_schedule),
        cmocka_unit_test(test_qgalore_skip_rule),
        cmocka_unit_test(test_rank_too_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
