// TensorBoard event files: TFRecord framing with masked CRC-32C around hand-encoded
// tensorflow.Event protobufs (the scalar subset; see include/trit/io.h for the layout).
#define _POSIX_C_SOURCE 200809L
#include "trit/io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TB_MAX_TAG 4096
#define TB_MAX_SCALARS 64

uint32_t trit_tfrecord_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

static void put_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint32_t get_le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get_le64(const uint8_t *p) { return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32; }

void trit_tfrecord_frame(uint8_t *out, const void *data, size_t n) {
    put_le64(out, (uint64_t)n);
    put_le32(out + 8, trit_tfrecord_mask(trit_crc32c(0, out, 8)));
    memcpy(out + 12, data, n);
    put_le32(out + 12 + n, trit_tfrecord_mask(trit_crc32c(0, data, n)));
}

trit_status trit_tfrecord_read(const uint8_t *buf, size_t len, const uint8_t **data, size_t *n, size_t *used) {
    if (len < 12) return trit_error(TRIT_ERR_FORMAT, "TFRecord header needs 12 bytes, %zu left", len);
    uint64_t size = get_le64(buf);
    if (trit_tfrecord_mask(trit_crc32c(0, buf, 8)) != get_le32(buf + 8))
        return trit_error(TRIT_ERR_FORMAT, "TFRecord length CRC does not match: the file is corrupt");
    if (size > len - 12 || len - 12 - size < 4)
        return trit_error(TRIT_ERR_FORMAT, "TFRecord of %llu bytes, but only %zu bytes follow its header: truncated",
                          (unsigned long long)size, len - 12);
    if (trit_tfrecord_mask(trit_crc32c(0, buf + 12, (size_t)size)) != get_le32(buf + 12 + size))
        return trit_error(TRIT_ERR_FORMAT, "TFRecord data CRC does not match: the file is corrupt");
    *data = buf + 12;
    *n = (size_t)size;
    *used = 12 + (size_t)size + 4;
    return TRIT_OK;
}

// ---- protobuf encoding: a cursor that counts every byte and stores those that fit -----------

typedef struct pb {
    uint8_t *buf;
    size_t cap, len;
} pb;

static void pb_byte(pb *b, uint8_t v) {
    if (b->len < b->cap) b->buf[b->len] = v;
    b->len++;
}
static void pb_varint(pb *b, uint64_t v) {
    while (v >= 0x80) {
        pb_byte(b, (uint8_t)(v | 0x80));
        v >>= 7;
    }
    pb_byte(b, (uint8_t)v);
}
static size_t varint_len(uint64_t v) {
    size_t n = 1;
    while (v >= 0x80) v >>= 7, n++;
    return n;
}
// Wire types: 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit.
static void pb_key(pb *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)(field << 3 | wire)); }
static void pb_fixed(pb *b, uint64_t bits, int bytes) {
    for (int i = 0; i < bytes; i++) pb_byte(b, (uint8_t)(bits >> (8 * i)));
}
static void pb_bytes(pb *b, unsigned field, const void *data, size_t n) {
    pb_key(b, field, 2);
    pb_varint(b, n);
    for (size_t i = 0; i < n; i++) pb_byte(b, ((const uint8_t *)data)[i]);
}

// Summary.Value{tag = 1, simple_value = 2 (in a oneof, so written even when 0)}.
static size_t value_len(const trit_tb_scalar *v) {
    size_t t = strlen(v->tag);
    return 1 + varint_len(t) + t + 1 + 4;
}

size_t trit_tb_encode_event(uint8_t *buf, size_t cap, trit_tb_event_kind kind, double wall_time, int64_t step,
                            const trit_tb_scalar *v, int n) {
    pb b = {buf, buf ? cap : 0, 0};
    uint64_t wall_bits;
    memcpy(&wall_bits, &wall_time, 8);
    if (wall_bits != 0) {  // Event.wall_time = 1 (double); proto3 leaves out zero
        pb_key(&b, 1, 1);
        pb_fixed(&b, wall_bits, 8);
    }
    if (step != 0 && kind != TRIT_TB_FILE_VERSION) {  // Event.step = 2 (int64)
        pb_key(&b, 2, 0);
        pb_varint(&b, (uint64_t)step);
    }
    if (kind == TRIT_TB_FILE_VERSION) {  // Event.file_version = 3
        pb_bytes(&b, 3, "brain.Event:2", 13);
    } else if (kind == TRIT_TB_START) {  // Event.session_log = 7: SessionLog{status = 1: START (1)}
        pb_key(&b, 7, 2);
        pb_varint(&b, 2);
        pb_key(&b, 1, 0);
        pb_varint(&b, 1);
    } else {  // Event.summary = 5: Summary{repeated Value value = 1}
        if (n < 1 || n > TB_MAX_SCALARS || !v) return 0;
        size_t summary = 0;
        for (int i = 0; i < n; i++) {
            if (!v[i].tag || strlen(v[i].tag) > TB_MAX_TAG) return 0;
            size_t vl = value_len(&v[i]);
            summary += 1 + varint_len(vl) + vl;
        }
        pb_key(&b, 5, 2);
        pb_varint(&b, summary);
        for (int i = 0; i < n; i++) {
            pb_key(&b, 1, 2);
            pb_varint(&b, value_len(&v[i]));
            pb_bytes(&b, 1, v[i].tag, strlen(v[i].tag));
            uint32_t bits;
            memcpy(&bits, &v[i].value, 4);
            pb_key(&b, 2, 5);
            pb_fixed(&b, bits, 4);
        }
    }
    return b.len;
}

