// safetensors: round trip of every dtype trit maps (scalars, empty and strided tensors included),
// a writer check that parses the bytes independently with cJSON, a file built byte by byte from
// the format description, and the dtype/shape mismatch errors of load.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "trit/io.h"
#include "io/io_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_CASES 10
static const struct {
    const char *name;
    trit_dtype dt;
    int ndim;
    int64_t shape[3];
} cases[N_CASES] = {
    {"w.f32", TRIT_F32, 2, {2, 3}},   {"w.f64", TRIT_F64, 1, {4}},    {"w.bf16", TRIT_BF16, 3, {3, 2, 2}},
    {"w.f16", TRIT_F16, 1, {5}},      {"i.i32", TRIT_I32, 2, {2, 2}}, {"i.i64", TRIT_I64, 1, {3}},
    {"i.i8", TRIT_I8, 1, {7}},        {"i.u8", TRIT_U8, 3, {1, 1, 1}}, {"scalar", TRIT_F32, 0, {0}},
    {"empty \"quoted\"\\name", TRIT_F32, 2, {0, 3}},
};

static trit_tensor *make_case(int k) {
    trit_tensor *t = trit_tensor_new(cases[k].dt, cases[k].ndim, cases[k].shape);
    uint8_t *p = t->data;
    for (size_t i = 0; i < trit_tensor_nbytes(t); i++) p[i] = (uint8_t)(31 * k + 7 * i + 1);
    return t;
}

static void test_round_trip(void **state) {
    (void)state;
    trit_tensor *ts[N_CASES];
    trit_safetensors_entry e[N_CASES];
    for (int k = 0; k < N_CASES; k++) {
        ts[k] = make_case(k);
        e[k] = (trit_safetensors_entry){cases[k].name, ts[k]};
    }
    const trit_safetensors_kv meta[2] = {{"format", "pt"}, {"note", "line\nbreak \"and\" caf\xc3\xa9"}};
    assert_int_equal(trit_safetensors_write(tfile_path("rt.safetensors"), e, N_CASES, meta, 2), TRIT_OK);
    trit_safetensors *f = trit_safetensors_open(tfile_path("rt.safetensors"));
    assert_non_null(f);
    assert_int_equal(trit_safetensors_count(f), N_CASES);
    for (int k = 0; k < N_CASES; k++) {
        const trit_safetensors_info *in = trit_safetensors_at(f, k);
        assert_string_equal(in->name, cases[k].name);
        assert_int_equal(in->dtype, cases[k].dt);
        assert_string_equal(in->dtype_name, trit_safetensors_dtype_name(cases[k].dt));
        assert_int_equal(in->ndim, cases[k].ndim);
        for (int d = 0; d < in->ndim; d++) assert_int_equal(in->shape[d], cases[k].shape[d]);
        trit_tensor *back = trit_tensor_new(cases[k].dt, cases[k].ndim, cases[k].shape);
        assert_int_equal(trit_safetensors_load(f, cases[k].name, back), TRIT_OK);
        assert_memory_equal(back->data, ts[k]->data, trit_tensor_nbytes(ts[k]));
        trit_tensor_free(back);
    }
    assert_int_equal(trit_safetensors_meta_count(f), 2);
    assert_string_equal(trit_safetensors_meta(f, "format"), "pt");
    assert_string_equal(trit_safetensors_meta(f, "note"), meta[1].value);
    assert_null(trit_safetensors_meta(f, "absent"));
    const char *key, *value;
    assert_int_equal(trit_safetensors_meta_at(f, 1, &key, &value), TRIT_OK);
    assert_string_equal(key, "note");
    assert_int_equal(trit_safetensors_meta_at(f, 2, &key, &value), TRIT_ERR_RANGE);
    assert_null(trit_safetensors_at(f, N_CASES));
    trit_safetensors_close(f);
    for (int k = 0; k < N_CASES; k++) trit_tensor_free(ts[k]);
}

