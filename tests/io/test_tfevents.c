// TensorBoard event files: CRC-32C and its TFRecord mask against their published check values,
// trit's Event encoding against the bytes TensorBoard's own writer made for the same events
// (tests/reference/make_tfevents_fixture.py), the record reader's refusals, and the writer.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "trit/io.h"

static void test_crc32c(void **state) {
    (void)state;
    // The CRC-32C check value (RFC 3720, B.4), and one computed in two pieces.
    assert_int_equal(trit_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(trit_crc32c(trit_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
    uint8_t zeros[32] = {0};
    assert_int_equal(trit_crc32c(0, zeros, 32), 0x8A9136AAu);  // RFC 3720 B.4: 32 bytes of zeros
    assert_int_equal(trit_tfrecord_mask(0), 0xa282ead8u);
    assert_int_equal(trit_tfrecord_mask(0x00008000u), 0xa282ead9u);  // bit 15 rotates to bit 0
}

static uint8_t *read_fixture(size_t *len) {
    const char *root = getenv("TRIT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/tfevents_scalars.bin", root ? root : ".");
    uint8_t *data = NULL;
    if (trit_file_read_all(path, &data, len) != TRIT_OK) fail_msg("%s (set TRIT_SOURCE_DIR)", trit_last_error());
    return data;
}

// Appends one framed event to buf at *at.
static void put_event(uint8_t *buf, size_t cap, size_t *at, trit_tb_event_kind kind, double wall, int64_t step,
                      const trit_tb_scalar *v, int n) {
    size_t len = trit_tb_encode_event(NULL, 0, kind, wall, step, v, n);
    assert_true(len > 0 && *at + len + 16 <= cap);
    uint8_t *ev = malloc(len);
    assert_int_equal(trit_tb_encode_event(ev, len, kind, wall, step, v, n), len);
    trit_tfrecord_frame(buf + *at, ev, len);
    free(ev);
    *at += len + 16;
}

// The events of make_tfevents_fixture.py, encoded by trit.
static size_t encode_fixture_events(uint8_t *buf, size_t cap) {
    char long_tag[201];
    memset(long_tag, 't', 200);
    long_tag[200] = '\0';
    size_t at = 0;
    put_event(buf, cap, &at, TRIT_TB_FILE_VERSION, 1700000000.25, 0, NULL, 0);
    put_event(buf, cap, &at, TRIT_TB_SCALARS, 1700000001.5, 1, (trit_tb_scalar[]){{"loss", 2.5f}, {"lr", 3e-4f}}, 2);
    put_event(buf, cap, &at, TRIT_TB_SCALARS, 0.0, 0, (trit_tb_scalar[]){{"grad_norm", -1.0f}, {"zero", 0.0f}}, 2);
    put_event(buf, cap, &at, TRIT_TB_START, 1700000002.0, 11, NULL, 0);
    put_event(buf, cap, &at, TRIT_TB_SCALARS, 1700000003.0, 123456789012, (trit_tb_scalar[]){{long_tag, 1e-30f}}, 1);
    put_event(buf, cap, &at, TRIT_TB_SCALARS, 1700000004.0, -5, (trit_tb_scalar[]){{"tokens_per_s", 12345.67f}}, 1);
    return at;
}

static void test_fixture_bytes(void **state) {
    (void)state;
    size_t len = 0;
    uint8_t *want = read_fixture(&len);
    uint8_t got[2048];
    size_t n = encode_fixture_events(got, sizeof got);
    assert_int_equal(n, len);
    for (size_t i = 0; i < n; i++)
        if (got[i] != want[i]) fail_msg("byte %zu differs from TensorBoard's: %02x, want %02x", i, got[i], want[i]);
    // And the reader walks TensorBoard's file record by record.
    int records = 0;
    for (size_t at = 0; at < len; records++) {
        const uint8_t *data;
        size_t dn, used;
        assert_int_equal(trit_tfrecord_read(want + at, len - at, &data, &dn, &used), TRIT_OK);
        at += used;
    }
    assert_int_equal(records, 6);
    free(want);
}

static void test_reader_refuses(void **state) {
    (void)state;
    uint8_t rec[64];
    trit_tfrecord_frame(rec, "hello", 5);
    const uint8_t *data;
    size_t n, used;
    assert_int_equal(trit_tfrecord_read(rec, 21, &data, &n, &used), TRIT_OK);
    assert_int_equal(n, 5);
    assert_int_equal(used, 21);
    assert_memory_equal(data, "hello", 5);
    rec[13] ^= 1;  // payload
    assert_int_equal(trit_tfrecord_read(rec, 21, &data, &n, &used), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "data CRC"));
    rec[13] ^= 1;
    rec[0] ^= 2;  // length
    assert_int_equal(trit_tfrecord_read(rec, 21, &data, &n, &used), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "length CRC"));
    rec[0] ^= 2;
    assert_int_equal(trit_tfrecord_read(rec, 20, &data, &n, &used), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "truncated"));
    assert_int_equal(trit_tfrecord_read(rec, 7, &data, &n, &used), TRIT_ERR_FORMAT);
}

