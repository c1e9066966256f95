// classifier_ce: cross_entropy(linear(x, W, b), targets) without ever holding the (rows, V)
// logits: they are made chunk_rows rows at a time in scratch by one GEMM and reduced to a row
// max and log-sum-exp (saved, 2 doubles per row). The loss is a graph's end, so when backward
// will follow (a training graph that wants x's, W's or b's gradient) forward goes on at once:
// it turns each chunk into dlogit = (softmax - onehot) * scale, with scale 1/count (mean) or 1
// (sum), and feeds it to two accumulating GEMMs,
//   dx[chunk] += dlogit W,   dW += dlogit^T x[chunk],   db += column sums of dlogit,
// into saved memory; backward then only adds d loss times those into the gradients. That is
// three GEMMs over W a step instead of four (the logits are never made twice) for saved memory
// the size of x and of W. Forward in eval mode leaves them out, and backward then makes the
// logits again itself.
// Per row the arithmetic is that of ops/matmul.c linear followed by ops/loss.c cross_entropy, so
// the fused op matches the pair. Chunks run in a fixed order, GEMMs sum in an order independent
// of threads, and row losses and bias sums are added serially or per column, so the results do
// not depend on the thread count. W may be a frozen quantized matrix (the tied head over a
// quantized token embedding): each GEMM then reads it through chunks of decoded rows
// (ops/qweight.h), dW does not exist, and the logits still never exceed one row chunk.
#include "ops/fused.h"
#include "ops/loss.h"

#include "ops/op_build.h"
#include "ops/gemm_call.h"
#include "ops/qweight.h"
#include "kernels/rowops.h"
#include "trit/ops.h"

#include <math.h>
#include <string.h>

// Default chunk: at most this many bytes of logits, within [CLS_MIN_ROWS, CLS_MAX_ROWS] rows, a
// multiple of CLS_ROW_TILES. Every chunk streams all of W (and dW) through the GEMMs once more,
// so chunks are as tall as the budget allows: at V = 50304 in f32, 256 rows (51 MB) run as fast
// as the unfused pair, 64 rows about twice as slow. Rows are taken in multiples of the GEMM
// kernels' row tiles (14 rows on AVX-512, 6 on AVX2): a 256-row chunk ends in a 4-row tile
// that costs a whole one in each of its three GEMMs. bpe50k's head at bf16 products, AMD EPYC
// Zen 4, 2 threads: 0.219-0.229 ms a row in chunks of 256, 0.202-0.205 in chunks of 294.
#define CLS_CHUNK_BYTES ((size_t)64 << 20)
#define CLS_ROW_TILES 42
#define CLS_MIN_ROWS (2 * CLS_ROW_TILES)
#define CLS_MAX_ROWS (7 * CLS_ROW_TILES)
// Columns per work item of the bias gradient sums.
#define CLS_COL_BLOCK 256
// Chunks smaller than this many logits stay on one thread.
#define CLS_PAR_MIN 8192

// The targets of rows [r0, ...): contiguous i32 or i64.
static const void *cls_targets_at(const trit_op_call *c, int64_t r0) {
    const trit_tensor *t = c->in[2];
    return (const char *)trit_tensor_ptr(t) + r0 * (t->dtype == TRIT_I64 ? 8 : 4);
}

static trit_status cls_check_dtypes(const trit_tensor *const *in, int n_in) {
    static const char *names[4] = {"x", "W", "targets", "bias"};
    for (int i = 0; i < n_in; i++) {
        if (i == 2) continue;
        if (i == 1 && trit_qw_is(in[1])) {
            trit_status s = R(trit_qw_check)(in[1], "classifier_ce", "W");
            if (s != TRIT_OK) return s;
            continue;
        }
        const bool ok = i < 2 ? trit_gemm_operand_dtype_ok(in[i]->dtype) : in[i]->dtype == TRIT_REAL_DTYPE;
        if (!ok)
            return trit_error(TRIT_ERR_DTYPE, "classifier_ce: expected %s to be %s%s, got %s", names[i],
                              trit_dtype_name(TRIT_REAL_DTYPE), i < 2 && TRIT_REAL_DTYPE == TRIT_F32 ? " (or bf16, f16)" : "",
                              trit_dtype_name(in[i]->dtype));
    }
    if (in[2]->dtype != TRIT_I32 && in[2]->dtype != TRIT_I64)
        return trit_error(TRIT_ERR_DTYPE, "classifier_ce: expected i32 or i64 class indices as targets, got %s",
                          trit_dtype_name(in[2]->dtype));
    return TRIT_OK;
}