// Parse what the writer produced without the reader: 8-byte length, padded JSON, offsets, bytes.
static void test_writer_layout(void **state) {
    (void)state;
    trit_tensor *a = make_case(0), *b = make_case(5);
    trit_safetensors_entry e[2] = {{"a", a}, {"b", b}};
    const trit_safetensors_kv meta[1] = {{"step", "12"}};
    assert_int_equal(trit_safetensors_write(tfile_path("w.safetensors"), e, 2, meta, 1), TRIT_OK);
    uint8_t *raw;
    size_t n;
    assert_int_equal(trit_file_read_all(tfile_path("w.safetensors"), &raw, &n), TRIT_OK);
    uint64_t hn = trit_le64_load(raw);
    assert_int_equal(hn % 8, 0); // padded so the data is 8-byte aligned
    assert_int_equal(n, 8 + hn + 24 + 24);
    assert_int_equal(raw[8], '{');
    cJSON *root = cJSON_ParseWithLength((const char *)raw + 8, hn);
    assert_non_null(root);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "__metadata__"), "step")->valuestring, "12");
    const char *names[2] = {"a", "b"};
    const char *dts[2] = {"F32", "I64"};
    int64_t begin[2] = {0, 24}, nd[2] = {2, 1};
    for (int k = 0; k < 2; k++) {
        cJSON *t = cJSON_GetObjectItem(root, names[k]);
        assert_string_equal(cJSON_GetObjectItem(t, "dtype")->valuestring, dts[k]);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(t, "shape")), nd[k]);
        cJSON *off = cJSON_GetObjectItem(t, "data_offsets");
        assert_int_equal((int64_t)cJSON_GetArrayItem(off, 0)->valuedouble, begin[k]);
        assert_int_equal((int64_t)cJSON_GetArrayItem(off, 1)->valuedouble, begin[k] + 24);
    }
    assert_int_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "a"), "shape"), 1)->valuedouble, 3);
    assert_memory_equal(raw + 8 + hn, a->data, 24);
    assert_memory_equal(raw + 8 + hn + 24, b->data, 24);
    cJSON_Delete(root);
    free(raw);
    trit_tensor_free(a);
    trit_tensor_free(b);
}

static size_t put_st(const char *name, const char *json, const uint8_t *data, size_t nd) {
    size_t hn = strlen(json);
    uint8_t *buf = malloc(8 + hn + nd);
    trit_le64_store(buf, hn);
    memcpy(buf + 8, json, hn);
    if (nd) memcpy(buf + 8 + hn, data, nd);
    tfile_write(tfile_path(name), buf, 8 + hn + nd);
    free(buf);
    return 8 + hn + nd;
}

