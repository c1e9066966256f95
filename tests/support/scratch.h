// Scratch files for tests: temporary directories, paths inside a per-program directory, whole-file
// writes that fail the test when they do not land, and recursive removal.
#ifndef TRIT_TEST_SCRATCH_H
#define TRIT_TEST_SCRATCH_H

#include <stdbool.h>
#include <stddef.h>

// A fresh directory $TMPDIR/trit-<tag>-XXXXXX (or under /tmp); path written into buf. Fails the
// test if it cannot be made.
void tfile_mkdtemp(char *buf, size_t n, const char *tag);
// Removes a directory tree or a file (test scratch only); missing paths are ignored.
void tfile_rm_rf(const char *path);
// Writes n bytes to path (created or truncated); fails the test on any short write.
void tfile_write(const char *path, const void *data, size_t n);
bool tfile_exists(const char *path);

// cmocka group setup/teardown: one scratch directory for the whole test program.
int tfile_group_setup(void **state);
int tfile_group_teardown(void **state);
// The group's scratch directory, and "<dir>/<name>" in one of 4 rotating buffers (so a call may
// take two or three paths at once).
const char *tfile_dir(void);
const char *tfile_path(const char *name);
// "<dir>/<name>" in the same rotating buffers, for a scratch directory of the test's own.
const char *tfile_join(const char *dir, const char *name);

#endif
