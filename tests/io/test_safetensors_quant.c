// Quantized tensors in safetensors: every quantized dtype and scheme (with and without double
// quantization and zero points) comes back with identical packed bytes and scales; plain tensors
// beside them are untouched; a malformed quantization map or a missing scale tensor is refused;
// the whole-file check matches the map with the tensors both ways.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "scratch.h"
#include "trit/io.h"
#include "trit/quant.h"

static trit_tensor *quantized(trit_dtype dt, int64_t group, trit_quant_scheme scheme, int64_t dq, const char *name) {
    const int64_t shape[2] = {8, 256};
    trit_tensor *w = trit_tensor_new(TRIT_F32, 2, shape);
    trit_tensor_fill_normal(w, 0.0, 0.05, 3, (uint64_t)dt);
    trit_quant_spec s = trit_quant_spec_default(dt);
    s.group_size = group, s.scheme = scheme, s.double_quant_block = dq;
    trit_tensor *q = trit_quantize(w, &s);
    assert_non_null(q);
    trit_tensor_set_name(q, name);
    trit_tensor_free(w);
    return q;
}

static void assert_same_quant(const trit_tensor *a, const trit_tensor *b) {
    assert_int_equal(a->dtype, b->dtype);
    assert_true(trit_tensor_same_shape(a, b));
    assert_memory_equal(trit_tensor_ptr(a), trit_tensor_ptr(b), trit_tensor_nbytes(a));
    const trit_quant_info *p = a->quant, *q = b->quant;
    assert_int_equal(p->group_size, q->group_size);
    assert_int_equal(p->num_groups, q->num_groups);
    assert_int_equal(p->dq_block, q->dq_block);
    const size_t G = (size_t)p->num_groups;
    if (p->scales) assert_memory_equal(p->scales, q->scales, 4 * G);
    else assert_memory_equal(p->qscales, q->qscales, G);
    if (p->scales2) {
        assert_memory_equal(p->scales2, q->scales2, 4 * (size_t)((p->num_groups + p->dq_block - 1) / p->dq_block));
        assert_true(p->scales_mean == q->scales_mean);
    }
    assert_int_equal(p->zero_points != NULL, q->zero_points != NULL);
    if (p->zero_points) assert_memory_equal(p->zero_points, q->zero_points, 4 * G);
}

static void test_round_trip_every_format(void **state) {
    (void)state;
    enum { N = 7 };
    trit_tensor *t[N] = {
        quantized(TRIT_QINT8, TRIT_QGROUP_CHANNEL, TRIT_QSCHEME_SYMMETRIC, 0, "a.int8"),
        quantized(TRIT_QINT4, 128, TRIT_QSCHEME_AFFINE, 0, "b.int4"),
        quantized(TRIT_QINT2, 64, TRIT_QSCHEME_SYMMETRIC, 0, "c.int2"),
        quantized(TRIT_NF4, 64, TRIT_QSCHEME_SYMMETRIC, 256, "d.nf4"),
        quantized(TRIT_F8_E4M3, TRIT_QGROUP_CHANNEL, TRIT_QSCHEME_SYMMETRIC, 0, "e.fp8"),
        quantized(TRIT_QINT4, 32, TRIT_QSCHEME_AFFINE, 16, "f.int4dq"),
        NULL,
    };
    const int64_t bshape[1] = {5};
    t[6] = trit_tensor_new(TRIT_F32, 1, bshape);
    for (int i = 0; i < 5; i++) ((float *)trit_tensor_ptr(t[6]))[i] = (float)i;
    trit_safetensors_entry e[N];
    for (int i = 0; i < N; i++) e[i] = (trit_safetensors_entry){i < 6 ? t[i]->name : "g.bias", t[i]};
    const trit_safetensors_kv meta[1] = {{"format", "test"}};
    const char *path = tfile_path("q.safetensors");
    assert_int_equal(trit_safetensors_write_quantized(path, e, N, meta, 1), TRIT_OK);
    trit_safetensors *f = trit_safetensors_open(path);
    assert_non_null(f);
    assert_string_equal(trit_safetensors_meta(f, "format"), "test");
    assert_non_null(strstr(trit_safetensors_meta(f, "quantization"), "\"d.nf4\""));
    assert_string_equal(trit_safetensors_find(f, "a.int8")->dtype_name, "I8");
    assert_string_equal(trit_safetensors_find(f, "e.fp8")->dtype_name, "F8_E4M3");
    assert_string_equal(trit_safetensors_find(f, "b.int4")->dtype_name, "U8");
    assert_non_null(trit_safetensors_find(f, "d.nf4.qscales"));
    assert_non_null(trit_safetensors_find(f, "b.int4.zero_points"));
    for (int i = 0; i < 6; i++) {
        assert_true(trit_safetensors_is_quantized(f, t[i]->name));
        trit_tensor *r = trit_safetensors_read_tensor(f, t[i]->name);
        assert_non_null(r);
        assert_same_quant(t[i], r);
        trit_tensor *da = trit_dequantize(t[i]), *db = trit_dequantize(r);
        assert_memory_equal(trit_tensor_ptr(da), trit_tensor_ptr(db), 4 * 8 * 256);
        trit_tensor_free(da), trit_tensor_free(db), trit_tensor_free(r);
    }
    assert_false(trit_safetensors_is_quantized(f, "g.bias"));
    trit_tensor *b = trit_safetensors_read_tensor(f, "g.bias");
    assert_memory_equal(trit_tensor_ptr(b), trit_tensor_ptr(t[6]), 20);
    trit_tensor_free(b);
    trit_safetensors_close(f);
    for (int i = 0; i < N; i++) trit_tensor_free(t[i]);
}

