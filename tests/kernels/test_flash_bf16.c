// Flash-attention bf16 pair kernels (kernels/flash_bf16.h), where the CPU has them: the pack
// kernels bit for bit against what their contract says (odd row counts, widths and pair counts
// that are not multiples of 16, padding lanes zero, f32 rounded as trit_f32_to_bf16 rounds), and
// the two products against sums in double of the same bf16 values, with row counts around the
// 6-row register tiles, head sizes spanning one or two 64-column chunks, both coefficient
// layouts, rowscale and accumulate on and off, and columns past the head left untouched.
// Tolerance: 1e-5 of the sum of |terms| (summation order), products of bf16 being exact in f32.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "kernels/flash_bf16.h"
#include "trit/base.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define W TRIT_FLASH_W
#define SENTINEL 1234.5f

static const trit_flash_bf16_kernels *kernels(void) {
    const trit_flash_bf16_kernels *kn = trit_kernel_flash_bf16();
    if (!kn) {
        print_message("skipped: this CPU has no AVX512-BF16 (or TRIT_CPU withholds it), so no bf16 pair kernels run\n");
        skip();
    }
    return kn;
}

static uint64_t lcg = 88172645463325252ull;
static float uniform(float lo, float hi) {
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (float)((lcg >> 40) / (double)(1ull << 24));
}
// A random bf16 value in [-2, 2): its bits.
static uint16_t rand_bf16(void) { return trit_f32_to_bf16(uniform(-2.0f, 2.0f)); }

static uint32_t *rand_words(int64_t n) {
    uint32_t *w = malloc(sizeof *w * (size_t)n);
    assert_non_null(w);
    for (int64_t i = 0; i < n; i++) w[i] = (uint32_t)rand_bf16() | (uint32_t)rand_bf16() << 16;
    return w;
}

static double lo_of(uint32_t w) { return trit_bf16_to_f32((uint16_t)(w & 0xffff)); }
static double hi_of(uint32_t w) { return trit_bf16_to_f32((uint16_t)(w >> 16)); }

static void test_pair_rows(void **state) {
    (void)state;
    const trit_flash_bf16_kernels *kn = kernels();
    const int64_t ns[] = {1, 5, 8}, ws[] = {3, 16, 40};
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) {
            const int64_t n = ns[a], w = ws[b], ld = w + 7, pairs = (n + 1) / 2;
            uint16_t *s16 = malloc(sizeof *s16 * (size_t)(n * ld));
            float *s32 = malloc(sizeof *s32 * (size_t)(n * ld));
            uint32_t *d = malloc(sizeof *d * (size_t)(pairs * w));
            assert_true(s16 && s32 && d);
            for (int64_t i = 0; i < n * ld; i++) s16[i] = rand_bf16(), s32[i] = uniform(-3.0f, 3.0f);
            for (int dt = 0; dt < 2; dt++) {
                kn->pair_rows(d, dt ? (const void *)s32 : s16, dt ? TRIT_F32 : TRIT_BF16, ld, n, w);
                for (int64_t p = 0; p < pairs; p++)
                    for (int64_t c = 0; c < w; c++) {
                        uint32_t want = 0;
                        for (int64_t h = 0; h < 2 && 2 * p + h < n; h++) {
                            const int64_t at = (2 * p + h) * ld + c;
                            want |= (uint32_t)(dt ? trit_f32_to_bf16(s32[at]) : s16[at]) << (16 * h);
                        }
                        if (d[p * w + c] != want)
                            fail_msg("pair_rows %s n=%lld w=%lld: word (%lld, %lld) is %08x, not %08x", dt ? "f32" : "bf16",
                                     (long long)n, (long long)w, (long long)p, (long long)c, d[p * w + c], want);
                    }
            }
            free(s16), free(s32), free(d);
        }
}

static void test_transpose_and_round(void **state) {
    (void)state;
    const trit_flash_bf16_kernels *kn = kernels();
    const int64_t ns[] = {1, 17, 50, W}, hps[] = {4, 16, 20};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 3; b++) {
            const int64_t n = ns[a], hp = hps[b], ldw = hp + 5;
            uint32_t *src = rand_words(n * ldw), *dst = malloc(sizeof *dst * (size_t)(hp * W));
            assert_non_null(dst);
            kn->transpose(dst, src, ldw, n, hp);
            for (int64_t c = 0; c < hp; c++)
                for (int64_t i = 0; i < W; i++) {
                    const uint32_t want = i < n ? src[i * ldw + c] : 0;
                    if (dst[c * W + i] != want)
                        fail_msg("transpose n=%lld hp=%lld: (%lld, %lld) is %08x, not %08x", (long long)n, (long long)hp,
                                 (long long)c, (long long)i, dst[c * W + i], want);
                }
            free(src), free(dst);
        }
    float x[37];
    uint16_t y[40];
    for (int i = 0; i < 37; i++) x[i] = uniform(-100.0f, 100.0f);
    x[3] = 0.0f, x[4] = -0.0f, x[5] = 1.0f + 1.0f / 256;  // a tie: to even
    for (int i = 0; i < 40; i++) y[i] = 0xbeef;
    kn->round(y, x, 37);
    for (int i = 0; i < 37; i++) assert_int_equal(y[i], trit_f32_to_bf16(x[i]));
    for (int i = 37; i < 40; i++) assert_int_equal(y[i], 0xbeef);
}