// Built from the format description: entries out of data order, whitespace, metadata in the
// middle, a 0-d tensor and trailing space padding.
static void test_read_handmade(void **state) {
    (void)state;
    const char *json = "{ \"b\" : {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]},\n"
                       "  \"__metadata__\": {\"format\": \"pt\"},\n"
                       "  \"a\": {\"shape\": [], \"data_offsets\": [0, 8], \"dtype\": \"I64\"},"
                       "  \"h\": {\"dtype\": \"BF16\", \"shape\": [1, 2], \"data_offsets\": [16, 20]} }   ";
    uint8_t data[20];
    trit_le64_store(data, (uint64_t)(int64_t)-42);
    trit_le32_store(data + 8, 0x3FC00000u);  // 1.5f
    trit_le32_store(data + 12, 0xC0000000u); // -2.0f
    data[16] = 0x80, data[17] = 0x3F;        // bf16 1.0
    data[18] = 0x40, data[19] = 0xC0;        // bf16 -3.0
    put_st("hand.safetensors", json, data, sizeof data);
    trit_safetensors *f = trit_safetensors_open(tfile_path("hand.safetensors"));
    if (!f) fail_msg("%s", trit_last_error());
    assert_int_equal(trit_safetensors_count(f), 3);
    assert_string_equal(trit_safetensors_meta(f, "format"), "pt");
    const trit_safetensors_info *a = trit_safetensors_find(f, "a");
    assert_int_equal(a->ndim, 0);
    assert_int_equal(a->dtype, TRIT_I64);
    trit_tensor *ta = trit_tensor_new(TRIT_I64, 0, NULL);
    assert_int_equal(trit_safetensors_load(f, "a", ta), TRIT_OK);
    assert_int_equal(((int64_t *)ta->data)[0], -42);
    int64_t two = 2, one_two[2] = {1, 2};
    trit_tensor *tb = trit_tensor_new(TRIT_F32, 1, &two);
    assert_int_equal(trit_safetensors_load(f, "b", tb), TRIT_OK);
    assert_true(((float *)tb->data)[0] == 1.5f);
    assert_true(((float *)tb->data)[1] == -2.0f);
    trit_tensor *th = trit_tensor_new(TRIT_BF16, 2, one_two);
    assert_int_equal(trit_safetensors_load(f, "h", th), TRIT_OK);
    assert_true(trit_tensor_get_flat(th, 0) == 1.0);
    assert_true(trit_tensor_get_flat(th, 1) == -3.0);
    trit_tensor_free(ta);
    trit_tensor_free(tb);
    trit_tensor_free(th);
    trit_safetensors_close(f);
}

// Strided tensors are written in logical order and loaded into strided destinations.
static void test_strided(void **state) {
    (void)state;
    int64_t s32[2] = {3, 2}, s23[2] = {2, 3};
    trit_tensor *base = trit_tensor_new(TRIT_F32, 2, s32);
    for (int i = 0; i < 6; i++) ((float *)base->data)[i] = (float)i; // [[0,1],[2,3],[4,5]]
    trit_tensor tv;
    assert_int_equal(trit_tensor_view_transpose(base, 0, 1, &tv), TRIT_OK); // [[0,2,4],[1,3,5]]
    trit_safetensors_entry e[1] = {{"t", &tv}};
    assert_int_equal(trit_safetensors_write(tfile_path("s.safetensors"), e, 1, NULL, 0), TRIT_OK);
    trit_safetensors *f = trit_safetensors_open(tfile_path("s.safetensors"));
    assert_non_null(f);
    trit_tensor *flat = trit_tensor_new(TRIT_F32, 2, s23);
    assert_int_equal(trit_safetensors_load(f, "t", flat), TRIT_OK);
    const float want[6] = {0, 2, 4, 1, 3, 5};
    assert_memory_equal(flat->data, want, sizeof want);
    // Load back into a transposed view of a fresh (3, 2) tensor: storage is the original order.
    trit_tensor *dst = trit_tensor_new(TRIT_F32, 2, s32);
    trit_tensor dv;
    assert_int_equal(trit_tensor_view_transpose(dst, 0, 1, &dv), TRIT_OK);
    assert_int_equal(trit_safetensors_load(f, "t", &dv), TRIT_OK);
    assert_memory_equal(dst->data, base->data, 6 * sizeof(float));
    trit_safetensors_close(f);
    trit_tensor_free(flat);
    trit_tensor_free(dst);
    trit_tensor_free(base);
}

