// Helpers every verb uses: error printing and flag parsing with getopt_long.
#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int cli_error(const char *verb, int code, const char *fmt, ...) {
    fprintf(stderr, "trit %s: ", verb);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return code;
}

int cli_fail(const char *verb, int code) {
    const char *msg = trit_last_error();
    return cli_error(verb, code, "%s", msg && *msg ? msg : "failed (no message)");
}

int cli_bad_option(const char *verb, int c, char **argv) {
    const char *arg = optind > 0 ? argv[optind - 1] : "?";
    if (c == ':') return cli_error(verb, CLI_USAGE, "%s needs a value (see trit %s --help)", arg, verb);
    if (optopt && optopt < 256) return cli_error(verb, CLI_USAGE, "unknown option '-%c' (see trit %s --help)", optopt, verb);
    return cli_error(verb, CLI_USAGE, "unknown option '%s' (see trit %s --help)", arg, verb);
}

void cli_getopt_reset(void) {
    optind = 0;  // 0 makes glibc re-initialise its scanner, so verbs may parse in turn
    opterr = 0;  // the verbs print their own messages
}

bool cli_int(const char *verb, const char *flag, const char *s, int64_t lo, int64_t hi, int64_t *out) {
    if (trit_arg_int_in(flag, s, lo, hi, out) == TRIT_OK) return true;
    cli_fail(verb, CLI_USAGE);
    return false;
}

bool cli_double(const char *verb, const char *flag, const char *s, double lo, double hi, unsigned open, double *out) {
    if (trit_arg_double_in(flag, s, lo, hi, open, out) == TRIT_OK) return true;
    cli_fail(verb, CLI_USAGE);
    return false;
}

bool cli_kv_cache(const char *verb, const char *s, trit_dtype *out) {
    if (strcmp(s, "f32") == 0 || strcmp(s, "f16") == 0) {
        *out = s[1] == '3' ? TRIT_F32 : TRIT_F16;
        return true;
    }
    cli_error(verb, CLI_USAGE, "--kv-cache expects f32 or f16, got '%s'", s);
    return false;
}

int cli_check_ckpt_args(const char *verb, int argc, char **argv, const char *ckpt) {
    if (optind < argc) return cli_error(verb, CLI_USAGE, "unexpected argument '%s'", argv[optind]);
    if (!ckpt) return cli_error(verb, CLI_USAGE, "--ckpt DIR is required (see trit %s --help)", verb);
    return CLI_OK;
}

bool cli_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}
