// Scratch files for tests (see scratch.h).
#define _GNU_SOURCE
#include "scratch.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

static char group_dir[512];

void tfile_mkdtemp(char *buf, size_t n, const char *tag) {
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, n, "%s/trit-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    assert_non_null(mkdtemp(buf));
}

void tfile_rm_rf(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        size_t n = strlen(path) + strlen(e->d_name) + 2;
        char *sub = malloc(n);
        assert_non_null(sub);
        snprintf(sub, n, "%s/%s", path, e->d_name);
        tfile_rm_rf(sub);
        free(sub);
    }
    if (d) closedir(d);
    rmdir(path);
}

void tfile_write(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n) assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

bool tfile_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

int tfile_group_setup(void **state) {
    (void)state;
    tfile_mkdtemp(group_dir, sizeof group_dir, "test");
    return 0;
}

int tfile_group_teardown(void **state) {
    (void)state;
    tfile_rm_rf(group_dir);
    return tfile_exists(group_dir) ? -1 : 0;
}

const char *tfile_dir(void) { return group_dir; }

const char *tfile_join(const char *dir, const char *name) {
    static char p[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

const char *tfile_path(const char *name) { return tfile_join(group_dir, name); }
