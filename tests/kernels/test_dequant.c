// The decoding kernel of quantized weights (kernels/dequant.h) against the dtype table's row
// converters, its definition: bit for bit, for every quantized dtype, over whole tensors and over
// runs that start and end inside groups and rows (at block boundaries), with NaN and Inf codes
// of fp8 and all 256 byte values of every packed format.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernel_census.h"
#include "kernels/dequant.h"
#include "kernels/kernel_table.h"
#include "qweight_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const qw_format FORMATS[] = {
    {TRIT_QINT8, 32, false, 0},    {TRIT_QINT8, TRIT_QGROUP_CHANNEL, true, 16}, {TRIT_QINT4, 64, true, 16},
    {TRIT_QINT4, 32, false, 0},    {TRIT_QINT2, 32, true, 0},                   {TRIT_QINT2, 64, false, 16},
    {TRIT_NF4, 64, false, 256},    {TRIT_F8_E4M3, 32, false, 0},                {TRIT_F8_E5M2, TRIT_QGROUP_TENSOR, false, 16},
    {TRIT_TERNARY, 64, false, 0},  {TRIT_TERNARY_B3, 64, false, 16},            {TRIT_TERNARY_B3, TRIT_QGROUP_TENSOR, false, 0},
    {TRIT_Q8_0, 0, false, 0},      {TRIT_Q4_0, 0, false, 0},                    {TRIT_TQ2_0, 0, false, 0},
    {TRIT_TQ1_0, 0, false, 0},
};

static void test_matches_converters(void **state) {
    (void)state;
    const int64_t N = 6, K = 768;  // 768: a multiple of every block and group here
    for (size_t f = 0; f < sizeof FORMATS / sizeof FORMATS[0]; f++) {
        char name[96];
        qw_format_name(&FORMATS[f], name, sizeof name);
        trit_tensor *wd, *wq = qw_make(&FORMATS[f], N, K, 80 + f, &wd);
        const trit_dtype dt = wq->dtype;
        const int64_t blk = trit_dtype_block(dt), n = N * K;
        // Every byte value (NaN and Inf codes of fp8, all code pairs of packed formats, base-3
        // bytes past 242) in the codes of side-scaled dtypes; blocked ones keep their f16 scales.
        if (dt >= TRIT_QINT8 && dt <= TRIT_TERNARY_B3) {
            uint8_t *p = wq->data;
            for (size_t i = 0; i < trit_tensor_nbytes(wq); i++) p[i] = (uint8_t)(i * 97 + 13);
        }
        float *ref = malloc(sizeof(float) * (size_t)n), *got = malloc(sizeof(float) * (size_t)n);
        trit_dtype_traits_of(dt)->to_f32(ref, wq->data, n, wq->quant, 0);
        trit_kernel_dequant_f32(dt, got, wq->data, n, wq->quant, 0);
        if (memcmp(ref, got, sizeof(float) * (size_t)n) != 0) fail_msg("%s: whole tensor differs", name);
        // Runs from inside one row (and group) to inside another.
        for (int64_t start = 0; start < n; start += blk * 37) {
            const int64_t len = (n - start) / blk * blk < blk * 53 ? (n - start) / blk * blk : blk * 53;
            memset(got, 0xff, sizeof(float) * (size_t)len);
            trit_kernel_dequant_f32(dt, got, (const char *)wq->data + trit_dtype_nbytes(dt, start), len, wq->quant, start);
            if (memcmp(ref + start, got, sizeof(float) * (size_t)len) != 0)
                fail_msg("%s: run [%lld, %lld) differs", name, (long long)start, (long long)(start + len));
        }
        free(ref);
        free(got);
        trit_tensor_free(wq);
        trit_tensor_free(wd);
    }
}

// Every run kernel of NF4 and FP8 this CPU has (not only the one the dispatch picks), on every
// byte value and on lengths with ragged tails, against the converter of a single group.
static void test_every_run_kernel(void **state) {
    (void)state;
    enum { N = 64 * 9 + 30 };  // whole vectors of every width, then a tail
    static uint8_t codes[N];
    static float ref[N], got[N];
    for (int i = 0; i < N; i++) codes[i] = (uint8_t)(i * 97 + 13);
    int n;
    const trit_kernel_entry *t = trit_kernel_table(&n);
    census c = {.what = "dequant runs"};
    for (int e = 0; e < n; e++) {
        if (t[e].id != TRIT_KERNEL_DEQUANT || !census_count(&c, t[e].name, t[e].needs, census_level_features())) continue;
        const trit_dtype dt = t[e].in;
        const float s = 0.3712f;
        trit_quant_info *q = trit_quant_info_new(N, N, false, 0);
        assert_non_null(q);
        q->scales[0] = s;
        trit_dtype_traits_of(dt)->to_f32(ref, codes, N, q, 0);
        float tab[16];
        for (int k = 0; k < 16; k++) tab[k] = trit_nf4_values[k] * s;
        const float *table = dt == TRIT_NF4 ? tab : trit_fp8_table(dt == TRIT_F8_E4M3 ? TRIT_FP8_E4M3 : TRIT_FP8_E5M2);
        for (int len = dt == TRIT_NF4 ? 2 : 1; len <= N; len += len < 40 ? (dt == TRIT_NF4 ? 2 : 1) : 61) {
            memset(got, 0xff, sizeof got);
            ((trit_kernel_dequant_fn *)t[e].fn)(dt, got, codes, len, s, table);
            if (memcmp(ref, got, sizeof(float) * (size_t)len) != 0) fail_msg("%s on %s: %d values differ", t[e].name, trit_dtype_name(dt), len);
            assert_true(len == N || ((const uint32_t *)got)[len] == 0xffffffffu);  // nothing past the run
        }
        trit_quant_info_free(q);
        census_ran(&c);
    }
    census_check(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_matches_converters), cmocka_unit_test(test_every_run_kernel)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
