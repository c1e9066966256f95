// Token shards (llm.c layout): write/read, a shard made byte by byte by the test, every bad input
// (missing, empty, short, truncated, padded, wrong magic/version, negative count), and prepare.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "trit/io.h"
#include "trit/tokenizer.h"
#include "io/io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put_file(const char *name, const void *data, size_t n) { tfile_write(tfile_path(name), data, n); }

static void test_write_read(void **state) {
    (void)state;
    int32_t tokens[1000];
    for (int i = 0; i < 1000; i++) tokens[i] = (int32_t)((i * 2654435761u) % 65536);
    tokens[0] = 0;
    tokens[1] = 65535;
    assert_int_equal(trit_shard_write(tfile_path("s.bin"), tokens, 1000), TRIT_OK);
    // The raw bytes follow the layout.
    uint8_t *raw;
    size_t n;
    assert_int_equal(trit_file_read_all(tfile_path("s.bin"), &raw, &n), TRIT_OK);
    assert_int_equal(n, 1024 + 2 * 1000);
    assert_int_equal(trit_le32_load(raw), 20240520);
    assert_int_equal(trit_le32_load(raw + 4), 1);
    assert_int_equal(trit_le32_load(raw + 8), 1000);
    for (int i = 3; i < 256; i++) assert_int_equal(trit_le32_load(raw + 4 * i), 0);
    assert_int_equal(raw[1024 + 2] | raw[1024 + 3] << 8, 65535);
    free(raw);
    uint16_t *back;
    int64_t count;
    assert_int_equal(trit_shard_read(tfile_path("s.bin"), &back, &count), TRIT_OK);
    assert_int_equal(count, 1000);
    for (int i = 0; i < 1000; i++) assert_int_equal(back[i], tokens[i]);
    free(back);
    assert_int_equal(trit_shard_read_count(tfile_path("s.bin"), &count), TRIT_OK);
    assert_int_equal(count, 1000);
    // Zero tokens is a valid shard.
    assert_int_equal(trit_shard_write(tfile_path("zero.bin"), NULL, 0), TRIT_OK);
    assert_int_equal(trit_shard_read(tfile_path("zero.bin"), &back, &count), TRIT_OK);
    assert_int_equal(count, 0);
    assert_non_null(back);
    free(back);
}

// A shard built here from the layout alone, as llm.c's scripts write it.
static void test_read_handmade(void **state) {
    (void)state;
    uint8_t buf[1024 + 6] = {0};
    trit_le32_store(buf, 20240520);
    trit_le32_store(buf + 4, 1);
    trit_le32_store(buf + 8, 3);
    const uint16_t vals[3] = {50256, 7, 258};
    for (int i = 0; i < 3; i++) {
        buf[1024 + 2 * i] = (uint8_t)(vals[i] & 0xFF);
        buf[1024 + 2 * i + 1] = (uint8_t)(vals[i] >> 8);
    }
    put_file("hand.bin", buf, sizeof buf);
    uint16_t *t;
    int64_t n;
    assert_int_equal(trit_shard_read(tfile_path("hand.bin"), &t, &n), TRIT_OK);
    assert_int_equal(n, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(t[i], vals[i]);
    free(t);
}

static void expect_read_error(const char *name, trit_status code, const char *needle) {
    uint16_t *t = (uint16_t *)1;
    int64_t n = 5;
    assert_int_equal(trit_shard_read(tfile_path(name), &t, &n), code);
    assert_null(t);
    assert_int_equal(n, 0);
    if (!strstr(trit_last_error(), needle)) fail_msg("error '%s' lacks '%s'", trit_last_error(), needle);
    assert_non_null(strstr(trit_last_error(), name));
    assert_int_equal(trit_shard_read_count(tfile_path(name), &n), code);
}

static void test_bad_inputs(void **state) {
    (void)state;
    int32_t tokens[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    assert_int_equal(trit_shard_write(tfile_path("ok.bin"), tokens, 10), TRIT_OK);
    uint8_t *good;
    size_t n;
    assert_int_equal(trit_file_read_all(tfile_path("ok.bin"), &good, &n), TRIT_OK);
    uint8_t *b = malloc(n + 2);

    expect_read_error("missing.bin", TRIT_ERR_IO, "cannot open");
    put_file("empty.bin", good, 0);
    expect_read_error("empty.bin", TRIT_ERR_FORMAT, "empty");
    put_file("short.bin", good, 100);
    expect_read_error("short.bin", TRIT_ERR_FORMAT, "shorter than its 1024-byte header");
    put_file("trunc.bin", good, n - 1);
    expect_read_error("trunc.bin", TRIT_ERR_FORMAT, "truncated: header says 10 tokens");
    memcpy(b, good, n);
    b[n] = b[n + 1] = 0;
    put_file("long.bin", b, n + 2);
    expect_read_error("long.bin", TRIT_ERR_FORMAT, "longer than its header says");
    memcpy(b, good, n);
    trit_le32_store(b, 20240521);
    put_file("magic.bin", b, n);
    expect_read_error("magic.bin", TRIT_ERR_FORMAT, "expected 20240520");
    memcpy(b, good, n);
    trit_le32_store(b + 4, 2);
    put_file("version.bin", b, n);
    expect_read_error("version.bin", TRIT_ERR_FORMAT, "version 2, expected 1");
    memcpy(b, good, n);
    trit_le32_store(b + 8, 11);
    put_file("count.bin", b, n);
    expect_read_error("count.bin", TRIT_ERR_FORMAT, "header says 11 tokens");
    memcpy(b, good, n);
    trit_le32_store(b + 8, (uint32_t)-4);
    put_file("neg.bin", b, n);
    expect_read_error("neg.bin", TRIT_ERR_FORMAT, "negative");
    // Junk: text, and random bytes of a plausible size.
    const char *text = "this is not a token shard at all, just text...";
    put_file("text.bin", text, strlen(text));
    expect_read_error("text.bin", TRIT_ERR_FORMAT, "truncated");
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)(i * 37 + 11);
    put_file("junk.bin", b, n);
    expect_read_error("junk.bin", TRIT_ERR_FORMAT, "not a token shard");
    uint16_t *t;
    int64_t cnt;
    assert_int_equal(trit_shard_read(tfile_dir(), &t, &cnt), TRIT_ERR_IO); // a directory
    free(b);
    free(good);

    // Writes that cannot be represented fail before creating anything.
    tokens[3] = 65536;
    assert_int_equal(trit_shard_write(tfile_path("big.bin"), tokens, 10), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "65536"));
    tokens[3] = -1;
    assert_int_equal(trit_shard_write(tfile_path("big.bin"), tokens, 10), TRIT_ERR_RANGE);
    struct stat st;
    assert_int_equal(stat(tfile_path("big.bin"), &st), -1);
    assert_int_equal(trit_shard_write(tfile_path("big.bin"), tokens, (int64_t)INT32_MAX + 1), TRIT_ERR_RANGE);
}