static trit_status cls_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_classifier_attr *a = attr;
    char s1[128], s2[128], s3[128];
    if (n_in != 3 + (a->has_bias ? 1 : 0))
        return trit_error(TRIT_ERR_INVALID, "classifier_ce: expected %d inputs (x, W, targets%s), got %d",
                          3 + (a->has_bias ? 1 : 0), a->has_bias ? ", bias" : "", n_in);
    if (a->reduction != TRIT_REDUCE_MEAN && a->reduction != TRIT_REDUCE_SUM)
        return trit_error(TRIT_ERR_INVALID, "classifier_ce: reduction must be TRIT_REDUCE_MEAN or TRIT_REDUCE_SUM, got %d",
                          a->reduction);
    if (a->chunk_rows < 0)
        return trit_error(TRIT_ERR_INVALID, "classifier_ce: chunk_rows must be >= 0 (0 chooses), got %lld",
                          (long long)a->chunk_rows);
    trit_status st = cls_check_dtypes(in, n_in);
    if (st != TRIT_OK) return st;
    const trit_tensor *x = in[0], *w = in[1], *t = in[2];
    trit_tensor_shape_str(x, s1, sizeof s1);
    trit_tensor_shape_str(w, s2, sizeof s2);
    trit_tensor_shape_str(t, s3, sizeof s3);
    if (x->ndim < 1 || x->shape[x->ndim - 1] < 1 || w->ndim != 2 || w->shape[0] < 1 || w->shape[1] != x->shape[x->ndim - 1])
        return trit_error(TRIT_ERR_SHAPE, "classifier_ce: expected x (..., C) and W (V, C) with C, V >= 1, got x %s and W %s",
                          s1, s2);
    bool ok = t->ndim == x->ndim - 1;
    for (int i = 0; ok && i < t->ndim; i++) ok = t->shape[i] == x->shape[i];
    if (!ok)
        return trit_error(TRIT_ERR_SHAPE, "classifier_ce: expected targets of x's shape without its last dim, got x %s and targets %s",
                          s1, s3);
    if (a->has_bias && (in[3]->ndim != 1 || in[3]->shape[0] != w->shape[0]))
        return trit_error(TRIT_ERR_SHAPE, "classifier_ce: expected bias (%lld) to match W %s, got %s",
                          (long long)w->shape[0], s2, trit_tensor_shape_str(in[3], s1, sizeof s1));
    return trit_tensor_init_layout(out, TRIT_REAL_DTYPE, 0, NULL);
}

static int64_t cls_rows(const trit_op_call *c) { return trit_tensor_numel(c->in[2]); }
static int64_t cls_C(const trit_op_call *c) { return c->in[1]->shape[1]; }
static int64_t cls_V(const trit_op_call *c) { return c->in[1]->shape[0]; }

static int64_t cls_chunk(const trit_op_call *c) {
    const trit_classifier_attr *a = c->attr;
    const int64_t rows = cls_rows(c);
    int64_t r = a->chunk_rows;
    if (r <= 0) {
        r = (int64_t)(CLS_CHUNK_BYTES / ((size_t)cls_V(c) * sizeof(real)));
        r = r < CLS_MIN_ROWS ? CLS_MIN_ROWS : r > CLS_MAX_ROWS ? CLS_MAX_ROWS : r / CLS_ROW_TILES * CLS_ROW_TILES;
    }
    return r < rows ? r : rows;
}

// Scratch: the chunk's logits (chunk, V), then doubles: forward's row losses (chunk) or
// backward's bias sums (V), then a quantized W's decoded chunk.
static size_t cls_logit_bytes(const trit_op_call *c) {
    const size_t b = (size_t)cls_chunk(c) * (size_t)cls_V(c) * sizeof(real);
    return (b + 63) / 64 * 64;
}

static size_t cls_doubles_bytes(const trit_op_call *c) {
    const int64_t r = cls_chunk(c), v = cls_V(c);
    return (sizeof(double) * (size_t)(r > v ? r : v) + 63) / 64 * 64;
}

