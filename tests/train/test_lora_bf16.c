// `trit finetune --lora ... --precision bf16 --adapter-dtype bf16` on the baby config (4 x 128,
// T 64, B 12), LoRA and QLoRA (NF4 + double quant), against the same runs with f32 adapters:
// the first step is the same bits, the val loss after K steps within a bound from bf16's
// precision, a stopped and resumed bf16-adapter run repeats the uninterrupted one bit for bit,
// the saved adapter is BF16, and the flag's misuses are refused.
//
// The bound. Both runs compute in bf16 (medium matmul precision): the f32 run's GEMMs round its
// f32 A and B to bf16 while packing, which is what the bf16 run stores, so step 1 reads the same
// values (tests/nn/test_lora_bf16.c) and its loss and gradient norm are the same bits. Each update
// then rounds the bf16 run's A and B once, stochastically: less than one bf16 ulp, 2^-7 of the
// value (8 significant bits). After K updates every adapter value is within about K 2^-7 of
// itself of the f32 run's (the errors added; independent, unbiased errors would add only in
// quadrature), so the adapter's product s B A x within about 2 K 2^-7 (A and B), and to first
// order the loss within 2 K 2^-7 times the adapter's whole effect on it, |L - L0| (L0: the same
// model with B = 0, the adapter at identity). Bound: 2 K 2^-7 |L - L0|, 0.125 |L - L0| at K = 8.
// Seen (AMD EPYC Zen 4): |L - L0| 0.019 and 0.020 (LoRA, QLoRA), the runs 5.4e-5 and 2.1e-5
// apart against bounds of 2.4e-3 and 2.5e-3: the bound is the worst case, every rounding a full
// ulp the same way; stochastic rounding is unbiased (standard deviation at most half an ulp), and
// the loss sums over thousands of values whose errors cancel. An adapter that did not train, or
// one updated with its gradients' sign lost, misses the bound by |L - L0|.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"

enum { K = 8, EVAL_BATCHES = 4 };

static const char *const LORA = "r=8,alpha=16,targets=c_attn,attn.c_proj,c_fc,mlp.c_proj";

static char root[512], text[600], base[600];

typedef struct record {
    double loss[K + 1], norm[K + 1];
} record;

static void on_step(void *ctx, const trit_train_step_info *info) {
    record *r = ctx;
    r->loss[info->step] = info->loss;
    r->norm[info->step] = info->grad_norm;
}

// About 40 KB of the fixture's words: a val split of 4 KB holds EVAL_BATCHES of 12 x 64 tokens.
static void write_text(const char *path) {
    static const char *words[] = {"the", "king", "and", "queen", "of", "a", "small", "land", "rode",
                                  "to", "sea", "where", "wind", "sang", "old", "songs", "by", "night"};
    char *t = malloc(48000);
    assert_non_null(t);
    size_t n = 0;
    for (uint64_t i = 0; n < 40000; i++) {
        const char *w = words[trit_rng_u32(7, 1, i) % (sizeof words / sizeof words[0])];
        n += (size_t)snprintf(t + n, 48000 - n, "%s%s", w, i % 11 == 10 ? ".\n" : " ");
    }
    tfile_write(path, t, n);
    free(t);
}

static void baby(trit_train_config *c, const char *out) {
    tf_tiny_config(c, text, out);
    c->layers = 4, c->heads = 4, c->dim = 128, c->seq = 64, c->batch = 12;
    c->eval_every = 0, c->eval_batches = 1;
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "lora-bf16");
    snprintf(text, sizeof text, "%s/text.txt", root);
    snprintf(base, sizeof base, "%s/base", root);
    write_text(text);
    trit_train_config c;
    baby(&c, base);
    c.steps = 30, c.warmup = 3;
    if (trit_train_run(&c, NULL, NULL) != TRIT_OK) fail_msg("base: %s", trit_last_error());
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

static void finetune_config(trit_train_config *c, const char *out, const char *qbase, const char *dtype) {
    baby(c, out);
    assert_int_equal(trit_train_config_set(c, "init-from", base), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "lora", LORA), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "precision", "bf16"), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "adapter-dtype", dtype), TRIT_OK);
    assert_int_equal(trit_train_config_set(c, "quantize-base", qbase), TRIT_OK);
    if (strcmp(qbase, "off") != 0) c->double_quant = 1;
    c->steps = K, c->warmup = 1, c->lr = 1e-2;
}

static void finetune(const char *out, const char *qbase, const char *dtype, record *r) {
    trit_train_config c;
    finetune_config(&c, out, qbase, dtype);
    trit_train_hooks h = {.on_step = on_step, .ctx = r};
    if (trit_train_run(&c, &h, NULL) != TRIT_OK) fail_msg("%s: %s", out, trit_last_error());
}

