// The library's version string, from the macros of trit/version.h.
#include "trit/version.h"

#define TRIT_STR_(x) #x
#define TRIT_STR(x) TRIT_STR_(x)

const char *trit_version(void) {
    return TRIT_STR(TRIT_VERSION_MAJOR) "." TRIT_STR(TRIT_VERSION_MINOR) "." TRIT_STR(TRIT_VERSION_PATCH);
}
