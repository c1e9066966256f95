// The few-row product used by decoding: every usable GEMV row of the kernel table against the
// portable GEMM on odd sizes, all transposes, with and without accumulation; 1 and 2 threads
// give the same bits.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/gemm.h"
#include "kernel_census.h"
#include "kernels/kernel_table.h"
#include "trit/trit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_rows_match_reference(void **state) {
    (void)state;
    int nt, tested = 0;
    census cen = {.what = "GEMV kernels"};
    const trit_kernel_entry *t = trit_kernel_table(&nt);
    const int64_t Ms[3] = {1, 2, 4}, Ns[3] = {1, 63, 257}, Ks[3] = {1, 17, 770};
    float *A = malloc(sizeof(float) * 4 * 770), *B = malloc(sizeof(float) * 257 * 770);
    float *want = malloc(sizeof(float) * 4 * 257), *got = malloc(sizeof(float) * 4 * 257);
    trit_rng_fill_uniform(A, 4 * 770, 1, 1, 0, -1, 1);
    trit_rng_fill_uniform(B, 257 * 770, 1, 2, 0, -1, 1);
    for (int i = 0; i < nt; i++) {
        if (t[i].id != TRIT_KERNEL_GEMV) continue;
        census_count(&cen, t[i].name, t[i].needs, census_level_features());
        if (t[i].needs & ~trit_cpu_usable_features()) continue;
        trit_kernel_gemm_f32_fn *fn = (trit_kernel_gemm_f32_fn *)t[i].fn;
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 3; c++)
                    for (int tr = 0; tr < 8; tr++) {
                        const int64_t M = Ms[a], N = Ns[b], K = Ks[c];
                        const bool ta = tr & 1, tb = tr & 2, acc = tr & 4;
                        const int64_t lda = ta ? M : K, ldb = tb ? K : N;
                        for (int64_t j = 0; j < M * N; j++) want[j] = got[j] = (float)(j % 7) - 3.0f;
                        trit_kernel_gemm_ref_f32(ta, tb, M, N, K, A, lda, B, ldb, want, N, acc);
                        fn(ta, tb, M, N, K, A, lda, B, ldb, got, N, acc);
                        for (int64_t j = 0; j < M * N; j++)
                            if (!(fabsf(got[j] - want[j]) <= 1e-5f * (float)K + 1e-6f))
                                fail_msg("%s M=%lld N=%lld K=%lld ta=%d tb=%d acc=%d: [%lld] %g vs %g", t[i].name,
                                         (long long)M, (long long)N, (long long)K, ta, tb, acc, (long long)j, got[j],
                                         want[j]);
                    }
        tested++;
        census_ran(&cen);
    }
    census_check(&cen);
    assert_true(tested >= 1);
    trit_threads_set(1);
    trit_kernel_gemv_f32(false, true, 1, 257, 770, A, 770, B, 770, want, 257, false);
    trit_threads_set(2);
    trit_kernel_gemv_f32(false, true, 1, 257, 770, A, 770, B, 770, got, 257, false);
    trit_threads_set(0);
    assert_memory_equal(want, got, sizeof(float) * 257);
    free(A), free(B), free(want), free(got);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_rows_match_reference)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
