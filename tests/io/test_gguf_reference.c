// The GGUF writer and the ggml block encodings against llama.cpp's own: the `gguf` Python package
// wrote tests/reference/fixtures/gguf_writer.gguf (tests/reference/make_gguf_fixture.py says
// what is in it); trit writes the same key-values and tensors, each encoded by trit's dtype table
// from the same f32 values, and the two files must be equal byte for byte (header, key-value
// types and order, tensor infos, offsets, padding between tensors and after the last, f16
// rounding, Q8_0/Q4_0 scales, TQ2_0/TQ1_0 packing) but for Q8_0/Q4_0 codes at near ties, where
// trit picks the code nearest x / d for the stored f16 scale d and ggml the nearest x / d before
// d's rounding: those must differ by one, trit's the nearer.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "trit/trit.h"

// The fixture's src (4, 256): (hash(i) mod 2^16 - 2^15) / 2^15 times 2^-(block mod 5), block 5 of
// zeros; every value an integer over a power of two, so exact here as in numpy.
static void src_values(float *v) {
    for (uint64_t i = 0; i < 4 * 256; i++) {
        const uint64_t h = (i * 2654435761u) % (1ull << 32) >> 16;
        const int64_t block = (int64_t)(i / 32);
        v[i] = block == 5 ? 0.0f : (float)(((double)h - 32768.0) / 32768.0 * ldexp(1.0, -(int)(block % 5)));
    }
}

// The fixture's tern (2, 256): codes in {-1, 0, 1} times 0.375 (first row) and 2^-6 (second).
static void tern_values(float *v) {
    for (int64_t i = 0; i < 2 * 256; i++) v[i] = (float)((i * 7 + i / 5) % 3 - 1) * (i < 256 ? 0.375f : 0x1p-6f);
}

// x (rows, 256) f32 encoded as dt by the dtype table; freed with the gguf at the end.
static trit_tensor *encoded(const float *x, int64_t rows, trit_dtype dt) {
    const int64_t shape[2] = {rows, 256};
    trit_tensor *f = trit_tensor_new(TRIT_F32, 2, shape), *t = trit_tensor_new(dt, 2, shape);
    assert_non_null(f);
    assert_non_null(t);
    memcpy(f->data, x, sizeof(float) * (size_t)(rows * 256));
    assert_int_equal(trit_tensor_copy(t, f), TRIT_OK);
    trit_tensor_free(f);
    return t;
}

