// `trit quantize` end to end: a tiny run quantized to every format writes a run directory whose
// val loss `trit eval` reproduces exactly, from which `trit sample` generates what the library
// generates from it, and whose checkpoint holds packed tensors; int8 and int4 checkpoints
// against the fp32 run (weights within half a step, the loss within the rounding's expected
// bound); bad formats, groups and runs are refused with a message and no output.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "../train/train_fixture.h"
#include "cli_run.h"

static char root[512], corpus[600], run[600];

#define RUN(...) cli_run(root, (const char *const[]){__VA_ARGS__, NULL})

static cli_result expect(cli_result r, int code, const char *out_has, const char *err_has) {
    if (r.code != code || (out_has && !strstr(r.out, out_has)) || (err_has && !strstr(r.err, err_has)))
        fail_msg("exit %d (want %d)\n--- stdout:\n%s\n--- stderr:\n%s\n--- wanted stdout '%s', stderr '%s'", r.code,
                 code, r.out, r.err, out_has ? out_has : "", err_has ? err_has : "");
    return r;
}

static int setup(void **state) {
    (void)state;
    tfile_mkdtemp(root, sizeof root, "cliq");
    snprintf(corpus, sizeof corpus, "%s/corpus.txt", root);
    snprintf(run, sizeof run, "%s/run", root);
    tf_write_corpus(corpus);
    cli_result r = expect(RUN("train", "--data", corpus, "--out", run, "--layers", "1", "--heads", "2", "--dim", "32",
                              "--seq", "16", "--batch", "4", "--steps", "30", "--eval-every", "30", "--eval-batches", "2",
                              "--sample-tokens", "0", "--threads", "1"),
                          0, NULL, NULL);
    cli_free(&r);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

// The loss after quantization as printed by quantize ("-> <fmt> X.XXXX") and by eval.
static double after_loss(const char *out, const char *fmt) {
    char key[64];
    snprintf(key, sizeof key, "-> %s ", fmt);
    const char *p = strstr(out, key);
    assert_non_null(p);
    return strtod(p + strlen(key), NULL);
}

static void test_every_format(void **state) {
    (void)state;
    const char *fmts[] = {"int8", "int4", "int2", "nf4", "fp8", "fp8-e5m2"};
    for (int i = 0; i < 6; i++) {
        char dir[700];
        snprintf(dir, sizeof dir, "%s/q-%s", root, fmts[i]);
        cli_result r = expect(RUN("quantize", run, "--format", fmts[i], "--group", "16", "--out", dir, "--batches", "4",
                                  "--batch", "2", "--threads", "1"),
                              0, "bits/param", NULL);
        const double q = after_loss(r.out, fmts[i]);
        cli_free(&r);
        r = expect(RUN("eval", "--ckpt", dir, "--batches", "4", "--batch", "2", "--threads", "1"), 0, "val loss", NULL);
        assert_true(fabs(strtod(strstr(r.out, "val loss ") + 9, NULL) - q) < 1e-4);
        cli_free(&r);
        // The text after the prompt is what this quantized checkpoint generates (trit sample
        // echoes the prompt itself, so the prompt alone shows nothing).
        r = expect(RUN("sample", "--ckpt", dir, "--prompt", "the ", "--max-tokens", "10", "--seed", "5", "--threads", "1"),
                   0, NULL, NULL);
        cli_expect_sample(r.out, cli_expected_sample(dir, "the ", 5, 10, 0.8), "the ");
        cli_free(&r);
        r = expect(RUN("info", dir), 0, "h.0.attn.c_attn.weight.scales", NULL);
        cli_free(&r);
    }
    // int8 per channel with double quantization and stochastic rounding; the embedding too.
    char dir[700];
    snprintf(dir, sizeof dir, "%s/q-mix", root);
    cli_result r = expect(RUN("quantize", run, "--format", "int8", "--double-quant", "--stochastic", "--affine",
                              "--embeddings", "--out", dir, "--batches", "2", "--threads", "1"),
                          0, "double quant", NULL);
    cli_free(&r);
    r = expect(RUN("info", dir), 0, "wte.weight.qscales", NULL);
    cli_free(&r);
}

// `trit train --ternary` (a switch: no value) trains through BitNet's quantizers, and its weights
// frozen to 2-bit ternary give the loss the ternary graph gave (weights only: --qat-acts off).
static void test_ternary_train_and_freeze(void **state) {
    (void)state;
    char run2[700], dir[700];
    snprintf(run2, sizeof run2, "%s/tern", root);
    snprintf(dir, sizeof dir, "%s/tern-q", root);
    cli_result r = expect(RUN("train", "--ternary", "--qat-acts", "off", "--data", corpus, "--out", run2, "--layers", "1",
                              "--heads", "2", "--dim", "32", "--seq", "16", "--batch", "4", "--steps", "20",
                              "--eval-every", "20", "--eval-batches", "2", "--sample-tokens", "0", "--threads", "1"),
                          0, "val loss", NULL);
    cli_free(&r);
    r = expect(RUN("eval", "--ckpt", run2, "--batches", "4", "--batch", "2", "--threads", "1"), 0, "val loss", NULL);
    const double trained = strtod(strstr(r.out, "val loss ") + 9, NULL);
    cli_free(&r);
    r = expect(RUN("quantize", run2, "--format", "ternary", "--out", dir, "--batches", "4", "--batch", "2", "--threads",
                   "1"),
               0, "2.0", NULL);  // about 2 bits per parameter
    // "Before" is the run as eval sees it (quantized as trained), and freezing loses nothing.
    const char *b = strstr(r.out, "before ");
    assert_non_null(b);
    assert_true(fabs(strtod(b + 7, NULL) - trained) < 1e-4);
    assert_true(fabs(after_loss(r.out, "ternary") - trained) < 1e-4);
    cli_free(&r);
    // Ternary blocks with an int8 head (the tied embedding): its loss is what eval and the decoder see.
    snprintf(dir, sizeof dir, "%s/tern-q8", root);
    r = expect(RUN("quantize", run2, "--format", "ternary", "--head", "int8", "--out", dir, "--batches", "4", "--batch",
                   "2", "--threads", "1"),
               0, "token embedding (tied head) to int8", NULL);
    const double q = after_loss(r.out, "ternary/int8");
    cli_free(&r);
    r = expect(RUN("eval", "--ckpt", dir, "--batches", "4", "--batch", "2", "--threads", "1"), 0, "val loss", NULL);
    assert_true(fabs(strtod(strstr(r.out, "val loss ") + 9, NULL) - q) < 1e-4);
    cli_free(&r);
    r = expect(RUN("eval", "--ckpt", dir, "--decoder", "--batches", "4", "--batch", "2", "--threads", "1"), 0,
               "through the decoder", NULL);
    assert_true(fabs(strtod(strstr(r.out, "val loss ") + 9, NULL) - q) < 1e-3);
    cli_free(&r);
    r = expect(RUN("info", dir), 0, "wte.weight.scales", NULL);
    cli_free(&r);
    r = expect(RUN("sample", "--ckpt", dir, "--prompt", "the ", "--max-tokens", "10", "--temperature", "0", "--threads",
                   "1"),
               0, NULL, NULL);
    cli_expect_sample(r.out, cli_expected_sample(dir, "the ", 1, 10, 0), "the ");
    cli_free(&r);
    r = expect(RUN("train", "--ternary", "1", "--data", corpus), 2, NULL, "unexpected argument '1'");
    cli_free(&r);
}

static double eval_loss(const char *dir) {
    cli_result r = expect(RUN("eval", "--ckpt", dir, "--batches", "4", "--batch", "2", "--threads", "1"), 0, "val loss", NULL);
    const double loss = strtod(strstr(r.out, "val loss ") + 9, NULL);
    cli_free(&r);
    return loss;
}

// The gradient of the fp32 run's loss over the windows eval reads (4 batches of 2 in order from
// val.bin, the model's context), into each block matrix's grad.
static trit_gpt *fp32_gradient(void) {
    char f[700];
    snprintf(f, sizeof f, "%s/%s", run, TRIT_CKPT_MODEL);
    trit_gpt *m = trit_checkpoint_load_model(f, NULL);
    assert_non_null(m);
    const int64_t B = 2, T = trit_gpt_get_config(m)->seq_len, batches = 4;
    snprintf(f, sizeof f, "%s/%s", run, TRIT_DATA_VAL);
    trit_data *d = trit_data_open(f, T);
    assert_non_null(d);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, B, T, &gg), TRIT_OK);
    trit_graph_set_training(gg.graph, false);
    trit_graph_zero_grad(gg.graph);
    for (int64_t j = 0; j < batches; j++) {
        assert_int_equal(trit_data_batch(d, TRIT_DATA_SEQUENTIAL, 0, j, B, trit_tensor_ptr(gg.idx),
                                         trit_tensor_ptr(gg.targets)),
                         TRIT_OK);
        assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
        assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
    }
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        trit_tensor *t = trit_gpt_tensor(m, i);
        float *g = t->grad->data;
        for (int64_t k = 0; k < trit_tensor_numel(t); k++) g[k] /= (float)batches;  // eval means the batches
    }
    trit_gpt_graph_free(&gg);
    trit_data_free(d);
    return m;
}

