// The vector vocabulary of x86/simd_avx512.h in AVX2 (+FMA): 8 floats a vector, doubles 4 a
// vector. AVX2 has no mask registers, so a row's tail is a lane count: whole vectors take plain
// loads and stores (the common case, one predictable branch) and only a ragged tail goes through
// vmaskmov, which never touches the lanes it leaves out. Predicates are all-ones lanes.
#ifndef TRIT_KERNELS_X86_SIMD_AVX2_H
#define TRIT_KERNELS_X86_SIMD_AVX2_H

#include <immintrin.h>
#include <stdint.h>

#define SIMD_VL 8
#define SIMD_SUFFIX avx2

typedef __m256 vf;
typedef __m256d vd;
typedef int vtail;   // lanes [0, n) of a vf, 0 <= n <= 8
typedef int vdtail;  // lanes [0, n) of a vd, 0 <= n <= 4
typedef __m256 vpred;

static inline vtail vtail_of(int64_t n) { return n >= 8 ? 8 : n <= 0 ? 0 : (int)n; }
static inline vdtail vtail_lo(vtail k) { return k < 4 ? k : 4; }
static inline vdtail vtail_hi(vtail k) { return k > 4 ? k - 4 : 0; }
static inline __m256i lanes_below(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
static inline __m256d dlanes_below(int n) {
    return _mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_set1_epi64x(n), _mm256_setr_epi64x(0, 1, 2, 3)));
}

static inline vf vload(vtail k, const float *p) {
    return k == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lanes_below(k));
}
static inline vf vload_or(vf fill, vtail k, const float *p) {
    return k == 8 ? _mm256_loadu_ps(p)
                  : _mm256_blendv_ps(fill, _mm256_maskload_ps(p, lanes_below(k)), _mm256_castsi256_ps(lanes_below(k)));
}
// k f16 values widened (F16C); lanes past k are 0. A short tail goes through a zeroed copy:
// AVX2 has no masked 16-bit load.
static inline vf vload_f16(vtail k, const uint16_t *p) {
    if (k == 8) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int i = 0; i < k; i++) t[i] = p[i];
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)t));
}
static inline void vstore(float *p, vtail k, vf v) {
    if (k == 8)
        _mm256_storeu_ps(p, v);
    else
        _mm256_maskstore_ps(p, lanes_below(k), v);
}
static inline vf vset1(float v) { return _mm256_set1_ps(v); }
static inline vf vzero(void) { return _mm256_setzero_ps(); }
static inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
static inline vf vsub(vf a, vf b) { return _mm256_sub_ps(a, b); }
static inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
static inline vf vdiv(vf a, vf b) { return _mm256_div_ps(a, b); }
static inline vf vsqrt(vf a) { return _mm256_sqrt_ps(a); }
static inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }  // b when either is NaN
static inline vf vabs(vf a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
static inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }  // b when either is NaN
static inline vf vfmadd(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
static inline vf vfnmadd(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a b
static inline vf vround(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
static inline vf pow2i(__m256i n) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n, _mm256_set1_epi32(127)), 23));
}
// p 2^n for integral n in [-150, 128] (what vexp asks for), rounded once as vscalefps rounds
// it: AVX2 has no vscalefps, so 2^n is applied as two powers of two built in the exponent
// field, 2^(n/2) and 2^(n - n/2), each a normal float; p 2^(n/2) is exact (p is near 1) and the
// second product rounds once, subnormal and overflowing results included. A NaN p stays NaN.
static inline vf vscale2(vf p, vf n) {
    const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1);
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2i(half)), pow2i(_mm256_sub_epi32(ni, half)));
}
static inline float vreduce_add(vf a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float vreduce_max(vf a) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

static inline vpred vge0(vf a) { return _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_GE_OQ); }
static inline vpred vne0(vf a) { return _mm256_cmp_ps(a, _mm256_setzero_ps(), _CMP_NEQ_UQ); }
static inline vpred vordered(vf a) { return _mm256_cmp_ps(a, a, _CMP_ORD_Q); }  // not NaN
static inline vf vselect(vpred p, vf if_false, vf if_true) { return _mm256_blendv_ps(if_false, if_true, p); }
static inline vf vadd_where(vpred p, vf a, vf b) { return _mm256_add_ps(a, _mm256_and_ps(p, b)); }

// The first k lanes of v, whole numbers in [-128, 127], stored as int8.
static inline void vstore_i8(int8_t *p, vtail k, vf v) {
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(_mm256_cvtps_epi32(v)),
                                      _mm256_extracti128_si256(_mm256_cvtps_epi32(v), 1));
    const __m128i b = _mm_packs_epi16(w, w);
    if (k == 8) {
        _mm_storel_epi64((__m128i *)p, b);
        return;
    }
    int8_t t[16];
    _mm_storeu_si128((__m128i *)t, b);
    for (int i = 0; i < k; i++) p[i] = t[i];
}

static inline vd vd_zero(void) { return _mm256_setzero_pd(); }
static inline vd vd_set1(double v) { return _mm256_set1_pd(v); }
static inline vd vd_lo(vf v) { return _mm256_cvtps_pd(_mm256_castps256_ps128(v)); }
static inline vd vd_hi(vf v) { return _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)); }
static inline vf vf_of(vd lo, vd hi) { return _mm256_set_m128(_mm256_cvtpd_ps(hi), _mm256_cvtpd_ps(lo)); }
static inline vd vd_add(vd a, vd b) { return _mm256_add_pd(a, b); }
static inline vd vd_sub(vd a, vd b) { return _mm256_sub_pd(a, b); }
static inline vd vd_mul(vd a, vd b) { return _mm256_mul_pd(a, b); }
static inline vd vd_fmadd(vd a, vd b, vd c) { return _mm256_fmadd_pd(a, b, c); }
static inline vd vd_sub_or0(vdtail k, vd a, vd b) {
    const vd d = _mm256_sub_pd(a, b);
    return k == 4 ? d : _mm256_and_pd(d, dlanes_below(k));
}
static inline vd vd_add_in(vdtail k, vd acc, vd v) {
    return _mm256_add_pd(acc, k == 4 ? v : _mm256_and_pd(v, dlanes_below(k)));
}
static inline double vd_reduce_add(vd a) {
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(a), _mm256_extractf128_pd(a, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

#include "kernels/x86/simd_exp.h"

#endif
