// llm.c's model and tokenizer files against files llm.c wrote (tests/reference/
// make_llmc_fixtures.py): models in fp32 and bf16 give the logits of llm.c's PyTorch GPT; a
// model trit exported gives, in trit, the step-0 loss llm.c's C trainer computed from it; trit
// writes the same bytes again; the tokenizer file reads back token for token; damaged files are
// refused with a message and nothing is half-written.
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "scratch.h"
#include "tritfix.h"
#include "trit/interop.h"
#include "trit/train.h"
#include "io/io_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *fixture(const char *name) {
    static char buf[4][1024];
    static int k;
    const char *src = getenv("TRIT_SOURCE_DIR");
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/tests/reference/fixtures/llmc/%s", src ? src : ".", name);
    return buf[k];
}

// Runs m's graph on B x T tokens (targets the next tokens when `next`, else none): its loss, and
// the logits compared with record `want` when want is not NULL.
static double run(trit_gpt *m, const tf_file *f, const char *tokens, int64_t B, int64_t T, bool next, const char *want) {
    const tf_record *t = tf_get(f, tokens);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, B, T, &gg), TRIT_OK);
    int32_t *idx = gg.idx->data, *tgt = gg.targets->data;
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < T; i++) {
            const int64_t at = b * T + i;  // llm.c's loader: sample b starts at b * T
            idx[b * T + i] = (int32_t)t->data[at];
            tgt[b * T + i] = next ? (int32_t)t->data[at + 1] : (int32_t)t->data[at];
        }
    assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
    if (want) print_message("%s max rel err %.3g\n", want, tf_compare(f, want, gg.logits, want, 1e-5));
    const double loss = *(const float *)gg.loss->data;
    trit_gpt_graph_free(&gg);
    return loss;
}

static void test_llmc_models(void **state) {
    (void)state;
    tf_file *f = tf_open("llmc/logits.bin");
    static const char *const tags[] = {"fp32", "bf16"};
    for (int i = 0; i < 2; i++) {
        char file[64], want[64];
        snprintf(file, sizeof file, "model_%s.bin", tags[i]);
        snprintf(want, sizeof want, "%s.logits", tags[i]);
        trit_gpt *m = trit_import_llmc(fixture(file));
        if (!m) fail_msg("%s: %s", file, trit_last_error());
        const trit_gpt_config *c = trit_gpt_get_config(m);
        assert_int_equal(c->vocab_size, 100);  // padded to 128 in the file
        assert_int_equal(c->seq_len, 64);
        run(m, f, "tokens", 2, 16, false, want);
        trit_gpt_free(m);
    }
    tf_close(f);
}

// llm.c's train_gpt2 (C, OpenMP) loaded trit's export and printed its step-0 loss on these tokens.
static void test_llmc_trainer_loss(void **state) {
    (void)state;
    tf_file *f = tf_open("llmc/logits.bin");
    trit_gpt *m = trit_import_llmc(fixture("trit_export.bin"));
    assert_non_null(m);
    const double want = tf_get(f, "llmc_step0_loss")->data[0];
    const double got = run(m, f, "llmc_tokens", 4, 64, true, NULL);
    print_message("step-0 loss: llm.c %.6f, trit %.6f\n", want, got);
    assert_true(fabs(got - want) < 1e-4);
    // Exported again, the file is byte for byte the one llm.c read.
    assert_int_equal(trit_export_llmc(m, 3, tfile_path("again.bin")), TRIT_OK);
    uint8_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    assert_int_equal(trit_file_read_all(tfile_path("again.bin"), &a, &na), TRIT_OK);
    assert_int_equal(trit_file_read_all(fixture("trit_export.bin"), &b, &nb), TRIT_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a), free(b);
    trit_gpt_free(m);
    tf_close(f);
}

