// Exact resume: a run stopped at step k (by --stop-after, or by a stop request as SIGINT makes)
// and continued with --resume gives the same train and validation losses, bit for bit, and the
// same final weights as the run that was never stopped (with AdamW, AdamW8bit, GaLore and Q-GaLore; with frozen
// weights, which the run's model file holds for the state). The config uses dropout and gradient
// accumulation so that their randomness and data positions are covered too.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>

#include "train_fixture.h"
#include "io/io_internal.h"
#include "train/train_internal.h"

enum { STEPS = 12 };

typedef struct record {
    double loss[STEPS + 1], val[STEPS + 1];
    int64_t first, last;
    int64_t stop_at;  // request a stop after this step (0 = never)
} record;

static void on_step(void *ctx, const trit_train_step_info *info) {
    record *r = ctx;
    assert_true(info->step >= 1 && info->step <= STEPS);
    if (r->first == 0) r->first = info->step;
    r->last = info->step;
    r->loss[info->step] = info->loss;
    r->val[info->step] = info->val_loss;
    if (r->stop_at && info->step == r->stop_at) trit_train_request_stop();
}

static void run(trit_train_config *c, record *r, trit_train_result *res) {
    trit_train_hooks h = {.on_step = on_step, .ctx = r};
    trit_status s = trit_train_run(c, &h, res);
    if (s != TRIT_OK) fail_msg("train: %s", trit_last_error());
}

static void config(trit_train_config *c, const char *data, const char *out) {
    tf_tiny_config(c, data, out);
    c->dropout = 0.1;
    c->total_batch_tokens = 2 * c->batch * c->seq;  // two micro-batches per step
}

// Same bits, not merely equal values (NaN == NaN included).
static void expect_same_bits(const record *a, const record *b, int64_t from, int64_t to) {
    for (int64_t s = from; s <= to; s++) {
        if (memcmp(&a->loss[s], &b->loss[s], sizeof(double)) != 0)
            fail_msg("step %lld: loss %.17g vs %.17g", (long long)s, a->loss[s], b->loss[s]);
        if (memcmp(&a->val[s], &b->val[s], sizeof(double)) != 0)
            fail_msg("step %lld: val loss %.17g vs %.17g", (long long)s, a->val[s], b->val[s]);
    }
}

static void expect_same_file(const char *dir_a, const char *dir_b, const char *name) {
    char pa[1100], pb[1100];
    snprintf(pa, sizeof pa, "%s/%s", dir_a, name);
    snprintf(pb, sizeof pb, "%s/%s", dir_b, name);
    uint8_t *a, *b;
    size_t na, nb;
    assert_int_equal(trit_file_read_all(pa, &a, &na), TRIT_OK);
    assert_int_equal(trit_file_read_all(pb, &b, &nb), TRIT_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na);
    free(a);
    free(b);
}

// A scratch root with the run directories full/ and part/ and, if wanted, a corpus file.
typedef struct dirs {
    char root[512], text[600], full[600], part[600];
} dirs;

static void make_dirs(dirs *d, const char *tag, int corpus) {
    tfile_mkdtemp(d->root, sizeof d->root, tag);
    snprintf(d->text, sizeof d->text, "%s/corpus.txt", d->root);
    snprintf(d->full, sizeof d->full, "%s/full", d->root);
    snprintf(d->part, sizeof d->part, "%s/part", d->root);
    if (corpus) tf_write_corpus(d->text);
}

// A config with only --resume (and the quiet flag) given, as on the command line.
static void resume_config(trit_train_config *c, const char *dir) {
    trit_train_config_init(c);
    assert_int_equal(trit_train_config_set(c, "resume", dir), TRIT_OK);
    c->quiet = 1;
}

// The whole of dir's train_state.bin (the caller frees it); its JSON header starts at byte 24.
static uint8_t *read_state(const char *dir) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, TRIT_CKPT_STATE);
    uint8_t *bytes;
    size_t n;
    assert_int_equal(trit_file_read_all(path, &bytes, &n), TRIT_OK);
    return bytes;
}

