// CRC-32 (IEEE) and CRC-32C (Castagnoli): their published check values, and the table-driven
// code against a bit-by-bit definition on every start alignment, every short length and long
// runs, whole and in pieces, from several threads at once (the tables are built on first use).
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "io/io_internal.h"
#include "trit/io.h"

// The definition: one bit at a time, reflected polynomial poly.
static uint32_t crc_bits(uint32_t poly, uint32_t crc, const uint8_t *p, size_t n) {
    crc = ~crc;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (poly & (0u - (crc & 1u)));
    }
    return ~crc;
}

typedef uint32_t crc_fn(uint32_t crc, const void *data, size_t n);

static uint8_t *noise(size_t n, uint32_t seed) {
    uint8_t *b = malloc(n);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        b[i] = (uint8_t)(seed >> 24);
    }
    return b;
}

static void check_against_bits(crc_fn *fn, uint32_t poly) {
    enum { N = 1 << 16 };
    uint8_t *b = noise(N + 8, 7u + poly);
    for (size_t at = 0; at < 8; at++)
        for (size_t n = 0; n <= 80; n++) assert_int_equal(fn(0, b + at, n), crc_bits(poly, 0, b + at, n));
    const uint32_t whole = crc_bits(poly, 0, b + 3, N);
    assert_int_equal(fn(0, b + 3, N), whole);
    // In two pieces split anywhere near the start, and in three of odd sizes.
    for (size_t cut = 0; cut <= 40; cut++) assert_int_equal(fn(fn(0, b + 3, cut), b + 3 + cut, N - cut), whole);
    assert_int_equal(fn(fn(fn(0, b + 3, 1001), b + 1004, 30013), b + 31017, N - 31014), whole);
    free(b);
}

static void test_crc32_check_values(void **state) {
    (void)state;
    // The CRC catalogue's check value of each: the CRC of the ASCII digits "123456789".
    assert_int_equal(trit_crc32(0, "123456789", 9), 0xCBF43926u);
    assert_int_equal(trit_crc32c(0, "123456789", 9), 0xE3069283u);
    assert_int_equal(trit_crc32(0, "", 0), 0u);
    assert_int_equal(trit_crc32(0x12345678u, "", 0), 0x12345678u);
}

static void test_crc32_matches_bitwise(void **state) {
    (void)state;
    check_against_bits(trit_crc32, 0xEDB88320u);
    check_against_bits(trit_crc32c, 0x82F63B78u);
}

typedef struct {
    const uint8_t *b;
    size_t n;
    uint32_t ieee, castagnoli;
} job;

static void *run(void *arg) {
    job *j = arg;
    j->ieee = trit_crc32(0, j->b, j->n);
    j->castagnoli = trit_crc32c(0, j->b, j->n);
    return NULL;
}

// Threads racing to the first call all get the right values (the tables are filled once).
// Meaningful only as this binary's first CRC calls: cmocka runs the tests in the listed order.
static void test_crc32_first_use_from_threads(void **state) {
    (void)state;
    enum { T = 8, N = 4099 };
    uint8_t *b = noise(N, 99u);
    pthread_t th[T];
    job jobs[T];
    for (int i = 0; i < T; i++) {
        jobs[i] = (job){b, N, 0, 0};
        assert_int_equal(pthread_create(&th[i], NULL, run, &jobs[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(jobs[i].ieee, crc_bits(0xEDB88320u, 0, b, N));
        assert_int_equal(jobs[i].castagnoli, crc_bits(0x82F63B78u, 0, b, N));
    }
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32_first_use_from_threads),
        cmocka_unit_test(test_crc32_check_values),
        cmocka_unit_test(test_crc32_matches_bitwise),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