static void test_bytes_equal_the_gguf_package(void **state) {
    (void)state;
    float src[4 * 256], tern[2 * 256];
    src_values(src);
    tern_values(tern);
    static const float odd[5] = {1.5f, -2.25f, 3.0f, 0.0f, -0.125f}, last[3] = {4.0f, 5.0f, -6.5f};
    static const char *const tokens[4] = {"a", "b\n", "", "<|endoftext|>"};
    const size_t lens[4] = {1, 2, 0, 13};
    static const int32_t i32s[3] = {1, -2, 300000};

    trit_gguf *g = trit_gguf_new();
    assert_non_null(g);
    trit_gguf_kv_str(g, "general.architecture", "gpt2");
    trit_gguf_kv_u32(g, "test.u32", 7);
    trit_gguf_kv_f32(g, "test.f32", 0.1f);
    trit_gguf_kv_str(g, "test.str", "trit");
    trit_gguf_kv_strs(g, "tokenizer.ggml.tokens", tokens, lens, 4);
    trit_gguf_kv_i32s(g, "test.i32s", i32s, 3);
    const uint64_t ne4[2] = {256, 4}, ne2[2] = {256, 2}, ne5[1] = {5}, ne3[1] = {3};
    const struct {
        const char *name;
        trit_dtype dt;
        uint32_t ggml;
        bool tern;
    } enc[] = {
        {"f16", TRIT_F16, TRIT_GGML_F16, false},     {"q8_0", TRIT_Q8_0, TRIT_GGML_Q8_0, false},
        {"q4_0", TRIT_Q4_0, TRIT_GGML_Q4_0, false},  {"tq2_0", TRIT_TQ2_0, TRIT_GGML_TQ2_0, true},
        {"tq1_0", TRIT_TQ1_0, TRIT_GGML_TQ1_0, true},
    };
    trit_tensor *t[5];
    assert_int_equal(trit_gguf_add_tensor(g, "src", TRIT_GGML_F32, 2, ne4, src, sizeof src), TRIT_OK);
    for (int k = 0; k < 5; k++) {
        if (k == 3) assert_int_equal(trit_gguf_add_tensor(g, "tern", TRIT_GGML_F32, 2, ne2, tern, sizeof tern), TRIT_OK);
        t[k] = encoded(enc[k].tern ? tern : src, enc[k].tern ? 2 : 4, enc[k].dt);
        assert_int_equal(trit_gguf_add_tensor(g, enc[k].name, enc[k].ggml, 2, enc[k].tern ? ne2 : ne4,
                                              trit_tensor_ptr(t[k]), trit_tensor_nbytes(t[k])),
                         TRIT_OK);
    }
    assert_int_equal(trit_gguf_add_tensor(g, "odd", TRIT_GGML_F32, 1, ne5, odd, sizeof odd), TRIT_OK);
    assert_int_equal(trit_gguf_add_tensor(g, "last", TRIT_GGML_F32, 1, ne3, last, sizeof last), TRIT_OK);
    const char *path = tfile_path("trit.gguf");
    assert_int_equal(trit_gguf_write(g, path), TRIT_OK);
    trit_gguf_free(g);

    char ref_path[1024];
    const char *root = getenv("TRIT_SOURCE_DIR");
    snprintf(ref_path, sizeof ref_path, "%s/tests/reference/fixtures/gguf_writer.gguf", root ? root : ".");
    uint8_t *ours, *ref;
    size_t n_ours, n_ref;
    if (trit_file_read_all(ref_path, &ref, &n_ref) != TRIT_OK)
        fail_msg("%s (set TRIT_SOURCE_DIR to the repository root)", trit_last_error());
    assert_int_equal(trit_file_read_all(path, &ours, &n_ours), TRIT_OK);
    if (n_ours != n_ref) fail_msg("trit's file has %zu bytes, the gguf package's %zu", n_ours, n_ref);
    // Where each tensor's data lies: after the infos, in order, each padded to 32 bytes.
    size_t off[9], at = n_ref;
    const size_t sizes[9] = {sizeof src, trit_tensor_nbytes(t[0]), trit_tensor_nbytes(t[1]), trit_tensor_nbytes(t[2]),
                             sizeof tern, trit_tensor_nbytes(t[3]), trit_tensor_nbytes(t[4]), sizeof odd, sizeof last};
    for (int i = 8; i >= 0; i--) off[i] = at -= (sizes[i] + 31) / 32 * 32;
    int near_ties = 0;
    for (size_t i = 0; i < n_ref; i++) {
        if (ours[i] == ref[i]) continue;
        // Only a q8_0 or q4_0 code may differ (tensors 2 and 3), and only by one, at a near tie:
        // trit rounds x / d with d the stored f16 scale (the code nearest what decoding gives),
        // ggml rounds x * (1 / d) with d before its rounding to f16.
        const int k = i >= off[2] && i < off[2] + sizes[2] ? 2 : i >= off[3] && i < off[3] + sizes[3] ? 3 : -1;
        const size_t bytes = k == 2 ? 34 : 18, in = k < 0 ? 0 : (i - off[k]) % bytes, blk = k < 0 ? 0 : (i - off[k]) / bytes;
        if (k < 0 || in < 2)
            fail_msg("trit's file differs from the gguf package's at byte %zu (0x%02x against 0x%02x)%s", i, ours[i],
                     ref[i], k < 0 ? "" : ", a block's scale");
        uint16_t h;
        memcpy(&h, ours + off[k] + blk * bytes, 2);
        const double d = trit_f16_to_f32(h);
        for (int half = 0; half < (k == 2 ? 1 : 2); half++) {
            const int j = k == 2 ? (int)in - 2 : (int)in - 2 + 16 * half;  // element of the block
            const int ct = k == 2 ? (int8_t)ours[i] : (ours[i] >> (4 * half) & 15) - 8;
            const int cg = k == 2 ? (int8_t)ref[i] : (ref[i] >> (4 * half) & 15) - 8;
            if (ct == cg) continue;
            const double x = src[blk * 32 + (size_t)j];
            // d is within 2^-11 (f16's rounding) of ggml's unrounded scale, so x / d is within
            // |x / d| 2^-11 of ggml's x / d: a code changes only when a midpoint lies in between.
            if (abs(ct - cg) != 1 || fabs(x / d - ct) > 0.5 || fabs(x / d - (ct + cg) / 2.0) > fabs(x / d) * 0x1p-11 * 1.001)
                fail_msg("%s block %zu element %d: trit's code %d, ggml's %d for x / d = %.6f", enc[k - 1].name, blk, j, ct,
                         cg, x / d);
            near_ties++;
        }
    }
    print_message("%d q8_0/q4_0 codes at near ties differ by one (trit's nearest x / d), of %d\n", near_ties, 2 * 4 * 256);
    print_message("%zu bytes: the rest equal to the gguf package's file\n", n_ours);
    free(ours);
    free(ref);
    for (int k = 0; k < 5; k++) trit_tensor_free(t[k]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bytes_equal_the_gguf_package),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