static void test_encode_bounds(void **state) {
    (void)state;
    trit_tb_scalar v = {"loss", 1.0f};
    size_t full = trit_tb_encode_event(NULL, 0, TRIT_TB_SCALARS, 1.0, 3, &v, 1);
    // wall_time 9 + step 2 + summary key/len 2 + value key/len 2 + tag 6 + float 5
    assert_int_equal(full, 26);
    uint8_t buf[32];
    memset(buf, 0xEE, sizeof buf);
    assert_int_equal(trit_tb_encode_event(buf, 10, TRIT_TB_SCALARS, 1.0, 3, &v, 1), full);
    assert_int_equal(buf[10], 0xEE);  // nothing past cap
    assert_int_equal(trit_tb_encode_event(NULL, 0, TRIT_TB_SCALARS, 1.0, 3, &v, 0), 0);
    char *huge = malloc(5000);
    memset(huge, 'x', 4999);
    huge[4999] = '\0';
    trit_tb_scalar h = {huge, 1.0f};
    assert_int_equal(trit_tb_encode_event(NULL, 0, TRIT_TB_SCALARS, 1.0, 3, &h, 1), 0);
    free(huge);
}

static void test_writer(void **state) {
    (void)state;
    char dir[512];
    tfile_mkdtemp(dir, sizeof dir, "tfevents");
    trit_tb_writer *w = trit_tb_open(dir, 1700000000.25);
    assert_non_null(w);
    assert_non_null(strstr(trit_tb_path(w), "/events.out.tfevents.1700000000."));
    trit_tb_scalar v[2] = {{"loss", 2.5f}, {"lr", 3e-4f}};
    assert_int_equal(trit_tb_write_scalars(w, 1700000001.5, 1, v, 2), TRIT_OK);
    assert_int_equal(trit_tb_write_scalars(w, 1700000001.5, 1, v, 0), TRIT_ERR_INVALID);
    char path[1024];
    snprintf(path, sizeof path, "%s", trit_tb_path(w));
    assert_int_equal(trit_tb_close(w), TRIT_OK);
    // The file is the fixture's first two events.
    size_t len = 0, flen = 0;
    uint8_t *got = NULL, *want = read_fixture(&flen);
    assert_int_equal(trit_file_read_all(path, &got, &len), TRIT_OK);
    const uint8_t *d;
    size_t n, u1, u2;
    assert_int_equal(trit_tfrecord_read(want, flen, &d, &n, &u1), TRIT_OK);
    assert_int_equal(trit_tfrecord_read(want + u1, flen - u1, &d, &n, &u2), TRIT_OK);
    assert_int_equal(len, u1 + u2);
    assert_memory_equal(got, want, len);
    free(got);
    free(want);

    char missing[600];
    snprintf(missing, sizeof missing, "%s/no/such/dir", dir);
    assert_null(trit_tb_open(missing, 1.0));
    assert_non_null(strstr(trit_last_error(), "does the directory"));
    tfile_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_fixture_bytes),
        cmocka_unit_test(test_reader_refuses),
        cmocka_unit_test(test_encode_bounds),
        cmocka_unit_test(test_writer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
