// Quantized weights for tests of ops that take them (linear, embedding, the tied head): a
// frozen quantized matrix and its decoded f32 twin, for every quantized row of the dtype table,
// and the rounding bounds the comparisons use.
#ifndef TRIT_TEST_QWEIGHT_CHECK_H
#define TRIT_TEST_QWEIGHT_CHECK_H

#include "trit/trit.h"

// A quantization of a weight: dtype, and for the side-scaled dtypes (trit_quantize) the group
// (TRIT_QGROUP_* or a size), affine or symmetric and the double-quantization block (0: none).
// Blocked dtypes with scales inside their blocks (q8_0, q4_0, tq2_0, tq1_0) ignore the rest.
typedef struct qw_format {
    trit_dtype dt;
    int64_t group;
    bool affine;
    int64_t dq;
} qw_format;

// "qint4 g32 affine dq16"-like name of f into buf.
const char *qw_format_name(const qw_format *f, char *buf, size_t n);

// W (N, K) uniform in [-1, 1) from (seed, 1), quantized as f, flagged PARAM | FROZEN; *deq gets a
// new f32 tensor of its decoded values (trit_dequantize), flagged the same. Fails the test on
// error.
trit_tensor *qw_make(const qw_format *f, int64_t N, int64_t K, uint64_t seed, trit_tensor **deq);

// A new f32 tensor of `shape` uniform in [lo, hi) from (seed, 2), flagged PARAM (trainable) when
// param.
trit_tensor *qw_tensor(int ndim, const int64_t *shape, double lo, double hi, uint64_t seed, bool param);

// gamma_n = n u / (1 - n u), u = 2^-24: a sum of n products computed in fp32 in any order lies
// within gamma_n * (sum of |terms|) of the exact value, so two orders differ by twice that.
double qw_gamma(int64_t n);

#endif
