// GaLore and Q-GaLore (include/trit/optim.h): the step of one projected matrix. The basis comes
// from LAPACK's SVD of the gradient in double (galore-torch takes torch.linalg.svd in fp32; double
// makes the basis of an exactly low-rank or axis-aligned gradient exact in f32), the products are
// trit's GEMM, and Adam's arithmetic is the AdamW kernel's, so with a basis of signed unit
// vectors the step is AdamW's bit for bit.
#define _GNU_SOURCE
#include "optim/optim_internal.h"

#include "kernels/gemm.h"

#include <dlfcn.h>
#include <lapacke.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- LAPACK, loaded at the first SVD ------------------------------------------------------------
// OpenBLAS starts its thread pool when it is loaded: linked into trit, every process would carry
// an idle thread, and `trit bench` could no longer fork its isolated runs. So liblapacke (and the
// OpenBLAS behind it) is opened only when a basis is first computed, with OPENBLAS_NUM_THREADS=1
// unless the environment says otherwise; the SVD then runs on one thread (openblas_set_num_threads
// when present), so its bits do not depend on any thread count.
typedef lapack_int dgesvd_fn(int layout, char jobu, char jobvt, lapack_int m, lapack_int n, double *a, lapack_int lda,
                             double *s, double *u, lapack_int ldu, double *vt, lapack_int ldvt, double *superb);
static dgesvd_fn *lapack_dgesvd;
static void (*blas_set_threads)(int);
static char lapack_why[256];
static pthread_once_t lapack_once = PTHREAD_ONCE_INIT;

static void load_lapack(void) {
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    void *h = dlopen("liblapacke.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(lapack_why, sizeof lapack_why, "%s", dlerror());
        return;
    }
    *(void **)&lapack_dgesvd = dlsym(h, "LAPACKE_dgesvd");
    *(void **)&blas_set_threads = dlsym(h, "openblas_set_num_threads");
    if (!lapack_dgesvd) snprintf(lapack_why, sizeof lapack_why, "liblapacke.so.3 has no LAPACKE_dgesvd");
}

static trit_status need_lapack(void) {
    pthread_once(&lapack_once, load_lapack);
    if (lapack_dgesvd) return TRIT_OK;
    return trit_error(TRIT_ERR_IO, "galore: cannot load LAPACK for the SVD of the bases (%s): install liblapacke and "
                      "libopenblas0 (tools/setup.sh)", lapack_why);
}

int64_t trit_galore_moment_count(const optim_galore *gl) { return gl->rank * (gl->left ? gl->cols : gl->rows); }
int64_t trit_galore_basis_count(const optim_galore *gl) { return gl->rank * (gl->left ? gl->rows : gl->cols); }

static int64_t current_gap(const trit_optim_config *cfg, const optim_galore *gl) {
    return gl->sched && gl->sched[0] >= 1.0 ? (int64_t)gl->sched[0] : cfg->galore_update;
}

bool trit_galore_due(const trit_optim_config *cfg, const optim_galore *gl, int64_t done) {
    return done % current_gap(cfg, gl) == 0;
}

trit_status trit_galore_ws_alloc(optim_galore_ws *ws, int64_t side_rank, int64_t elems, bool quantized) {
    memset(ws, 0, sizeof *ws);
    const int64_t parts = quantized ? 3 : 2;
    const size_t bytes = sizeof(float) * (size_t)(parts * side_rank + elems);
    float *block = trit_aligned_alloc(bytes);
    if (!block) return trit_error(TRIT_ERR_NOMEM, "galore: could not allocate %zu bytes of workspace", bytes);
    ws->r = block;
    ws->z = block + side_rank;
    ws->basis = quantized ? block + 2 * side_rank : NULL;
    ws->d = block + parts * side_rank;
    ws->bytes = bytes;
    return TRIT_OK;
}

void trit_galore_ws_free(optim_galore_ws *ws) {
    if (ws->r) trit_aligned_free(ws->r);
    memset(ws, 0, sizeof *ws);
}