// Writes one int4 tensor's parts by hand with the map given, then tries to read it back.
static trit_status read_with_map(const char *map, bool with_scales) {
    trit_tensor *q = quantized(TRIT_QINT4, 128, TRIT_QSCHEME_SYMMETRIC, 0, "w");
    const int64_t cshape[2] = {8, 128}, G = 16;
    trit_tensor codes, scales;
    memset(&codes, 0, sizeof codes), memset(&scales, 0, sizeof scales);
    trit_tensor_init_layout(&codes, TRIT_U8, 2, cshape);
    codes.data = trit_tensor_ptr(q);
    trit_tensor_init_layout(&scales, TRIT_F32, 1, &G);
    scales.data = q->quant->scales;
    const trit_safetensors_entry e[2] = {{"w", &codes}, {"w.scales", &scales}};
    const trit_safetensors_kv kv[1] = {{"quantization", map}};
    const char *path = tfile_path("bad.safetensors");
    assert_int_equal(trit_safetensors_write(path, e, with_scales ? 2 : 1, kv, 1), TRIT_OK);
    trit_safetensors *f = trit_safetensors_open(path);
    assert_non_null(f);
    trit_tensor *r = trit_safetensors_read_tensor(f, "w");
    trit_status s = r ? TRIT_OK : TRIT_ERR_FORMAT;
    if (r) assert_same_quant(q, r);
    trit_tensor_free(r);
    trit_safetensors_close(f);
    trit_tensor_free(q);
    return s;
}

