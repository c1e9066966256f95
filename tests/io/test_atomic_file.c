// Whole-file reads and atomic writes: content lands complete, failures leave the old file and no
// temp file behind, and every failure says which path and why.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "trit/io.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

// Number of "*.tmp.*" files left in the directory.
static int temp_files(void) {
    DIR *d = opendir(tfile_dir());
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static void assert_content(const char *name, const char *want) {
    uint8_t *b;
    size_t n;
    assert_int_equal(trit_file_read_all(tfile_path(name), &b, &n), TRIT_OK);
    assert_int_equal(n, strlen(want));
    assert_memory_equal(b, want, n);
    assert_int_equal(b[n], 0);
    free(b);
}

static void test_write_and_replace(void **state) {
    (void)state;
    assert_int_equal(trit_file_write_atomic(tfile_path("a.txt"), "first version", 13), TRIT_OK);
    assert_content("a.txt", "first version");
    trit_atomic_file f;
    assert_int_equal(trit_atomic_open(&f, tfile_path("a.txt")), TRIT_OK);
    char tmp_name[64];
    snprintf(tmp_name, sizeof tmp_name, "a.txt.tmp.%ld", (long)getpid());
    assert_string_equal(f.tmp_path, tfile_path(tmp_name));
    assert_int_equal(temp_files(), 1);
    assert_int_equal(trit_atomic_write(&f, "second", 6), TRIT_OK);
    assert_content("a.txt", "first version"); // nothing visible before commit
    assert_int_equal(trit_atomic_write(&f, " one", 4), TRIT_OK);
    assert_int_equal(trit_atomic_commit(&f), TRIT_OK);
    assert_content("a.txt", "second one");
    assert_int_equal(temp_files(), 0);
    assert_null(f.fp);
    assert_int_equal(trit_file_write_atomic(tfile_path("empty"), NULL, 0), TRIT_OK);
    assert_content("empty", "");
}

static void test_abort_and_sticky_failure(void **state) {
    (void)state;
    assert_int_equal(trit_file_write_atomic(tfile_path("b.txt"), "keep me", 7), TRIT_OK);
    trit_atomic_file f;
    assert_int_equal(trit_atomic_open(&f, tfile_path("b.txt")), TRIT_OK);
    trit_atomic_write(&f, "half", 4);
    trit_atomic_abort(&f);
    assert_content("b.txt", "keep me");
    assert_int_equal(temp_files(), 0);
    // A failure in the middle of a write is remembered; commit discards the temp file.
    assert_int_equal(trit_atomic_open(&f, tfile_path("b.txt")), TRIT_OK);
    trit_atomic_write(&f, "part", 4);
    f.status = trit_error(TRIT_ERR_IO, "simulated failure");
    assert_int_equal(trit_atomic_write(&f, "more", 4), TRIT_ERR_IO);
    assert_int_equal(trit_atomic_commit(&f), TRIT_ERR_IO);
    assert_content("b.txt", "keep me");
    assert_int_equal(temp_files(), 0);
    assert_int_equal(trit_atomic_commit(&f), TRIT_ERR_STATE); // already closed
}

static void test_failures(void **state) {
    (void)state;
    // Directory missing: nothing created, message names the path.
    assert_int_equal(trit_file_write_atomic(tfile_path("no/such/dir/x"), "x", 1), TRIT_ERR_IO);
    assert_non_null(strstr(trit_last_error(), "no/such/dir/x"));
    // The target is a directory: rename fails, the temp file is removed.
    assert_int_equal(mkdir(tfile_path("sub"), 0755), 0);
    assert_int_equal(trit_file_write_atomic(tfile_path("sub"), "data", 4), TRIT_ERR_IO);
    assert_non_null(strstr(trit_last_error(), "sub"));
    assert_int_equal(temp_files(), 0);
    struct stat st;
    assert_int_equal(stat(tfile_path("sub"), &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(trit_atomic_open(NULL, "x"), TRIT_ERR_INVALID);
    // NULL data for a non-zero length: refused, the old file kept, no temp file left.
    assert_int_equal(trit_file_write_atomic(tfile_path("c.txt"), "old", 3), TRIT_OK);
    assert_int_equal(trit_file_write_atomic(tfile_path("c.txt"), NULL, 5), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "data is NULL"));
    assert_content("c.txt", "old");
    assert_int_equal(temp_files(), 0);
    // Reads.
    uint8_t *b;
    size_t n;
    assert_int_equal(trit_file_read_all(tfile_path("missing"), &b, &n), TRIT_ERR_IO);
    assert_non_null(strstr(trit_last_error(), "missing"));
    assert_int_equal(trit_file_read_all(tfile_path("sub"), &b, &n), TRIT_ERR_IO);
    assert_non_null(strstr(trit_last_error(), "regular file"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_and_replace),
        cmocka_unit_test(test_abort_and_sticky_failure),
        cmocka_unit_test(test_failures),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
