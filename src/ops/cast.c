// cast between float dtypes through the dtype table's row converters, in chunks of CHUNK
// elements (through an f32 row on the stack), split over threads by chunk: each element is
// converted on its own, so the result never depends on the thread count. A strided input (a
// view of a 16-bit parameter, say) is read element by element; no copy op is put before it,
// since copies of 16-bit values are what this op is for.
#include "ops/cast.h"

#include "ops/op_build.h"
#include "trit/ops.h"

#include <string.h>

enum { CHUNK = 2048 };

static bool castable(trit_dtype dt) { return dt == TRIT_F32 || dt == TRIT_F64 || dt == TRIT_BF16 || dt == TRIT_F16; }

static trit_status cast_infer(const trit_tensor *const *in, int n_in, const void *attr, trit_tensor *out) {
    const trit_cast_attr *a = attr;
    if (n_in != 1) return trit_error(TRIT_ERR_INVALID, "cast: expected 1 input, got %d", n_in);
    if (!castable(in[0]->dtype) || !castable(a->dtype))
        return trit_error(TRIT_ERR_DTYPE, "cast: converts between f32, f64, bf16 and f16, asked %s -> %s "
                          "(quantized dtypes have their own quantize ops)", trit_dtype_name(in[0]->dtype),
                          trit_dtype_name(a->dtype));
    return trit_tensor_init_layout(out, a->dtype, in[0]->ndim, in[0]->shape);
}

// f64 on either side goes element by element in double (f64 -> bf16/f16 rounds through f32,
// which can differ from a direct rounding only at exact ties of the f32 rounding).
static void cast_f64(void *dst, trit_dtype ddt, const void *src, trit_dtype sdt, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        double v = sdt == TRIT_F64 ? ((const double *)src)[i] : 0;
        if (sdt != TRIT_F64) {
            float f;
            trit_dtype_traits_of(sdt)->to_f32(&f, (const char *)src + trit_dtype_nbytes(sdt, i), 1, NULL, i);
            v = f;
        }
        if (ddt == TRIT_F64) {
            ((double *)dst)[i] = v;
        } else {
            const float f = (float)v;
            trit_dtype_traits_of(ddt)->from_f32((char *)dst + trit_dtype_nbytes(ddt, i), &f, 1, NULL, i);
        }
    }
}

static trit_status cast_forward(const trit_op_call *c) {
    const trit_tensor *x = c->in[0];
    trit_tensor *y = c->out;
    const int64_t n = trit_tensor_numel(x);
    const void *src = trit_tensor_ptr(x);
    if (!trit_tensor_is_contiguous(x)) return trit_tensor_copy(y, x);  // a strided view: element by element
    if (x->dtype == y->dtype) {
        memcpy(y->data, src, trit_dtype_nbytes(x->dtype, n));
        return TRIT_OK;
    }
    if (x->dtype == TRIT_F64 || y->dtype == TRIT_F64) {
        cast_f64(y->data, y->dtype, src, x->dtype, n);
        return TRIT_OK;
    }
    const trit_dtype_traits *from = trit_dtype_traits_of(x->dtype), *to = trit_dtype_traits_of(y->dtype);
    const int64_t chunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel for schedule(static) if (n >= 4 * CHUNK)
    for (int64_t k = 0; k < chunks; k++) {
        float row[CHUNK];
        const int64_t i0 = k * CHUNK, m = n - i0 < CHUNK ? n - i0 : CHUNK;
        from->to_f32(row, (const char *)src + trit_dtype_nbytes(x->dtype, i0), m, NULL, i0);
        to->from_f32((char *)y->data + trit_dtype_nbytes(y->dtype, i0), row, m, NULL, i0);
    }
    return TRIT_OK;
}

static trit_status cast_backward(const trit_op_call *c) {
    if (!c->gin[0]) return TRIT_OK;
    real *gx = c->gin[0]->data;
    const real *gy = c->gout->data;
    const int64_t n = trit_tensor_numel(c->out);
    for (int64_t i = 0; i < n; i++) gx[i] += gy[i];
    return TRIT_OK;
}

const trit_op_def R(trit_op_cast) = {
    .name = "cast", .infer = cast_infer, .forward = cast_forward, .backward = cast_backward,
    .bwd_unread = TRIT_IN(0) | TRIT_OUT,
    .lowp_inputs = TRIT_IN(0), .attr_size = sizeof(trit_cast_attr),
};

// ---- graph constructor ------------------------------------------------------------------
// Float build only: this file is compiled twice (base/real.h), the public API must exist once.
#ifndef TRIT_REAL_F64

trit_tensor *trit_cast(trit_graph *g, trit_tensor *x, trit_dtype dt) {
    if (x && x->dtype == dt) return x;
    const trit_cast_attr a = {.dtype = dt};
    return TRIT_APPLY(g, trit_op_cast, 1, &x, &a);
}

#endif
