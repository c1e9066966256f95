// Errors, logging level, arena, aligned allocation and the thread-count knob.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "trit/base.h"
#include "trit/version.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

// The version string the library reports is the one its headers' macros spell.
static void test_version(void **state) {
    (void)state;
    char want[48];
    snprintf(want, sizeof want, "%d.%d.%d", TRIT_VERSION_MAJOR, TRIT_VERSION_MINOR, TRIT_VERSION_PATCH);
    assert_string_equal(trit_version(), want);
    assert_true(TRIT_VERSION_AT_LEAST(TRIT_VERSION_MAJOR, TRIT_VERSION_MINOR, TRIT_VERSION_PATCH));
    assert_false(TRIT_VERSION_AT_LEAST(TRIT_VERSION_MAJOR, TRIT_VERSION_MINOR, TRIT_VERSION_PATCH + 1));
    assert_false(TRIT_VERSION_AT_LEAST(TRIT_VERSION_MAJOR + 1, 0, 0));
    assert_true(TRIT_VERSION_AT_LEAST(0, 0, 0));
}

static void test_error_message(void **state) {
    (void)state;
    trit_clear_error();
    assert_string_equal(trit_last_error(), "");
    trit_status s = trit_error(TRIT_ERR_SHAPE, "expected %d dims, found %d", 2, 3);
    assert_int_equal(s, TRIT_ERR_SHAPE);
    assert_string_equal(trit_last_error(), "expected 2 dims, found 3");
    // A long message is truncated, never overflows.
    char big[4000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    trit_error(TRIT_ERR_IO, "%s", big);
    size_t len = strlen(trit_last_error());
    assert_true(len > 100 && len < sizeof big - 1);
    trit_clear_error();
    assert_string_equal(trit_last_error(), "");
}

// Messages are per thread: an error raised on one thread is not seen on another.
static void test_error_thread_local(void **state) {
    (void)state;
    trit_error(TRIT_ERR_RANGE, "main thread");
    int workers = 1, worker_saw_empty = 0;
#pragma omp parallel num_threads(2)
    {
        if (omp_get_thread_num() == 1) {
            workers = omp_get_num_threads();
            // This is the first parallel region of the program, so the worker is fresh.
            worker_saw_empty = trit_last_error()[0] == '\0';
            trit_error(TRIT_ERR_IO, "worker thread");
        }
    }
    assert_string_equal(trit_last_error(), "main thread");
    if (workers == 2) assert_true(worker_saw_empty);
}

static void test_status_names(void **state) {
    (void)state;
    assert_string_equal(trit_status_name(TRIT_OK), "ok");
    assert_string_equal(trit_status_name(TRIT_ERR_SHAPE), "shape mismatch");
    assert_string_equal(trit_status_name(TRIT_ERR_UNSUPPORTED), "unsupported");
    assert_string_equal(trit_status_name((trit_status)99), "unknown status");
    // Every defined code has its own name.
    for (int a = TRIT_OK; a <= TRIT_ERR_RANGE; a++)
        for (int b = a + 1; b <= TRIT_ERR_RANGE; b++)
            assert_string_not_equal(trit_status_name((trit_status)a),
                                    trit_status_name((trit_status)b));
}

static void test_log_level(void **state) {
    (void)state;
    trit_log_level old = trit_log_get_level();
    trit_log_set_level(TRIT_LOG_ERROR);
    assert_int_equal(trit_log_get_level(), TRIT_LOG_ERROR);
    trit_log(TRIT_LOG_INFO, "this is filtered out");
    trit_log_set_level(old);
    assert_int_equal(trit_log_get_level(), old);
}

static void test_arena(void **state) {
    (void)state;
    trit_arena a;
    assert_int_equal(trit_arena_init(&a, 1000), TRIT_OK);
    assert_int_equal((uintptr_t)a.base % TRIT_ALIGN, 0);
    uint8_t *p = trit_arena_alloc(&a, 1);
    uint8_t *q = trit_arena_alloc(&a, 100);
    uint8_t *r = trit_arena_alloc(&a, 64);
    assert_non_null(p);
    assert_non_null(q);
    assert_non_null(r);
    assert_ptr_equal(p, a.base);
    assert_int_equal((uintptr_t)q % TRIT_ALIGN, 0);
    assert_int_equal((uintptr_t)r % TRIT_ALIGN, 0);
    assert_ptr_equal(q, p + 64);  // the 1-byte block takes one aligned slot
    assert_ptr_equal(r, q + 128); // 100 bytes round up to two
    memset(q, 0xab, 100);         // usable without touching r
    assert_int_equal(r[0], 0);
    assert_int_equal(a.used, 256);

    trit_clear_error();
    assert_null(trit_arena_alloc(&a, 800)); // 256 + 800 > 1000
    assert_true(strstr(trit_last_error(), "arena full") != NULL);
    assert_int_equal(a.used, 256); // a failed request changes nothing
    assert_non_null(trit_arena_alloc(&a, 1000 - 256)); // exactly fills it
    assert_int_equal(a.used, 1000);
    assert_null(trit_arena_alloc(&a, 1));
    assert_int_equal(a.peak, 1000);

    trit_arena_reset(&a);
    assert_int_equal(a.used, 0);
    assert_int_equal(a.peak, 1000); // the high-water mark survives a reset
    assert_ptr_equal(trit_arena_alloc(&a, 10), a.base);
    trit_arena_free(&a);
    assert_null(a.base);
    assert_int_equal(a.size, 0);
    trit_arena_free(&a); // freeing twice is harmless

    assert_int_equal(trit_arena_init(NULL, 10), TRIT_ERR_INVALID);
}

static void test_aligned_alloc(void **state) {
    (void)state;
    static const size_t sizes[] = {0, 1, 63, 64, 65, 1000, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *p = trit_aligned_alloc(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % TRIT_ALIGN, 0);
        for (size_t k = 0; k < sizes[i]; k++)
            if (p[k] != 0) fail_msg("byte %zu of a %zu-byte block is not zero", k, sizes[i]);
        trit_aligned_free(p);
    }
    trit_aligned_free(NULL);
#ifndef UNDER_ASAN // ASan reports huge requests instead of returning NULL
    trit_clear_error();
    assert_null(trit_aligned_alloc(SIZE_MAX / 2));
    assert_true(strstr(trit_last_error(), "could not allocate") != NULL);
#endif
}

static void test_threads(void **state) {
    (void)state;
    int def = trit_threads_get();
    assert_true(def >= 1);
    trit_threads_set(1);
    assert_int_equal(trit_threads_get(), 1);
    assert_int_equal(omp_get_max_threads(), 1);
    trit_threads_set(3);
    assert_int_equal(trit_threads_get(), 3);
    int seen = 0;
#pragma omp parallel
    {
#pragma omp single
        seen = omp_get_num_threads();
    }
    assert_int_equal(seen, 3);
    trit_threads_set(0); // back to the default
    assert_int_equal(trit_threads_get(), def);
    trit_threads_set(-4);
    assert_int_equal(trit_threads_get(), def);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_message),
        cmocka_unit_test(test_error_thread_local),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_log_level),
        cmocka_unit_test(test_arena),
        cmocka_unit_test(test_aligned_alloc),
        cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
