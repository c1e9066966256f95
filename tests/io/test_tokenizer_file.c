// Tokenizer files: save/load identity for both kinds, and every way a file can be wrong
// (missing, empty, foreign, truncated, corrupt, wrong version, forged merges) gives a clear error.
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
#include <unistd.h>

static const char sample[] =
    "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"
    "First Citizen:\nYou are all resolved rather to die than to famish?\n\0\xff\xfe binary tail";
#define SAMPLE_LEN (sizeof sample - 1)

static void assert_same_tokenizer(const trit_tokenizer *a, const trit_tokenizer *b) {
    assert_int_equal(trit_tokenizer_get_kind(a), trit_tokenizer_get_kind(b));
    assert_int_equal(trit_tokenizer_vocab_size(a), trit_tokenizer_vocab_size(b));
    assert_int_equal(trit_tokenizer_num_merges(a), trit_tokenizer_num_merges(b));
    for (int32_t i = 0; i < trit_tokenizer_vocab_size(a); i++) {
        const uint8_t *x, *y;
        size_t nx, ny;
        assert_int_equal(trit_tokenizer_token_bytes(a, i, &x, &nx), TRIT_OK);
        assert_int_equal(trit_tokenizer_token_bytes(b, i, &y, &ny), TRIT_OK);
        assert_int_equal(nx, ny);
        assert_memory_equal(x, y, nx);
    }
    int32_t *ia, *ib;
    size_t na, nb;
    assert_int_equal(trit_tokenizer_encode(a, sample, SAMPLE_LEN, &ia, &na), TRIT_OK);
    assert_int_equal(trit_tokenizer_encode(b, sample, SAMPLE_LEN, &ib, &nb), TRIT_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(ia, ib, na * sizeof *ia);
    free(ia);
    free(ib);
}

static void test_save_load_identity(void **state) {
    (void)state;
    trit_tokenizer *toks[2] = {trit_tokenizer_train_char(sample, SAMPLE_LEN),
                               trit_tokenizer_train_bpe(sample, SAMPLE_LEN, 300)};
    for (int k = 0; k < 2; k++) {
        assert_non_null(toks[k]);
        assert_int_equal(trit_tokenizer_save(toks[k], tfile_path("tok.bin")), TRIT_OK);
        trit_tokenizer *back = trit_tokenizer_load(tfile_path("tok.bin"));
        assert_non_null(back);
        assert_same_tokenizer(toks[k], back);
        trit_tokenizer_free(back);
        trit_tokenizer_free(toks[k]);
    }
}

static uint8_t *load_bytes(const char *name, size_t *n) {
    uint8_t *b;
    assert_int_equal(trit_file_read_all(tfile_path(name), &b, n), TRIT_OK);
    return b;
}

static void expect_load_error(const uint8_t *bytes, size_t n, const char *needle) {
    assert_int_equal(trit_file_write_atomic(tfile_path("bad.bin"), bytes, n), TRIT_OK);
    trit_tokenizer *tok = trit_tokenizer_load(tfile_path("bad.bin"));
    if (tok) fail_msg("loading a bad file succeeded; expected an error with '%s'", needle);
    if (!strstr(trit_last_error(), needle)) fail_msg("error '%s' lacks '%s'", trit_last_error(), needle);
    assert_non_null(strstr(trit_last_error(), "bad.bin"));
}

// Re-seal the CRC after an edit, so the test reaches the checks behind it.
static void reseal(uint8_t *b, size_t n) { trit_le32_store(b + n - 4, trit_crc32(0, b, n - 4)); }

static void test_corrupt_files(void **state) {
    (void)state;
    trit_tokenizer *tok = trit_tokenizer_train_bpe(sample, SAMPLE_LEN, 280);
    assert_int_equal(trit_tokenizer_save(tok, tfile_path("good.bin")), TRIT_OK);
    trit_tokenizer_free(tok);
    size_t n;
    uint8_t *good = load_bytes("good.bin", &n);
    assert_int_equal(n, 24 + 24 * 8 + 4);
    assert_memory_equal(good, "TTOK", 4);
    uint8_t *b = malloc(n);

    assert_null(trit_tokenizer_load(tfile_path("missing.bin")));
    assert_non_null(strstr(trit_last_error(), "missing.bin"));
    expect_load_error(good, 0, "not a trit tokenizer");
    expect_load_error((const uint8_t *)"{\"model\": \"gpt2\"}", 17, "not a trit tokenizer");
    expect_load_error(good, 20, "truncated");
    expect_load_error(good, n - 9, "truncated");
    memcpy(b, good, n);
    b[24 + 13] ^= 0x40; // a merge id, CRC now wrong
    expect_load_error(b, n, "corrupt");
    memcpy(b, good, n);
    b[4] = 2;
    expect_load_error(b, n, "version 2");
    memcpy(b, good, n);
    b[8] = 9;
    reseal(b, n);
    expect_load_error(b, n, "kind 9");
    memcpy(b, good, n);
    b[16] = 7; // pre-splitting rules of another version
    reseal(b, n);
    expect_load_error(b, n, "retrain");
    memcpy(b, good, n);
    trit_le32_store(b + 24 + 8 * 3, 300); // merge 3 refers to a token that does not exist yet
    reseal(b, n);
    expect_load_error(b, n, "merge 3");
    memcpy(b, good, n);
    memcpy(b + 24 + 8, b + 24, 8); // merge 1 repeats merge 0
    reseal(b, n);
    expect_load_error(b, n, "repeats");
    memcpy(b, good, n);
    trit_le32_store(b + 12, 999); // vocab size disagrees with the payload
    reseal(b, n);
    expect_load_error(b, n, "vocab 999");
    free(b);
    free(good);

    // A char vocabulary must be strictly increasing.
    tok = trit_tokenizer_train_char("abc", 3);
    assert_int_equal(trit_tokenizer_save(tok, tfile_path("char.bin")), TRIT_OK);
    trit_tokenizer_free(tok);
    good = load_bytes("char.bin", &n);
    good[25] = 'a';
    reseal(good, n);
    expect_load_error(good, n, "increasing");
    free(good);
}

// The check value of CRC-32/ISO-HDLC (zlib's crc32).
static void test_crc32_known_answer(void **state) {
    (void)state;
    assert_int_equal(trit_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(trit_crc32(trit_crc32(0, "1234", 4), "56789", 5), 0xCBF43926u);
    assert_int_equal(trit_crc32(0, "", 0), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_known_answer),
        cmocka_unit_test(test_save_load_identity),
        cmocka_unit_test(test_corrupt_files),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
