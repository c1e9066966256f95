// Fake quantization (quantization-aware training, as optimum-quanto and BitNet train): the
// forward rounds x to the codes a quantized tensor would hold and returns their values,
//   integer codes: clamp(round(x / s), -qmax, qmax) * s     fp8: fp8(x / s) * s
// with s chosen per group, per row, from a calibrated running absmax, or BitNet's absmean; the
// rule for s and the rounding are those of trit_quantize, so freezing a fake-quantized weight
// gives exactly the values training saw. Backward is the straight-through estimator: the
// gradient passes unchanged, or (clip_ste) only where |x| <= qmax * s. Forward saves the one
// scale of the calibrated mode, which backward needs and the state may change after.
#include "ops/fake_quant.h"
#include "ops/op_def.h"

#include "ops/op_build.h"
#include "trit/ops.h"

#include <math.h>
#include <string.h>

typedef struct trit_fake_quant_attr {
    trit_fake_quant_spec spec;
} trit_fake_quant_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_fake_quant);

enum { FQ_CHUNK = 16384 };  // elements per parallel work item

static int qmax_of(trit_dtype dt) { return dt == TRIT_QINT8 ? 127 : dt == TRIT_QINT4 ? 7 : 1; }

static bool is_fp8(trit_dtype dt) { return dt == TRIT_F8_E4M3 || dt == TRIT_F8_E5M2; }

static trit_fp8_kind kind_of(trit_dtype dt) { return dt == TRIT_F8_E5M2 ? TRIT_FP8_E5M2 : TRIT_FP8_E4M3; }

// The largest |value| the codes reach with scale 1.
static double range_of(trit_dtype dt) { return is_fp8(dt) ? (double)trit_fp8_max(kind_of(dt)) : qmax_of(dt); }

static int64_t group_of(const trit_fake_quant_spec *s, const trit_tensor *x) {
    const int64_t n = trit_tensor_numel(x), row = x->ndim ? x->shape[x->ndim - 1] : 1;
    if (s->mode == TRIT_FQ_TOKEN) return row;
    if (s->mode != TRIT_FQ_GROUPS || s->group_size == 0) return n;
    return s->group_size < 0 ? row : s->group_size;
}

static trit_status fq_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_fake_quant_spec *s = &((const trit_fake_quant_attr *)attr)->spec;
    const trit_tensor *x = in[0];
    if (x->dtype != TRIT_REAL_DTYPE)
        return trit_error(TRIT_ERR_DTYPE, "fake_quant: expected a %s input, got %s", trit_dtype_name(TRIT_REAL_DTYPE),
                          trit_dtype_name(x->dtype));
    if (s->dtype != TRIT_QINT8 && s->dtype != TRIT_QINT4 && s->dtype != TRIT_QINT2 && !is_fp8(s->dtype))
        return trit_error(TRIT_ERR_DTYPE, "fake_quant: codes of qint8, qint4, qint2, f8_e4m3 or f8_e5m2, not %s",
                          trit_dtype_name(s->dtype));
    if ((s->mode == TRIT_FQ_CALIBRATED) != (n_in == 2))
        return trit_error(TRIT_ERR_INVALID, "fake_quant: a calibrated scale needs a running-absmax state tensor (and "
                          "only it takes one)");
    if (n_in == 2 && (in[1]->dtype != TRIT_REAL_DTYPE || trit_tensor_numel(in[1]) != 1))
        return trit_error(TRIT_ERR_SHAPE, "fake_quant: the running absmax must be one %s value",
                          trit_dtype_name(TRIT_REAL_DTYPE));
    const int64_t n = trit_tensor_numel(x), g = group_of(s, x), row = x->ndim ? x->shape[x->ndim - 1] : 1;
    if (g <= 0 || n % g != 0 || (s->mode == TRIT_FQ_GROUPS && s->group_size > 0 && row % g != 0))
        return trit_error(TRIT_ERR_SHAPE, "fake_quant: group size %lld must divide the rows of %lld",
                          (long long)s->group_size, (long long)row);
    if (s->mode == TRIT_FQ_CALIBRATED && !(s->momentum >= 0 && s->momentum < 1))
        return trit_error(TRIT_ERR_INVALID, "fake_quant: momentum must be in [0, 1), got %g", s->momentum);
    return trit_tensor_init_layout(out, x->dtype, x->ndim, x->shape);
}

