// Leveled logging to stderr; TRIT_LOG=debug|info|warn|error|off sets the starting level.
#include "trit/base.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int level = -1;

static trit_log_level level_from_env(void) {
    const char *s = getenv("TRIT_LOG");
    if (!s) return TRIT_LOG_INFO;
    static const char *names[] = {"debug", "info", "warn", "error", "off"};
    for (int i = 0; i <= TRIT_LOG_OFF; i++)
        if (strcmp(s, names[i]) == 0) return (trit_log_level)i;
    return TRIT_LOG_INFO;
}

void trit_log_set_level(trit_log_level l) { level = (int)l; }

trit_log_level trit_log_get_level(void) {
    if (level < 0) level = (int)level_from_env();
    return (trit_log_level)level;
}

void trit_log(trit_log_level l, const char *fmt, ...) {
    if (l < trit_log_get_level() || l == TRIT_LOG_OFF) return;
    static const char *tags[] = {"debug", "info", "warn", "error"};
    fprintf(stderr, "trit %s: ", tags[l]);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
