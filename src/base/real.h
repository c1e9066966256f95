// Files under src/ops/ and src/kernels/ref/ are written once against `real` and compiled twice:
// as float (the training path) and, with TRIT_REAL_F64, as double (the gradient-check path).
// R(name) gives each build its own symbol: name_f32 or name_f64. The R-prefixed macros are the
// libm function for `real` (REXP is exp or expf); the square root is spelled REAL_SQRT, since
// "RSQRT" reads as the reciprocal square root it is not.
#ifndef TRIT_REAL_H
#define TRIT_REAL_H

#include <math.h>

#ifdef TRIT_REAL_F64
typedef double real;
#define R(name) name##_f64
#define TRIT_REAL_DTYPE TRIT_F64
#define REAL_SQRT(x) sqrt(x)
#define REXP(x) exp(x)
#define RLOG(x) log(x)
#define RTANH(x) tanh(x)
#define RFABS(x) fabs(x)
#define RPOW(x, y) pow(x, y)
#define RMAX_NEG (-HUGE_VAL)
#else
typedef float real;
#define R(name) name##_f32
#define TRIT_REAL_DTYPE TRIT_F32
#define REAL_SQRT(x) sqrtf(x)
#define REXP(x) expf(x)
#define RLOG(x) logf(x)
#define RTANH(x) tanhf(x)
#define RFABS(x) fabsf(x)
#define RPOW(x, y) powf(x, y)
#define RMAX_NEG (-HUGE_VALF)
#endif

// Both builds of an op: declare with TRIT_DECLARE_REAL(const trit_op_def, trit_op_relu).
#define TRIT_DECLARE_REAL(type, name) extern type name##_f32, name##_f64

#endif
