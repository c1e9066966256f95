// The GPT's parameter list: for every combination of the optional tensors (biases, LayerNorm or
// RMSNorm, SubLN, learned or rotary positions, GELU or SwiGLU) the list is allocated to exactly
// the parameters the config calls for (counted here by the documented rule, independently of
// the builder), and appending past its end is refused with a message instead of writing past it.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "nn/gpt_internal.h"
#include "trit/trit.h"

#include <stdio.h>
#include <string.h>

// Per block: ln_1, c_attn, c_proj, ln_2, c_fc, mlp.c_proj weights; biases of the four linears;
// LayerNorm shifts of ln_1 and ln_2; with SubLN two sub-norm weights (and their shifts under a
// LayerNorm with biases). Around the blocks: wte, wpe (learned positions), ln_f and its shift.
static int documented_count(const trit_gpt_config *c) {
    const bool ln_bias = c->bias && c->norm == TRIT_NORM_LAYER;
    const int block = 6 + (c->bias ? 4 : 0) + (ln_bias ? 2 : 0) + (c->subln ? 2 : 0) + (c->subln && ln_bias ? 2 : 0);
    return 1 + (c->pos == TRIT_POS_LEARNED) + (int)c->n_layer * block + 1 + ln_bias;
}

static void test_list_is_exactly_the_config_s_parameters(void **state) {
    (void)state;
    int configs = 0, most = 0;
    for (int bits = 0; bits < 32; bits++)
        for (int64_t L = 1; L <= 3; L += 2) {
            trit_gpt_config c = trit_gpt_config_default();
            c.vocab_size = 17, c.seq_len = 8, c.n_layer = L, c.n_head = 2, c.n_embd = 8;
            c.bias = bits & 1;
            c.norm = bits & 2 ? TRIT_NORM_RMS : TRIT_NORM_LAYER;
            c.subln = bits & 4;
            c.pos = bits & 8 ? TRIT_POS_ROPE : TRIT_POS_LEARNED;
            c.mlp = bits & 16 ? TRIT_MLP_SWIGLU : TRIT_MLP_GELU;
            trit_gpt *m = trit_gpt_new(&c, 1);
            if (!m) fail_msg("config %d (L = %lld) did not build: %s", bits, (long long)L, trit_last_error());
            const int want = documented_count(&c);
            assert_int_equal(trit_gpt_num_tensors(m), want);
            assert_int_equal(m->cap_tensors, want);
            for (int i = 0; i < want; i++) {
                assert_non_null(m->tensors[i]);
                for (int j = 0; j < i; j++) assert_string_not_equal(m->tensors[i]->name, m->tensors[j]->name);
            }
            most = want > most ? want : most;
            configs++;
            trit_gpt_free(m);
        }
    assert_int_equal(configs, 64);
    // Every optional tensor at once: 16 per block plus wte, wpe, ln_f and its shift.
    assert_int_equal(most, 16 * 3 + 4);
}

// One more parameter than the config calls for is an error that names it; the list is unchanged
// and the tensor stays the caller's.
static void test_append_past_the_end_is_refused(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = 17, c.seq_len = 8, c.n_layer = 2, c.n_head = 2, c.n_embd = 8, c.subln = true;
    trit_gpt *m = trit_gpt_new(&c, 1);
    assert_non_null(m);
    const int n = trit_gpt_num_tensors(m);
    const int64_t shape[1] = {8};
    trit_tensor *extra = trit_tensor_new_param(TRIT_F32, 1, shape, "h.1.extra.weight");
    assert_non_null(extra);
    trit_clear_error();
    assert_int_equal(trit_gpt_append_tensor(m, extra), TRIT_ERR_RANGE);
    assert_non_null(strstr(trit_last_error(), "'h.1.extra.weight' would be number"));
    assert_int_equal(trit_gpt_num_tensors(m), n);
    assert_int_equal(m->cap_tensors, n);
    trit_tensor_free(extra);
    assert_int_equal(trit_gpt_append_tensor(m, NULL), TRIT_ERR_INVALID);
    trit_gpt_free(m);
}

// A zeroed model (for loaders) has trit_gpt_new's parameters, in flat storage, every value zero.
static void test_zeroed_model(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.subln = true;
    trit_gpt *a = trit_gpt_new(&c, 3), *z = trit_gpt_new_zeroed(&c);
    assert_non_null(z);
    assert_int_equal(trit_gpt_num_tensors(a), trit_gpt_num_tensors(z));
    assert_int_equal(trit_gpt_num_params(a), trit_gpt_num_params(z));
    int64_t nonzero_a = 0;
    for (int i = 0; i < trit_gpt_num_tensors(z); i++) {
        const trit_tensor *x = trit_gpt_tensor(a, i), *y = trit_gpt_tensor(z, i);
        assert_string_equal(x->name, y->name);
        assert_true(trit_tensor_same_shape(x, y));
        for (int64_t k = 0; k < trit_tensor_numel(y); k++) {
            assert_true(((const float *)y->data)[k] == 0.0f);
            nonzero_a += ((const float *)x->data)[k] != 0.0f;
        }
    }
    assert_true(nonzero_a > trit_gpt_num_params(a) / 2);  // the random model is not zero
    trit_gpt_free(a);
    trit_gpt_free(z);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_is_exactly_the_config_s_parameters),
        cmocka_unit_test(test_append_past_the_end_is_refused),
        cmocka_unit_test(test_zeroed_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