// Quantized against the fp32 run it came from, on the windows eval reads, with bounds from the
// fp32 weights and gradient alone (not from the quantizer's output). Symmetric int-k codes in
// groups of 16 put each weight w_i on a multiple of s = amax/(2^(k-1) - 1) (amax: its group's
// largest |w|), so the checkpoint's weight is within s/2 of it (and float rounding of the scale
// product: 1e-6 s). The loss moves by dL = sum_i g_i e_i (g: the fp32 run's gradient, e: the
// rounding errors) plus the second-order term c = e'He/2. Rounding to nearest leaves errors that
// act as independent and uniform on [-s/2, s/2] (variance s^2/12), so the first-order sum has
// the standard deviation sd = sqrt(sum_i g_i^2 s_i^2/12) and stays within 4 sd (a chance of 6e-5
// for a normal sum; the worst case, all errors aligned, is sum_i |g_i| s_i/2, far looser). c is
// measured by the reflection w - e: (L(w + e) + L(w - e))/2 - L(w) = c up to fourth order.
// `trit eval` prints the quantized run's loss to 4 decimals: that is the loss of these weights.
static void test_loss_within_rounding_bound(void **state) {
    (void)state;
    trit_gpt *m = fp32_gradient();
    char val[700];
    snprintf(val, sizeof val, "%s/%s", run, TRIT_DATA_VAL);
    double fp32 = 0;
    assert_int_equal(trit_eval_loss(m, val, 4, 2, 16, &fp32, NULL), TRIT_OK);
    assert_true(fabs(eval_loss(run) - fp32) <= 5e-5 + 1e-6);
    const struct {
        const char *name;
        int bits;
    } fmts[] = {{"int8", 8}, {"int4", 4}};
    for (int k = 0; k < 2; k++) {
        char dir[700];
        snprintf(dir, sizeof dir, "%s/bound-%s", root, fmts[k].name);
        cli_result r = expect(RUN("quantize", run, "--format", fmts[k].name, "--group", "16", "--out", dir, "--batches",
                                  "1", "--threads", "1"),
                              0, "bits/param", NULL);
        cli_free(&r);
        trit_gpt *q = trit_checkpoint_load_model(dir, NULL);
        assert_non_null(q);
        double var = 0, worst = 0;
        int matrices = 0;
        float *saved[64] = {0};
        for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
            if (!trit_gpt_quantized(q, i)) continue;
            matrices++;
            trit_tensor *t = trit_gpt_tensor(m, i);
            const float *g = t->grad->data, *wq = trit_gpt_tensor(q, i)->data;
            float *w = t->data;
            assert_int_equal(trit_tensor_numel(t) % 16, 0);
            assert_true(i < 64);
            saved[i] = malloc(sizeof(float) * (size_t)trit_tensor_numel(t));
            assert_non_null(saved[i]);
            memcpy(saved[i], w, sizeof(float) * (size_t)trit_tensor_numel(t));
            for (int64_t j0 = 0; j0 < trit_tensor_numel(t); j0 += 16) {
                float amax = 0;
                for (int64_t j = j0; j < j0 + 16; j++) amax = fmaxf(amax, fabsf(w[j]));
                const double step = amax / (double)((1 << (fmts[k].bits - 1)) - 1);
                for (int64_t j = j0; j < j0 + 16; j++) {
                    const double e = (double)wq[j] - w[j];
                    if (fabs(e) > step * (0.5 + 1e-6))
                        fail_msg("%s: %s[%lld] is %.9g, %.3g steps of %.3g from the fp32 weight %.9g (at most 1/2)",
                                 fmts[k].name, t->name, (long long)j, (double)wq[j], fabs(e) / step, step, (double)w[j]);
                    worst = fmax(worst, fabs(e) / step);
                    var += (double)g[j] * g[j] * step * step / 12;
                    w[j] = (float)((double)w[j] - e);  // the reflection w - e, put back below
                }
            }
        }
        assert_true(matrices >= 4);  // attention and MLP matrices of the block
        double loss = 0, reflected = 0;
        assert_int_equal(trit_eval_loss(m, val, 4, 2, 16, &reflected, NULL), TRIT_OK);
        for (int i = 0; i < 64; i++) {
            if (!saved[i]) continue;
            memcpy(trit_gpt_tensor(m, i)->data, saved[i], sizeof(float) * (size_t)trit_tensor_numel(trit_gpt_tensor(m, i)));
            free(saved[i]);
        }
        assert_int_equal(trit_eval_loss(q, val, 4, 2, 16, &loss, NULL), TRIT_OK);
        trit_gpt_free(q);
        const double printed = eval_loss(dir), sd = sqrt(var), c = fabs((loss + reflected) / 2 - fp32);
        print_message("%s: largest error %.3f steps; loss %.7f, fp32 %.7f: change %+.3g, bound 4 sd %.3g + second order "
                      "%.3g\n", fmts[k].name, worst, loss, fp32, loss - fp32, 4 * sd, c);
        if (!(fabs(loss - fp32) <= 4 * sd + c))
            fail_msg("%s: the loss moved by %.3g from fp32's %.7f, beyond 4 sd %.3g + %.3g", fmts[k].name, loss - fp32,
                     fp32, 4 * sd, c);
        if (!(fabs(printed - loss) <= 5e-5 + 1e-6))
            fail_msg("%s: trit eval printed %.4f for a run whose loss is %.7f", fmts[k].name, printed, loss);
    }
    trit_gpt_free(m);
}

