// safetensors files that lie: each broken header gives a FORMAT (or IO) error that says what is
// wrong, and random byte flips and truncations of a valid file never crash the reader (this file
// runs under ASan/UBSan in CI).
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "trit/io.h"
#include "io/io_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put_raw(const uint8_t *b, size_t n) {
    // A new file each time: truncating a file in place makes some file systems (ext4's
    // auto_da_alloc) flush it on close, which turns this loop into seconds of disk waits.
    unlink(tfile_path("x.safetensors"));
    tfile_write(tfile_path("x.safetensors"), b, n);
}

// A file with `json` as header (length field = its length + adjust) and `nd` data bytes.
static void put_st(const char *json, size_t nd, int64_t adjust) {
    size_t hn = strlen(json);
    uint8_t *buf = calloc(8 + hn + nd + 1, 1);
    trit_le64_store(buf, (uint64_t)((int64_t)hn + adjust));
    memcpy(buf + 8, json, hn);
    put_raw(buf, 8 + hn + nd);
    free(buf);
}

static void expect_error(const char *needle) {
    trit_safetensors *f = trit_safetensors_open(tfile_path("x.safetensors"));
    if (f) {
        trit_safetensors_close(f);
        fail_msg("opening a broken file succeeded; expected an error with '%s'", needle);
    }
    if (!strstr(trit_last_error(), needle)) fail_msg("error '%s' lacks '%s'", trit_last_error(), needle);
}

#define T(dtype, shape, b, e) "{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" b "," e "]}"

static void test_corrupt_headers(void **state) {
    (void)state;
    assert_null(trit_safetensors_open(tfile_path("missing.safetensors")));
    assert_non_null(strstr(trit_last_error(), "missing.safetensors"));
    put_raw((const uint8_t *)"", 0);
    expect_error("too short");
    put_raw((const uint8_t *)"\x10\0\0", 3);
    expect_error("too short");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") "}", 8, 1000);
    expect_error("header length");
    put_st("{}", 0, -2);
    expect_error("header length");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") "}", 8, -3); // length cuts the JSON short
    expect_error("not valid JSON");
    put_st("{\"a\": {\"dtype\": \"F32\", \"shape\": [2], ", 0, 0);
    expect_error("not valid JSON");
    put_st("[1, 2, 3]", 0, 0);
    expect_error("does not start with '{'");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") "} xyz", 8, 0);
    expect_error("junk after the JSON");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") "}", 4, 0);
    expect_error("outside the 4-byte data section");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") ",\"b\":" T("F32", "[2]", "4", "12") "}", 12, 0);
    expect_error("overlap");
    put_st("{\"a\":" T("F32", "[1]", "0", "4") ",\"b\":" T("F32", "[1]", "8", "12") "}", 12, 0);
    expect_error("hole");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") "}", 12, 0);
    expect_error("trailing junk");
    put_st("{\"a\":" T("F32", "[3]", "0", "8") "}", 8, 0);
    expect_error("3 elements of F32 need 12");
    put_st("{\"a\":" T("F12", "[2]", "0", "8") "}", 8, 0);
    expect_error("unknown dtype \"F12\"");
    put_st("{\"a\":" T("F32", "[2]", "8", "0") "}", 8, 0);
    expect_error("outside");
    put_st("{\"a\":" T("F32", "[2]", "-8", "0") "}", 8, 0);
    expect_error("data_offsets");
    put_st("{\"a\":" T("F32", "[2]", "0.5", "8") "}", 8, 0);
    expect_error("data_offsets");
    put_st("{\"a\":" T("F32", "[2.5]", "0", "8") "}", 8, 0);
    expect_error("dim 0");
    put_st("{\"a\":" T("F32", "\"2\"", "0", "8") "}", 8, 0);
    expect_error("shape");
    put_st("{\"a\":" T("F32", "[1,1,1,1,1,1,1,1,2]", "0", "8") "}", 8, 0);
    expect_error("9 dims");
    put_st("{\"a\":" T("F32", "[4294967296,4294967296,4294967296]", "0", "8") "}", 8, 0);
    expect_error("impossibly large");
    put_st("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, 0);
    expect_error("data_offsets");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") ",\"a\":" T("F32", "[2]", "8", "16") "}", 16, 0);
    expect_error("appears twice");
    put_st("{\"__metadata__\":{\"step\":12}}", 0, 0);
    expect_error("not a string");
    put_st("{\"__metadata__\":[1]}", 0, 0);
    expect_error("object of strings");
    put_st("{\"a\":5}", 0, 0);
    expect_error("not an object");
    put_st("{\"\":" T("F32", "[2]", "0", "8") "}", 8, 0);
    expect_error("empty name");
}

