// `trit tokenize` and `trit prepare --tokenizer gpt2:DIR`: ids of standard input equal to
// tiktoken's (the fixture), --decode gives the bytes back, a run keeps the tokenizer it was
// prepared with, JSON Lines documents get <|endoftext|>, and bad tokenizer files or arguments
// exit non-zero with a message.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "cli_run.h"
#include "scratch.h"
#include "trit/io.h"

static char root[512], gpt2[1024], spec[1100];

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "clitok");
    const char *data = getenv("TRIT_DATA_DIR");
    snprintf(gpt2, sizeof gpt2, "%s/gpt2", data && *data ? data : "../shared/data");
    snprintf(spec, sizeof spec, "gpt2:%s", gpt2);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

static void skip_without_gpt2(void) {
    char p[1200];
    snprintf(p, sizeof p, "%s/encoder.json", gpt2);
    if (!tfile_exists(p)) {
        print_message("%s not found (TRIT_DATA_DIR): skipping\n", p);
        skip();
    }
}

// `trit args...` with standard input from the file `in`.
static cli_result run_in(const char *in, const char *const *args) {
    const int saved = dup(0), fd = open(in, O_RDONLY);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 0);  // the child inherits it
    close(fd);
    cli_result r = cli_run(root, args);
    dup2(saved, 0);
    close(saved);
    return r;
}

#define RUN_IN(in, ...) run_in(in, (const char *const[]){__VA_ARGS__, NULL})

static const char *fixture(const char *name) {
    static char p[1024];
    const char *src = getenv("TRIT_SOURCE_DIR");
    snprintf(p, sizeof p, "%s/tests/reference/fixtures/%s", src && *src ? src : ".", name);
    return p;
}

static void test_encode_decode(void **state) {
    (void)state;
    skip_without_gpt2();
    char text_path[1024], ids_path[1024];
    snprintf(text_path, sizeof text_path, "%s", fixture("gpt2_text.txt"));
    snprintf(ids_path, sizeof ids_path, "%s", fixture("gpt2_text.ids"));
    char *want = cli_slurp(ids_path);
    cli_result r = RUN_IN(text_path, "tokenize", "--tokenizer", spec);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, want);
    cli_free(&r);
    r = RUN_IN(ids_path, "tokenize", "--tokenizer", spec, "--decode");
    assert_int_equal(r.code, 0);
    char *text = cli_slurp(text_path);
    assert_string_equal(r.out, text);  // the fixture holds no NUL past U+0000, which is first
    cli_free(&r);
    free(text);
    free(want);
}

static void test_prepare_and_run_tokenizer(void **state) {
    (void)state;
    skip_without_gpt2();
    char jsonl[600], out[600], in[600];
    snprintf(jsonl, sizeof jsonl, "%s/docs.jsonl", root);
    snprintf(out, sizeof out, "%s/prepared", root);
    snprintf(in, sizeof in, "%s/in.txt", root);
    const char docs[] = "{\"body\": \"First Citizen:\\n\", \"n\": 1}\n\n{\"body\": \"a<|endoftext|>b\"}\n"
                        "{\"body\": \"First Citizen:\\nFirst Citizen:\\n\"}\n";
    tfile_write(jsonl, docs, sizeof docs - 1);
    cli_expect(cli_run(root, (const char *const[]){"prepare", "--data", jsonl, "--field", "body", "--tokenizer", spec,
                                                   "--out", out, "--val-fraction", "0.4", NULL}),
               0, "gpt2 tokenizer with 50257 tokens; 15 train and 9 val tokens", NULL);
    char train[700], val[700];
    snprintf(train, sizeof train, "%s/train.bin", out);
    snprintf(val, sizeof val, "%s/val.bin", out);
    uint16_t *t;
    int64_t n;
    assert_int_equal(trit_shard_read(train, &t, &n), TRIT_OK);
    // <|endoftext|> before each document; the special token's text inside one stays text.
    const uint16_t want[] = {50256, 5962, 22307, 25, 198, 50256, 64, 27, 91, 437, 1659, 5239, 91, 29, 65};
    assert_int_equal(n, 15);
    assert_memory_equal(t, want, sizeof want);
    free(t);
    // The prepared directory's tokenizer is GPT-2's.
    tfile_write(in, "First Citizen:\n", 15);
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", out), 0, "5962 22307 25 198\n", NULL);
    cli_expect(cli_run(root, (const char *const[]){"prepare", "--data", jsonl, "--field", "text", "--tokenizer", spec,
                                                   "--out", out, NULL}),
               1, NULL, "line 1 has no string field \"text\"");
}

