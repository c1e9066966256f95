// `trit train --ternary` on the integer kernels (--ternary-matmul int8, the default) against
// today's fake-quantized fp32 path (--ternary-matmul fake) over 50 steps of a tiny model, at every
// CPU level this machine has (a level it lacks is named and skipped): the same losses within the
// tolerance below at every step, one packing of the ternary codes per optimizer step, and after
// freezing the same checkpoint: the same tensors, dtypes, shapes and ternary codes' layout.
//
// Tolerance. At step 1 the weights are the same, and the int8 path's forward multiplies the very
// values the fake-quantized graph multiplies (ops/ternary_linear.c; tests/ops/test_ternary_linear.c
// bounds each output by 2 gamma_K of its sum of magnitudes); through the network that moves the
// loss by a few fp32 units: |dL_1| <= 1e-5 L_1 (seen: below 1e-6). After that the paths differ in
// the input gradients: dY's per-row int8 codes are off by at most max|dy| / 254 each, which for
// independent errors moves dX by about max|dy| / (254 sqrt 3) per unit of its rms, i.e. a
// relative error eps = (max|dy| / rms(dy)) / 440 per layer: about 1-2% for the ratios of 4-9 that
// gradient rows have. The weight gradient's bf16 products (dY s_x rounded to bf16 against x's
// codes) add a relative error of at most 2^-8 an element, about 2^-8 / sqrt 3 rms: a tenth of eps,
// inside the same bound. A step's loss decrease, computed from gradients off by eps, is off by about
// eps of itself, so after t steps |L_int8(t) - L_fake(t)| ~ eps (L(1) - L(t)); ternary codes that
// flip near their thresholds add to it (the same drift the fp32-rounding-only path,
// int8-fp32-dx, shows). Bound: 4% of the loss decrease so far (2 eps, eps = 2%) plus the step-1
// term; the test prints the largest share of it seen.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "graph/graph_internal.h"
#include "kernel_census.h"
#include "train_fixture.h"

enum { STEPS = 50 };

typedef struct losses {
    double l[STEPS];
    int n;
} losses;

static void on_step(void *ctx, const trit_train_step_info *info) {
    losses *ls = ctx;
    if (ls->n < STEPS) ls->l[ls->n++] = info->loss;
}

static void train(const char *dir, const char *data, const char *matmul, losses *ls) {
    trit_train_config c;
    tf_tiny_config(&c, data, dir);
    c.layers = 2, c.dim = 64, c.heads = 2, c.seq = 32, c.batch = 4;
    c.steps = STEPS, c.warmup = 10, c.eval_every = 0, c.log_every = 10;
    c.threads = 2;
    assert_int_equal(trit_train_config_set(&c, "ternary", "1"), TRIT_OK);
    assert_int_equal(trit_train_config_set(&c, "ternary-matmul", matmul), TRIT_OK);
    ls->n = 0;
    const trit_train_hooks h = {.on_step = on_step, .ctx = ls};
    if (trit_train_run(&c, &h, NULL) != TRIT_OK) fail_msg("train --ternary-matmul %s: %s", matmul, trit_last_error());
    assert_int_equal(ls->n, STEPS);
}

// Both runs' checkpoints frozen by the run's rule: the same parameters and quantized copies.
static void check_same_frozen_format(const char *a, const char *b) {
    trit_gpt *ma = trit_checkpoint_load_as_trained(a, NULL), *mb = trit_checkpoint_load_as_trained(b, NULL);
    assert_non_null(ma);
    assert_non_null(mb);
    assert_int_equal(trit_gpt_num_tensors(ma), trit_gpt_num_tensors(mb));
    int ternary = 0;
    for (int i = 0; i < trit_gpt_num_tensors(ma); i++) {
        const trit_tensor *ta = trit_gpt_tensor(ma, i), *tb = trit_gpt_tensor(mb, i);
        assert_string_equal(ta->name, tb->name);
        assert_int_equal(ta->dtype, tb->dtype);
        assert_true(trit_tensor_same_shape(ta, tb));
        const trit_tensor *qa = trit_gpt_quantized(ma, i), *qb = trit_gpt_quantized(mb, i);
        assert_true((qa == NULL) == (qb == NULL));
        if (!qa) continue;
        assert_int_equal(qa->dtype, TRIT_TERNARY);
        assert_int_equal(qb->dtype, TRIT_TERNARY);
        assert_true(trit_tensor_same_shape(qa, qb));
        assert_int_equal(qa->quant->group_size, qb->quant->group_size);
        ternary++;
    }
    assert_int_equal(ternary, 2 * 4);  // layers x block matrices
    trit_gpt_free(ma);
    trit_gpt_free(mb);
}

