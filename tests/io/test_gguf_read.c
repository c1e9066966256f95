// The GGUF reader on the file the `gguf` Python package wrote (tests/reference/make_gguf_fixture.py):
// its key-values and tensors as written, each tensor's bytes where trit's writer puts the same
// encodings; every truncation of it refused with a message; a tensor type trit does not read
// refused by name.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "trit/trit.h"

static uint8_t *fixture(size_t *n) {
    const char *src = getenv("TRIT_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/reference/fixtures/gguf_writer.gguf", src ? src : ".");
    uint8_t *d = NULL;
    assert_int_equal(trit_file_read_all(path, &d, n), TRIT_OK);
    return d;
}

static void test_reads_the_python_file(void **state) {
    (void)state;
    size_t n = 0;
    uint8_t *d = fixture(&n);
    trit_gguf_file *f = trit_gguf_parse(d, n, "fixture");
    assert_non_null(f);
    const char *s;
    size_t len;
    uint32_t u;
    float x;
    uint64_t k;
    assert_int_equal(trit_gguf_get_str(f, "general.architecture", &s, &len), TRIT_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(s, "gpt2", 4);
    assert_int_equal(trit_gguf_get_u32(f, "test.u32", &u), TRIT_OK);
    assert_int_equal(u, 7);
    assert_int_equal(trit_gguf_get_f32(f, "test.f32", &x), TRIT_OK);
    assert_true(x == 0.1f);
    assert_int_equal(trit_gguf_get_arr(f, "tokenizer.ggml.tokens", TRIT_GGUF_TYPE_STRING, &k), TRIT_OK);
    assert_int_equal(k, 4);
    trit_gguf_arr_str(f, "tokenizer.ggml.tokens", 1, &s, &len);
    assert_int_equal(len, 2);
    assert_memory_equal(s, "b\n", 2);
    trit_gguf_arr_str(f, "tokenizer.ggml.tokens", 2, &s, &len);
    assert_int_equal(len, 0);
    trit_gguf_arr_str(f, "tokenizer.ggml.tokens", 3, &s, &len);
    assert_int_equal(len, 13);
    assert_int_equal(trit_gguf_get_arr(f, "test.i32s", TRIT_GGUF_TYPE_I32, &k), TRIT_OK);
    assert_int_equal(k, 3);
    assert_int_equal(trit_gguf_arr_i32(f, "test.i32s", 1), -2);
    assert_int_equal(trit_gguf_arr_i32(f, "test.i32s", 2), 300000);
    // Wrong types and missing keys are refused by name.
    assert_int_equal(trit_gguf_get_u32(f, "test.str", &u), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "test.str"));
    assert_int_equal(trit_gguf_get_str(f, "nope", &s, &len), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "missing"));
    // Tensors: the types and dims written, the bytes of "odd" and "last".
    assert_int_equal(trit_gguf_num_tensors(f), 9);
    const struct {
        const char *name;
        uint32_t type;
        uint64_t ne0, ne1;
        size_t bytes;
    } want[] = {{"src", TRIT_GGML_F32, 256, 4, 4096},      {"f16", TRIT_GGML_F16, 256, 4, 2048},
                {"q8_0", TRIT_GGML_Q8_0, 256, 4, 32 * 34},  {"q4_0", TRIT_GGML_Q4_0, 256, 4, 32 * 18},
                {"tern", TRIT_GGML_F32, 256, 2, 2048},     {"tq2_0", TRIT_GGML_TQ2_0, 256, 2, 2 * 66},
                {"tq1_0", TRIT_GGML_TQ1_0, 256, 2, 2 * 54}, {"odd", TRIT_GGML_F32, 5, 1, 20}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const trit_gguf_tensor *t = trit_gguf_find_tensor(f, want[i].name);
        assert_non_null(t);
        assert_int_equal(t->type, want[i].type);
        assert_int_equal(t->ne[0], want[i].ne0);
        assert_int_equal(t->ndim > 1 ? t->ne[1] : 1, want[i].ne1);
        assert_int_equal(t->nbytes, want[i].bytes);
        assert_true(t->data >= d && t->data + t->nbytes <= d + n && (t->data - d) % 32 == 0);
    }
    const float odd[5] = {1.5f, -2.25f, 3.0f, 0.0f, -0.125f}, last[3] = {4.0f, 5.0f, -6.5f};
    assert_memory_equal(trit_gguf_find_tensor(f, "odd")->data, odd, sizeof odd);
    assert_memory_equal(trit_gguf_find_tensor(f, "last")->data, last, sizeof last);
    assert_null(trit_gguf_find_tensor(f, "absent"));
    trit_gguf_close(f);
    free(d);
}

// Every prefix of the file is refused with a message (never a crash, never a half-read file).
static void test_truncations(void **state) {
    (void)state;
    size_t n = 0;
    uint8_t *d = fixture(&n);
    for (size_t k = 0; k < n; k += (k < 4096 ? 1 : 97)) {
        uint8_t *cut = malloc(k ? k : 1);
        memcpy(cut, d, k);
        trit_gguf_file *f = trit_gguf_parse(cut, k, "cut");
        if (f) fail_msg("a prefix of %zu of %zu bytes was read", k, n);
        assert_true(strstr(trit_last_error(), "truncated") || strstr(trit_last_error(), "magic"));
        free(cut);
    }
    free(d);
}

// A tensor of ggml type 12 (q4_K) is refused, naming the tensor and the types trit reads.
static void test_unknown_type(void **state) {
    (void)state;
    char dir[512], path[600];
    tfile_mkdtemp(dir, sizeof dir, "gguf_read");
    snprintf(path, sizeof path, "%s/k.gguf", dir);
    trit_gguf *g = trit_gguf_new();
    static uint8_t block[144];
    const uint64_t ne[1] = {256};
    trit_gguf_kv_str(g, "general.architecture", "gpt2");
    assert_int_equal(trit_gguf_add_tensor(g, "blk.0.ffn_up.weight", 12, 1, ne, block, sizeof block), TRIT_OK);
    assert_int_equal(trit_gguf_write(g, path), TRIT_OK);
    trit_gguf_free(g);
    assert_null(trit_gguf_open(path));
    assert_non_null(strstr(trit_last_error(), "'blk.0.ffn_up.weight' has ggml type 12"));
    assert_non_null(strstr(trit_last_error(), "llama-quantize"));
    tfile_rm_rf(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_the_python_file),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_unknown_type),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
