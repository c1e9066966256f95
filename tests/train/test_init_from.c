// --init-from RUN: a new run starts from RUN's weights as trained (fp32, --qat, `trit quantize`d),
// so its first step's loss is RUN's evaluation loss on that batch; its optimizer and schedule
// are fresh (the first AdamW step moves every weight by the learning rate); its architecture and
// tokenizer are RUN's; a run started that way resumes; and every bad input (a missing or
// incomplete RUN, another shape, another tokenizer or vocabulary, --resume beside it) fails
// with a message naming the problem and leaves no run directory behind.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"
#include "trit/io.h"

static char root[512], corpus[600], base[600];  // scratch, the text, RUN (trained once)

static const char *at(const char *name) { return tfile_join(root, name); }

typedef struct first {
    double loss, lr;
    int64_t steps;
} first;

static void on_step(void *ctx, const trit_train_step_info *info) {
    first *f = ctx;
    if (f->steps++ == 0) f->loss = info->loss, f->lr = info->lr;
}

static trit_status run(trit_train_config *c, first *f) {
    trit_train_hooks h = {.on_step = on_step, .ctx = f};
    trit_train_result r;
    return trit_train_run(c, &h, &r);
}

static void train_ok(trit_train_config *c, first *f) {
    if (run(c, f) != TRIT_OK) fail_msg("train: %s", trit_last_error());
}

// RUN: 2 layers so that "2 layers" reads as the message says; trained on the corpus.
static void base_config(trit_train_config *c, const char *out) {
    tf_tiny_config(c, corpus, out);
    c->layers = 2;
}