static trit_dtype cls_qw_dtype(const trit_op_call *c) { return trit_qw_decode_dtype(c->in[0]->dtype); }

static void *cls_qw_scratch(const trit_op_call *c) {
    return (char *)c->scratch + cls_logit_bytes(c) + cls_doubles_bytes(c);
}

// At bf16 matmul precision every product takes W's values rounded to bf16, chunk after chunk:
// rounded once per call into scratch instead, W is read at half the bytes and packed without
// converting (the products, and so the results, are the same bits). Where it is held: the region
// a quantized W's decoded chunk takes otherwise.
static bool cls_w_rounded(const trit_op_call *c) {
#ifndef TRIT_REAL_F64
    return c->in[1]->dtype == TRIT_F32 && c->ctx && c->ctx->matmul == TRIT_MATMUL_MEDIUM;
#else
    (void)c;
    return false;
#endif
}

static size_t cls_scratch_bytes(const trit_op_call *c) {
    const size_t qw = trit_qw_is(c->in[1]) ? R(trit_qw_scratch_bytes)(c->in[1], cls_qw_dtype(c)) : 0;
    const size_t w16 = cls_w_rounded(c) ? sizeof(uint16_t) * (size_t)(cls_V(c) * cls_C(c)) : 0;
    return cls_logit_bytes(c) + cls_doubles_bytes(c) + (qw > w16 ? qw : w16);
}

// W as the GEMMs read it: rounded into scratch (filled by cls_round_w) or as stored.
static trit_mm_ref cls_w(const trit_op_call *c) {
    return cls_w_rounded(c) ? (trit_mm_ref){cls_qw_scratch(c), TRIT_BF16} : trit_mm_of(c->in[1]);
}

static void cls_round_w(const trit_op_call *c) {
#ifndef TRIT_REAL_F64
    if (!cls_w_rounded(c)) return;
    const int64_t n = cls_V(c) * cls_C(c), block = 1 << 16;
    const float *w = trit_tensor_ptr(c->in[1]);
    uint16_t *h = cls_qw_scratch(c);
#pragma omp parallel for schedule(static) if (n >= 4 * block)
    for (int64_t i = 0; i < n; i += block) trit_f32_to_bf16_n(h + i, w + i, n - i < block ? n - i : block);
#else
    (void)c;
#endif
}

// Saved memory: per row the logits' max and log(sum(exp(logit - max))), then the count of
// non-ignored rows and whether forward left the gradients; then, for the inputs whose gradient
// backward will be asked for, forward's dx (rows, C), dW (V, C) and bias sums (V doubles).
static size_t cls_align(size_t b) { return (b + 63) / 64 * 64; }
static bool cls_wants(const trit_op_call *c, int i) { return (c->grad_inputs & TRIT_IN(i)) != 0; }
static size_t cls_stats_bytes(const trit_op_call *c) { return cls_align(sizeof(double) * (size_t)(2 * cls_rows(c) + 2)); }
static size_t cls_dx_bytes(const trit_op_call *c) {
    return cls_wants(c, 0) ? cls_align(sizeof(real) * (size_t)(cls_rows(c) * cls_C(c))) : 0;
}
static size_t cls_dw_bytes(const trit_op_call *c) {  // a quantized W gets no gradient
    return cls_wants(c, 1) && !trit_qw_is(c->in[1]) ? cls_align(sizeof(real) * (size_t)(cls_V(c) * cls_C(c))) : 0;
}
static size_t cls_db_bytes(const trit_op_call *c) {
    const trit_classifier_attr *a = c->attr;
    return a->has_bias && cls_wants(c, 3) ? cls_align(sizeof(double) * (size_t)cls_V(c)) : 0;
}
static size_t cls_saved_bytes(const trit_op_call *c) {
    return cls_stats_bytes(c) + cls_dx_bytes(c) + cls_dw_bytes(c) + cls_db_bytes(c);
}

// Forward's gradients in saved memory (NULL where not kept).
typedef struct {
    real *dx;    // (rows, C)
    real *dw;    // (V, C)
    double *db;  // (V)
} cls_grads;

static cls_grads cls_saved_grads(const trit_op_call *c) {
    char *p = (char *)c->saved + cls_stats_bytes(c);
    cls_grads g = {NULL, NULL, NULL};
    if (cls_dx_bytes(c)) g.dx = (real *)p;
    p += cls_dx_bytes(c);
    if (cls_dw_bytes(c)) g.dw = (real *)p;
    p += cls_dw_bytes(c);
    if (cls_db_bytes(c)) g.db = (double *)p;
    return g;
}