static void read_shard(const char *name, uint16_t **t, int64_t *n) {
    assert_int_equal(trit_shard_read(tfile_path(name), t, n), TRIT_OK);
}

static void test_prepare(void **state) {
    (void)state;
    char text[1001];
    for (int i = 0; i < 1000; i++) text[i] = "abcdefghij \n"[(i * 7) % 12];
    text[1000] = 0;
    put_file("input.txt", text, 1000);
    trit_tokenizer *tok = trit_tokenizer_train_char(text, 1000);
    int64_t nt = 0, nv = 0;
    assert_int_equal(trit_shards_prepare(tok, tfile_path("input.txt"), tfile_path("train.bin"), tfile_path("val.bin"),
                                         TRIT_DEFAULT_VAL_FRACTION, &nt, &nv),
                     TRIT_OK);
    assert_int_equal(nt, 900);
    assert_int_equal(nv, 100);
    int32_t *ids;
    size_t n;
    assert_int_equal(trit_tokenizer_encode(tok, text, 1000, &ids, &n), TRIT_OK);
    uint16_t *tr, *va;
    int64_t ntr, nva;
    read_shard("train.bin", &tr, &ntr);
    read_shard("val.bin", &va, &nva);
    assert_int_equal(ntr, 900);
    assert_int_equal(nva, 100);
    for (int64_t i = 0; i < 900; i++) assert_int_equal(tr[i], ids[i]);
    for (int64_t i = 0; i < 100; i++) assert_int_equal(va[i], ids[900 + i]);
    free(tr);
    free(va);
    free(ids);

    // BPE splits at a token boundary: train + val decode back to the whole text.
    trit_tokenizer *bpe = trit_tokenizer_train_bpe(text, 1000, 300);
    assert_int_equal(trit_shards_prepare(bpe, tfile_path("input.txt"), tfile_path("train.bin"), tfile_path("val.bin"), 0.25,
                                         &nt, &nv),
                     TRIT_OK);
    read_shard("train.bin", &tr, &ntr);
    read_shard("val.bin", &va, &nva);
    assert_int_equal(ntr + nva, nt + nv);
    assert_int_equal(nva, (int64_t)((double)(nt + nv) * 0.25));
    int32_t *all = malloc((size_t)(ntr + nva) * sizeof *all);
    for (int64_t i = 0; i < ntr; i++) all[i] = tr[i];
    for (int64_t i = 0; i < nva; i++) all[ntr + i] = va[i];
    uint8_t *back;
    assert_int_equal(trit_tokenizer_decode(bpe, all, (size_t)(ntr + nva), &back, &n), TRIT_OK);
    assert_int_equal(n, 1000);
    assert_memory_equal(back, text, 1000);
    free(back);
    free(all);
    free(tr);
    free(va);

    // No validation split.
    assert_int_equal(trit_shards_prepare(tok, tfile_path("input.txt"), tfile_path("t0.bin"), NULL, 0.0, &nt, &nv), TRIT_OK);
    assert_int_equal(nt, 1000);
    assert_int_equal(nv, 0);
    trit_tokenizer_free(bpe);
    trit_tokenizer_free(tok);
}

