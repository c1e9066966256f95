// The decoding kernel of quantized weights (kernels/dequant.h) against the dtype table's row
// converters, its definition: bit for bit, for every quantized dtype, over whole tensors and over
// runs that start and end inside groups and rows (at block boundaries), with NaN and Inf codes
// of fp8 and all 256 byte values of every packed format.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/dequant.h"
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

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_matches_converters)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