static void test_bad_input(void **state) {
    (void)state;
    char dir[600], in[600], enc[700], bpe[700];
    snprintf(dir, sizeof dir, "%s/badtok", root);
    snprintf(in, sizeof in, "%s/in.txt", root);
    snprintf(enc, sizeof enc, "%s/encoder.json", dir);
    snprintf(bpe, sizeof bpe, "%s/vocab.bpe", dir);
    tfile_write(in, "hello", 5);
    mkdir(dir, 0755);
    char bad_spec[700];
    snprintf(bad_spec, sizeof bad_spec, "gpt2:%s", dir);
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", bad_spec), 1, NULL, "no GPT-2 tokenizer files");
    tfile_write(enc, "{}", 2);
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", bad_spec), 1, NULL, "has encoder.json but not vocab.bpe");
    tfile_write(bpe, "#version: 0.2\n", 14);
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", bad_spec), 1, NULL, "has 0 tokens");
    cli_expect(RUN_IN(in, "tokenize"), 2, NULL, "--tokenizer gpt2:DIR|RUN|FILE is required");
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", bad_spec, "extra"), 2, NULL, "unexpected argument");
    char out[600];
    snprintf(out, sizeof out, "%s/never", root);
    cli_expect(cli_run(root, (const char *const[]){"prepare", "--data", in, "--tokenizer", bad_spec, "--out", out, NULL}),
               1, NULL, "has 0 tokens");
    assert_false(tfile_exists(out));
    cli_expect(cli_run(root, (const char *const[]){"prepare", "--data", in, "--tokenizer", bad_spec, "--vocab", "300",
                                                   "--out", out, NULL}),
               2, NULL, "--vocab sizes a tokenizer trained on the text");
    // trit train takes GPT-2's tokenizer through a prepared directory, and says so.
    cli_expect(cli_run(root, (const char *const[]){"train", "--data", in, "--tokenizer", bad_spec, "--out", out, NULL}),
               2, NULL, "run `trit prepare --data FILE --tokenizer gpt2:");
    assert_false(tfile_exists(out));
    if (!tfile_exists(gpt2)) return;
    // GPT-2's vocabulary with a malformed merge line and with a merge of unknown tokens.
    char src[1200];
    snprintf(src, sizeof src, "%s/encoder.json", gpt2);
    uint8_t *data;
    size_t n;
    assert_int_equal(trit_file_read_all(src, &data, &n), TRIT_OK);
    tfile_write(enc, data, n);
    free(data);
    tfile_write(bpe, "#version: 0.2\n\xc4\xa0 t\nheo\n", 24);
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", bad_spec), 1, NULL, "vocab.bpe' line 3: expected two tokens");
    tfile_write(bpe, "#version: 0.2\n\xc4\xa0 t\nq\xc3\xbf\xc3\xbf \xc3\xbfz\n", 26);
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", bad_spec), 1, NULL, "which '");
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", spec, "--decode"), 2, NULL, "expects token ids");
    tfile_write(in, "1 99999", 7);
    cli_expect(RUN_IN(in, "tokenize", "--tokenizer", spec, "--decode"), 1, NULL, "outside the vocabulary");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encode_decode),
        cmocka_unit_test(test_prepare_and_run_tokenizer),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