static void check_level(trit_cpu_isa level, const char *data) {
    assert_int_equal(trit_cpu_set_level(level), TRIT_OK);
    char fake_dir[512], int_dir[512], a[600], b[600];
    tfile_mkdtemp(fake_dir, sizeof fake_dir, "tern-fake");
    tfile_mkdtemp(int_dir, sizeof int_dir, "tern-int8");
    losses fake, ints;
    snprintf(a, sizeof a, "%s/run", fake_dir);
    snprintf(b, sizeof b, "%s/run", int_dir);
    train(a, data, "fake", &fake);
    train(b, data, "int8", &ints);
    const double l1 = fake.l[0];
    assert_true(fabs(ints.l[0] - l1) <= 1e-5 * l1);
    double worst = 0, lowest = l1;
    for (int t = 0; t < STEPS; t++) {
        lowest = fmin(lowest, fake.l[t]);
        const double bound = 0.04 * (l1 - lowest) + 1e-5 * l1, d = fabs(ints.l[t] - fake.l[t]);
        if (d > bound) fail_msg("step %d: loss %.6f on the integer kernels, %.6f fake-quantized: off by %.3g, bound %.3g",
                                t + 1, ints.l[t], fake.l[t], d, bound);
        worst = fmax(worst, d / bound);
    }
    assert_true(fake.l[STEPS - 1] < l1 - 0.3);  // the runs learned something the bound is relative to
    print_message("  %s: loss %.4f -> %.4f (fake) / %.4f (int8); largest share of the bound %.3f\n",
                  trit_cpu_level_name(level), l1, fake.l[STEPS - 1], ints.l[STEPS - 1], worst);
    check_same_frozen_format(a, b);
    tfile_rm_rf(fake_dir);
    tfile_rm_rf(int_dir);
}

static void test_int8_kernels_track_fake_quantization(void **state) {
    (void)state;
    char dir[512], data[600];
    tfile_mkdtemp(dir, sizeof dir, "tern");
    snprintf(data, sizeof data, "%s/corpus.txt", dir);
    tf_write_corpus(data);
    const struct {
        trit_cpu_isa level;
        const char *name;
        uint32_t needs;
    } levels[] = {
        {TRIT_CPU_REF, "ternary training, portable kernels", 0},
        {TRIT_CPU_AVX2, "ternary training, AVX2 kernels", TRIT_FEAT_AVX2},
        {TRIT_CPU_AVX512, "ternary training, AVX512-VNNI kernels", TRIT_FEAT_AVX512 | TRIT_FEAT_AVX512_VNNI},
    };
    census cen = {.what = "ternary training levels"};
    const trit_cpu_isa was = trit_cpu_level();
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (!census_count(&cen, levels[i].name, levels[i].needs, census_level_features())) continue;
        check_level(levels[i].level, data);
        census_ran(&cen);
    }
    trit_cpu_set_level(was);
    census_check(&cen);
    tfile_rm_rf(dir);
}

// The codes are packed once per optimizer step, whatever the micro-batches: three forward and
// backward passes of one step share one packing.
static void test_one_packing_per_step(void **state) {
    (void)state;
    trit_gpt_config g = trit_gpt_config_default();
    g.n_layer = 1, g.n_embd = 64, g.n_head = 2, g.seq_len = 16, g.vocab_size = 40;
    trit_gpt *m = trit_gpt_new(&g, 3);
    assert_non_null(m);
    const trit_fake_quant_spec w = {.dtype = TRIT_QINT2, .mode = TRIT_FQ_TERNARY};
    const trit_fake_quant_spec a = {.dtype = TRIT_QINT8, .mode = TRIT_FQ_TOKEN};
    assert_int_equal(trit_gpt_set_qat(m, &w, &a), TRIT_OK);
    assert_int_equal(trit_gpt_set_ternary_matmul(m, TRIT_TERNARY_MATMUL_INT8), TRIT_OK);
    trit_gpt_graph gg;
    assert_int_equal(trit_gpt_build(m, 2, 16, &gg), TRIT_OK);
    assert_int_equal(trit_graph_count_op(gg.graph, "ternary_linear"), 4);
    assert_int_equal(trit_graph_count_op(gg.graph, "fake_quant"), 0);
    int32_t *idx = trit_tensor_ptr(gg.idx), *tg = trit_tensor_ptr(gg.targets);
    for (int i = 0; i < 32; i++) idx[i] = (i * 7 + 1) % 40, tg[i] = (i * 3) % 40;
    int qkv = -1;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++)
        if (strcmp(trit_gpt_tensor(m, i)->name, "h.0.attn.c_attn.weight") == 0) qkv = i;
    assert_true(qkv >= 0);
    for (int step = 0; step < 2; step++) {
        for (int micro = 0; micro < 3; micro++) {
            assert_int_equal(trit_graph_forward(gg.graph), TRIT_OK);
            assert_int_equal(trit_graph_backward(gg.graph), TRIT_OK);
        }
        assert_int_equal(trit_gpt_ternary_fills(m, qkv), step + 1);
        trit_gpt_ternary_weights_changed(m);  // what the trainer does after the update
    }
    trit_gpt_graph_free(&gg);
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_int8_kernels_track_fake_quantization),
        cmocka_unit_test(test_one_packing_per_step),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
