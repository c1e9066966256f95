// The built-in addition task: the problem text format, the held-out split (about 1 in 10
// pairs, never in training batches), masked targets, and a short training run that must learn
// 2-digit addition well above chance.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "train_fixture.h"
#include "train/train_internal.h"

static void test_format(void **state) {
    (void)state;
    char b[64];
    assert_int_equal(trit_addition_text_len(3), 12);
    assert_int_equal(trit_addition_format(3, 123, 456, b, sizeof b), TRIT_OK);
    assert_string_equal(b, "123+456=9750");  // 579, least significant digit first, 4 digits
    assert_int_equal(trit_addition_format(3, 999, 999, b, sizeof b), TRIT_OK);
    assert_string_equal(b, "999+999=8991");
    assert_int_equal(trit_addition_format(3, 7, 5, b, sizeof b), TRIT_OK);
    assert_string_equal(b, "007+005=2100");
    assert_int_equal(trit_addition_format(1, 9, 9, b, sizeof b), TRIT_OK);
    assert_string_equal(b, "9+9=81");
    assert_int_not_equal(trit_addition_format(3, 1000, 1, b, sizeof b), TRIT_OK);
    assert_int_not_equal(trit_addition_format(3, 1, 1, b, 12), TRIT_OK);  // no room for the NUL
}

static void test_split_and_batches(void **state) {
    (void)state;
    int held = 0;
    for (uint64_t a = 0; a < 100; a++)
        for (uint64_t b = 0; b < 100; b++) held += trit_addition_held_out(2, a, b);
    assert_true(held > 850 && held < 1150);  // about 10% of 10000

    trit_tokenizer *tok = trit_addition_tokenizer();
    assert_non_null(tok);
    assert_int_equal(trit_tokenizer_vocab_size(tok), 12);
    trit_addition t;
    assert_int_equal(trit_addition_init(&t, 2, tok), TRIT_OK);
    enum { B = 64, T = 8 };  // "12+34=640": 9 bytes, 8 inputs
    int32_t x[B * T], y[B * T];
    for (int held_out = 0; held_out < 2; held_out++) {
        trit_addition_batch(&t, 11, 3, B, held_out, x, y);
        for (int r = 0; r < B; r++) {
            char text[16];
            for (int i = 0; i < T; i++) text[i] = (char)t.byte_of[x[r * T + i]];
            text[T] = (char)t.byte_of[y[r * T + T - 1]];
            text[T + 1] = 0;
            uint64_t a = (uint64_t)(text[0] - '0') * 10 + (uint64_t)(text[1] - '0');
            uint64_t b = (uint64_t)(text[3] - '0') * 10 + (uint64_t)(text[4] - '0');
            char want[16];
            assert_int_equal(trit_addition_format(2, a, b, want, sizeof want), TRIT_OK);
            assert_string_equal(text, want);
            assert_int_equal(trit_addition_held_out(2, a, b), held_out);
            // Targets: -1 up to '=', then the three answer digits (text bytes 6..8).
            for (int i = 0; i < T; i++) {
                if (i < 5) assert_int_equal(y[r * T + i], -1);
                else assert_int_equal(t.byte_of[y[r * T + i]], want[i + 1]);
            }
        }
    }
    trit_tokenizer_free(tok);
}

// 2-digit addition, a small model, 600 steps: far above the 1-in-100 of guessing the last digits.
static void test_learns_two_digit_addition(void **state) {
    (void)state;
    char root[512];
    tfile_mkdtemp(root, sizeof root, "add");
    trit_train_config c;
    trit_train_config_init(&c);
    snprintf(c.out, sizeof c.out, "%s/run", root);
    c.digits = 2;
    c.layers = 2;
    c.dim = 64;
    c.batch = 64;
    c.steps = 600;
    c.warmup = 30;
    c.lr = 3e-3;
    c.eval_every = 0;
    c.task_test = 300;
    c.threads = 1;
    c.quiet = 1;
    trit_train_result r;
    assert_int_equal(trit_train_run(&c, NULL, &r), TRIT_OK);
    print_message("2-digit addition after 600 steps: %.1f%% exact match, %.1f s\n", 100 * r.accuracy, r.seconds);
    assert_true(r.accuracy > 0.9);
    tfile_rm_rf(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_split_and_batches),
        cmocka_unit_test(test_learns_two_digit_addition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