static void test_load_mismatch(void **state) {
    (void)state;
    trit_tensor *a = make_case(0); // F32 (2, 3)
    trit_safetensors_entry e[1] = {{"blocks.0.attn.weight", a}};
    assert_int_equal(trit_safetensors_write(tfile_path("m.safetensors"), e, 1, NULL, 0), TRIT_OK);
    trit_safetensors *f = trit_safetensors_open(tfile_path("m.safetensors"));
    int64_t s32[2] = {3, 2}, s23[2] = {2, 3};
    trit_tensor *wrong_shape = trit_tensor_new(TRIT_F32, 2, s32);
    assert_int_equal(trit_safetensors_load(f, "blocks.0.attn.weight", wrong_shape), TRIT_ERR_SHAPE);
    const char *msg = trit_last_error();
    assert_non_null(strstr(msg, "blocks.0.attn.weight"));
    assert_non_null(strstr(msg, "(2, 3)"));
    assert_non_null(strstr(msg, "(3, 2)"));
    assert_non_null(strstr(msg, "model configuration"));
    trit_tensor *wrong_dtype = trit_tensor_new(TRIT_I32, 2, s23);
    assert_int_equal(trit_safetensors_load(f, "blocks.0.attn.weight", wrong_dtype), TRIT_ERR_DTYPE);
    assert_non_null(strstr(trit_last_error(), "F32"));
    assert_non_null(strstr(trit_last_error(), "I32"));
    // Float dtypes convert: to f64 exactly, to bf16 rounded to nearest even, and back to f32.
    trit_tensor *wide = trit_tensor_new(TRIT_F64, 2, s23), *half = trit_tensor_new(TRIT_BF16, 2, s23);
    assert_int_equal(trit_safetensors_load(f, "blocks.0.attn.weight", wide), TRIT_OK);
    assert_int_equal(trit_safetensors_load(f, "blocks.0.attn.weight", half), TRIT_OK);
    for (int64_t i = 0; i < 6; i++) {
        const float v = ((float *)a->data)[i];
        assert_true(((double *)wide->data)[i] == (double)v);
        assert_int_equal(((uint16_t *)half->data)[i], trit_f32_to_bf16(v));
    }
    trit_safetensors_entry he[1] = {{"h", half}};
    assert_int_equal(trit_safetensors_write(tfile_path("h.safetensors"), he, 1, NULL, 0), TRIT_OK);
    trit_safetensors *hf = trit_safetensors_open(tfile_path("h.safetensors"));
    assert_string_equal(trit_safetensors_find(hf, "h")->dtype_name, "BF16");
    trit_tensor *back = trit_tensor_new(TRIT_F32, 2, s23);
    assert_int_equal(trit_safetensors_load(hf, "h", back), TRIT_OK);
    for (int64_t i = 0; i < 6; i++) assert_true(((float *)back->data)[i] == trit_bf16_to_f32(((uint16_t *)half->data)[i]));
    trit_safetensors_close(hf);
    trit_tensor_free(back);
    trit_tensor_free(wide);
    trit_tensor_free(half);
    assert_int_equal(trit_safetensors_load(f, "blocks.1.attn.weight", wrong_dtype), TRIT_ERR_INVALID);
    assert_non_null(strstr(trit_last_error(), "no tensor 'blocks.1.attn.weight'"));
    trit_safetensors_close(f);
    trit_tensor_free(wrong_shape);
    trit_tensor_free(wrong_dtype);

    // Writer refuses what the format cannot hold.
    trit_safetensors_entry dup[2] = {{"x", a}, {"x", a}};
    assert_int_equal(trit_safetensors_write(tfile_path("d.safetensors"), dup, 2, NULL, 0), TRIT_ERR_INVALID);
    trit_safetensors_entry meta_name[1] = {{"__metadata__", a}};
    assert_int_equal(trit_safetensors_write(tfile_path("d.safetensors"), meta_name, 1, NULL, 0), TRIT_ERR_INVALID);
    trit_safetensors_entry bad_utf8[1] = {{"caf\xe9", a}};
    assert_int_equal(trit_safetensors_write(tfile_path("d.safetensors"), bad_utf8, 1, NULL, 0), TRIT_ERR_INVALID);
    assert_int_equal(access(tfile_path("d.safetensors"), F_OK), -1);
    trit_tensor_free(a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_writer_layout),
        cmocka_unit_test(test_read_handmade),
        cmocka_unit_test(test_strided),
        cmocka_unit_test(test_load_mismatch),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
