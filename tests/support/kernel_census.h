// What a kernel test must have run on this CPU: a kernel whose features the CPU and OS have is
// checked, or the test fails; one they lack is skipped and named in the output. The features
// are worked out here from the raw CPUID and XCR0 flags (trit_cpu_features_get) and TRIT_CPU,
// not taken from trit_cpu_usable_features or trit_cpu_detected_level, the dispatch under test:
// a dispatch that lost a feature would otherwise skip its kernels and pass.
#ifndef TRIT_TEST_KERNEL_CENSUS_H
#define TRIT_TEST_KERNEL_CENSUS_H

#include <stdbool.h>
#include <stdint.h>

// TRIT_FEAT_* bits this CPU and OS have (AMX left out: no kernel uses it yet).
uint32_t census_cpu_features(void);
// The same within the level TRIT_CPU names (ref: none; avx2: AVX2; avx512 or unset: all).
uint32_t census_level_features(void);

typedef struct census {
    const char *what;    // "GEMV kernels"
    int want, ran;       // kernels the features allow, kernels checked
    char skipped[1024];  // names of the kernels left out
} census;

// Counts a kernel needing `needs` against the features `have` (one of the two above); returns
// whether it must run. A kernel it must not run is named as skipped.
bool census_count(census *c, const char *name, uint32_t needs, uint32_t have);
// After a kernel ran its checks.
void census_ran(census *c);
// Prints how many kernels ran and which were skipped; fails unless every kernel the features
// allow ran (ran >= want).
void census_check(const census *c);

#endif