// The top `rank` singular vectors of g (rows, cols) on its smaller side, as the f32 basis:
// left P (rows, rank), right Q (rank, cols). g row-major is g^T column-major (cols, rows), so
// LAPACK reads it in place of a transpose: g's left vectors are g^T's right ones (vt) and
// g's right vectors g^T's left ones (u).
static trit_status svd_basis(const float *g, int64_t rows, int64_t cols, int64_t rank, bool left, float *basis) {
    const int64_t k = rows < cols ? rows : cols, n = rows * cols;
    const int64_t vec_len = left ? rows : cols;
    trit_status st = need_lapack();
    if (st != TRIT_OK) return st;
    double *a = malloc(sizeof(double) * (size_t)(n + k + k + vec_len * k));
    if (!a) return trit_error(TRIT_ERR_NOMEM, "galore: out of memory for the SVD of a (%lld, %lld) gradient",
                              (long long)rows, (long long)cols);
    double *sv = a + n, *superb = sv + k, *vecs = superb + k, dummy = 0.0;
    for (int64_t i = 0; i < n; i++) a[i] = g[i];
    if (blas_set_threads) blas_set_threads(1);
    const lapack_int info =
        left ? lapack_dgesvd(LAPACK_COL_MAJOR, 'N', 'S', (lapack_int)cols, (lapack_int)rows, a, (lapack_int)cols, sv,
                             &dummy, 1, vecs, (lapack_int)k, superb)
             : lapack_dgesvd(LAPACK_COL_MAJOR, 'S', 'N', (lapack_int)cols, (lapack_int)rows, a, (lapack_int)cols, sv,
                             vecs, (lapack_int)cols, &dummy, 1, superb);
    if (info == 0) {
        // Vector j, element i: vt[j + i k] (left, vt (k, rows) column-major) or u[i + j cols]
        // (right, u (cols, k)). An SVD's signs are arbitrary; a vector that flipped between two
        // refreshes would flip the moments carried across, so each is signed to make its largest
        // entry positive.
        const int64_t step_i = left ? k : 1, step_j = left ? 1 : cols;
        for (int64_t j = 0; j < rank; j++) {
            int64_t big = 0;
            for (int64_t i = 1; i < vec_len; i++)
                if (fabs(vecs[j * step_j + i * step_i]) > fabs(vecs[j * step_j + big * step_i])) big = i;
            const double sign = vecs[j * step_j + big * step_i] < 0 ? -1.0 : 1.0;
            for (int64_t i = 0; i < vec_len; i++) {
                const float x = (float)(sign * vecs[j * step_j + i * step_i]);
                if (left) basis[i * rank + j] = x;  // P (rows, rank)
                else basis[j * cols + i] = x;       // Q (rank, cols)
            }
        }
    }
    free(a);
    if (info != 0)
        return trit_error(TRIT_ERR_NUMERIC, "galore: LAPACK's SVD of a (%lld, %lld) gradient failed (info %d)",
                          (long long)rows, (long long)cols, (int)info);
    return TRIT_OK;
}

// ---- Q-GaLore's int4 basis ------------------------------------------------------------------

static void int4_encode(const float *x, int64_t n, uint8_t *codes, float *scales) {
    memset(codes, 0x88, (size_t)(n + 1) / 2);
    for (int64_t lo = 0, b = 0; lo < n; lo += TRIT_QGALORE_GROUP, b++) {
        const int64_t hi = lo + TRIT_QGALORE_GROUP < n ? lo + TRIT_QGALORE_GROUP : n;
        float amax = 0.0f;
        for (int64_t i = lo; i < hi; i++) amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
        const float scale = amax / 7.0f;
        scales[b] = scale;
        for (int64_t i = lo; scale > 0.0f && i < hi; i++) {
            float q = nearbyintf(x[i] / scale);
            q = q > 7.0f ? 7.0f : q < -7.0f ? -7.0f : q;
            const uint8_t c = (uint8_t)((int)q + 8);
            codes[i / 2] = (uint8_t)(i % 2 ? (codes[i / 2] & 0x0f) | (c << 4) : (codes[i / 2] & 0xf0) | c);
        }
    }
}

static float int4_at(const uint8_t *codes, const float *scales, int64_t i) {
    const int c = i % 2 ? codes[i / 2] >> 4 : codes[i / 2] & 0x0f;
    return (float)(c - 8) * scales[i / TRIT_QGALORE_GROUP];
}

static void int4_decode(const uint8_t *codes, const float *scales, int64_t n, float *out) {
    for (int64_t i = 0; i < n; i++) out[i] = int4_at(codes, scales, i);
}

// Element i of the leading basis vector: P's column 0 or Q's row 0.
static int64_t lead_index(const optim_galore *gl, int64_t i) { return gl->left ? i * gl->rank : i; }

// Q-GaLore's lazy refresh: |cos| of the new leading vector with the stored basis's, queued; the
// gap doubles while the queue is full and its mean reaches the threshold.
static void qgalore_schedule(const trit_optim_config *cfg, optim_galore *gl, const float *fresh) {
    double *sc = gl->sched;
    if (sc[0] < 1.0) sc[0] = (double)cfg->galore_update;
    if (sc[1] >= 1.0) {
        const int64_t len = gl->left ? gl->rows : gl->cols;
        double dot = 0.0, na = 0.0, nb = 0.0;
        for (int64_t i = 0; i < len; i++) {
            const double a = int4_at(gl->basis_q, gl->basis_scales, lead_index(gl, i)), b = fresh[lead_index(gl, i)];
            dot += a * b, na += a * a, nb += b * b;
        }
        const double cos = na > 0.0 && nb > 0.0 ? fabs(dot) / sqrt(na * nb) : 0.0;
        double *queue = sc + 3;
        int64_t q = (int64_t)sc[2];
        if (q == TRIT_QGALORE_QUEUE) memmove(queue, queue + 1, sizeof(double) * (TRIT_QGALORE_QUEUE - 1)), q--;
        queue[q++] = cos;
        sc[2] = (double)q;
        double mean = 0.0;
        for (int64_t i = 0; i < q; i++) mean += queue[i];
        if (q == TRIT_QGALORE_QUEUE && mean / (double)q >= cfg->qgalore_cos && sc[0] < 0x1p40) sc[0] *= 2.0;
    }
    sc[1] += 1.0;
}