// L (n, V) = x[r0 : r0 + n] W^T + b.
static void cls_logits(const trit_op_call *c, int64_t r0, int64_t n, real *L) {
    const trit_classifier_attr *a = c->attr;
    const int64_t C = cls_C(c), V = cls_V(c);
    const trit_mm_ref x = trit_mm_at(trit_mm_of(c->in[0]), r0 * C);  // (n, C)
    const trit_mm_ref w = cls_w(c);                                   // (V, C)
    if (a->has_bias) {  // every row starts as the bias, then the GEMM accumulates onto it
        const real *b = trit_tensor_ptr(c->in[3]);
        for (int64_t i = 0; i < n; i++) memcpy(L + i * V, b, sizeof(real) * (size_t)V);
    }
    if (trit_qw_is(c->in[1]))
        R(trit_qw_gemm_xwt)(c, n, x, false, C, c->in[1], L, TRIT_REAL_DTYPE, V, a->has_bias, NULL, cls_qw_scratch(c));
    else
        trit_op_gemm(c, false, true, n, V, C, x, C, w, C, L, V, a->has_bias);
}

// The chunk's dlogits as the gradient GEMMs read them. Where W is rounded (bf16 products), they
// would round each dlogit to bf16 in packing too, so ce_dlogits rounds them once instead, into
// the first half of each row of L (row stride 2 V bf16 values): the same products, from half
// the bytes (bpe50k's head, a 256-row chunk on AMD EPYC Zen 4: dW 19.3 -> 18.0 ms, dx 24.6 ->
// 22.4 ms). Not with a bias, whose gradient sums the f32 values.
typedef struct cls_dl {
    trit_mm_ref d;  // (n, V) at row stride ld
    int64_t ld;
} cls_dl;

static cls_dl cls_dl_of(const trit_op_call *c, real *L, const cls_grads *g) {
    const int64_t V = cls_V(c);
    if (cls_w_rounded(c) && !g->db) return (cls_dl){{L, TRIT_BF16}, 2 * V};
    return (cls_dl){trit_mm_real(L), V};
}

// Turns the chunk's logits into dlogit = scale * (softmax - onehot), zero on ignored rows, in
// the form D says. Returns whether any row of the chunk counts.
static bool cls_dlogits(const trit_op_call *c, int64_t r0, int64_t n, real scale, real *L, cls_dl D) {
    const trit_classifier_attr *a = c->attr;
    const int64_t V = cls_V(c);
    const double *stats = c->saved;
    bool any = false;
    for (int64_t i = 0; i < n && !any; i++) any = trit_op_index_at(c->in[2], r0 + i) != a->ignore_index;
    if (!any) return false;
    R(trit_kernel_ce_dlogits)(L, stats + 2 * r0, cls_targets_at(c, r0), c->in[2]->dtype == TRIT_I64, a->ignore_index,
                              scale, n, V, D.d.dt == TRIT_BF16);
    return true;
}

// acc (V) += column sums of D (n, V); threads split the columns, rows are added in order.
static void cls_column_sums(const real *D, int64_t n, int64_t V, double *acc) {
    const int64_t nblocks = (V + CLS_COL_BLOCK - 1) / CLS_COL_BLOCK;
#pragma omp parallel for schedule(static) if (n * V >= CLS_PAR_MIN)
    for (int64_t blk = 0; blk < nblocks; blk++) {
        const int64_t c0 = blk * CLS_COL_BLOCK, c1 = V - c0 < CLS_COL_BLOCK ? V : c0 + CLS_COL_BLOCK;
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = c0; j < c1; j++) acc[j] += (double)D[i * V + j];
    }
}

