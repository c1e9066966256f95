// Quantized test weights and rounding bounds (see qweight_check.h).
#include "qweight_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <cmocka.h>

const char *qw_format_name(const qw_format *f, char *buf, size_t n) {
    const bool scaled = f->dt != TRIT_Q8_0 && f->dt != TRIT_Q4_0 && f->dt != TRIT_TQ2_0 && f->dt != TRIT_TQ1_0;
    if (!scaled) {
        snprintf(buf, n, "%s", trit_dtype_name(f->dt));
        return buf;
    }
    char g[32];
    if (f->group == TRIT_QGROUP_TENSOR) snprintf(g, sizeof g, "per tensor");
    else if (f->group == TRIT_QGROUP_CHANNEL) snprintf(g, sizeof g, "per channel");
    else snprintf(g, sizeof g, "g%lld", (long long)f->group);
    snprintf(buf, n, "%s %s%s%s", trit_dtype_name(f->dt), g, f->affine ? " affine" : "", f->dq ? " dq" : "");
    return buf;
}

trit_tensor *qw_tensor(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed, bool param) {
    trit_tensor *t = param ? trit_tensor_new_param(TRIT_F32, ndim, shape, "p") : trit_tensor_new(TRIT_F32, ndim, shape);
    assert_non_null(t);
    assert_int_equal(trit_tensor_fill_uniform(t, lo, hi, seed, 2), TRIT_OK);
    return t;
}

trit_tensor *qw_make(const qw_format *f, int64_t N, int64_t K, uint64_t seed, trit_tensor **deq) {
    const int64_t shape[2] = {N, K};
    trit_tensor *w = trit_tensor_new(TRIT_F32, 2, shape), *q = NULL;
    assert_non_null(w);
    assert_int_equal(trit_tensor_fill_uniform(w, -1.0, 1.0, seed, 1), TRIT_OK);
    if (f->dt == TRIT_Q8_0 || f->dt == TRIT_Q4_0 || f->dt == TRIT_TQ2_0 || f->dt == TRIT_TQ1_0) {
        q = trit_tensor_new(f->dt, 2, shape);  // scales inside the blocks: the dtype's row converter
        if (q) trit_dtype_traits_of(f->dt)->from_f32(q->data, w->data, N * K, NULL, 0);
    } else {
        trit_quant_spec s = trit_quant_spec_default(f->dt);
        s.group_size = f->group;
        s.scheme = f->affine ? TRIT_QSCHEME_AFFINE : TRIT_QSCHEME_SYMMETRIC;
        s.double_quant_block = f->dq;
        q = trit_quantize(w, &s);
    }
    trit_tensor_free(w);
    if (!q) fail_msg("quantize %s: %s", trit_dtype_name(f->dt), trit_last_error());
    *deq = trit_dequantize(q);
    assert_non_null(*deq);
    q->flags |= TRIT_FLAG_PARAM | TRIT_FLAG_FROZEN;
    (*deq)->flags |= TRIT_FLAG_PARAM | TRIT_FLAG_FROZEN;
    assert_int_equal(trit_tensor_set_name(q, "wq"), TRIT_OK);
    assert_int_equal(trit_tensor_set_name(*deq, "w"), TRIT_OK);
    return q;
}

double qw_gamma(int64_t n) {
    const double u = 0x1p-24;
    return (double)n * u / (1.0 - (double)n * u);
}