static trit_status refresh(const trit_optim_config *cfg, optim_galore *gl, const optim_galore_ws *ws, const float *g) {
    float *fresh = gl->basis ? gl->basis : ws->basis;
    trit_status s = svd_basis(g, gl->rows, gl->cols, gl->rank, gl->left, fresh);
    if (s != TRIT_OK || !gl->basis_q) return s;
    qgalore_schedule(cfg, gl, fresh);
    int4_encode(fresh, trit_galore_basis_count(gl), gl->basis_q, gl->basis_scales);
    return TRIT_OK;
}

// Q-GaLore: w (n) to the int8 grid of its groups, rounding x / scale up with probability equal
// to its fraction (Philox bits of (seed, stream, element)).
static void int8_grid_sr(float *w, int64_t n, uint64_t seed, uint64_t stream) {
    const int64_t groups = (n + TRIT_QGALORE_GROUP - 1) / TRIT_QGALORE_GROUP;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
    for (int64_t b = 0; b < groups; b++) {
        const int64_t lo = b * TRIT_QGALORE_GROUP, len = n - lo < TRIT_QGALORE_GROUP ? n - lo : TRIT_QGALORE_GROUP;
        float u[TRIT_QGALORE_GROUP], amax = 0.0f;
        for (int64_t i = 0; i < len; i++) amax = fabsf(w[lo + i]) > amax ? fabsf(w[lo + i]) : amax;
        const float scale = amax / 127.0f;
        if (!(scale > 0.0f) || !isfinite(scale)) continue;
        trit_rng_fill_uniform(u, len, seed, stream, (uint64_t)lo, 0.0f, 1.0f);
        for (int64_t i = 0; i < len; i++) {
            // The absmax value itself is the grid's end, exactly (its quotient may miss 127 by an ulp).
            const float x = fabsf(w[lo + i]) == amax ? copysignf(127.0f, w[lo + i]) : w[lo + i] / scale;
            float q = floorf(x + u[i]);
            q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            w[lo + i] = q * scale;
        }
    }
}

trit_status trit_galore_step(const trit_optim_config *cfg, optim_galore *gl, const optim_galore_ws *ws, float *w,
                             const float *g, float *m, float *v, const optim_scalars *s, int64_t done, int index,
                             uint64_t seed) {
    const int64_t rows = gl->rows, cols = gl->cols, r = gl->rank, nm = trit_galore_moment_count(gl);
    if (trit_galore_due(cfg, gl, done)) {
        trit_status st = refresh(cfg, gl, ws, g);
        if (st != TRIT_OK) return st;
    }
    const float *basis = gl->basis;
    if (gl->basis_q) {
        int4_decode(gl->basis_q, gl->basis_scales, trit_galore_basis_count(gl), ws->basis);
        basis = ws->basis;
    }
    if (gl->left) {  // R = P^T G (r, cols); D = P Z
        trit_kernel_gemm_f32(true, false, r, cols, rows, basis, r, g, cols, ws->r, cols, false);
        trit_optim_adam_direction(ws->z, ws->r, m, v, nm, s);
        trit_kernel_gemm_f32(false, false, rows, cols, r, basis, r, ws->z, cols, ws->d, cols, false);
    } else {         // R = G Q^T (rows, r); D = Z Q
        trit_kernel_gemm_f32(false, true, rows, r, cols, g, cols, basis, cols, ws->r, r, false);
        trit_optim_adam_direction(ws->z, ws->r, m, v, nm, s);
        trit_kernel_gemm_f32(false, false, rows, cols, r, ws->z, r, basis, cols, ws->d, cols, false);
    }
    // The AdamW kernel's order: decay first, then the step added (scale 1 adds it unchanged).
    const float decay_mul = s->decay_mul, scale = (float)cfg->galore_scale;
    const float *d = ws->d;
    const int64_t n = rows * cols;
#pragma omp parallel for schedule(static) if (n >= OPTIM_PAR_MIN)
    for (int64_t i = 0; i < n; i++) {
        const float x = w[i] * decay_mul;
        w[i] = x + scale * d[i];
    }
    if (gl->basis_q) int8_grid_sr(w, n, seed, OPTIM_QGALORE_STREAM + ((uint64_t)index << 40) + (uint64_t)(done + 1));
    return TRIT_OK;
}
