// A directory written as a whole: its files go into "<dir>.tmp.<pid>" beside it, which is
// renamed over dir (absent, or empty) once every file is complete, so a failure leaves nothing.
#define _POSIX_C_SOURCE 200809L
#include "trit/interop.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool dir_is_empty(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)) != NULL) empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty;
}

trit_status trit_stage_open(const char *dir, char *stage, size_t n) {
    if (!dir || !stage || !*dir) return trit_error(TRIT_ERR_INVALID, "trit_stage_open: no directory given");
    struct stat st;
    if (stat(dir, &st) == 0 && (!S_ISDIR(st.st_mode) || !dir_is_empty(dir)))
        return trit_error(TRIT_ERR_IO, "'%s' exists and is %s: pass a new directory (nothing is overwritten)", dir,
                          S_ISDIR(st.st_mode) ? "not empty" : "not a directory");
    int k = snprintf(stage, n, "%s.tmp.%ld", dir, (long)getpid());
    if (k < 0 || (size_t)k >= n) return trit_error(TRIT_ERR_RANGE, "path '%s' is too long", dir);
    if (mkdir(stage, 0755) != 0)
        return trit_error(TRIT_ERR_IO, "cannot make the directory '%s': %s (is the parent directory there and "
                          "writable?)", stage, strerror(errno));
    return TRIT_OK;
}

trit_status trit_stage_commit(const char *stage, const char *dir) {
    if (rename(stage, dir) == 0) return TRIT_OK;
    trit_status s = trit_error(TRIT_ERR_IO, "cannot rename '%s' to '%s': %s", stage, dir, strerror(errno));
    trit_stage_abort(stage);
    return s;
}

void trit_stage_abort(const char *stage) {
    DIR *d = opendir(stage);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0 &&
            snprintf(p, sizeof p, "%s/%s", stage, e->d_name) < (int)sizeof p)
            unlink(p);
    closedir(d);
    rmdir(stage);
}
