// The kernel table: every key has a portable row, lookups follow the usable features (and so
// TRIT_CPU / trit_cpu_set_level), a call site's remembered choice follows a level change, and a
// key without a row gives an error (or, for a key fixed in the code, the portable kernel), never
// a NULL call.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/gemm.h"
#include "kernels/kernel_table.h"
#include "kernels/qgemm.h"
#include "kernels/qgemm_panel.h"
#include "trit/trit.h"

#include <stdio.h>
#include <string.h>

static void test_every_key_has_a_portable_row(void **state) {
    (void)state;
    int n;
    const trit_kernel_entry *t = trit_kernel_table(&n);
    assert_true(n > 0);
    for (int i = 0; i < n; i++) {
        bool portable = false;
        for (int j = 0; j < n; j++)
            portable |= t[j].id == t[i].id && t[j].in == t[i].in && t[j].out == t[i].out && t[j].needs == 0;
        if (!portable) fprintf(stderr, "no portable row for %s\n", t[i].name);
        assert_true(portable);
        assert_non_null(t[i].fn);
    }
    assert_null(trit_kernel_find(TRIT_KERNEL_GEMM, TRIT_I8, TRIT_F32));
    assert_non_null(strstr(trit_last_error(), "no kernel"));
}

static void test_usable_features_follow_the_level(void **state) {
    (void)state;
    const trit_cpu_isa saved = trit_cpu_level();
    const uint32_t det = trit_cpu_detected_features();
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_REF), TRIT_OK);
    assert_int_equal(trit_cpu_usable_features(), 0);
    assert_string_equal(trit_kernel_find(TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32)->name, "trit_kernel_gemm_ref_f32");
    if (det & TRIT_FEAT_AVX2) {
        assert_int_equal(trit_cpu_set_level(TRIT_CPU_AVX2), TRIT_OK);
        assert_int_equal(trit_cpu_usable_features(), TRIT_FEAT_AVX2);
        assert_string_equal(trit_kernel_find(TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32)->name, "trit_kernel_gemm_avx2_f32");
        // Row kernels and flash tiles have AVX2 rows of their own.
        assert_string_equal(trit_kernel_find(TRIT_KERNEL_NORM_FWD, TRIT_F32, TRIT_F32)->name,
                            "trit_kernel_norm_fwd_avx2");
        assert_string_equal(trit_kernel_find(TRIT_KERNEL_FLASH_ACCUM, TRIT_F32, TRIT_F32)->name,
                            "trit_kernel_flash_accum_avx2_f32");
    } else {
        printf("  no AVX2 on this CPU: avx2 rows skipped\n");
    }
    if (det & TRIT_FEAT_AVX512) {
        assert_int_equal(trit_cpu_set_level(TRIT_CPU_AVX512), TRIT_OK);
        const uint32_t u = trit_cpu_usable_features();
        assert_true(u & TRIT_FEAT_AVX512);
        assert_int_equal(u & (TRIT_FEAT_AMX_BF16 | TRIT_FEAT_AMX_INT8), 0);
        assert_int_equal(u & TRIT_FEAT_AVX512_BF16, det & TRIT_FEAT_AVX512_BF16);
        assert_string_equal(trit_kernel_find(TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32)->name,
                            "trit_kernel_gemm_avx512_f32");
    } else {
        printf("  no AVX-512 on this CPU: avx512 rows skipped\n");
    }
    assert_int_equal(trit_cpu_set_level(saved), TRIT_OK);
}

// A remembered choice is renewed when the usable features change.
static void test_slot_follows_level_changes(void **state) {
    (void)state;
    const trit_cpu_isa saved = trit_cpu_level();
    static trit_kernel_slot slot;
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_REF), TRIT_OK);
    const trit_kernel_entry *a = trit_kernel_pick(&slot, TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32);
    assert_ptr_equal(a, trit_kernel_pick(&slot, TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32));
    assert_int_equal(trit_cpu_set_level(saved), TRIT_OK);
    const trit_kernel_entry *b = trit_kernel_pick(&slot, TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32);
    assert_ptr_equal(b, trit_kernel_find(TRIT_KERNEL_GEMM, TRIT_F32, TRIT_F32));
    if (saved != TRIT_CPU_REF) assert_ptr_not_equal(a, b);
}

// A (kernel, dtype) key the table has no row for: the lookup names it and the keys it has, the
// call site remembers the miss (and still says why), and a fallback is only taken when given.
static void test_key_without_a_row(void **state) {
    (void)state;
    static trit_kernel_slot slot, slot_or;
    for (int round = 0; round < 2; round++) {  // the second time from the slot's memory
        trit_clear_error();
        assert_null(TRIT_KERNEL_FN(trit_kernel_qpanel_fn, &slot, TRIT_KERNEL_QPANEL, TRIT_NF4, TRIT_F32));
        assert_non_null(strstr(trit_last_error(), "no kernel qpanel for nf4 -> f32"));
        assert_non_null(strstr(trit_last_error(), "qint8 -> f32, qint4 -> f32, ternary -> f32"));
    }
    trit_log_level saved = trit_log_get_level();
    trit_log_set_level(TRIT_LOG_ERROR);  // the fallback's warning is expected here
    trit_kernel_gemm_f32_fn *fn =
        TRIT_KERNEL_FN_OR(trit_kernel_gemm_f32_fn, &slot_or, TRIT_KERNEL_GEMM, TRIT_I8, TRIT_F32, trit_kernel_gemm_ref_f32);
    trit_log_set_level(saved);
    assert_ptr_equal(fn, trit_kernel_gemm_ref_f32);
    assert_string_equal(trit_kernel_id_name(TRIT_KERNEL_WGEMM), "wgemm");
    assert_string_equal(trit_kernel_id_name((trit_kernel_id)99), "?");
}

// The entry points keyed by a weight's dtype refuse a dtype without kernels and write nothing
// (the panel entry point called NULL here, and the others ran the ternary or e4m3 kernel).
static void test_entry_points_refuse_a_dtype_without_kernels(void **state) {
    (void)state;
    enum { M = 2, N = 16, K = 64 };
    static uint8_t codes[N * K];
    static float scales[N], x[M * K], y[M * N];
    static int8_t q[M * K];
    static int32_t gsum[M];
    float xs[M] = {1, 1};
    const trit_qact a = {q, xs, gsum};
    for (int i = 0; i < M * N; i++) y[i] = 7.0f;
    const trit_qpanels panels = {.wdt = TRIT_NF4, .N = N, .K = K, .G = K, .panels = 1, .panel_bytes = N * K / 2,
                                 .codes = codes, .scales = scales};
    trit_clear_error();
    assert_int_equal(trit_kernel_qgemm_panels(&panels, M, &a, y, N, NULL), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "nf4 have no panel kernel"));
    assert_int_equal(trit_kernel_qgemm(TRIT_NF4, M, N, K, K, &a, codes, scales, y, N), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "nf4 have no integer kernel"));
    assert_int_equal(trit_kernel_fp8_gemm(TRIT_QINT8, M, N, K, K, x, codes, scales, y, N), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "qint8 are not fp8"));
    for (int i = 0; i < M * N; i++) assert_true(y[i] == 7.0f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_key_has_a_portable_row),
        cmocka_unit_test(test_usable_features_follow_the_level),
        cmocka_unit_test(test_slot_follows_level_changes),
        cmocka_unit_test(test_key_without_a_row),
        cmocka_unit_test(test_entry_points_refuse_a_dtype_without_kernels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
