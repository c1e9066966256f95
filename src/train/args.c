// Numbers from the command line and from config files: the whole string must be the number,
// and a value outside a flag's allowed range is refused with a message naming the flag and
// the range ("--layers must be in [1, 1024], got -1"), never clamped or taken as "unset".
#include "trit/train.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

trit_status trit_arg_int(const char *flag, const char *s, int64_t *out) {
    if (!s || !*s) return trit_error(TRIT_ERR_INVALID, "%s expects an integer, got an empty value", flag);
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (end == s || *end != 0)
        return trit_error(TRIT_ERR_INVALID, "%s expects an integer, got '%s'", flag, s);
    if (errno == ERANGE)
        return trit_error(TRIT_ERR_RANGE, "%s: '%s' is out of the 64-bit integer range", flag, s);
    *out = (int64_t)v;
    return TRIT_OK;
}

trit_status trit_arg_double(const char *flag, const char *s, double *out) {
    if (!s || !*s) return trit_error(TRIT_ERR_INVALID, "%s expects a number, got an empty value", flag);
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != 0)
        return trit_error(TRIT_ERR_INVALID, "%s expects a number, got '%s'", flag, s);
    if (!isfinite(v))  // overflow gives +-HUGE_VAL
        return trit_error(TRIT_ERR_RANGE, "%s expects a finite number, got '%s'", flag, s);
    if (errno == ERANGE || (v != 0.0 && fabs(v) < DBL_MIN))
        return trit_error(TRIT_ERR_RANGE, "%s: '%s' is below the smallest normal double (%g); use 0 or a larger value",
                          flag, s, DBL_MIN);
    *out = v;
    return TRIT_OK;
}

trit_status trit_check_int(const char *flag, int64_t v, int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi) return TRIT_OK;
    return trit_error(TRIT_ERR_RANGE, "%s must be in [%lld, %lld], got %lld", flag, (long long)lo, (long long)hi,
                      (long long)v);
}

// The shortest "%.Ng" that reads back as v, so "got 1.0000001" is not shown as "got 1".
static void shortest(char *buf, size_t n, double v) {
    for (int p = 6; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (!isfinite(v) || strtod(buf, NULL) == v) return;
    }
}

trit_status trit_check_double(const char *flag, double v, double lo, double hi, unsigned open) {
    const bool lo_ok = (open & TRIT_OPEN_LO) ? v > lo : v >= lo;
    const bool hi_ok = (open & TRIT_OPEN_HI) ? v < hi : v <= hi;
    // A subnormal would not read back through trit_arg_double, so a saved config holding one
    // (a JSON number) could not be resumed; no setting means anything at that scale.
    const bool normal = v == 0.0 || fabs(v) >= DBL_MIN;
    if (isfinite(v) && lo_ok && hi_ok && normal) return TRIT_OK;
    if (isfinite(v) && lo_ok && hi_ok)
        return trit_error(TRIT_ERR_RANGE, "%s: %g is below the smallest normal double (%g); use 0 or a larger value",
                          flag, v, DBL_MIN);
    char got[40];
    shortest(got, sizeof got, v);
    return trit_error(TRIT_ERR_RANGE, "%s must be in %c%g, %g%c, got %s", flag, (open & TRIT_OPEN_LO) ? '(' : '[', lo,
                      hi, (open & TRIT_OPEN_HI) ? ')' : ']', got);
}

trit_status trit_arg_int_in(const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    int64_t v = 0;
    trit_status st = trit_arg_int(flag, s, &v);
    if (st == TRIT_OK) st = trit_check_int(flag, v, lo, hi);
    if (st == TRIT_OK) *out = v;
    return st;
}

trit_status trit_arg_double_in(const char *flag, const char *s, double lo, double hi, unsigned open, double *out) {
    double v = 0;
    trit_status st = trit_arg_double(flag, s, &v);
    if (st == TRIT_OK) st = trit_check_double(flag, v, lo, hi, open);
    if (st == TRIT_OK) *out = v;
    return st;
}