// The gradients of rows [r0, r0 + n) from their dlogits D (n, V), added into g: dx's rows,
// dW (written first when dw_fresh) and the bias sums (f32 D only: cls_dl_of).
static void cls_chunk_grads(const trit_op_call *c, int64_t r0, int64_t n, cls_dl D, cls_grads g, bool dw_fresh) {
    const int64_t C = cls_C(c), V = cls_V(c);
    const trit_mm_ref x = trit_mm_of(c->in[0]), w = cls_w(c);  // (rows, C), (V, C)
    if (g.dx && trit_qw_is(c->in[1]))
        R(trit_qw_gemm_dyw)(c, n, D.d, D.ld, c->in[1], g.dx + r0 * C, C, cls_qw_dtype(c), cls_qw_scratch(c));
    else if (g.dx)
        trit_op_gemm(c, false, false, n, C, V, D.d, D.ld, w, C, g.dx + r0 * C, C, true);
    if (g.dw) trit_op_gemm(c, true, false, V, C, n, D.d, D.ld, trit_mm_at(x, r0 * C), C, g.dw, C, !dw_fresh);
    if (g.db) cls_column_sums(D.d.p, n, V, g.db);
}

static trit_status cls_forward(const trit_op_call *c) {
    const trit_classifier_attr *a = c->attr;
    const int64_t rows = cls_rows(c), C = cls_C(c), V = cls_V(c), chunk = cls_chunk(c);
    double *stats = c->saved;  // (rows, 2), the count, whether the gradients follow
    const int64_t count = trit_ce_count_targets("classifier_ce", c->in[2], V, a->ignore_index);
    if (count < 0) return TRIT_ERR_RANGE;
    real *L = c->scratch;                                               // (chunk, V)
    double *row_loss = (double *)((char *)c->scratch + cls_logit_bytes(c));  // (chunk)
    const cls_grads g = cls_saved_grads(c);
    const bool grads = c->ctx->training && !c->ctx->recompute && count > 0 && (g.dx || g.dw || g.db);
    const real unit = (real)(a->reduction == TRIT_REDUCE_MEAN ? 1.0 / (double)count : 1.0);
    if (grads && g.dx) memset(g.dx, 0, sizeof(real) * (size_t)(rows * C));
    if (grads && g.db) memset(g.db, 0, sizeof(double) * (size_t)V);
    bool dw_fresh = true;
    double total = 0;
    const cls_dl D = cls_dl_of(c, L, &g);
    cls_round_w(c);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
        cls_logits(c, r0, n, L);
        // -log_softmax(logits)[t] = (max - logit[t]) + log(sum): no cancellation of large numbers.
        R(trit_kernel_ce_fwd)(stats + 2 * r0, row_loss, L, cls_targets_at(c, r0), c->in[2]->dtype == TRIT_I64,
                              a->ignore_index, n, V);
        for (int64_t i = 0; i < n; i++) total += row_loss[i];
        if (grads && cls_dlogits(c, r0, n, unit, L, D)) {
            cls_chunk_grads(c, r0, n, D, g, dw_fresh);
            dw_fresh = dw_fresh && !g.dw;
        }
    }
    if (grads && g.dw && dw_fresh) memset(g.dw, 0, sizeof(real) * (size_t)(V * C));
    stats[2 * rows] = (double)count;
    stats[2 * rows + 1] = grads ? 1.0 : 0.0;
    if (a->reduction == TRIT_REDUCE_MEAN) total = count > 0 ? total / (double)count : 0.0;
    *(real *)c->out->data = (real)total;
    return TRIT_OK;
}

// y (n) += s * x, in order (y = s * x where store); s == 1 adds x exactly as an accumulating
// GEMM onto y would.
static void cls_add_scaled(real *y, const real *x, int64_t n, real s, bool store) {
    if (store && s == (real)1)
        memcpy(y, x, sizeof(real) * (size_t)n);
    else if (store)
        for (int64_t i = 0; i < n; i++) y[i] = s * x[i];
    else if (s == (real)1)
        for (int64_t i = 0; i < n; i++) y[i] += x[i];
    else
        for (int64_t i = 0; i < n; i++) y[i] += s * x[i];
}

