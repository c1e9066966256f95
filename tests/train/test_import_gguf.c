// trit_import_gguf on the library's own export: at f32 every parameter comes back bit-equal; a
// model exported without a tokenizer (placeholder tokens past 256) comes back without one; an
// output.weight that is not the embedding (an untied head) is refused.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "trit/trit.h"

static trit_gpt *model(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = 300, c.seq_len = 16, c.n_layer = 2, c.n_head = 2, c.n_embd = 32;
    trit_gpt *m = trit_gpt_new(&c, 7);
    assert_non_null(m);
    return m;
}

static void test_f32_bit_equal_without_tokenizer(void **state) {
    (void)state;
    trit_gpt *m = model();
    assert_int_equal(trit_export_gguf(m, NULL, TRIT_F32, tfile_path("m.gguf")), TRIT_OK);
    trit_tokenizer *tok = (trit_tokenizer *)1;
    trit_gpt *b = trit_import_gguf(tfile_path("m.gguf"), &tok);
    assert_non_null(b);
    assert_null(tok);  // placeholders: no tokenizer
    const trit_gpt_config *x = trit_gpt_get_config(m), *y = trit_gpt_get_config(b);
    assert_int_equal(x->vocab_size, y->vocab_size);
    assert_int_equal(x->n_layer, y->n_layer);
    assert_int_equal(x->seq_len, y->seq_len);
    assert_true(x->norm_eps == y->norm_eps);
    assert_int_equal(trit_gpt_mlp_hidden(x), trit_gpt_mlp_hidden(y));
    assert_int_equal(trit_gpt_num_tensors(m), trit_gpt_num_tensors(b));
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *p = trit_gpt_tensor(m, i), *q = trit_gpt_tensor(b, i);  // same shapes: (N, K) or (N)
        assert_string_equal(p->name, q->name);
        assert_true(trit_tensor_same_shape(p, q));
        assert_memory_equal(trit_tensor_ptr(p), trit_tensor_ptr(q), trit_tensor_nbytes(p));
    }
    trit_gpt_free(b);
    trit_gpt_free(m);
}

// The export's output.weight bytes changed: the head is no longer the embedding.
static void test_untied_head_refused(void **state) {
    (void)state;
    trit_gpt *m = model();
    assert_int_equal(trit_export_gguf(m, NULL, TRIT_F32, tfile_path("u.gguf")), TRIT_OK);
    trit_gguf_file *f = trit_gguf_open(tfile_path("u.gguf"));
    assert_non_null(f);
    const size_t at = (size_t)(trit_gguf_find_tensor(f, "output.weight")->data - trit_gguf_tensor_at(f, 0)->data);
    trit_gguf_close(f);
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(tfile_path("u.gguf"), &d, &n), TRIT_OK);
    // The first tensor's data starts where the file's data section does: find it by its bytes.
    const trit_tensor *wte = trit_gpt_find(m, "wte.weight");  // (V, C)
    const uint8_t *start = memmem(d, n, trit_tensor_ptr(wte), 64);
    assert_non_null(start);
    d[(size_t)(start - d) + at] ^= 1;
    tfile_write(tfile_path("u2.gguf"), d, n);
    free(d);
    assert_null(trit_import_gguf(tfile_path("u2.gguf"), NULL));
    assert_non_null(strstr(trit_last_error(), "untied head"));
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f32_bit_equal_without_tokenizer),
        cmocka_unit_test(test_untied_head_refused),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
