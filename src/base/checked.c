// Checked number conversions: doubles that came from a user or a file become integers only
// through here, because a plain cast of NaN or of a value outside the target type is undefined.
#include "trit/base.h"

#include <math.h>

int64_t trit_f64_to_i64_sat(double x, int64_t lo, int64_t hi) {
    if (lo > hi) return lo;
    if (isnan(x)) return lo <= 0 && 0 <= hi ? 0 : lo;
    // Clamp to the int64_t range in double (where [-2^63, 2^63) is exact), cast, then clamp to
    // [lo, hi] as integers: (double)hi may be rounded and must not be compared against.
    if (x >= 0x1p63) return hi;
    if (x < -0x1p63) return lo;
    const int64_t v = (int64_t)x;
    return v < lo ? lo : v > hi ? hi : v;
}

bool trit_f64_to_i64_exact(double x, int64_t lo, int64_t hi, int64_t *out) {
    // 2^63 itself is not an int64_t, and every double below it in magnitude converts exactly
    // once it is known to be a whole number.
    if (!isfinite(x) || x != floor(x) || x < -0x1p63 || x >= 0x1p63) return false;
    const int64_t v = (int64_t)x;
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool trit_mul_i64(int64_t a, int64_t b, int64_t *out) {
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return false;
    *out = r;
    return true;
}