static void test_malformed_maps_refused(void **state) {
    (void)state;
    const char *good = "{\"w\":{\"dtype\":\"qint4\",\"shape\":[8,256],\"group_size\":128,\"scheme\":\"symmetric\","
                       "\"double_quant_block\":0,\"scales_mean\":0}}";
    assert_int_equal(read_with_map(good, true), TRIT_OK);
    assert_int_equal(read_with_map(good, false), TRIT_ERR_FORMAT);  // no w.scales
    assert_non_null(strstr(trit_last_error(), "w.scales"));
    const char *bad[] = {
        "[1]",
        "{\"w\":{\"dtype\":\"f32\",\"shape\":[8,256],\"group_size\":128,\"scheme\":\"symmetric\",\"double_quant_block\":0,\"scales_mean\":0}}",
        "{\"w\":{\"dtype\":\"qint4\",\"shape\":[8,255],\"group_size\":128,\"scheme\":\"symmetric\",\"double_quant_block\":0,\"scales_mean\":0}}",
        "{\"w\":{\"dtype\":\"qint4\",\"shape\":[8,256],\"group_size\":100,\"scheme\":\"symmetric\",\"double_quant_block\":0,\"scales_mean\":0}}",
        "{\"w\":{\"dtype\":\"qint4\",\"shape\":[8,256],\"group_size\":128,\"scheme\":\"odd\",\"double_quant_block\":0,\"scales_mean\":0}}",
        "{\"w\":{\"dtype\":\"qint4\",\"shape\":[8,256],\"group_size\":128,\"scheme\":\"symmetric\",\"double_quant_block\":-1,\"scales_mean\":0}}",
        "{\"w\":{\"dtype\":\"qint4\",\"shape\":[16,256],\"group_size\":128,\"scheme\":\"symmetric\",\"double_quant_block\":0,\"scales_mean\":0}}",
        "{\"w\":{\"dtype\":\"qint4\",\"shape\":[8,256],\"group_size\":64,\"scheme\":\"symmetric\",\"double_quant_block\":0,\"scales_mean\":0}}",
        "{\"w\":{\"dtype\":\"qint4\",\"shape\":[8,256],\"group_size\":128,\"scheme\":\"affine\",\"double_quant_block\":0,\"scales_mean\":0}}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) assert_int_not_equal(read_with_map(bad[i], true), TRIT_OK);
}

// trit_safetensors_check_quantized on one int4 tensor "w" (8, 256), groups of 128 (16 scales),
// with the map entry and the tensors given.
static trit_status check_with(const char *map, const char *extra, trit_dtype extra_dt, int64_t extra_n, int64_t nscales) {
    const int64_t cshape[2] = {8, 128};
    trit_tensor *codes = trit_tensor_new(TRIT_U8, 2, cshape), *scales = trit_tensor_new(TRIT_F32, 1, &nscales),
                *x = extra ? trit_tensor_new(extra_dt, 1, &extra_n) : NULL;
    const trit_safetensors_entry e[3] = {{"w", codes}, {"w.scales", scales}, {extra, x}};
    const trit_safetensors_kv kv[1] = {{"quantization", map}};
    const char *path = tfile_path("check.safetensors");
    assert_int_equal(trit_safetensors_write(path, e, extra ? 3 : 2, kv, map ? 1 : 0), TRIT_OK);
    trit_safetensors *f = trit_safetensors_open(path);
    assert_non_null(f);
    trit_clear_error();
    const trit_status s = trit_safetensors_check_quantized(f);
    trit_safetensors_close(f);
    trit_tensor_free(codes), trit_tensor_free(scales), trit_tensor_free(x);
    return s;
}

static void test_map_and_tensors_checked_both_ways(void **state) {
    (void)state;
    const char *w = "\"w\":{\"dtype\":\"qint4\",\"shape\":[8,256],\"group_size\":128,\"scheme\":\"symmetric\","
                    "\"double_quant_block\":0,\"scales_mean\":0}";
    char map[512], ghost[512];
    snprintf(map, sizeof map, "{%s}", w);
    snprintf(ghost, sizeof ghost, "{%s,\"v\":{\"dtype\":\"qint4\",\"shape\":[8,256],\"group_size\":128,"
             "\"scheme\":\"symmetric\",\"double_quant_block\":0,\"scales_mean\":0}}", w);
    assert_int_equal(check_with(map, NULL, TRIT_F32, 0, 16), TRIT_OK);
    assert_int_equal(check_with(NULL, NULL, TRIT_F32, 0, 16), TRIT_OK);  // no map: a plain file, w.scales a name
    // A map entry whose tensor is absent.
    assert_int_equal(check_with(ghost, NULL, TRIT_F32, 0, 16), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "the quantization map lists 'v' but the file lacks it"));
    // Scales of the wrong length or dtype.
    assert_int_equal(check_with(map, NULL, TRIT_F32, 0, 15), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "calls for 'w.scales' as F32 [16], but the file's is F32 [15]"));
    assert_int_equal(check_with(map, "w.qscales", TRIT_I8, 16, 16), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "'w.qscales' is beside quantized 'w', whose map entry (qint4 [8, 256], "
                                              "groups of 128, symmetric) calls for no .qscales tensor"));
    // A tensor merely named like a side tensor of a tensor the map does not list is left alone.
    assert_int_equal(check_with(map, "v.zero_points", TRIT_F32, 16, 16), TRIT_OK);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip_every_format),
        cmocka_unit_test(test_malformed_maps_refused),
        cmocka_unit_test(test_map_and_tensors_checked_both_ways),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