// The uninterrupted run into d->full (a) and the same run stopped after step 5 into d->part (b),
// both of config() changed by set.
static void full_and_stopped(const dirs *d, void (*set)(trit_train_config *c), record *a, record *b) {
    trit_train_config c;
    trit_train_result res;
    for (int k = 0; k < 2; k++) {
        config(&c, d->text, k ? d->part : d->full);
        set(&c);
        c.stop_after = k ? 5 : 0;
        run(&c, k ? b : a, &res);
    }
}

static void test_stop_after_and_resume(void **state) {
    (void)state;
    dirs d;
    make_dirs(&d, "resume", 1);
    const char *text = d.text, *full = d.full, *part = d.part;

    trit_train_config c;
    trit_train_result res;
    record a = {0}, b = {0};
    config(&c, text, full);
    run(&c, &a, &res);
    assert_int_equal(res.step, STEPS);
    assert_false(res.interrupted);
    assert_int_equal(a.first, 1);
    assert_true(a.loss[STEPS] < a.loss[1]);  // it learns something
    assert_false(isnan(a.val[4]));
    assert_true(isnan(a.val[5]));

    config(&c, text, part);
    c.stop_after = 5;
    run(&c, &b, &res);
    assert_int_equal(res.step, 5);
    assert_int_equal(b.last, 5);

    // Resume: only --resume on the command line.
    resume_config(&c, part);
    b.first = 0;
    run(&c, &b, &res);
    assert_int_equal(b.first, 6);
    assert_int_equal(res.step, STEPS);
    expect_same_bits(&a, &b, 1, STEPS);
    expect_same_file(full, part, TRIT_CKPT_MODEL);

    // The metrics file has each step once, with the same losses.
    char ma[700], mb[700];
    snprintf(ma, sizeof ma, "%s/%s", full, TRIT_CKPT_METRICS);
    snprintf(mb, sizeof mb, "%s/%s", part, TRIT_CKPT_METRICS);
    trit_metric_row *ra, *rb;
    int64_t na, nb;
    assert_int_equal(trit_metrics_read(ma, &ra, &na), TRIT_OK);
    assert_int_equal(trit_metrics_read(mb, &rb, &nb), TRIT_OK);
    assert_int_equal(na, STEPS);
    assert_int_equal(nb, STEPS);
    for (int64_t i = 0; i < na; i++) {
        assert_int_equal(ra[i].step, i + 1);
        assert_int_equal(rb[i].step, i + 1);
        assert_true(ra[i].loss == rb[i].loss);
    }
    free(ra);
    free(rb);
    tfile_rm_rf(d.root);
}

// A stop request (what SIGINT and SIGTERM raise) finishes the step, checkpoints and returns OK.
static void test_stop_request_and_resume(void **state) {
    (void)state;
    dirs d;
    make_dirs(&d, "stop", 1);
    const char *text = d.text, *full = d.full, *part = d.part;

    trit_train_config c;
    trit_train_result res;
    record a = {0}, b = {0};
    config(&c, text, full);
    c.order = TRIT_DATA_SEQUENTIAL;
    run(&c, &a, &res);

    config(&c, text, part);
    c.order = TRIT_DATA_SEQUENTIAL;
    b.stop_at = 7;
    run(&c, &b, &res);
    assert_true(res.interrupted);
    assert_int_equal(res.step, 7);

    resume_config(&c, part);
    c.threads = 2;  // thread count may change on resume and must not change the numbers
    b.stop_at = 0;
    run(&c, &b, &res);
    assert_false(res.interrupted);
    expect_same_bits(&a, &b, 1, STEPS);
    expect_same_file(full, part, TRIT_CKPT_MODEL);
    tfile_rm_rf(d.root);
}

