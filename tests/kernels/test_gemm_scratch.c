// GEMM packing scratch: each packed kernel file this CPU runs asks for exactly the buffer its
// published blocking gives (kernels/gemm_blocking.h), with an f32 C and with a 16-bit C, as the
// calling thread's held bytes show; and the per-thread plan a memory report uses
// (kernels/gemm_scratch.h) follows the kernel table's choices for each compute policy. A file
// the CPU cannot run is skipped with a message.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_census.h"
#include "kernels/gemm.h"
#include "kernels/gemm_blocking.h"
#include "kernels/gemm_lowp.h"
#include "kernels/gemm_scratch.h"
#include "kernels/thread_buffer.h"
#include "trit/base.h"

// One packed kernel file: its blocking, its f32 GEMM (NULL for the bf16 file, which has none)
// and its mixed core, and the feature it needs.
typedef struct kernel_file {
    const trit_gemm_blocking *b;
    trit_kernel_gemm_f32_fn *f32;
    trit_kernel_gemm_mixed_fn *core;
    uint32_t needs;
} kernel_file;

static const kernel_file FILES[] = {
    {&trit_gemm_blocking_avx2, trit_kernel_gemm_avx2_f32, trit_kernel_gemm_mixed_avx2_core, TRIT_FEAT_AVX2},
    {&trit_gemm_blocking_avx512, trit_kernel_gemm_avx512_f32, trit_kernel_gemm_mixed_avx512_core, TRIT_FEAT_AVX512},
    {&trit_gemm_blocking_avx512bf16, NULL, trit_kernel_gemm_mixed_avx512bf16_core,
     TRIT_FEAT_AVX512 | TRIT_FEAT_AVX512_BF16},
};

typedef struct call {
    const kernel_file *f;
    int64_t M, N, K;
    bool c16;
    size_t held;  // out: the thread's buffer bytes after the call
} call;

// One product on a fresh thread (so its buffers start empty) running alone.
static void *run_call(void *arg) {
    call *c = arg;
    omp_set_num_threads(1);
    const size_t na = (size_t)(c->M * c->K), nb = (size_t)(c->N * c->K), nc = (size_t)(c->M * c->N);
    if (c->c16 || !c->f->f32) {
        uint16_t *a = calloc(na, 2), *b = calloc(nb, 2), *out = calloc(nc, 4);
        assert_true(a && b && out);
        const trit_gemm_operand A = {a, TRIT_BF16, c->K, false}, B = {b, TRIT_BF16, c->K, true};
        c->f->core(c->M, c->N, c->K, &A, &B, out, c->c16 ? TRIT_BF16 : TRIT_F32, c->N, false, TRIT_MATMUL_HIGHEST,
                   NULL);
        free(a), free(b), free(out);
    } else {
        float *a = calloc(na, 4), *b = calloc(nb, 4), *out = calloc(nc, 4);
        assert_true(a && b && out);
        // B stored (N, K): always packed, never read in place.
        c->f->f32(false, true, c->M, c->N, c->K, a, c->K, b, c->K, out, c->N, false);
        free(a), free(b), free(out);
    }
    c->held = trit_thread_buffer_bytes();
    return NULL;
}

static size_t held_after(const kernel_file *f, int64_t M, int64_t N, int64_t K, bool c16) {
    call c = {f, M, N, K, c16, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_call, &c), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    return c.held;
}

static void test_kernels_ask_for_what_their_blocking_says(void **state) {
    (void)state;
    const uint32_t have = trit_cpu_detected_features();
    census cen = {.what = "GEMM kernel files"};
    for (size_t i = 0; i < sizeof FILES / sizeof FILES[0]; i++) {
        const kernel_file *f = &FILES[i];
        census_count(&cen, f->b->file, f->needs, census_cpu_features());
        if ((f->needs & have) != f->needs) continue;
        census_ran(&cen);
        const trit_gemm_blocking *b = f->b;
        // Ragged shapes, and the largest request (M >= MC, N >= NC, K = KC).
        const int64_t shapes[][3] = {{7, 40, 300}, {b->mc + 3, 2 * b->nr + 1, b->kc + 1}, {b->mc, b->nc, b->kc}};
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
            const size_t want = 4 * (size_t)trit_gemm_pack_floats(b, M, N, K);
            const size_t got = held_after(f, M, N, K, false);
            if (got != want)
                fail_msg("%s f32 C (%lld, %lld, %lld): holds %zu bytes, its blocking says %zu", b->file, (long long)M,
                         (long long)N, (long long)K, got, want);
            const size_t want16 = 4 * (size_t)trit_gemm_pack_c16_floats(b, M, N, K);
            const size_t got16 = held_after(f, M, N, K, true);
            if (got16 != want16)
                fail_msg("%s bf16 C (%lld, %lld, %lld): holds %zu bytes, its blocking says %zu", b->file, (long long)M,
                         (long long)N, (long long)K, got16, want16);
        }
        assert_int_equal(held_after(f, b->mc, b->nc, b->kc, false), trit_gemm_pack_bytes_max(b));
    }
    census_check(&cen);
}

