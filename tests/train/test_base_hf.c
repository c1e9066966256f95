// A Hugging Face GPT-2 directory with its tokenizer files as a base
// (tests/reference/make_hf_gpt2_base_fixture.py wrote hf_gpt2/with_tokenizer with transformers):
// trit_base_load gives the transformers reader's model and a tokenizer whose ids are
// transformers' on a text of every Unicode category; the same base exported by trit (vocab.json +
// merges.txt) loads to the same weights and ids; a directory without tokenizer files, with half
// a pair, or with a tokenizer of another size is refused with a message.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "trit/interop.h"
#include "trit/train.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char root[512];

static const char *fixture(const char *rel) {
    static char buf[4][1024];
    static int k;
    const char *src = getenv("TRIT_SOURCE_DIR");
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/tests/reference/fixtures/%s", src ? src : ".", rel);
    return buf[k];
}

// A copy of fixture file `rel` as dir/name.
static void copy_in(const char *rel, const char *dir, const char *name) {
    uint8_t *data = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(fixture(rel), &data, &n), TRIT_OK);
    tfile_write(tfile_join(dir, name), data, n);
    free(data);
}

// Loads `dir` as a base of the HF kind, or fails the test with trit's message.
static void load_hf(const char *dir, trit_base *b) {
    trit_base_kind kind;
    assert_int_equal(trit_base_probe(dir, &kind), TRIT_OK);
    assert_int_equal(kind, TRIT_BASE_HF);
    if (trit_base_load(dir, b) != TRIT_OK) fail_msg("%s: %s", dir, trit_last_error());
    assert_int_equal(b->kind, TRIT_BASE_HF);
    assert_int_equal(b->step, 0);
}

// tok's ids of gpt2_text.txt + "<|endoftext|>" equal transformers' (with_tokenizer.ids).
static void check_ids(const trit_tokenizer *tok) {
    uint8_t *text = NULL, *want_text = NULL;
    size_t len = 0, wlen = 0, n = 0;
    assert_int_equal(trit_file_read_all(fixture("gpt2_text.txt"), &text, &len), TRIT_OK);
    text = realloc(text, len + 13);
    memcpy(text + len, "<|endoftext|>", 13);
    int32_t *ids = NULL;
    assert_int_equal(trit_tokenizer_encode(tok, text, len + 13, &ids, &n), TRIT_OK);
    assert_int_equal(trit_file_read_all(fixture("hf_gpt2/with_tokenizer.ids"), &want_text, &wlen), TRIT_OK);
    char *p = (char *)want_text;
    size_t k = 0;
    for (;;) {
        char *end;
        const long v = strtol(p, &end, 10);
        if (end == p) break;
        if (k >= n || ids[k] != v) fail_msg("id %zu: trit %d, transformers %ld", k, k < n ? (int)ids[k] : -1, v);
        p = end;
        k++;
    }
    assert_int_equal(k, n);
    assert_true(n > 1000);
    free(ids), free(text), free(want_text);
}

static void test_hf_base_loads(void **state) {
    (void)state;
    trit_base b;
    load_hf(fixture("hf_gpt2/with_tokenizer"), &b);
    assert_int_equal(trit_gpt_get_config(b.model)->vocab_size, 300);
    assert_int_equal(trit_tokenizer_vocab_size(b.tok), 300);
    assert_int_equal(trit_tokenizer_get_kind(b.tok), TRIT_TOKENIZER_GPT2);
    check_ids(b.tok);
    // trit's own export of the base (vocab.json + merges.txt) is the same base again.
    char out[1024];
    snprintf(out, sizeof out, "%s", tfile_join(root, "exported"));
    assert_int_equal(trit_export_hf_gpt2_with(b.model, b.tok, out), TRIT_OK);
    assert_true(tfile_exists(tfile_join(out, "merges.txt")));
    assert_false(tfile_exists(tfile_join(out, "tokenizer.json")));
    trit_base c;
    load_hf(out, &c);
    check_ids(c.tok);
    for (int i = 0; i < trit_gpt_num_tensors(b.model); i++) {
        const trit_tensor *x = trit_gpt_tensor(b.model, i), *y = trit_gpt_tensor(c.model, i);
        assert_string_equal(x->name, y->name);
        assert_memory_equal(x->data, y->data, trit_tensor_nbytes(x));
    }
    trit_base_free(&c);
    trit_base_free(&b);
}

static void expect_refused(const char *dir, trit_status code, const char *msg) {
    trit_base b;
    assert_int_equal(trit_base_load(dir, &b), code);
    if (!strstr(trit_last_error(), msg)) fail_msg("expected \"%s\" in: %s", msg, trit_last_error());
    assert_null(b.model);
    assert_null(b.tok);
}

static void test_hf_base_refused(void **state) {
    (void)state;
    // No tokenizer files: today's message, which names the import that makes a run.
    expect_refused(fixture("hf_gpt2/fp32"), TRIT_ERR_INVALID, "is a Hugging Face directory without tokenizer files");
    expect_refused(fixture("hf_gpt2/fp32"), TRIT_ERR_INVALID, "make a run of it first with `trit import hf");
    // The 96-token model with the 300-token tokenizer.
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", tfile_join(root, "mixed"));
    assert_int_equal(mkdir(dir, 0755), 0);
    copy_in("hf_gpt2/fp32/config.json", dir, "config.json");
    copy_in("hf_gpt2/fp32/model.safetensors", dir, "model.safetensors");
    copy_in("hf_gpt2/with_tokenizer/tokenizer.json", dir, "tokenizer.json");
    expect_refused(dir, TRIT_ERR_FORMAT, "vocab_size is 96 but its tokenizer files have 300 tokens");
    // Half of a pair: the reader names the missing file.
    snprintf(dir, sizeof dir, "%s", tfile_join(root, "half"));
    assert_int_equal(mkdir(dir, 0755), 0);
    copy_in("hf_gpt2/with_tokenizer/config.json", dir, "config.json");
    copy_in("hf_gpt2/with_tokenizer/model.safetensors", dir, "model.safetensors");
    tfile_write(tfile_join(dir, "vocab.json"), "{}", 2);
    expect_refused(dir, TRIT_ERR_FORMAT, "has vocab.json but not merges.txt");
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "base-hf");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hf_base_loads),
        cmocka_unit_test(test_hf_base_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