// A valid dtype trit lacks: listed, not loadable.
static void test_unsupported_dtype(void **state) {
    (void)state;
    put_st("{\"mask\":" T("BOOL", "[3]", "0", "3") ",\"w\":" T("F32", "[1]", "3", "7") "}", 7, 0);
    trit_safetensors *f = trit_safetensors_open(tfile_path("x.safetensors"));
    if (!f) fail_msg("%s", trit_last_error());
    const trit_safetensors_info *in = trit_safetensors_find(f, "mask");
    assert_non_null(in);
    assert_int_equal(in->dtype, TRIT_DTYPE_COUNT);
    assert_string_equal(in->dtype_name, "BOOL");
    int64_t three = 3, one = 1;
    trit_tensor *t = trit_tensor_new(TRIT_U8, 1, &three);
    assert_int_equal(trit_safetensors_load(f, "mask", t), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "BOOL"));
    trit_tensor *w = trit_tensor_new(TRIT_F32, 1, &one);
    assert_int_equal(trit_safetensors_load(f, "w", w), TRIT_OK); // unaligned offset is fine
    trit_tensor_free(t);
    trit_tensor_free(w);
    trit_safetensors_close(f);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

// Open a possibly broken file and, if it opens, load every tensor it lists.
static int exercise(void) {
    trit_safetensors *f = trit_safetensors_open(tfile_path("x.safetensors"));
    if (!f) {
        assert_true(strlen(trit_last_error()) > 0);
        return 0;
    }
    for (int64_t i = 0; i < trit_safetensors_count(f); i++) {
        const trit_safetensors_info *in = trit_safetensors_at(f, i);
        assert_true(in->end >= in->begin);
        if (in->dtype == TRIT_DTYPE_COUNT) continue;
        trit_tensor *t = trit_tensor_new(in->dtype, in->ndim, in->shape);
        if (t) {
            assert_int_equal(trit_safetensors_load(f, in->name, t), TRIT_OK);
            trit_tensor_free(t);
        }
    }
    for (int64_t i = 0; i < trit_safetensors_meta_count(f); i++) {
        const char *k, *v;
        assert_int_equal(trit_safetensors_meta_at(f, i, &k, &v), TRIT_OK);
    }
    trit_safetensors_close(f);
    return 1;
}

// The strict validator: every kind of ill-formed sequence, and the edges of the valid ranges.
static void test_utf8_validator(void **state) {
    (void)state;
    static const struct {
        const char *s;
        size_t bad_at;  // SIZE_MAX: valid
    } cases[] = {
        {"plain ascii", SIZE_MAX},
        {"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9D\x84\x9E", SIZE_MAX},  // 2-, 3- and 4-byte forms
        {"\xED\x9F\xBF\xEE\x80\x80", SIZE_MAX},                    // U+D7FF and U+E000 around the surrogates
        {"\xF4\x8F\xBF\xBF", SIZE_MAX},                            // U+10FFFF, the last code point
        {"ab\x80", 2},                                             // lone continuation byte
        {"a\xC0\xAF", 1},                                          // overlong '/'
        {"a\xC1\xBF", 1},                                          // overlong U+007F
        {"\xE0\x80\xAF", 0},                                       // overlong 3-byte '/'
        {"\xE0\x9F\xBF", 0},                                       // overlong U+07FF
        {"\xF0\x8F\xBF\xBF", 0},                                   // overlong U+FFFF
        {"x\xED\xA0\x80", 1},                                      // U+D800, a surrogate
        {"\xED\xBF\xBF", 0},                                       // U+DFFF
        {"\xF4\x90\x80\x80", 0},                                   // U+110000
        {"\xF5\x80\x80\x80", 0},                                   // past any code point
        {"\xFF", 0},
        {"ok\xE2\x82", 2},                                         // cut short at the end
        {"\xE2\x82x", 0},                                          // cut short by an ASCII byte
        {"\xF0\x9D\x84", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t at = 12345;
        const bool ok = trit_utf8_valid((const uint8_t *)cases[i].s, strlen(cases[i].s), &at);
        if (ok != (cases[i].bad_at == SIZE_MAX)) fail_msg("case %zu: valid = %d", i, (int)ok);
        if (!ok && at != cases[i].bad_at) fail_msg("case %zu: bad at %zu, want %zu", i, at, cases[i].bad_at);
    }
}

// A header that is not UTF-8 is refused, wherever the bad bytes are; UTF-8 names load.
static void test_header_not_utf8(void **state) {
    (void)state;
    put_st("{\"a\xFF\":" T("F32", "[2]", "0", "8") "}", 8, 0);
    expect_error("not valid UTF-8 (byte 0xff at offset 3 of the");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") ",\"__metadata__\":{\"k\":\"\xC0\xAF\"}}", 8, 0);
    expect_error("requires UTF-8 JSON");
    put_st("{\"\xED\xA0\x80\":" T("F32", "[2]", "0", "8") "}", 8, 0);
    expect_error("byte 0xed at offset 2");
    put_st("{\"\xF4\x90\x80\x80\":" T("F32", "[2]", "0", "8") "}", 8, 0);
    expect_error("byte 0xf4 at offset 2");
    put_st("{\"a\":" T("F32", "[2]", "0", "8") "}  \xE2\x82", 8, 0);  // in the padding, cut short
    expect_error("not valid UTF-8");
    put_st("{\"\xE2\x82\xAC\xF4\x8F\xBF\xBF\":" T("F32", "[2]", "0", "8") "}", 8, 0);
    trit_safetensors *f = trit_safetensors_open(tfile_path("x.safetensors"));
    if (!f) fail_msg("a UTF-8 name was refused: %s", trit_last_error());
    assert_non_null(trit_safetensors_find(f, "\xE2\x82\xAC\xF4\x8F\xBF\xBF"));
    trit_safetensors_close(f);
}

