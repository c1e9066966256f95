#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernel_census.h"
#include "trit/trit.h"

uint32_t census_cpu_features(void) {
    const trit_cpu_features *f = trit_cpu_features_get();
    uint32_t m = 0;
    if (f->avx2 && f->fma && f->f16c && f->os_avx) m |= TRIT_FEAT_AVX2;
    if ((m & TRIT_FEAT_AVX2) && f->avx512f && f->avx512bw && f->avx512vl && f->avx512dq && f->os_avx512) {
        m |= TRIT_FEAT_AVX512;
        if (f->avx512_bf16) m |= TRIT_FEAT_AVX512_BF16;
        if (f->avx512_vnni) m |= TRIT_FEAT_AVX512_VNNI;
    }
    return m;
}

uint32_t census_level_features(void) {
    const char *env = getenv("TRIT_CPU");
    const uint32_t m = census_cpu_features();
    if (env && strcmp(env, "ref") == 0) return 0;
    if (env && strcmp(env, "avx2") == 0) return m & TRIT_FEAT_AVX2;
    return m;
}

bool census_count(census *c, const char *name, uint32_t needs, uint32_t have) {
    if (!(needs & ~have)) {
        c->want++;
        return true;
    }
    const size_t n = strlen(c->skipped);
    snprintf(c->skipped + n, sizeof c->skipped - n, "%s%s", n ? ", " : "", name);
    return false;
}

void census_ran(census *c) { c->ran++; }

void census_check(const census *c) {
    const char *env = getenv("TRIT_CPU");
    printf("  %s: %d checked of the %d this CPU%s%s allows%s%s\n", c->what, c->ran, c->want, env ? " at TRIT_CPU=" : "",
           env ? env : "", c->skipped[0] ? "; skipped, their features missing here: " : "", c->skipped);
    if (c->ran < c->want)
        fail_msg("%s: %d checked, but this CPU's features allow %d: the dispatch skipped kernels it can run", c->what,
                 c->ran, c->want);
}
