// FP8 <-> fp32 (OCP 8-bit floating point): e4m3fn (bias 7, no Inf, one NaN pattern per sign,
// largest 448) and e5m2 (bias 15, IEEE-like with Inf and NaN, largest 57344). Conversion from
// fp32 saturates: finite values past the largest and +-Inf give +-largest; NaN stays NaN.
// Rounding works on the value divided by its quantum (a power of two, so the division is exact).
#include "trit/base.h"

#include <math.h>
#include <pthread.h>

typedef struct fp8_format {
    int mbits, bias;
    int emin;           // exponent of the smallest normal
    double max;         // largest finite value
    uint8_t max_bits;   // its encoding (without sign)
    uint8_t nan_bits;
    bool has_inf;
} fp8_format;

static const fp8_format E4M3 = {3, 7, -6, 448.0, 0x7e, 0x7f, false};
static const fp8_format E5M2 = {2, 15, -14, 57344.0, 0x7b, 0x7f, true};

static uint8_t fp8_pack(double y, const fp8_format *f) {
    if (y == 0) return 0;
    int e;
    frexp(y, &e);
    const int lead = e - 1;  // y = 1.m * 2^lead
    if (lead < f->emin)      // subnormal: exponent field 0, mantissa in units of the smallest step
        return (uint8_t)ldexp(y, f->mbits - f->emin);
    const int mant = (int)ldexp(y, f->mbits - lead) - (1 << f->mbits);
    return (uint8_t)(((lead + f->bias) << f->mbits) | mant);
}

// u < 0: round to nearest even; else stochastic with u uniform in [0, 1).
static uint8_t fp8_encode(float x, const fp8_format *f, float u) {
    const uint8_t sign = signbit(x) ? 0x80 : 0;
    if (isnan(x)) return sign | f->nan_bits;
    const double a = fabs((double)x);
    if (a >= f->max) return sign | f->max_bits;
    int e = 0;
    if (a > 0) frexp(a, &e);
    const int lead = a > 0 && e - 1 > f->emin ? e - 1 : f->emin;
    const double quantum = ldexp(1.0, lead - f->mbits);
    const double v = a / quantum;
    double y = (u < 0 ? nearbyint(v) : floor(v + (double)u)) * quantum;
    if (y > f->max) y = f->max;
    return sign | fp8_pack(y, f);
}

static float fp8_decode(uint8_t b, const fp8_format *f) {
    const int m = b & ((1 << f->mbits) - 1), ef = (b & 0x7f) >> f->mbits;
    const double sign = b & 0x80 ? -1.0 : 1.0;
    const int ef_max = 0x7f >> f->mbits;
    if (f->has_inf && ef == ef_max) return m ? NAN : (float)(sign * INFINITY);
    if (!f->has_inf && (b & 0x7f) == f->nan_bits) return NAN;
    if (ef == 0) return (float)(sign * ldexp(m, f->emin - f->mbits));
    return (float)(sign * ldexp((1 << f->mbits) + m, ef - f->bias - f->mbits));
}

static float e4m3_lut[256], e5m2_lut[256];
static pthread_once_t lut_once = PTHREAD_ONCE_INIT;

static void lut_init(void) {
    for (int b = 0; b < 256; b++) {
        e4m3_lut[b] = fp8_decode((uint8_t)b, &E4M3);
        e5m2_lut[b] = fp8_decode((uint8_t)b, &E5M2);
    }
}

const float *trit_fp8_table(trit_fp8_kind kind) {
    pthread_once(&lut_once, lut_init);
    return kind == TRIT_FP8_E5M2 ? e5m2_lut : e4m3_lut;
}

static const fp8_format *format_of(trit_fp8_kind kind) { return kind == TRIT_FP8_E5M2 ? &E5M2 : &E4M3; }

uint8_t trit_f32_to_fp8(float x, trit_fp8_kind kind) { return fp8_encode(x, format_of(kind), -1.0f); }

uint8_t trit_f32_to_fp8_sr(float x, trit_fp8_kind kind, float u) { return fp8_encode(x, format_of(kind), u); }

float trit_fp8_to_f32(uint8_t b, trit_fp8_kind kind) { return trit_fp8_table(kind)[b]; }

float trit_fp8_max(trit_fp8_kind kind) { return (float)format_of(kind)->max; }