static void test_fuzz(void **state) {
    (void)state;
    int64_t s1[2] = {3, 5}, s2[1] = {7}, s3[3] = {2, 2, 2};
    trit_tensor *a = trit_tensor_new(TRIT_F32, 2, s1), *b = trit_tensor_new(TRIT_BF16, 1, s2),
                *c = trit_tensor_new(TRIT_I64, 3, s3);
    trit_safetensors_entry e[3] = {{"model.a", a}, {"model.b", b}, {"model.c", c}};
    const trit_safetensors_kv meta[2] = {{"format", "pt"}, {"step", "100"}};
    assert_int_equal(trit_safetensors_write(tfile_path("x.safetensors"), e, 3, meta, 2), TRIT_OK);
    uint8_t *good;
    size_t n;
    assert_int_equal(trit_file_read_all(tfile_path("x.safetensors"), &good, &n), TRIT_OK);
    assert_int_equal(exercise(), 1);
    size_t hn = (size_t)trit_le64_load(good) + 8;
    uint8_t *buf = malloc(n);
    int opened = 0;
    const char noise[] = "{}[],:\"0123456789-.e \\u";
    for (int it = 0; it < 3000; it++) {
        memcpy(buf, good, n);
        size_t len = n;
        int flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < flips; k++) {
            size_t at = rnd() % 4 ? rnd() % hn : rnd() % n; // mostly the header, where parsing happens
            uint32_t how = rnd() % 3;
            buf[at] = how == 0 ? (uint8_t)rnd() : how == 1 ? (uint8_t)(buf[at] ^ (1u << (rnd() % 8)))
                                                          : (uint8_t)noise[rnd() % (sizeof noise - 1)];
        }
        if (rnd() % 8 == 0) len = rnd() % (n + 1); // truncation
        put_raw(buf, len);
        opened += exercise();
    }
    print_message("fuzz: %d of 3000 mutated files still opened (and loaded)\n", opened);
    assert_true(opened < 3000);
    free(buf);
    free(good);
    trit_tensor_free(a);
    trit_tensor_free(b);
    trit_tensor_free(c);
}

// Found by fuzz/fuzz_safetensors: a quantization map entry claiming a 3 GiB tensor made the
// reader allocate it before looking at the file's 4-byte codes tensor.
static void test_quant_map_claims_huge_tensor(void **state) {
    (void)state;
    put_st("{\"__metadata__\":{\"quantization\":\"{\\\"w\\\":{\\\"shape\\\":[49152,65536],"
           "\\\"dtype\\\":\\\"qint8\\\",\\\"group_size\\\":3221225472,\\\"scheme\\\":\\\"symmetric\\\","
           "\\\"double_quant_block\\\":0,\\\"scales_mean\\\":0}}\"},"
           "\"w\":" T("I8", "[4]", "0", "4") "}", 4, 0);
    trit_safetensors *f = trit_safetensors_open(tfile_path("x.safetensors"));
    assert_non_null(f);
    assert_true(trit_safetensors_is_quantized(f, "w"));
    assert_null(trit_safetensors_read_tensor(f, "w"));
    if (!strstr(trit_last_error(), "map and the tensors disagree"))
        fail_msg("unexpected error: %s", trit_last_error());
    trit_safetensors_close(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corrupt_headers),
        cmocka_unit_test(test_unsupported_dtype),
        cmocka_unit_test(test_utf8_validator),
        cmocka_unit_test(test_header_not_utf8),
        cmocka_unit_test(test_fuzz),
        cmocka_unit_test(test_quant_map_claims_huge_tensor),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
