// Whole-file reads and atomic writes. A writer puts bytes in "<path>.tmp.<pid>" beside the
// target, fsyncs it, renames it over the target and fsyncs the directory, so after a crash the
// target is either the old file or the complete new one.
#define _POSIX_C_SOURCE 200809L
#include "trit/io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

trit_status trit_file_read_all(const char *path, uint8_t **data, size_t *len) {
    if (!path || !data || !len) return trit_error(TRIT_ERR_INVALID, "trit_file_read_all: NULL argument");
    *data = NULL;
    *len = 0;
    FILE *fp = fopen(path, "rb");
    if (!fp) return trit_error(TRIT_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return trit_error(TRIT_ERR_IO, "'%s' is not a regular file: pass the path of a file", path);
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = malloc(size + 1);
    if (!buf) {
        fclose(fp);
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate %zu bytes to read '%s'", size + 1, path);
    }
    size_t got = fread(buf, 1, size, fp);
    int failed = ferror(fp);
    fclose(fp);
    if (failed || got != size) {
        free(buf);
        return trit_error(TRIT_ERR_IO, "reading '%s': expected %zu bytes, got %zu (file changed or I/O error)",
                          path, size, got);
    }
    buf[size] = 0;
    *data = buf;
    *len = size;
    return TRIT_OK;
}

static char *str_dup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void atomic_release(trit_atomic_file *f) {
    free(f->path);
    free(f->tmp_path);
    f->path = f->tmp_path = NULL;
    f->fp = NULL;
}

trit_status trit_atomic_open(trit_atomic_file *f, const char *path) {
    if (!f || !path || !*path) return trit_error(TRIT_ERR_INVALID, "trit_atomic_open: empty path");
    memset(f, 0, sizeof *f);
    size_t n = strlen(path) + 32;
    f->path = str_dup(path);
    f->tmp_path = malloc(n);
    if (!f->path || !f->tmp_path) {
        atomic_release(f);
        return trit_error(TRIT_ERR_NOMEM, "cannot allocate a temp name for '%s'", path);
    }
    snprintf(f->tmp_path, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(f->tmp_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        trit_status s = trit_error(TRIT_ERR_IO, "cannot create '%s' to write '%s': %s (does the directory exist and is it writable?)",
                                   f->tmp_path, path, strerror(errno));
        atomic_release(f);
        return s;
    }
    f->fp = fdopen(fd, "wb");
    if (!f->fp) {
        trit_status s = trit_error(TRIT_ERR_IO, "cannot open a stream on '%s': %s", f->tmp_path, strerror(errno));
        close(fd);
        unlink(f->tmp_path);
        atomic_release(f);
        return s;
    }
    f->status = TRIT_OK;
    return TRIT_OK;
}

trit_status trit_atomic_write(trit_atomic_file *f, const void *data, size_t n) {
    if (!f || !f->fp) return trit_error(TRIT_ERR_STATE, "trit_atomic_write: file is not open");
    if (f->status != TRIT_OK) return f->status;
    if (n == 0) return TRIT_OK;
    if (!data) {  // poisons the file: the commit then removes it instead of leaving a partial one
        f->status = trit_error(TRIT_ERR_INVALID, "trit_atomic_write: data is NULL for %zu bytes to '%s'", n, f->path);
        return f->status;
    }
    if (fwrite(data, 1, n, f->fp) != n)
        f->status = trit_error(TRIT_ERR_IO, "writing '%s': %s", f->tmp_path, strerror(errno));
    return f->status;
}

void trit_atomic_abort(trit_atomic_file *f) {
    if (!f || !f->tmp_path) return;
    if (f->fp) fclose(f->fp);
    unlink(f->tmp_path);
    atomic_release(f);
}

// fsync the directory holding `path` so the rename itself survives a crash.
static trit_status sync_parent_dir(const char *path) {
    const char *slash = strrchr(path, '/');
    char *dir = slash ? malloc((size_t)(slash - path) + 2) : NULL;
    if (slash && !dir) return trit_error(TRIT_ERR_NOMEM, "cannot allocate a directory name");
    if (dir) {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        memcpy(dir, path, n);
        dir[n] = 0;
    }
    int fd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY);
    trit_status s = TRIT_OK;
    if (fd < 0) {
        s = trit_error(TRIT_ERR_IO, "'%s' was written but its directory could not be opened to sync: %s",
                       path, strerror(errno));
    } else {
        // Some file systems cannot fsync a directory (EINVAL): nothing more can be done there.
        if (fsync(fd) != 0 && errno != EINVAL)
            s = trit_error(TRIT_ERR_IO, "'%s' was written but syncing its directory failed: %s",
                           path, strerror(errno));
        close(fd);
    }
    free(dir);
    return s;
}

trit_status trit_atomic_commit(trit_atomic_file *f) {
    if (!f || !f->fp) return trit_error(TRIT_ERR_STATE, "trit_atomic_commit: file is not open");
    FILE *fp = f->fp;
    f->fp = NULL;
    trit_status s = f->status;
    if (s == TRIT_OK && fflush(fp) != 0)
        s = trit_error(TRIT_ERR_IO, "writing '%s': %s", f->tmp_path, strerror(errno));
    if (s == TRIT_OK && fsync(fileno(fp)) != 0)
        s = trit_error(TRIT_ERR_IO, "syncing '%s' to disk: %s", f->tmp_path, strerror(errno));
    if (fclose(fp) != 0 && s == TRIT_OK)
        s = trit_error(TRIT_ERR_IO, "closing '%s': %s", f->tmp_path, strerror(errno));
    if (s == TRIT_OK && rename(f->tmp_path, f->path) != 0)
        s = trit_error(TRIT_ERR_IO, "cannot replace '%s' with the new file: %s", f->path, strerror(errno));
    if (s != TRIT_OK) {
        unlink(f->tmp_path);
        atomic_release(f);
        return s;
    }
    s = sync_parent_dir(f->path);
    atomic_release(f);
    return s;
}

trit_status trit_file_write_atomic(const char *path, const void *data, size_t n) {
    trit_atomic_file f;
    trit_status s = trit_atomic_open(&f, path);
    if (s != TRIT_OK) return s;
    trit_atomic_write(&f, data, n);
    return trit_atomic_commit(&f);
}

trit_status trit_file_copy(const char *src, const char *dst) {
    uint8_t *data = NULL;
    size_t n = 0;
    trit_status s = trit_file_read_all(src, &data, &n);
    trit_atomic_file f;
    if (s == TRIT_OK) s = trit_atomic_open(&f, dst);
    if (s == TRIT_OK) {
        trit_atomic_write(&f, data, n);
        s = trit_atomic_commit(&f);
    }
    free(data);
    return s;
}
