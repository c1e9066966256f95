// exp of a vector of floats, written once over the vocabulary of x86/simd_avx512.h or
// x86/simd_avx2.h (which include it last), so both widths give the same bits.
//
// Method: Cody-Waite range reduction x = n ln2 + r, n = round(x / ln2), |r| <= ln2 / 2, with ln2
// split into a float part and a remainder; with fused multiply-add, x - n * ln2_hi is exact
// (W. J. Cody and W. Waite, Software Manual for the Elementary Functions, 1980). Then
// exp(r) = 1 + r + r^2 q(r), q of degree 4, whose coefficients minimize the relative error on
// [-ln2/2, ln2/2] (a Remez exchange: maximum relative error 3.1e-9, far below float rounding);
// Horner with FMA; finally p 2^n rounded once (vscale2), correctly into the subnormal range and
// to 0 or Inf past it. Measured against double exp over every float x in [-87.3, 88.7] (the
// results are normal floats): maximum relative error 8.5e-8, under one float ulp.
//
// Special values: exp(-Inf) = 0, exp(+Inf) = +Inf, exp(NaN) = NaN; x is clamped to [-104, 89]
// first (beyond which float results are 0 or Inf anyway) so n stays finite; the clamp keeps a
// NaN (max and min return their second operand when either is NaN).
#ifndef TRIT_KERNELS_X86_SIMD_EXP_H
#define TRIT_KERNELS_X86_SIMD_EXP_H

static inline vf vexp(vf x) {
    x = vmin(vset1(89.0f), vmax(vset1(-104.0f), x));
    const vf n = vround(vmul(x, vset1(1.44269504088896341f)));
    vf r = vfnmadd(n, vset1(0.693145751953125f), x);        // ln2_hi: 15 bits, so n * ln2_hi is exact
    r = vfnmadd(n, vset1(1.42860682030941723212e-6f), r);   // ln2 - ln2_hi
    vf q = vset1(1.381459955e-03f);
    q = vfmadd(q, r, vset1(8.368716875e-03f));
    q = vfmadd(q, r, vset1(4.166838803e-02f));
    q = vfmadd(q, r, vset1(1.666652063e-01f));
    q = vfmadd(q, r, vset1(4.999999345e-01f));
    return vscale2(vadd(vfmadd(vmul(r, r), q, r), vset1(1.0f)), n);
}

#endif