static trit_status cls_backward(const trit_op_call *c) {
    const trit_classifier_attr *a = c->attr;
    const int64_t rows = cls_rows(c), C = cls_C(c), V = cls_V(c), chunk = cls_chunk(c);
    const double *stats = c->saved;
    const double count = stats[2 * rows];
    real *dx = c->gin[0] ? c->gin[0]->data : NULL;                      // (rows, C)
    real *dw = c->gin[1] ? c->gin[1]->data : NULL;                      // (V, C)
    real *db = a->has_bias && c->gin[3] ? c->gin[3]->data : NULL;       // (V)
    const uint32_t st = c->store_inputs;
    if (count == 0 || (!dx && !dw && !db)) {  // every row ignored: the loss is a constant 0
        for (int i = 0; i < c->n_in; i++) trit_op_zero_stored(c, i);
        return TRIT_OK;
    }
    if (dw && trit_qw_is(c->in[1]))
        return trit_error(TRIT_ERR_STATE, "classifier_ce: the %s W '%s' was asked for a gradient; quantized weights "
                          "get none: freeze it", trit_dtype_name(c->in[1]->dtype), c->in[1]->name);
    const double go = (double)*(const real *)c->gout->data;
    const cls_grads saved = cls_saved_grads(c);
    if (stats[2 * rows + 1] != 0 && (!dx || saved.dx) && (!dw || saved.dw) && (!db || saved.db)) {
        if (dx) cls_add_scaled(dx, saved.dx, rows * C, (real)go, st & TRIT_IN(0));
        if (dw) cls_add_scaled(dw, saved.dw, V * C, (real)go, st & TRIT_IN(1));
        if (db && (st & TRIT_IN(3)))
            for (int64_t j = 0; j < V; j++) db[j] = (real)(go * saved.db[j]);
        else if (db)
            for (int64_t j = 0; j < V; j++) db[j] += (real)(go * saved.db[j]);
        return TRIT_OK;
    }
    for (int i = 0; i < c->n_in; i++) trit_op_zero_stored(c, i);
    // Forward ran in eval mode: make the logits again, chunk by chunk, straight into the gradients.
    const real scale = (real)(a->reduction == TRIT_REDUCE_MEAN ? go / count : go);
    real *L = c->scratch;                                                       // (chunk, V)
    double *bias_acc = (double *)((char *)c->scratch + cls_logit_bytes(c));     // (V)
    const cls_grads g = {dx, dw, db ? bias_acc : NULL};
    if (db) memset(bias_acc, 0, sizeof(double) * (size_t)V);
    const cls_dl D = cls_dl_of(c, L, &g);
    cls_round_w(c);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
        const int64_t n = rows - r0 < chunk ? rows - r0 : chunk;
        cls_logits(c, r0, n, L);
        if (cls_dlogits(c, r0, n, scale, L, D)) cls_chunk_grads(c, r0, n, D, g, false);
    }
    if (db)
        for (int64_t j = 0; j < V; j++) db[j] += (real)bias_acc[j];
    return TRIT_OK;
}

const trit_op_def R(trit_op_classifier_ce) = {
    .name = "classifier_ce",
    .infer = cls_infer,
    .forward = cls_forward,
    .backward = cls_backward,
    .saved_bytes = cls_saved_bytes,
    .scratch_bytes = cls_scratch_bytes,
    .contiguous_inputs = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(2) | TRIT_IN(3),
    .no_grad_inputs = TRIT_IN(2),
    .bwd_stores = TRIT_IN(0) | TRIT_IN(1) | TRIT_IN(3),
    .lowp_inputs = TRIT_IN(0) | TRIT_IN(1),
    .attr_size = sizeof(trit_classifier_attr),
};

// ---- graph constructors -----------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_classifier_ce_chunked(trit_graph *g, trit_tensor *x, trit_tensor *W, trit_tensor *b,
                                        trit_tensor *targets, int64_t ignore_index, trit_reduction red,
                                        int64_t chunk_rows) {
    if (!trit_graph_reduction_ok(g, "classifier_ce", red)) return NULL;
    if (chunk_rows < 0) {
        trit_error(TRIT_ERR_INVALID, "classifier_ce: chunk_rows must be >= 0 (0 chooses), got %lld", (long long)chunk_rows);
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    trit_classifier_attr a = {
        .ignore_index = ignore_index, .reduction = (int)red, .has_bias = b != NULL, .chunk_rows = chunk_rows};
    trit_tensor *in[4] = {x, W, targets, b};
    return TRIT_APPLY(g, trit_op_classifier_ce, b ? 4 : 3, in, &a);
}

trit_tensor *trit_classifier_ce(trit_graph *g, trit_tensor *x, trit_tensor *W, trit_tensor *b, trit_tensor *targets,
                                int64_t ignore_index, trit_reduction red) {
    return trit_classifier_ce_chunked(g, x, W, b, targets, ignore_index, red, 0);
}

#endif