// The addition task resumes exactly too (its batches are generated from the step).
static void test_addition_resume(void **state) {
    (void)state;
    dirs d;
    make_dirs(&d, "addres", 0);
    const char *full = d.full, *part = d.part;
    trit_train_config c;
    trit_train_result res;
    record a = {0}, b = {0};
    for (int k = 0; k < 2; k++) {
        trit_train_config_init(&c);
        assert_int_equal(trit_train_config_set(&c, "out", k ? part : full), TRIT_OK);
        c.layers = 1;
        c.dim = 16;
        c.batch = 8;
        c.steps = STEPS;
        c.eval_every = 6;
        c.eval_batches = 1;
        c.task_test = 5;
        c.threads = 1;
        c.quiet = 1;
        c.digits = 2;
        c.stop_after = k ? 3 : 0;
        run(&c, k ? &b : &a, &res);
    }
    resume_config(&c, part);
    run(&c, &b, &res);
    expect_same_bits(&a, &b, 1, STEPS);
    assert_false(isnan(res.accuracy));
    tfile_rm_rf(d.root);
}

// AdamW8bit resumes bit-exactly: its codes and block scales are in train_state.bin (version 3,
// dtype u8 with scales). Width 32 gives the MLP matrices 32 x 128 = 4096 values (8-bit state)
// and leaves the others under 4096 (fp32 state), so both kinds of state are saved and restored.
// A resume that asks for the other optimizer, and a load of the state into an AdamW optimizer,
// are refused with the optimizer's name.
static void set_adamw8bit(trit_train_config *c) {
    c->dim = 32;
    c->optimizer = TRIT_TRAIN_ADAMW8BIT;
}

static void test_adamw8bit_resume(void **state) {
    (void)state;
    dirs d;
    make_dirs(&d, "res8", 1);
    trit_train_config c;
    trit_train_result res;
    record a = {0}, b = {0};
    full_and_stopped(&d, set_adamw8bit, &a, &b);
    assert_true(a.loss[STEPS] < a.loss[1]);

    // The state file lists u8 moments with scales, and fp32 ones.
    uint8_t *bytes = read_state(d.part);
    const char *header = (const char *)bytes + 24;
    assert_true(trit_le32_load(bytes + 8) == 4);
    assert_non_null(strstr(header, "\"optimizer\":{\"kind\":\"adamw8bit\""));
    assert_non_null(strstr(header, "\"name\":\"h.0.mlp.c_fc.weight.exp_avg\",\"role\":\"optim\",\"dtype\":\"u8\""));
    assert_non_null(strstr(header, "\"name\":\"h.0.mlp.c_fc.weight.exp_avg_sq\",\"role\":\"optim\",\"dtype\":\"u8\""));
    assert_non_null(strstr(header, "\"count\":\"4096\",\"scales_offset\""));
    assert_non_null(strstr(header, "\"name\":\"h.0.attn.c_attn.weight.exp_avg\",\"role\":\"optim\",\"dtype\":\"f32\""));
    free(bytes);

    // Another optimizer on resume: the config merge names the flag.
    resume_config(&c, d.part);
    c.optimizer = TRIT_TRAIN_ADAMW;
    assert_int_not_equal(trit_train_run(&c, NULL, &res), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "trained with --optimizer adamw8bit, but --optimizer adamw was given"));
    // The state loaded into an AdamW optimizer: the file names its optimizer.
    char model[700], path[700];
    snprintf(model, sizeof model, "%s/%s", d.part, TRIT_CKPT_MODEL);
    snprintf(path, sizeof path, "%s/%s", d.part, TRIT_CKPT_STATE);
    trit_gpt *m = trit_checkpoint_load_model(model, NULL);
    assert_non_null(m);
    trit_tensor *params[64];
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) params[i] = trit_gpt_tensor(m, i);
    const trit_optim_config oc = trit_optim_adamw(0.9, 0.95, 1e-8);
    trit_optim *o = trit_optim_new_gpt2(&oc, params, trit_gpt_num_tensors(m), 0.1);
    trit_train_state st;
    assert_int_equal(trit_state_load(path, &st, m, o), TRIT_ERR_FORMAT);
    assert_non_null(strstr(trit_last_error(), "holds the state of optimizer adamw8bit, this run uses adamw"));
    trit_optim_free(o);
    trit_gpt_free(m);

    // Resume with only --resume, on 2 threads: the same bits as the uninterrupted run.
    resume_config(&c, d.part);
    c.threads = 2;
    run(&c, &b, &res);
    assert_int_equal(res.step, STEPS);
    expect_same_bits(&a, &b, 1, STEPS);
    expect_same_file(d.full, d.part, TRIT_CKPT_MODEL);
    tfile_rm_rf(d.root);
}