static void test_bad_input(void **state) {
    (void)state;
    char dir[700];
    snprintf(dir, sizeof dir, "%s/bad", root);
    cli_result r = expect(RUN("quantize", run, "--format", "int3", "--out", dir), 2, NULL, "--format must be");
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int8", "--head", "int3", "--out", dir), 2, NULL, "--head must be");
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int8", "--head", "int8", "--embeddings", "--out", dir), 2, NULL,
               "not both");
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int4", "--group", "7", "--out", dir), 1, NULL, "group size 7");
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int4", "--out", dir), 1, NULL, "must divide");  // 128 > width 32
    cli_free(&r);
    r = expect(RUN("quantize", run, "--format", "int4", "--group", "-2", "--out", dir), 2, NULL, "--group");
    cli_free(&r);
    r = expect(RUN("quantize", "--format", "int8"), 2, NULL, "RUN");
    cli_free(&r);
    r = expect(RUN("quantize", dir, "--format", "int8"), 1, NULL, NULL);  // no such run
    cli_free(&r);
    assert_false(tfile_exists(dir));
    // A run whose tokenizer cannot be copied: the model was already written, and is removed with
    // the directory, so no half-made output is left.
    char broken[700], f[800], g[800];
    snprintf(broken, sizeof broken, "%s/broken", root);
    mkdir(broken, 0755);
    const char *files[2] = {TRIT_CKPT_MODEL, TRIT_DATA_VAL};
    for (int i = 0; i < 2; i++) {
        snprintf(f, sizeof f, "%s/%s", run, files[i]);
        snprintf(g, sizeof g, "%s/%s", broken, files[i]);
        FILE *in = fopen(f, "rb");
        assert_non_null(in);
        fseek(in, 0, SEEK_END);
        const long n = ftell(in);
        fclose(in);
        char *data = cli_slurp(f);
        tfile_write(g, data, (size_t)n);
        free(data);
    }
    snprintf(g, sizeof g, "%s/%s", broken, TRIT_CKPT_TOKENIZER);
    mkdir(g, 0755);  // a directory where the tokenizer file should be
    r = expect(RUN("quantize", broken, "--format", "int8", "--out", dir, "--batches", "1", "--threads", "1"), 1, NULL, NULL);
    cli_free(&r);
    assert_false(tfile_exists(dir));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_format),
        cmocka_unit_test(test_ternary_train_and_freeze),
        cmocka_unit_test(test_loss_within_rounding_bound),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