// Adding and removing 1.5 * 2^(mantissa bits) rounds to nearest even exactly for values this
// small (|v| <= 127 after clamping), as nearbyint does, without a library call per element.
#define RNE_MAGIC ((real)(sizeof(real) == sizeof(float) ? 12582912.0 : 6755399441055744.0))

static inline real fq_value(real x, real s, trit_dtype dt, int qmax) {
    if (s == 0 || x != x) return x != x ? x : (real)0;
    if (is_fp8(dt)) {
        const trit_fp8_kind k = kind_of(dt);
        return (real)trit_fp8_to_f32(trit_f32_to_fp8((float)(x / s), k), k) * s;
    }
    real v = x / s;  // clamping before rounding gives the same code, and bounds v for the trick
    v = v > (real)qmax ? (real)qmax : v < (real)-qmax ? (real)-qmax : v;
    const int code = (int)((v + RNE_MAGIC) - RNE_MAGIC);  // an int: -0 becomes 0, as in the codec
    return (real)code * s;
}

// max |x| (NaN ignored). Eight running maxima so the loop vectorises; max is exact, so the order
// does not change the result.
static real absmax(const real *x, int64_t n) {
    real m[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) m[j] = RFABS(x[i + j]) > m[j] ? RFABS(x[i + j]) : m[j];
    for (; i < n; i++) m[0] = RFABS(x[i]) > m[0] ? RFABS(x[i]) : m[0];
    for (int j = 1; j < 8; j++) m[0] = m[j] > m[0] ? m[j] : m[0];
    return m[0];
}

// y = fq_value(x[i], s, dt, qmax) over n elements for integer codes, with the same arithmetic
// but no branch per element, so the loop vectorises. Adding 0 turns a -0 code into 0, as
// fq_value's int conversion does; a NaN stays NaN.
static void fq_int_span(const real *x, real *y, int64_t n, real s, int qmax) {
    if (s == 0) {
        for (int64_t i = 0; i < n; i++) y[i] = x[i] != x[i] ? x[i] : (real)0;
        return;
    }
    const real q = (real)qmax;
    for (int64_t i = 0; i < n; i++) {
        real v = x[i] / s;
        v = v > q ? q : v;
        v = v < -q ? -q : v;
        y[i] = (((v + RNE_MAGIC) - RNE_MAGIC) + (real)0) * s;
    }
}

// y = fake quantization of x (n) with scale s: the vectorised span for integer codes.
static void fq_span(const real *x, real *y, int64_t n, real s, trit_dtype dt, int qmax) {
    if (!is_fp8(dt)) {
        fq_int_span(x, y, n, s, qmax);
        return;
    }
    for (int64_t i = 0; i < n; i++) y[i] = fq_value(x[i], s, dt, qmax);
}

// The scale of one group of values under s (not the calibrated mode).
static real group_scale(const trit_fake_quant_spec *s, const real *x, int64_t n) {
    if (s->mode == TRIT_FQ_TERNARY) {
        double sum = 0;
        for (int64_t i = 0; i < n; i++) sum += RFABS(x[i]);
        const double m = sum / (double)n;
        return (real)(m > 1e-5 ? m : 1e-5);
    }
    return (real)(absmax(x, n) / range_of(s->dtype));
}

static real calibrated_scale(const trit_op_call *c, const real *x, int64_t n) {
    const trit_fake_quant_spec *s = &((const trit_fake_quant_attr *)c->attr)->spec;
    real *r = trit_tensor_ptr(c->in[1]);
    const real amax = absmax(x, n);
    if (c->ctx->training) *r = *r == 0 ? amax : (real)(s->momentum * *r + (1 - s->momentum) * amax);
    return (real)((*r > 0 ? *r : amax) / range_of(s->dtype));
}

static size_t fq_saved_bytes(const trit_op_call *c) { (void)c; return sizeof(real); }