// bf16 export: every value is its bf16 rounding; the padding rows are zeros.
static void test_bf16_round_trip(void **state) {
    (void)state;
    trit_gpt_config c = trit_gpt_config_default();
    c.vocab_size = 130, c.n_layer = 2, c.n_embd = 32, c.n_head = 2, c.seq_len = 16;
    trit_gpt *m = trit_gpt_new(&c, 5);
    assert_int_equal(trit_export_llmc(m, 5, tfile_path("m5.bin")), TRIT_OK);
    trit_llmc_header h;
    trit_llmc_file *f = trit_llmc_open(tfile_path("m5.bin"), &h);
    assert_non_null(f);
    assert_int_equal(h.version, 5);
    assert_int_equal(h.Vp, 256);
    float pad[32];
    assert_int_equal(trit_llmc_read(f, 255 * 32, 32, pad), TRIT_OK);  // the last padding row
    for (int i = 0; i < 32; i++) assert_true(pad[i] == 0.0f);
    trit_llmc_close(f);
    trit_gpt *back = trit_import_llmc(tfile_path("m5.bin"));
    assert_non_null(back);
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *x = trit_gpt_tensor(m, i), *y = trit_gpt_find(back, x->name);
        const float *a = x->data, *b = y->data;
        for (int64_t k = 0; k < trit_tensor_numel(x); k++) assert_true(trit_bf16_to_f32(trit_f32_to_bf16(a[k])) == b[k]);
    }
    trit_gpt_free(back);
    c.mlp = TRIT_MLP_SWIGLU;
    trit_gpt *sw = trit_gpt_new(&c, 5);
    assert_int_equal(trit_export_llmc(sw, 3, tfile_path("sw.bin")), TRIT_ERR_UNSUPPORTED);
    assert_false(tfile_exists(tfile_path("sw.bin")));
    trit_gpt_free(sw);
    trit_gpt_free(m);
}

static void expect_open_fails(const char *path, const char *says) {
    trit_llmc_header h;
    trit_llmc_file *f = trit_llmc_open(path, &h);
    if (f) fail_msg("'%s' opened; expected '%s'", path, says);
    print_message("refused: %s\n", trit_last_error());
    if (!strstr(trit_last_error(), says)) fail_msg("message '%s' lacks '%s'", trit_last_error(), says);
    assert_null(trit_import_llmc(path));
}

static void test_bad_models(void **state) {
    (void)state;
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(fixture("model_fp32.bin"), &d, &n), TRIT_OK);
    tfile_write(tfile_path("short.bin"), d, n - 1);
    expect_open_fails(tfile_path("short.bin"), "truncated");
    tfile_write(tfile_path("head.bin"), d, 100);
    expect_open_fails(tfile_path("head.bin"), "shorter than llm.c's 1024-byte header");
    uint8_t *e = malloc(n + 4);
    memcpy(e, d, n);
    memset(e + n, 0, 4);
    tfile_write(tfile_path("long.bin"), e, n + 4);
    expect_open_fails(tfile_path("long.bin"), "longer than a model");
    trit_le32_store(e, 20240520);
    tfile_write(tfile_path("magic.bin"), e, n);
    expect_open_fails(tfile_path("magic.bin"), "not llm.c's model magic");
    memcpy(e, d, n);
    trit_le32_store(e + 4, 4);
    tfile_write(tfile_path("v4.bin"), e, n);
    expect_open_fails(tfile_path("v4.bin"), "version 4");
    memcpy(e, d, n);
    trit_le32_store(e + 16, 1 << 24);  // L = 2^24 with C = 2^24 would overflow int64 unchecked
    trit_le32_store(e + 24, 1 << 24);
    tfile_write(tfile_path("huge.bin"), e, n);
    expect_open_fails(tfile_path("huge.bin"), "more than trit loads");
    memcpy(e, d, n);
    trit_le32_store(e + 28, 64);  // Vp below V
    tfile_write(tfile_path("vp.bin"), e, n);
    expect_open_fails(tfile_path("vp.bin"), "padded_vocab_size 64 is below vocab_size 100");
    memcpy(e, d, n);
    trit_le32_store(e + 20, 3);  // C % H
    tfile_write(tfile_path("heads.bin"), e, n);
    expect_open_fails(tfile_path("heads.bin"), "not a multiple of num_heads 3");
    free(e), free(d);
}