static void test_scores(void **state) {
    (void)state;
    const trit_flash_bf16_kernels *kn = kernels();
    const int64_t nrs[] = {1, 2, 5, 6, 7, 13, 64}, hps[] = {4, 20, 32};
    for (int a = 0; a < 7; a++)
        for (int b = 0; b < 3; b++) {
            const int64_t nr = nrs[a], hp = hps[b], ldx = hp + 3;
            uint32_t *x = rand_words(nr * ldx), *yt = rand_words(hp * W);
            float *st = malloc(sizeof *st * (size_t)(nr * W));
            assert_non_null(st);
            kn->scores(nr, hp, x, ldx, yt, st);
            for (int64_t r = 0; r < nr; r++)
                for (int64_t i = 0; i < W; i++) {
                    double sum = 0, mag = 0;
                    for (int64_t p = 0; p < hp; p++) {
                        const uint32_t u = x[r * ldx + p], v = yt[p * W + i];
                        sum += lo_of(u) * lo_of(v) + hi_of(u) * hi_of(v);
                        mag += fabs(lo_of(u) * lo_of(v)) + fabs(hi_of(u) * hi_of(v));
                    }
                    if (fabs(st[r * W + i] - sum) > 1e-5 * mag + 1e-30)
                        fail_msg("scores nr=%lld hp=%lld: (%lld, %lld) is %.9g, not %.9g", (long long)nr, (long long)hp,
                                 (long long)r, (long long)i, st[r * W + i], sum);
                }
            free(x), free(yt), free(st);
        }
}

// One accum case: coefficients laid out (nr, np) with rs, ks as given.
static void check_accum(const trit_flash_bf16_kernels *kn, int64_t nr, int64_t np, int64_t hs, bool by_row,
                        bool scaled, bool accumulate) {
    const int64_t rs = by_row ? np + 1 : 1, ks = by_row ? 1 : nr + 2, ldy = hs + 4, ldacc = hs + 3;
    uint32_t *coef = rand_words(by_row ? nr * rs : np * ks), *y = rand_words(np * ldy);
    float *acc = malloc(sizeof *acc * (size_t)(nr * ldacc)), *old = malloc(sizeof *old * (size_t)(nr * ldacc));
    float scale[64];
    assert_true(acc && old);
    for (int64_t i = 0; i < nr * ldacc; i++) acc[i] = old[i] = i % ldacc < hs ? uniform(-1.0f, 1.0f) : SENTINEL;
    for (int64_t r = 0; r < nr; r++) scale[r] = uniform(0.0f, 1.0f);
    kn->accum(nr, np, hs, coef, rs, ks, y, ldy, acc, ldacc, scaled ? scale : NULL, accumulate);
    for (int64_t r = 0; r < nr; r++)
        for (int64_t c = 0; c < ldacc; c++) {
            const float got = acc[r * ldacc + c];
            if (c >= hs) {
                if (got != SENTINEL) fail_msg("accum wrote column %lld past the head's %lld", (long long)c, (long long)hs);
                continue;
            }
            double sum = accumulate ? old[r * ldacc + c] * (scaled ? (double)scale[r] : 1.0) : 0, mag = fabs(sum);
            for (int64_t p = 0; p < np; p++) {
                const uint32_t u = coef[r * rs + p * ks], v = y[p * ldy + c];
                sum += lo_of(u) * lo_of(v) + hi_of(u) * hi_of(v);
                mag += fabs(lo_of(u) * lo_of(v)) + fabs(hi_of(u) * hi_of(v));
            }
            if (fabs(got - sum) > 1e-5 * mag + 1e-30)
                fail_msg("accum nr=%lld np=%lld hs=%lld %s%s%s: (%lld, %lld) is %.9g, not %.9g", (long long)nr,
                         (long long)np, (long long)hs, by_row ? "rows" : "columns", scaled ? " scaled" : "",
                         accumulate ? " accumulate" : "", (long long)r, (long long)c, got, sum);
        }
    free(coef), free(y), free(acc), free(old);
}

static void test_accum(void **state) {
    (void)state;
    const trit_flash_bf16_kernels *kn = kernels();
    const int64_t nrs[] = {1, 5, 6, 7, 13, 64}, nps[] = {1, 5, 32}, hss[] = {8, 40, 64, 80};
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 3; b++)
            for (int c = 0; c < 4; c++)
                for (int mode = 0; mode < 4; mode++)
                    check_accum(kn, nrs[a], nps[b], hss[c], mode & 1, mode == 3, mode >= 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pair_rows),
        cmocka_unit_test(test_transpose_and_round),
        cmocka_unit_test(test_scores),
        cmocka_unit_test(test_accum),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
