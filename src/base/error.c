// Per-thread error text behind trit_last_error().
#include "trit/base.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[1024];

const char *trit_last_error(void) { return last_error; }

void trit_clear_error(void) { last_error[0] = '\0'; }

trit_status trit_error(trit_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}

const char *trit_status_name(trit_status s) {
    switch (s) {
    case TRIT_OK: return "ok";
    case TRIT_ERR_INVALID: return "invalid argument";
    case TRIT_ERR_SHAPE: return "shape mismatch";
    case TRIT_ERR_DTYPE: return "wrong dtype";
    case TRIT_ERR_NOMEM: return "out of memory";
    case TRIT_ERR_IO: return "I/O error";
    case TRIT_ERR_FORMAT: return "bad format";
    case TRIT_ERR_NUMERIC: return "non-finite value";
    case TRIT_ERR_STATE: return "API misuse";
    case TRIT_ERR_UNSUPPORTED: return "unsupported";
    case TRIT_ERR_RANGE: return "out of range";
    }
    return "unknown status";
}