// ---- tokenizer ------------------------------------------------------------------------------

static void test_tokenizer_file(void **state) {
    (void)state;
    trit_llmc_vocab v;
    assert_int_equal(trit_llmc_vocab_read(fixture("tokenizer.bin"), &v), TRIT_OK);
    assert_int_equal(v.n, 40);
    assert_int_equal(v.eot, 39);
    assert_int_equal(v.len[39], 13);
    assert_memory_equal(v.bytes[39], "<|endoftext|>", 13);
    assert_int_equal(v.len[36], 2);
    assert_memory_equal(v.bytes[36], "\xff\xfe", 2);
    assert_int_equal(v.len[0], 1);
    assert_int_equal(v.bytes[0][0], '\n');
    // Not character level (multi-byte tokens): no trit tokenizer encodes with these ids.
    assert_null(trit_tokenizer_from_llmc(&v));
    assert_non_null(strstr(trit_last_error(), "merges"));
    trit_llmc_vocab_free(&v);

    // A character-level tokenizer goes out and comes back as the same tokenizer.
    const char text[] = "to be, or not to be: that is the question\n";
    trit_tokenizer *tok = trit_tokenizer_train_char(text, sizeof text - 1);
    assert_int_equal(trit_llmc_vocab_write(tok, 0, tfile_path("tok.bin")), TRIT_OK);
    assert_int_equal(trit_llmc_vocab_read(tfile_path("tok.bin"), &v), TRIT_OK);
    assert_int_equal(v.n, trit_tokenizer_vocab_size(tok));
    assert_int_equal(v.eot, 0);
    trit_tokenizer *back = trit_tokenizer_from_llmc(&v);
    assert_non_null(back);
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    assert_int_equal(trit_tokenizer_encode(tok, text, sizeof text - 1, &a, &na), TRIT_OK);
    assert_int_equal(trit_tokenizer_encode(back, text, sizeof text - 1, &b, &nb), TRIT_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof *a);
    free(a), free(b);
    trit_tokenizer_free(back);
    trit_llmc_vocab_free(&v);
    assert_int_equal(trit_llmc_vocab_write(tok, 99, tfile_path("bad_eot.bin")), TRIT_ERR_RANGE);
    assert_false(tfile_exists(tfile_path("bad_eot.bin")));
    trit_tokenizer_free(tok);
}

static void expect_vocab_fails(const uint8_t *d, size_t n, const char *says) {
    tfile_write(tfile_path("badtok.bin"), d, n);
    trit_llmc_vocab v;
    assert_int_not_equal(trit_llmc_vocab_read(tfile_path("badtok.bin"), &v), TRIT_OK);
    print_message("refused: %s\n", trit_last_error());
    if (!strstr(trit_last_error(), says)) fail_msg("message '%s' lacks '%s'", trit_last_error(), says);
    assert_null(v.bytes);
}

static void test_bad_tokenizer_files(void **state) {
    (void)state;
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(fixture("tokenizer.bin"), &d, &n), TRIT_OK);
    expect_vocab_fails(d, n - 1, "runs past the end");
    expect_vocab_fails(d, 1000, "shorter than");
    expect_vocab_fails(d, 1024 + 30, "which its 1054 bytes cannot hold");
    uint8_t *e = malloc(n + 1);
    memcpy(e, d, n);
    e[n] = 'x';
    expect_vocab_fails(e, n + 1, "1 bytes after its 40 tokens");
    trit_le32_store(e + 12, 40);
    expect_vocab_fails(e, n, "end-of-text id 40");
    memcpy(e, d, n);
    trit_le32_store(e + 4, 3);
    expect_vocab_fails(e, n, "version 3");
    memcpy(e, d, n);
    e[1024] = 0;
    expect_vocab_fails(e, n, "has length 0");
    free(e), free(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llmc_models),
        cmocka_unit_test(test_llmc_trainer_loss),
        cmocka_unit_test(test_bf16_round_trip),
        cmocka_unit_test(test_bad_models),
        cmocka_unit_test(test_tokenizer_file),
        cmocka_unit_test(test_bad_tokenizer_files),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