// GaLore and Q-GaLore: stopped at step 5 and resumed on 2 threads, with a refresh every 3 steps
// (one at step 6, after the resume), the same bits as the uninterrupted run. The state holds the
// projected moments, the basis (f32, or int4 codes with scales) and Q-GaLore's schedule.
static void galore_resume(trit_train_optimizer kind, const char *tag, const char *basis_entry) {
    dirs d;
    make_dirs(&d, tag, 1);
    trit_train_config c;
    trit_train_result res;
    record a = {0}, b = {0};
    for (int k = 0; k < 2; k++) {
        config(&c, d.text, k ? d.part : d.full);
        c.dim = 32;
        c.optimizer = kind;
        c.galore_rank = 8;
        c.galore_update = 3;
        c.stop_after = k ? 5 : 0;
        run(&c, k ? &b : &a, &res);
    }
    assert_true(a.loss[STEPS] < a.loss[1]);
    uint8_t *bytes = read_state(d.part);
    const char *header = (const char *)bytes + 24;
    assert_non_null(strstr(header, "\"name\":\"h.0.mlp.c_fc.weight.exp_avg\",\"role\":\"optim\",\"dtype\":\"f32\","
                                   "\"shape\":[\"128\",\"8\"]"));
    assert_non_null(strstr(header, basis_entry));
    free(bytes);
    resume_config(&c, d.part);
    c.threads = 2;
    run(&c, &b, &res);
    assert_int_equal(res.step, STEPS);
    expect_same_bits(&a, &b, 1, STEPS);
    expect_same_file(d.full, d.part, TRIT_CKPT_MODEL);
    tfile_rm_rf(d.root);
}

static void test_galore_resume(void **state) {
    (void)state;
    galore_resume(TRIT_TRAIN_GALORE, "resgl",
                  "\"name\":\"h.0.mlp.c_proj.weight.galore_basis\",\"role\":\"optim\",\"dtype\":\"f32\","
                  "\"shape\":[\"32\",\"8\"]");
    galore_resume(TRIT_TRAIN_QGALORE, "resqg",
                  "\"name\":\"h.0.mlp.c_fc.weight.galore_sched\",\"role\":\"optim\",\"dtype\":\"f64\"");
}

