// The peak loops (kernels/peak.h) do the work they count: each row of the kernel table the CPU
// can run, called for a few passes, returns iters x chains x lanes x 2 operations and leaves in
// its sink the sum its accumulators reach, worked out here from the loop's constants; the
// streaming sums add a buffer exactly. Rows the CPU lacks are skipped and named (census).
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "kernel_census.h"
#include "kernels/kernel_table.h"
#include "kernels/peak.h"

// What a loop must return and leave in its sink after `iters` passes.
typedef struct expect {
    const char *name;
    int64_t ops_per_pass;
    double (*sink)(int64_t iters);
} expect;

// fp32: a = a/2 + 1 from a = chain index, 12 chains x lanes; after n passes a_i = 2 + (i - 2) 2^-n.
static double fma_sum(int64_t n, int chains, int lanes) {
    double s = 0;
    for (int i = 0; i < chains; i++) s += lanes * (2.0 + (i - 2.0) * ldexp(1.0, -(int)n));
    return s;
}
static double sink_fma_zmm(int64_t n) { return fma_sum(n, 12, 16); }
static double sink_fma_ymm(int64_t n) { return fma_sum(n, 12, 8); }
static double sink_fma_ref(int64_t n) {  // 32 lanes, lane j starting at j
    double s = 0;
    for (int j = 0; j < 32; j++) s += 2.0 + (j - 2.0) * ldexp(1.0, -(int)n);
    return s;
}
// bf16: each lane adds two products of 2^-6 x 2^-6 a pass; 12 chains of 16 lanes start at i.
static double sink_bf16_zmm(int64_t n) { return 16 * 66.0 + 12 * 16 * n * 2 * 0x1p-12; }
static double sink_bf16_ref(int64_t n) { return 32 * n * 2 * 0x1p-12; }
// int8: vpdpbusd adds four products of 1 x 1 a lane; 12 chains of 16 lanes start at i.
static double sink_int8_zmm(int64_t n) { return 16 * 66.0 + 12 * 16 * 4.0 * n; }
// AVX2: lane 0 of the sum of 8 chains, each adding 2 pairs of 1 x 1 products a pass.
static double sink_int8_ymm(int64_t n) { return 8 * 4.0 * n; }
static double sink_int8_ref(int64_t n) { return 32 * 4.0 * n; }

static const expect expects[] = {
    {"trit_kernel_peak_fma_avx512", 12 * 16 * 2, sink_fma_zmm},
    {"trit_kernel_peak_fma_avx2", 12 * 8 * 2, sink_fma_ymm},
    {"trit_kernel_peak_fma_ref", 32 * 2, sink_fma_ref},
    {"trit_kernel_peak_bf16_avx512bf16", 12 * 32 * 2, sink_bf16_zmm},
    {"trit_kernel_peak_bf16_ref", 32 * 2 * 2, sink_bf16_ref},
    {"trit_kernel_peak_int8_avx512vnni", 12 * 64 * 2, sink_int8_zmm},
    {"trit_kernel_peak_int8_avx2", 8 * 32 * 2, sink_int8_ymm},
    {"trit_kernel_peak_int8_ref", 32 * 4 * 2, sink_int8_ref},
};

static const expect *find_expect(const char *name) {
    for (size_t i = 0; i < sizeof expects / sizeof expects[0]; i++)
        if (strcmp(expects[i].name, name) == 0) return &expects[i];
    return NULL;
}

static void test_peak_loops(void **state) {
    (void)state;
    int n;
    const trit_kernel_entry *t = trit_kernel_table(&n);
    census c = {.what = "peak loops"};
    const uint32_t have = census_level_features();
    int listed = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].id != TRIT_KERNEL_PEAK) continue;
        listed++;
        const expect *e = find_expect(t[i].name);
        if (!e) fprintf(stderr, "no expectation for %s\n", t[i].name);
        assert_non_null(e);
        if (!census_count(&c, t[i].name, t[i].needs, have)) continue;
        // 5 passes: 2^-5 keeps the fp32 sums exact; 1000: the integer sums, past any start-up.
        const int64_t passes[] = {5, 1000};
        for (int k = 0; k < 2; k++) {
            float sink = NAN;
            const int64_t ops = ((trit_kernel_peak_fn *)t[i].fn)(passes[k], &sink);
            assert_int_equal(ops, passes[k] * e->ops_per_pass);
            const double want = e->sink(passes[k]);
            // fp32 sums of 192 to 400 small values: a few roundings of 2^-24 each.
            if (fabs(sink - want) > 1e-6 * fabs(want) + 1e-6) fprintf(stderr, "%s: sink %.9g, want %.9g\n", t[i].name, sink, want);
            assert_true(fabs(sink - want) <= 1e-6 * fabs(want) + 1e-6);
        }
        census_ran(&c);
    }
    assert_int_equal(listed, (int)(sizeof expects / sizeof expects[0]));
    census_check(&c);
}

// Small integers, so every order of addition gives the same float.
static void test_read_sums(void **state) {
    (void)state;
    enum { N = 1031 + 64 };
    static float x[N] __attribute__((aligned(64)));
    double want[3] = {0};
    const int64_t lens[3] = {0, 1031, N};
    for (int64_t i = 0; i < N; i++) x[i] = (float)(i % 7) - 3.0f + (i == 1030 ? 1000.0f : 0.0f);
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < lens[k]; i++) want[k] += x[i];
    int n;
    const trit_kernel_entry *t = trit_kernel_table(&n);
    census c = {.what = "read loops"};
    for (int i = 0; i < n; i++) {
        if (t[i].id != TRIT_KERNEL_READ || !census_count(&c, t[i].name, t[i].needs, census_level_features())) continue;
        for (int k = 0; k < 3; k++) assert_true(((trit_kernel_read_fn *)t[i].fn)(x, lens[k]) == (float)want[k]);
        census_ran(&c);
    }
    census_check(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peak_loops),
        cmocka_unit_test(test_read_sums),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