static trit_status fq_forward(const trit_op_call *c) {
    const trit_fake_quant_spec *s = &((const trit_fake_quant_attr *)c->attr)->spec;
    const real *x = trit_tensor_ptr(c->in[0]);  // (n)
    real *y = c->out->data;                     // (n)
    const int64_t n = trit_tensor_numel(c->out), g = group_of(s, c->in[0]), G = n / g;
    const int qmax = s->mode == TRIT_FQ_TERNARY ? 1 : qmax_of(s->dtype);
    const trit_dtype dt = s->mode == TRIT_FQ_TERNARY ? TRIT_QINT2 : s->dtype;
    real *saved = c->saved;
    *saved = s->mode == TRIT_FQ_CALIBRATED ? calibrated_scale(c, x, n) : 0;
    if (G == 1) {  // one scale (a whole matrix, or calibrated): the elements split among threads
        const real sc = s->mode == TRIT_FQ_CALIBRATED ? *saved : group_scale(s, x, n);
        const int64_t chunks = (n + FQ_CHUNK - 1) / FQ_CHUNK;
#pragma omp parallel for schedule(static) if (chunks > 1)
        for (int64_t k = 0; k < chunks; k++)
            fq_span(x + k * FQ_CHUNK, y + k * FQ_CHUNK, (k + 1) * FQ_CHUNK < n ? FQ_CHUNK : n - k * FQ_CHUNK, sc, dt, qmax);
        return TRIT_OK;
    }
#pragma omp parallel for schedule(static) if (n >= FQ_CHUNK)
    for (int64_t k = 0; k < G; k++) {
        fq_span(x + k * g, y + k * g, g, group_scale(s, x + k * g, g), dt, qmax);
    }
    return TRIT_OK;
}

static trit_status fq_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    const trit_fake_quant_spec *s = &((const trit_fake_quant_attr *)c->attr)->spec;
    const real *x = trit_tensor_ptr(c->in[0]), *gy = c->gout->data;
    real *gx = c->gin[0]->data;
    const int64_t n = trit_tensor_numel(c->out);
    const bool clip = s->clip_ste && s->mode == TRIT_FQ_CALIBRATED;
    const real limit = (real)(*(const real *)c->saved * range_of(s->dtype));
#pragma omp parallel for schedule(static) if (n >= FQ_CHUNK)
    for (int64_t i = 0; i < n; i++)
        if (!clip || RFABS(x[i]) <= limit) gx[i] += gy[i];
    return TRIT_OK;
}

const trit_op_def R(trit_op_fake_quant) = {
    .name = "fake_quant", .infer = fq_infer, .forward = fq_forward, .backward = fq_backward,
    .saved_bytes = fq_saved_bytes, .contiguous_inputs = TRIT_IN(0), .no_grad_inputs = TRIT_IN(1),
    .attr_size = sizeof(trit_fake_quant_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

void trit_fake_quant_rows_f32(const float *x, float *y, int64_t R, int64_t K, const trit_fake_quant_spec *s) {
    const int qmax = s->mode == TRIT_FQ_TERNARY ? 1 : qmax_of(s->dtype);
    const trit_dtype dt = s->mode == TRIT_FQ_TERNARY ? TRIT_QINT2 : s->dtype;
    for (int64_t r = 0; r < R; r++) fq_span(x + r * K, y + r * K, K, group_scale(s, x + r * K, K), dt, qmax);
}

float trit_fake_quant_ternary_scale_f32(const float *w, int64_t n) {
    const trit_fake_quant_spec s = {.dtype = TRIT_QINT2, .mode = TRIT_FQ_TERNARY};
    return group_scale(&s, w, n);
}

bool trit_fake_quant_row_codes_f32(const float *x, int64_t K, int8_t *q, float *scale) {
    const trit_fake_quant_spec spec = {.dtype = TRIT_QINT8, .mode = TRIT_FQ_TOKEN};
    const float s = group_scale(&spec, x, K), lim = 127;
    int bad = 0;
    for (int64_t k = 0; k < K; k++) {  // fq_int_span's arithmetic, the code kept instead of code * s
        float v = s != 0 ? x[k] / s : x[k] * 0;  // x * 0: a NaN stays NaN under s = 0
        bad |= v != v;
        v = v > lim ? lim : v;
        v = v < -lim ? -lim : v;
        v = v == v ? v : 0;
        q[k] = (int8_t)(int)((v + RNE_MAGIC) - RNE_MAGIC);
    }
    *scale = bad ? NAN : s;
    return !bad;
}

trit_tensor *trit_fake_quant(trit_graph *g, trit_tensor *x, const trit_fake_quant_spec *s, trit_tensor *running_absmax) {
    if (!s) {
        trit_error(TRIT_ERR_INVALID, "fake_quant: NULL spec");
        return trit_graph_fail(g, TRIT_ERR_INVALID);
    }
    const trit_fake_quant_attr a = {.spec = *s};
    trit_tensor *in[2] = {x, running_absmax};
    return TRIT_APPLY(g, trit_op_fake_quant, running_absmax ? 2 : 1, in, &a);
}

#endif