static size_t plan(trit_dtype act, trit_matmul_precision prec, const int64_t *shapes, int n, bool from_f32) {
    const trit_gemm_workload w = {act, prec, shapes, n, from_f32};
    trit_gemm_scratch s;
    assert_int_equal(trit_gemm_scratch_plan(&w, &s), TRIT_OK);
    size_t sum = 0;
    for (int i = 0; i < s.n; i++) sum += s.buf[i].bytes;
    assert_int_equal(sum, s.bytes);
    return s.bytes;
}

// The plan at each level this CPU has, against the blockings: nothing on the portable kernels;
// on AVX2 one buffer, the larger of the f32-C bound and the 16-bit C requests; the AVX-512 file
// likewise, plus the AVX512-BF16 file's own where bf16 products run there.
static void test_plan_follows_the_table(void **state) {
    (void)state;
    const trit_cpu_isa saved = trit_cpu_level();
    const int64_t small[2] = {48, 16}, deep[2] = {64, 100000}, gpt2[4] = {2304, 768, 768, 3072};
    assert_int_equal(trit_cpu_set_level(TRIT_CPU_REF), TRIT_OK);
    assert_int_equal(plan(TRIT_F32, TRIT_MATMUL_HIGHEST, NULL, 0, false), 0);
    assert_int_equal(plan(TRIT_BF16, TRIT_MATMUL_HIGHEST, gpt2, 2, false), 0);
    // By the CPU's own flags: a level they allow must be settable (kernel_census.h).
    const uint32_t have = census_cpu_features();
    if (have & TRIT_FEAT_AVX2) {
        const trit_gemm_blocking *b = &trit_gemm_blocking_avx2;
        assert_int_equal(trit_cpu_set_level(TRIT_CPU_AVX2), TRIT_OK);
        const size_t f32 = trit_gemm_pack_bytes_max(b);
        assert_int_equal(f32, (size_t)256 * (4096 + 144) * 4);  // KC x (NC + MC) floats
        assert_int_equal(plan(TRIT_F32, TRIT_MATMUL_HIGHEST, NULL, 0, false), f32);
        assert_int_equal(plan(TRIT_BF16, TRIT_MATMUL_HIGHEST, small, 1, false), f32);
        // B packed for K = 100000 exceeds the f32-C bound: the buffer grows to it.
        const size_t d = 4 * (size_t)trit_gemm_pack_c16_floats(b, b->mc, 64, 100000);
        assert_true(d > f32);
        assert_int_equal(plan(TRIT_F16, TRIT_MATMUL_HIGHEST, deep, 1, false), d);
        assert_int_equal(plan(TRIT_F32, TRIT_MATMUL_MEDIUM, deep, 1, false), f32);  // f32 C only
        // A 16-bit C from an f32 operand at HIGH adds gemm_mixed.c's 64 rows of N floats.
        assert_int_equal(plan(TRIT_BF16, TRIT_MATMUL_HIGH, small, 1, true), f32 + 64 * 48 * 4);
    } else {
        printf("  no AVX2 on this CPU: its plan not checked\n");
    }
    if (have & TRIT_FEAT_AVX512) {
        const trit_gemm_blocking *b = &trit_gemm_blocking_avx512, *h = &trit_gemm_blocking_avx512bf16;
        assert_int_equal(trit_cpu_set_level(TRIT_CPU_AVX512), TRIT_OK);
        const size_t f32 = trit_gemm_pack_bytes_max(b);
        size_t c16 = 0;
        const trit_gemm_blocking *c16_file = have & TRIT_FEAT_AVX512_BF16 ? h : b;
        for (int i = 0; i < 2; i++) {
            const size_t r = 4 * (size_t)trit_gemm_pack_c16_floats(c16_file, c16_file->mc, gpt2[2 * i], gpt2[2 * i + 1]);
            c16 = r > c16 ? r : c16;
        }
        assert_int_equal(plan(TRIT_F32, TRIT_MATMUL_HIGHEST, gpt2, 2, false), f32);
        if (have & TRIT_FEAT_AVX512_BF16) {
            const size_t hf32 = trit_gemm_pack_bytes_max(h);
            assert_int_equal(plan(TRIT_BF16, TRIT_MATMUL_HIGHEST, gpt2, 2, false), f32 + (c16 > hf32 ? c16 : hf32));
            // f16 operands run on the AVX-512 file, 16-bit C included.
            size_t f16 = f32;
            for (int i = 0; i < 2; i++) {
                const size_t r = 4 * (size_t)trit_gemm_pack_c16_floats(b, b->mc, gpt2[2 * i], gpt2[2 * i + 1]);
                f16 = r > f16 ? r : f16;
            }
            assert_int_equal(plan(TRIT_F16, TRIT_MATMUL_HIGHEST, gpt2, 2, false), f16 + hf32);
        } else {
            assert_int_equal(plan(TRIT_BF16, TRIT_MATMUL_HIGHEST, gpt2, 2, false), c16 > f32 ? c16 : f32);
        }
    } else {
        printf("  no AVX-512 on this CPU: its plan not checked\n");
    }
    assert_int_equal(trit_cpu_set_level(saved), TRIT_OK);
    trit_gemm_scratch s;
    assert_int_equal(trit_gemm_scratch_plan(NULL, &s), TRIT_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_ask_for_what_their_blocking_says),
        cmocka_unit_test(test_plan_follows_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
