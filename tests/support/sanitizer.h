// TEST_UNDER_ASAN is defined when AddressSanitizer is on (gcc or clang): its shadow memory and
// allocator change RSS and heap statistics, so tests that measure them skip.
#ifndef TRIT_TEST_SANITIZER_H
#define TRIT_TEST_SANITIZER_H

#if defined(__SANITIZE_ADDRESS__)
#define TEST_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_UNDER_ASAN 1
#endif
#endif

#endif
