// Token-shard batches: windows hold the right tokens (targets are inputs shifted by one),
// random windows are a pure function of (seed, window) and cover the shard, sequential windows
// tile it epoch after epoch, and bad shards give clear errors.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "train_fixture.h"

enum { N = 1000, T = 8, B = 4 };

static trit_data *make(uint16_t *tok) {
    for (int i = 0; i < N; i++) tok[i] = (uint16_t)(i * 7 % 1009);  // distinct: position is recoverable
    trit_data *d = trit_data_from_tokens(tok, N, T);
    assert_non_null(d);
    return d;
}

static void test_windows_hold_shifted_tokens(void **state) {
    (void)state;
    uint16_t tok[N];
    trit_data *d = make(tok);
    int32_t x[B * T], y[B * T];
    for (int order = 0; order < 2; order++) {
        for (int64_t batch = 0; batch < 50; batch++) {
            assert_int_equal(trit_data_batch(d, (trit_data_order)order, 42, batch, B, x, y), TRIT_OK);
            for (int b = 0; b < B; b++) {
                int64_t s = trit_data_window_start(d, (trit_data_order)order, 42, batch * B + b);
                assert_true(s >= 0 && s + T + 1 <= N);
                for (int t = 0; t < T; t++) {
                    assert_int_equal(x[b * T + t], tok[s + t]);
                    assert_int_equal(y[b * T + t], tok[s + t + 1]);
                }
            }
        }
    }
    int32_t mx = 0;
    for (int i = 0; i < N; i++) mx = tok[i] > mx ? tok[i] : mx;
    assert_int_equal(trit_data_max_token(d), mx + 1);
    trit_data_free(d);
}

static void test_random_windows_depend_on_seed_and_index_only(void **state) {
    (void)state;
    uint16_t tok[N];
    trit_data *d = make(tok);
    int64_t seen_first = 0, seen_last = 0, same_other_seed = 0;
    int64_t hist[10] = {0};
    for (int64_t w = 0; w < 20000; w++) {
        int64_t s = trit_data_window_start(d, TRIT_DATA_RANDOM, 7, w);
        assert_int_equal(s, trit_data_window_start(d, TRIT_DATA_RANDOM, 7, w));  // pure
        same_other_seed += s == trit_data_window_start(d, TRIT_DATA_RANDOM, 8, w);
        seen_first += s == 0;
        seen_last += s == N - T - 1;
        hist[s * 10 / (N - T)]++;
    }
    assert_true(seen_first > 0 && seen_last > 0);  // both ends reachable
    assert_true(same_other_seed < 100);            // ~20000/992 expected by chance
    for (int i = 0; i < 10; i++) assert_true(hist[i] > 1700 && hist[i] < 2300);  // roughly uniform
    trit_data_free(d);
}

static void test_sequential_epochs(void **state) {
    (void)state;
    uint16_t tok[N];
    trit_data *d = make(tok);
    int64_t W = trit_data_epoch_windows(d);
    assert_int_equal(W, (N - 1) / T);
    for (int64_t w = 0; w < W; w++) assert_int_equal(trit_data_window_start(d, TRIT_DATA_SEQUENTIAL, 1, w), w * T);
    assert_int_equal(trit_data_window_start(d, TRIT_DATA_SEQUENTIAL, 1, W), 0);  // next epoch
    assert_int_equal(trit_data_window_start(d, TRIT_DATA_SEQUENTIAL, 1, W + 3), 3 * T);
    trit_data_free(d);
}

static void test_bad_shards(void **state) {
    (void)state;
    char root[512], p[600];
    tfile_mkdtemp(root, sizeof root, "data");
    uint16_t few[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    assert_null(trit_data_from_tokens(few, 8, 8));  // needs T + 1 tokens
    assert_non_null(strstr(trit_last_error(), "fewer than one window"));

    snprintf(p, sizeof p, "%s/missing.bin", root);
    assert_null(trit_data_open(p, 8));
    snprintf(p, sizeof p, "%s/text.bin", root);
    tfile_write(p, "hello, this is not a shard", 26);
    assert_null(trit_data_open(p, 8));
    assert_true(strlen(trit_last_error()) > 0);

    int32_t ids[100];
    for (int i = 0; i < 100; i++) ids[i] = i;
    snprintf(p, sizeof p, "%s/ok.bin", root);
    assert_int_equal(trit_shard_write(p, ids, 100), TRIT_OK);
    trit_data *d = trit_data_open(p, 8);
    assert_non_null(d);
    assert_int_equal(trit_data_num_tokens(d), 100);
    assert_int_equal(trit_data_max_token(d), 100);
    trit_data_free(d);
    tfile_rm_rf(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_windows_hold_shifted_tokens),
        cmocka_unit_test(test_random_windows_depend_on_seed_and_index_only),
        cmocka_unit_test(test_sequential_epochs),
        cmocka_unit_test(test_bad_shards),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