// The val loss of a run's model (as trained: an NF4 base as its decoded codes), its adapter's
// B zeroed first when identity.
static double val_loss(const char *run, bool identity) {
    trit_gpt *m = trit_checkpoint_load_as_trained(run, NULL);
    assert_non_null(m);
    for (int i = 0; identity && i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        if (strstr(t->name, ".lora_B.")) memset(trit_tensor_ptr(t), 0, trit_tensor_nbytes(t));
    }
    char shard[800];
    snprintf(shard, sizeof shard, "%s/%s", run, TRIT_DATA_VAL);
    double loss = NAN;
    int64_t used = 0;
    assert_int_equal(trit_eval_loss(m, shard, EVAL_BATCHES, 12, 64, &loss, &used), TRIT_OK);
    assert_int_equal(used, EVAL_BATCHES);
    trit_gpt_free(m);
    return loss;
}

static void check_pair(const char *qbase) {
    char a[700], b[700], path[800];
    snprintf(a, sizeof a, "%s/%s-f32", root, qbase);
    snprintf(b, sizeof b, "%s/%s-bf16", root, qbase);
    record f, h;
    memset(&f, 0, sizeof f), memset(&h, 0, sizeof h);
    finetune(a, qbase, "f32", &f);
    finetune(b, qbase, "bf16", &h);
    assert_memory_equal(&f.loss[1], &h.loss[1], sizeof(double));
    assert_memory_equal(&f.norm[1], &h.norm[1], sizeof(double));
    const double lf = val_loss(a, false), lh = val_loss(b, false), l0 = val_loss(a, true);
    const double bound = 2 * K * 0x1p-7 * fabs(lf - l0);
    printf("  %s: val loss at identity %.6f, f32 adapter %.6f, bf16 adapter %.6f: %.3g apart, bound %.3g\n", qbase, l0,
           lf, lh, fabs(lh - lf), bound);
    assert_true(l0 - lf > 0.01);  // the adapter learned something to bound against
    assert_true(fabs(lh - lf) <= bound);
    snprintf(path, sizeof path, "%s/%s", b, TRIT_PEFT_WEIGHTS);
    trit_safetensors *st = trit_safetensors_open(path);
    assert_non_null(st);
    assert_int_equal(trit_safetensors_count(st), 4 * 4 * 2);
    for (int64_t i = 0; i < trit_safetensors_count(st); i++) assert_string_equal(trit_safetensors_at(st, i)->dtype_name, "BF16");
    trit_safetensors_close(st);
}

static void test_lora(void **state) {
    (void)state;
    check_pair("off");
}

static void test_qlora(void **state) {
    (void)state;
    check_pair("nf4");
}

// Stochastic rounding draws its bits from (seed, parameter, step, element): a run stopped at
// step 3 and resumed repeats the uninterrupted one.
static void test_resume(void **state) {
    (void)state;
    char a[700], b[700];
    snprintf(a, sizeof a, "%s/resume-a", root);
    snprintf(b, sizeof b, "%s/resume-b", root);
    record x, y;
    memset(&x, 0, sizeof x), memset(&y, 0, sizeof y);
    finetune(a, "nf4", "bf16", &x);
    trit_train_config c;
    finetune_config(&c, b, "nf4", "bf16");
    c.stop_after = 3;
    trit_train_hooks h = {.on_step = on_step, .ctx = &y};
    assert_int_equal(trit_train_run(&c, &h, NULL), TRIT_OK);
    trit_train_config_init(&c);
    assert_int_equal(trit_train_config_set(&c, "resume", b), TRIT_OK);
    c.quiet = 1, c.threads = 1;
    assert_int_equal(trit_train_run(&c, &h, NULL), TRIT_OK);
    for (int s = 1; s <= K; s++) assert_memory_equal(&x.loss[s], &y.loss[s], sizeof(double));
    trit_train_config_init(&c);  // resuming with the other dtype: refused by the saved config
    assert_int_equal(trit_train_config_set(&c, "resume", b), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "lora-dtype", "f32"), TRIT_OK);
    c.quiet = 1;
    assert_int_not_equal(trit_train_run(&c, NULL, NULL), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "trained with --adapter-dtype bf16, but --adapter-dtype f32 was given"));
}

// Without --precision bf16, without an adapter: refused before anything is written.
static void test_refused(void **state) {
    (void)state;
    char out[700];
    snprintf(out, sizeof out, "%s/refused", root);
    trit_train_config c;
    finetune_config(&c, out, "off", "bf16");
    assert_int_equal(trit_train_config_set(&c, "precision", "fp32"), TRIT_OK);
    assert_int_not_equal(trit_train_run(&c, NULL, NULL), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "--adapter-dtype bf16 keeps the adapter in bf16 for bf16 compute: add "
                                              "--precision bf16"));
    baby(&c, out);
    assert_int_equal(trit_train_config_set(&c, "precision", "bf16"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "adapter-dtype", "bf16"), TRIT_OK);
    assert_int_not_equal(trit_train_run(&c, NULL, NULL), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "--adapter-dtype bf16 stores an adapter's weights: it needs --lora or "
                                              "--adapter-type"));
    assert_int_not_equal(trit_train_config_set(&c, "adapter-dtype", "f16"), TRIT_OK);
    assert_false(tfile_exists(out));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lora), cmocka_unit_test(test_qlora), cmocka_unit_test(test_resume),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
