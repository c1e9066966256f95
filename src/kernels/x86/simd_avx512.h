// The vector vocabulary of kernels written once for several x86 widths (x86/rowops_simd.h), in
// AVX-512: 16 floats a vector, a tail of a row as a lane bitmask, doubles 8 a vector (one half
// of a float vector widened). x86/simd_avx2.h defines the same names for AVX2; include exactly
// one, only from a file compiled with that ISA's flags.
#ifndef TRIT_KERNELS_X86_SIMD_AVX512_H
#define TRIT_KERNELS_X86_SIMD_AVX512_H

#include <immintrin.h>
#include <stdint.h>

#define SIMD_VL 16
#define SIMD_SUFFIX avx512

typedef __m512 vf;      // SIMD_VL floats
typedef __m512d vd;     // SIMD_VL / 2 doubles: one half of a vf, widened
typedef __mmask16 vtail;  // the first n lanes of a vf
typedef __mmask8 vdtail;  // the first n lanes of a vd
typedef __mmask16 vpred;  // a per-lane predicate

static inline vtail vtail_of(int64_t n) {
    return n >= 16 ? (vtail)0xFFFF : n <= 0 ? (vtail)0 : (vtail)((1u << n) - 1);
}
static inline vdtail vtail_lo(vtail k) { return (vdtail)k; }
static inline vdtail vtail_hi(vtail k) { return (vdtail)(k >> 8); }

static inline vf vload(vtail k, const float *p) { return _mm512_maskz_loadu_ps(k, p); }
static inline vf vload_or(vf fill, vtail k, const float *p) { return _mm512_mask_loadu_ps(fill, k, p); }
// k f16 values widened; lanes past k are 0.
static inline vf vload_f16(vtail k, const uint16_t *p) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p)); }
static inline void vstore(float *p, vtail k, vf v) { _mm512_mask_storeu_ps(p, k, v); }
static inline vf vset1(float v) { return _mm512_set1_ps(v); }
static inline vf vzero(void) { return _mm512_setzero_ps(); }
static inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm512_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
static inline vf vdiv(vf a, vf b) { return _mm512_div_ps(a, b); }
static inline vf vsqrt(vf a) { return _mm512_sqrt_ps(a); }
static inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }  // b when either is NaN
static inline vf vabs(vf a) { return _mm512_abs_ps(a); }
static inline vf vmin(vf a, vf b) { return _mm512_min_ps(a, b); }  // b when either is NaN
static inline vf vfmadd(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }
static inline vf vfnmadd(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a b
static inline vf vround(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// p 2^n for integral n, rounded once (into the subnormals, or to 0 or Inf past them).
static inline vf vscale2(vf p, vf n) { return _mm512_scalef_ps(p, n); }
static inline float vreduce_max(vf a) { return _mm512_reduce_max_ps(a); }

static inline vpred vge0(vf a) { return _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_GE_OQ); }
static inline vpred vne0(vf a) { return _mm512_cmp_ps_mask(a, _mm512_setzero_ps(), _CMP_NEQ_UQ); }
static inline vpred vordered(vf a) { return _mm512_cmp_ps_mask(a, a, _CMP_ORD_Q); }  // not NaN
static inline vf vselect(vpred p, vf if_false, vf if_true) { return _mm512_mask_blend_ps(p, if_false, if_true); }
static inline vf vadd_where(vpred p, vf a, vf b) { return _mm512_mask_add_ps(a, p, a, b); }

// The first k lanes of v, whole numbers in [-128, 127], stored as int8.
static inline void vstore_i8(int8_t *p, vtail k, vf v) { _mm512_mask_cvtsepi32_storeu_epi8(p, k, _mm512_cvtps_epi32(v)); }

static inline vd vd_zero(void) { return _mm512_setzero_pd(); }
static inline vd vd_set1(double v) { return _mm512_set1_pd(v); }
static inline vd vd_lo(vf v) { return _mm512_cvtps_pd(_mm512_castps512_ps256(v)); }
static inline vd vd_hi(vf v) { return _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)); }
static inline vf vf_of(vd lo, vd hi) {
    return _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
}
static inline vd vd_add(vd a, vd b) { return _mm512_add_pd(a, b); }
static inline vd vd_sub(vd a, vd b) { return _mm512_sub_pd(a, b); }
static inline vd vd_mul(vd a, vd b) { return _mm512_mul_pd(a, b); }
static inline vd vd_fmadd(vd a, vd b, vd c) { return _mm512_fmadd_pd(a, b, c); }
static inline vd vd_sub_or0(vdtail k, vd a, vd b) { return _mm512_maskz_sub_pd(k, a, b); }
static inline vd vd_add_in(vdtail k, vd acc, vd v) { return _mm512_mask_add_pd(acc, k, acc, v); }
static inline double vd_reduce_add(vd a) { return _mm512_reduce_add_pd(a); }

#include "kernels/x86/simd_exp.h"

#endif