// ---- the writer --------------------------------------------------------------------------------

struct trit_tb_writer {
    FILE *fp;
    char *path;
};

static trit_status write_event(trit_tb_writer *w, trit_tb_event_kind kind, double wall_time, int64_t step,
                               const trit_tb_scalar *v, int n) {
    if (!w) return trit_error(TRIT_ERR_INVALID, "TensorBoard writer is NULL");
    size_t len = trit_tb_encode_event(NULL, 0, kind, wall_time, step, v, n);
    if (len == 0) return trit_error(TRIT_ERR_INVALID, "a TensorBoard event needs 1 to %d scalars with tags of at "
                                    "most %d bytes, got %d", TB_MAX_SCALARS, TB_MAX_TAG, n);
    uint8_t *rec = malloc(len + 16);
    if (!rec) return trit_error(TRIT_ERR_NOMEM, "cannot allocate a %zu-byte TensorBoard event", len + 16);
    trit_tb_encode_event(rec + 12, len, kind, wall_time, step, v, n);
    // Frame in place: the payload already sits at offset 12.
    put_le64(rec, (uint64_t)len);
    put_le32(rec + 8, trit_tfrecord_mask(trit_crc32c(0, rec, 8)));
    put_le32(rec + 12 + len, trit_tfrecord_mask(trit_crc32c(0, rec + 12, len)));
    bool ok = fwrite(rec, 1, len + 16, w->fp) == len + 16 && fflush(w->fp) == 0;
    free(rec);
    if (!ok) return trit_error(TRIT_ERR_IO, "cannot write to '%s': %s", w->path, strerror(errno));
    return TRIT_OK;
}

trit_tb_writer *trit_tb_open(const char *dir, double wall_time) {
    if (!dir || !dir[0]) {
        trit_error(TRIT_ERR_INVALID, "no TensorBoard directory given");
        return NULL;
    }
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (*p == '/') *p = '_';
    long long secs = wall_time > 0 && wall_time < 1e15 ? (long long)wall_time : 0;
    int need = snprintf(NULL, 0, "%s/events.out.tfevents.%lld.%s.%ld.trit", dir, secs, host, (long)getpid());
    trit_tb_writer *w = calloc(1, sizeof *w);
    char *path = need > 0 ? malloc((size_t)need + 1) : NULL;
    if (!w || !path) {
        free(w);
        free(path);
        trit_error(TRIT_ERR_NOMEM, "cannot allocate a TensorBoard writer");
        return NULL;
    }
    snprintf(path, (size_t)need + 1, "%s/events.out.tfevents.%lld.%s.%ld.trit", dir, secs, host, (long)getpid());
    w->path = path;
    w->fp = fopen(path, "ab");
    if (!w->fp) {
        trit_error(TRIT_ERR_IO, "cannot create TensorBoard event file '%s': %s (does the directory '%s' exist and "
                   "is it writable?)", path, strerror(errno), dir);
        free(path);
        free(w);
        return NULL;
    }
    if (write_event(w, TRIT_TB_FILE_VERSION, wall_time, 0, NULL, 0) != TRIT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", trit_last_error());
        trit_tb_close(w);
        trit_error(TRIT_ERR_IO, "%s", msg);
        return NULL;
    }
    return w;
}

trit_status trit_tb_write_scalars(trit_tb_writer *w, double wall_time, int64_t step, const trit_tb_scalar *v, int n) {
    if (n < 1 || n > TB_MAX_SCALARS || !v)
        return trit_error(TRIT_ERR_INVALID, "a TensorBoard event needs 1 to %d scalars, got %d", TB_MAX_SCALARS, n);
    return write_event(w, TRIT_TB_SCALARS, wall_time, step, v, n);
}

trit_status trit_tb_write_start(trit_tb_writer *w, double wall_time, int64_t step) {
    return write_event(w, TRIT_TB_START, wall_time, step, NULL, 0);
}

const char *trit_tb_path(const trit_tb_writer *w) { return w ? w->path : ""; }

trit_status trit_tb_close(trit_tb_writer *w) {
    if (!w) return TRIT_OK;
    trit_status s = TRIT_OK;
    if (w->fp && fclose(w->fp) != 0) s = trit_error(TRIT_ERR_IO, "cannot close '%s': %s", w->path, strerror(errno));
    free(w->path);
    free(w);
    return s;
}