// A new run from `from`: one step of B sequential windows, no warmup, so its first batch is the
// first B windows of its train.bin (what trit_eval_loss reads) at the full learning rate.
static void init_config(trit_train_config *c, const char *from, const char *data, const char *out) {
    trit_train_config_init(c);
    if (data) assert_int_equal(trit_train_config_set(c, "data", data), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "out", out), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "init-from", from), TRIT_OK);
    c->batch = 4, c->steps = 1, c->warmup = 0, c->lr = 1e-3, c->order = TRIT_DATA_SEQUENTIAL;
    c->eval_every = 0, c->eval_batches = 1, c->ckpt_every = 0, c->sample_tokens = 0, c->threads = 1, c->quiet = 1;
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "init-from");
    snprintf(corpus, sizeof corpus, "%s", at("corpus.txt"));
    tf_write_corpus(corpus);
    snprintf(base, sizeof base, "%s", at("base"));
    trit_train_config c;
    base_config(&c, base);
    first f = {0};
    train_ok(&c, &f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

// The first step's loss of a run from `from` equals from's loss (as trained) on that batch, the
// first windows of the shards in `dir`.
static void expect_first_loss(const char *from, const char *dir, const trit_train_config *c, const first *f) {
    trit_gpt *m = trit_checkpoint_load_as_trained(from, NULL);
    assert_non_null(m);
    char shard[800];
    snprintf(shard, sizeof shard, "%s/%s", dir, TRIT_DATA_TRAIN);
    double want = 0;
    assert_int_equal(trit_eval_loss(m, shard, 1, c->batch, trit_gpt_get_config(m)->seq_len, &want, NULL), TRIT_OK);
    trit_gpt_free(m);
    print_message("first step %.9f, %s evaluated %.9f\n", f->loss, from, want);
    // The training graph computes the head in row chunks: the same sums to float rounding.
    assert_true(fabs(f->loss - want) < 5e-6 * want);
}

static void test_starts_from_the_weights(void **state) {
    (void)state;
    trit_train_config c;
    const char *out = at("from-text");
    init_config(&c, base, corpus, out);  // the text again, tokenized with RUN's tokenizer
    first f = {0};
    train_ok(&c, &f);
    expect_first_loss(base, out, &c, &f);

    // A fresh model's first loss is far from it: the weights were taken.
    trit_train_config fresh;
    base_config(&fresh, at("fresh"));
    fresh.steps = 1, fresh.warmup = 0, fresh.order = TRIT_DATA_SEQUENTIAL;
    first g = {0};
    train_ok(&fresh, &g);
    assert_true(fabs(g.loss - f.loss) > 0.1);

    // The architecture and tokenizer are RUN's; the run's own state starts at step 0.
    trit_train_config saved;
    int64_t step = -1;
    assert_int_equal(trit_train_run_info(out, &saved, &step), TRIT_OK);
    assert_int_equal(step, 1);
    assert_int_equal(saved.layers, 2);
    assert_int_equal(saved.dim, 16);
    assert_string_equal(saved.init_from, base);
    uint8_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    assert_int_equal(trit_file_read_all(at("base/tokenizer.bin"), &a, &na), TRIT_OK);
    assert_int_equal(trit_file_read_all(at("from-text/tokenizer.bin"), &b, &nb), TRIT_OK);
    assert_true(na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);

    // A fresh AdamW's first step moves each weight by lr * g / (|g| + eps), i.e. by the learning
    // rate (a bias has no weight decay); RUN's moments would give other steps.
    assert_true(f.lr == 1e-3);
    trit_gpt *before = trit_checkpoint_load_model(base, NULL), *after = trit_checkpoint_load_model(out, NULL);
    assert_non_null(before);
    assert_non_null(after);
    const trit_tensor *p = trit_gpt_find(before, "ln_f.bias"), *q = trit_gpt_find(after, "ln_f.bias");
    for (int64_t i = 0; i < trit_tensor_numel(p); i++) {
        const double d = fabs(trit_tensor_get_flat(q, i) - trit_tensor_get_flat(p, i));
        if (fabs(d - 1e-3) > 1e-5) fail_msg("ln_f.bias[%lld] moved by %.9g, not the learning rate", (long long)i, d);
    }
    trit_gpt_free(before);
    trit_gpt_free(after);
}

// From a prepared directory with RUN's tokenizer (RUN's own directory is one), with the run's
// precision and a run that stops and resumes (its saved --init-from does not apply again).
static void test_prepared_dir_and_resume(void **state) {
    (void)state;
    trit_train_config c;
    init_config(&c, base, base, at("from-dir"));
    c.steps = 4, c.stop_after = 2;
    first f = {0};
    train_ok(&c, &f);
    expect_first_loss(base, base, &c, &f);
    trit_train_config r;
    trit_train_config_init(&r);
    assert_int_equal(trit_train_config_set(&r, "resume", at("from-dir")), TRIT_OK);
    r.quiet = 1;
    first g = {0};
    train_ok(&r, &g);
    assert_int_equal(g.steps, 2);
    int64_t step = 0;
    assert_int_equal(trit_train_run_info(at("from-dir"), NULL, &step), TRIT_OK);
    assert_int_equal(step, 4);
}

// A --qat run loads as trained (its matrices quantized with the training rule), and so does a
// quantized checkpoint (what `trit quantize` writes): the first loss is theirs.
static void test_qat_and_quantized_runs(void **state) {
    (void)state;
    trit_train_config c;
    base_config(&c, at("qat"));
    assert_int_equal(trit_train_config_set(&c, "qat", "int2"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "group", "16"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "qat-acts", "off"), TRIT_OK);
    first f = {0};
    train_ok(&c, &f);
    init_config(&c, at("qat"), at("qat"), at("from-qat"));  // a plain run from the int2 weights
    memset(&f, 0, sizeof f);
    train_ok(&c, &f);
    expect_first_loss(at("qat"), at("qat"), &c, &f);
    // Not the latent weights: those give another loss.
    trit_gpt *latent = trit_checkpoint_load_model(at("qat"), NULL);
    assert_non_null(latent);
    double l = 0;
    assert_int_equal(trit_eval_loss(latent, at("qat/train.bin"), 1, c.batch, 16, &l, NULL), TRIT_OK);
    trit_gpt_free(latent);
    print_message("latent weights: %.9f\n", l);
    assert_true(fabs(l - f.loss) > 5e-5 * l);

    // A quantized copy of RUN in a directory of its own, with RUN's tokenizer and shards.
    trit_gpt *m = trit_checkpoint_load_model(base, NULL);
    assert_non_null(m);
    trit_quant_spec q = trit_quant_spec_default(TRIT_QINT4);
    q.group_size = 16;
    trit_quantize_report rep;
    assert_int_equal(trit_gpt_quantize(m, &q, TRIT_QUANTIZE_BLOCKS, &rep), TRIT_OK);
    assert_int_equal(trit_make_dir(at("int4"), NULL), TRIT_OK);
    assert_int_equal(trit_checkpoint_save_model(m, at("int4/model.safetensors"), 12), TRIT_OK);
    trit_gpt_free(m);
    const char *files[3] = {TRIT_CKPT_TOKENIZER, TRIT_DATA_TRAIN, TRIT_DATA_VAL};
    for (int i = 0; i < 3; i++) {
        char src[700], dst[700];
        snprintf(src, sizeof src, "%s/%s", base, files[i]);
        snprintf(dst, sizeof dst, "%s/%s", at("int4"), files[i]);
        assert_int_equal(trit_file_copy(src, dst), TRIT_OK);
    }
    init_config(&c, at("int4"), at("int4"), at("from-int4"));
    memset(&f, 0, sizeof f);
    train_ok(&c, &f);
    expect_first_loss(at("int4"), at("int4"), &c, &f);
    // Not RUN's f32 weights either.
    trit_gpt *plain = trit_checkpoint_load_model(base, NULL);
    assert_non_null(plain);
    assert_int_equal(trit_eval_loss(plain, at("int4/train.bin"), 1, c.batch, 16, &l, NULL), TRIT_OK);
    trit_gpt_free(plain);
    print_message("f32 weights: %.9f\n", l);
    assert_true(fabs(l - f.loss) > 2e-5 * l);
}

// A bad input fails with a message holding `want` and makes no run directory.
static void expect_refused(trit_train_config *c, const char *want) {
    first f = {0};
    if (run(c, &f) == TRIT_OK) fail_msg("--init-from %s was accepted", c->init_from);
    if (!strstr(trit_last_error(), want)) fail_msg("message '%s' lacks '%s'", trit_last_error(), want);
    if (tfile_exists(c->out)) fail_msg("'%s' was made", c->out);
}

static void test_bad_input(void **state) {
    (void)state;
    trit_train_config c;
    char out[700];
    snprintf(out, sizeof out, "%s", at("refused"));
    init_config(&c, at("nowhere"), corpus, out);
    expect_refused(&c, "no such directory");
    init_config(&c, corpus, corpus, out);
    expect_refused(&c, "is a file");
    assert_int_equal(trit_make_dir(at("empty"), NULL), TRIT_OK);
    init_config(&c, at("empty"), corpus, out);
    expect_refused(&c, "has no model.safetensors");
    // Another shape.
    init_config(&c, base, corpus, out);
    c.layers = 6;
    expect_refused(&c, "has 2 layers, --layers says 6: drop --layers or start from another run");
    init_config(&c, base, corpus, out);
    assert_int_equal(trit_train_config_set(&c, "norm", "rms"), TRIT_OK);
    expect_refused(&c, "has LayerNorm, --norm says rms");
    init_config(&c, base, corpus, out);
    c.seq = 32;
    expect_refused(&c, "has context 16, --seq says 32");
    // Another tokenizer or vocabulary.
    init_config(&c, base, corpus, out);
    assert_int_equal(trit_train_config_set(&c, "tokenizer", "bpe"), TRIT_OK);
    expect_refused(&c, "has a char tokenizer, --tokenizer says bpe");
    assert_int_equal(trit_prepare_text(corpus, TRIT_TOKENIZER_BPE, 300, 0.1, at("bpe"), NULL), TRIT_OK);
    init_config(&c, base, at("bpe"), out);
    expect_refused(&c, "(bpe, 300 tokens) is not the tokenizer of");
    init_config(&c, base, NULL, out);  // the addition task has its own tokenizer
    expect_refused(&c, "the addition task's tokenizer (char, 12 tokens) is not the tokenizer of");
    tfile_write(at("other.txt"), "Zebras quietly vex jumpy fog.\n", 30);  // 'Z' and 'x' are not in RUN's
    init_config(&c, base, at("other.txt"), out);
    expect_refused(&c, "is not in the char vocabulary");
    // RUN's files disagree: its tokenizer is another run's.
    assert_int_equal(trit_make_dir(at("mixed"), NULL), TRIT_OK);
    assert_int_equal(trit_file_copy(at("base/model.safetensors"), at("mixed/model.safetensors")), TRIT_OK);
    assert_int_equal(trit_file_copy(at("bpe/tokenizer.bin"), at("mixed/tokenizer.bin")), TRIT_OK);
    init_config(&c, at("mixed"), corpus, out);
    expect_refused(&c, "the directory mixes two runs");
    // A damaged model file.
    assert_int_equal(trit_make_dir(at("cut"), NULL), TRIT_OK);
    tfile_write(at("cut/model.safetensors"), "\x10\x00\x00\x00\x00\x00\x00\x00{}", 10);
    assert_int_equal(trit_file_copy(at("base/tokenizer.bin"), at("cut/tokenizer.bin")), TRIT_OK);
    init_config(&c, at("cut"), corpus, out);
    expect_refused(&c, "--init-from '");
    // Beside --resume.
    init_config(&c, base, corpus, out);
    assert_int_equal(trit_train_config_set(&c, "resume", base), TRIT_OK);
    c.out[0] = 0;
    expect_refused(&c, "--init-from starts a new run");
    // Into RUN itself (a `trit quantize` directory has no train state to stop it).
    init_config(&c, at("int4"), corpus, at("int4"));
    first g = {0};
    assert_int_not_equal(run(&c, &g), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "needs a directory of its own"));
    assert_false(tfile_exists(at("int4/metrics.jsonl")));
    // Over an existing run: refused before anything is written there.
    init_config(&c, base, corpus, at("from-text"));
    first f = {0};
    assert_int_not_equal(run(&c, &f), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "already holds a training run"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_starts_from_the_weights),
        cmocka_unit_test(test_prepared_dir_and_resume),
        cmocka_unit_test(test_qat_and_quantized_runs),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