// An offload mode gives the same losses and model file, bit for bit, as in memory; it is a
// run-time choice, so a run stopped without it resumes with it to the same bits too (a restore
// writes into the mappings). No offload file (`left`) is left in the run directory.
static void offload_same_bits(const char *name, trit_train_offload mode, const char *freeze, const char *left) {
    dirs d;
    make_dirs(&d, name, 1);
    trit_train_config c;
    trit_train_result res;
    record a = {0}, b = {0}, p = {0};
    for (int k = 0; k < 3; k++) {  // in memory; offloaded; stopped in memory and resumed offloaded
        config(&c, d.text, k ? d.part : d.full);
        snprintf(c.freeze, sizeof c.freeze, "%s", freeze);
        c.offload = k == 1 ? mode : TRIT_OFFLOAD_OFF;
        if (k == 2) {
            c.stop_after = 5;
            run(&c, &p, &res);
            resume_config(&c, d.part);
            c.offload = mode;
        }
        run(&c, k == 0 ? &a : k == 1 ? &b : &p, &res);
        if (k == 0) continue;
        assert_int_equal(res.step, STEPS);
        expect_same_bits(&a, k == 1 ? &b : &p, 1, STEPS);
        expect_same_file(d.full, d.part, TRIT_CKPT_MODEL);
        char path[700];
        snprintf(path, sizeof path, "%s/%s", d.part, left);
        assert_false(tfile_exists(path));
        tfile_rm_rf(d.part);
    }
    assert_true(a.loss[STEPS] < a.loss[1]);
    tfile_rm_rf(d.root);
}

// --offload optimizer: the optimizer state in a memory-mapped file.
static void test_offload_same_bits(void **state) {
    (void)state;
    offload_same_bits("resoff", TRIT_OFFLOAD_OPTIMIZER, "", "optimizer.offload");
}

// --offload optimizer+frozen: frozen weights (the attention blocks and the tied token embedding,
// which the head reads through a view) in a file mapping whose pages each step drops.
static void test_offload_frozen_same_bits(void **state) {
    (void)state;
    offload_same_bits("resofz", TRIT_OFFLOAD_OPTIMIZER_FROZEN, "h.*.attn.*,wte.weight", "frozen.offload");
}

// Frozen weights are left to model.safetensors: the state file of a --freeze run lists the
// trained weights and not the frozen ones, the run resumes to the same bits, and a resume without
// the model file stops with a message naming it.
static void set_frozen(trit_train_config *c) { snprintf(c->freeze, sizeof c->freeze, "h.*.attn.*,wte.weight"); }

static void test_frozen_weights_from_model_file(void **state) {
    (void)state;
    dirs d;
    make_dirs(&d, "resfz", 1);
    trit_train_config c;
    trit_train_result res;
    record a = {0}, b = {0};
    full_and_stopped(&d, set_frozen, &a, &b);
    uint8_t *bytes = read_state(d.part);
    const char *header = (const char *)bytes + 24;
    assert_non_null(strstr(header, "\"name\":\"h.0.mlp.c_fc.weight\",\"role\":\"weight\""));
    assert_null(strstr(header, "\"name\":\"h.0.attn.c_attn.weight\",\"role\":\"weight\""));
    assert_null(strstr(header, "\"name\":\"wte.weight\",\"role\":\"weight\""));
    free(bytes);

    char model[700], kept[720];
    snprintf(model, sizeof model, "%s/%s", d.part, TRIT_CKPT_MODEL);
    snprintf(kept, sizeof kept, "%s.kept", model);
    assert_int_equal(rename(model, kept), 0);
    resume_config(&c, d.part);
    assert_int_not_equal(trit_train_run(&c, NULL, &res), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), TRIT_CKPT_MODEL));
    assert_non_null(strstr(trit_last_error(), "frozen"));
    assert_int_equal(rename(kept, model), 0);

    resume_config(&c, d.part);
    b.first = 0;
    run(&c, &b, &res);
    assert_int_equal(b.first, 6);
    assert_int_equal(res.step, STEPS);
    expect_same_bits(&a, &b, 1, STEPS);
    expect_same_file(d.full, d.part, TRIT_CKPT_MODEL);
    tfile_rm_rf(d.root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_after_and_resume),
        cmocka_unit_test(test_stop_request_and_resume),
        cmocka_unit_test(test_addition_resume),
        cmocka_unit_test(test_adamw8bit_resume),
        cmocka_unit_test(test_galore_resume),
        cmocka_unit_test(test_offload_same_bits),
        cmocka_unit_test(test_offload_frozen_same_bits),
        cmocka_unit_test(test_frozen_weights_from_model_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
