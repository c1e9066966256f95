// Character-level tokenizer: vocabulary, ids, round trips over all 256 byte values, clear errors.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "trit/tokenizer.h"

#include <stdlib.h>
#include <string.h>

static void test_vocab_and_ids(void **state) {
    (void)state;
    const char *text = "hello world";
    trit_tokenizer *tok = trit_tokenizer_train_char(text, strlen(text));
    assert_non_null(tok);
    assert_int_equal(trit_tokenizer_get_kind(tok), TRIT_TOKENIZER_CHAR);
    assert_string_equal(trit_tokenizer_kind_name(TRIT_TOKENIZER_CHAR), "char");
    // Sorted distinct bytes: ' ' d e h l o r w
    assert_int_equal(trit_tokenizer_vocab_size(tok), 8);
    assert_int_equal(trit_tokenizer_num_merges(tok), 0);
    const char *order = " dehlorw";
    for (int32_t i = 0; i < 8; i++) {
        const uint8_t *b;
        size_t n;
        assert_int_equal(trit_tokenizer_token_bytes(tok, i, &b, &n), TRIT_OK);
        assert_int_equal(n, 1);
        assert_int_equal(b[0], (uint8_t)order[i]);
    }
    int32_t *ids;
    size_t n;
    assert_int_equal(trit_tokenizer_encode(tok, "hello", 5, &ids, &n), TRIT_OK);
    const int32_t want[5] = {3, 2, 4, 4, 5};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want, sizeof want);
    uint8_t *back;
    size_t blen;
    assert_int_equal(trit_tokenizer_decode(tok, ids, n, &back, &blen), TRIT_OK);
    assert_int_equal(blen, 5);
    assert_string_equal((char *)back, "hello");
    free(back);
    free(ids);
    trit_tokenizer_free(tok);
}

static void test_errors(void **state) {
    (void)state;
    trit_tokenizer *tok = trit_tokenizer_train_char("abc", 3);
    int32_t *ids = (int32_t *)1;
    size_t n = 7;
    assert_int_equal(trit_tokenizer_encode(tok, "abz", 3, &ids, &n), TRIT_ERR_RANGE);
    assert_null(ids);
    assert_int_equal(n, 0);
    assert_non_null(strstr(trit_last_error(), "0x7a"));
    assert_non_null(strstr(trit_last_error(), "offset 2"));
    int32_t bad[1] = {3};
    uint8_t *out;
    assert_int_equal(trit_tokenizer_decode(tok, bad, 1, &out, &n), TRIT_ERR_RANGE);
    const uint8_t *b;
    assert_int_equal(trit_tokenizer_token_bytes(tok, -1, &b, &n), TRIT_ERR_RANGE);
    // Empty input encodes to zero tokens (and a non-NULL array).
    assert_int_equal(trit_tokenizer_encode(tok, "", 0, &ids, &n), TRIT_OK);
    assert_non_null(ids);
    assert_int_equal(n, 0);
    free(ids);
    trit_tokenizer_free(tok);
    assert_null(trit_tokenizer_train_char("", 0));
    assert_non_null(strstr(trit_last_error(), "non-empty"));
}

static void test_round_trip_all_bytes(void **state) {
    (void)state;
    uint8_t text[4096];
    uint32_t x = 12345;
    for (size_t i = 0; i < sizeof text; i++) {
        x = x * 1103515245u + 12345u;
        text[i] = i < 256 ? (uint8_t)i : (uint8_t)(x >> 24); // every byte value, NUL included
    }
    trit_tokenizer *tok = trit_tokenizer_train_char(text, sizeof text);
    assert_int_equal(trit_tokenizer_vocab_size(tok), 256);
    int32_t *ids;
    size_t n;
    assert_int_equal(trit_tokenizer_encode(tok, text, sizeof text, &ids, &n), TRIT_OK);
    assert_int_equal(n, sizeof text);
    for (size_t i = 0; i < n; i++) assert_int_equal(ids[i], text[i]); // full vocab: id == byte
    uint8_t *back;
    size_t blen;
    assert_int_equal(trit_tokenizer_decode(tok, ids, n, &back, &blen), TRIT_OK);
    assert_int_equal(blen, sizeof text);
    assert_memory_equal(back, text, sizeof text);
    free(back);
    free(ids);
    trit_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vocab_and_ids),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_round_trip_all_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