// A BPE file with 65281 merges (every merge joins two bytes, so all are valid): 65537 tokens.
static trit_tokenizer *huge_vocab_tokenizer(void) {
    int32_t nm = 65281;
    size_t n = 24 + (size_t)nm * 8 + 4;
    uint8_t *b = calloc(n, 1);
    memcpy(b, "TTOK", 4);
    trit_le32_store(b + 4, 1);
    trit_le32_store(b + 8, 2);
    trit_le32_store(b + 12, 256 + (uint32_t)nm);
    trit_le32_store(b + 16, 1);
    trit_le32_store(b + 20, (uint32_t)nm * 8);
    for (int32_t r = 0; r < nm; r++) {
        trit_le32_store(b + 24 + 8 * r, (uint32_t)(r / 256));
        trit_le32_store(b + 28 + 8 * r, (uint32_t)(r % 256));
    }
    trit_le32_store(b + n - 4, trit_crc32(0, b, n - 4));
    put_file("huge.tok", b, n);
    free(b);
    return trit_tokenizer_load(tfile_path("huge.tok"));
}

static void test_prepare_errors(void **state) {
    (void)state;
    trit_tokenizer *tok = trit_tokenizer_train_char("abc\n", 4);
    char out[600], val[600];
    snprintf(out, sizeof out, "%s", tfile_path("o.bin"));
    snprintf(val, sizeof val, "%s", tfile_path("v.bin"));
    assert_int_equal(trit_shards_prepare(tok, tfile_path("nope.txt"), out, val, 0.1, NULL, NULL), TRIT_ERR_IO);
    assert_non_null(strstr(trit_last_error(), "nope.txt"));
    put_file("empty.txt", "", 0);
    assert_int_equal(trit_shards_prepare(tok, tfile_path("empty.txt"), out, val, 0.1, NULL, NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "empty"));
    const uint8_t junk[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0xff};
    put_file("junk.txt", junk, sizeof junk);
    assert_int_equal(trit_shards_prepare(tok, tfile_path("junk.txt"), out, val, 0.1, NULL, NULL), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "binary"));
    put_file("other.txt", "abcz\n", 5);
    assert_int_equal(trit_shards_prepare(tok, tfile_path("other.txt"), out, val, 0.1, NULL, NULL), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "0x7a"));
    put_file("tiny.txt", "ab", 2);
    assert_int_equal(trit_shards_prepare(tok, tfile_path("tiny.txt"), out, val, 0.1, NULL, NULL), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "too few"));
    assert_int_equal(trit_shards_prepare(tok, tfile_path("tiny.txt"), out, val, 1.0, NULL, NULL), TRIT_ERR_RANGE);
    assert_int_equal(trit_shards_prepare(tok, tfile_path("tiny.txt"), out, val, -0.5, NULL, NULL), TRIT_ERR_RANGE);
    assert_int_equal(trit_shards_prepare(tok, tfile_path("tiny.txt"), out, NULL, 0.1, NULL, NULL), TRIT_ERR_INVALID);
    struct stat st;
    assert_int_equal(stat(out, &st), -1); // no failed call left a file behind
    assert_int_equal(stat(val, &st), -1);
    trit_tokenizer_free(tok);

    trit_tokenizer *huge = huge_vocab_tokenizer();
    assert_non_null(huge);
    assert_int_equal(trit_tokenizer_vocab_size(huge), 65537);
    put_file("fine.txt", "hello world\n", 12);
    assert_int_equal(trit_shards_prepare(huge, tfile_path("fine.txt"), out, val, 0.1, NULL, NULL), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "uint16"));
    trit_tokenizer_free(huge);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_read),
        cmocka_unit_test(test_read_handmade),
        cmocka_unit_test(test_bad_inputs),
        cmocka_unit_test(test_prepare),
        cmocka_unit_test(test_prepare_errors),
    };
    trit_log_set_level(TRIT_LOG_ERROR);
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
