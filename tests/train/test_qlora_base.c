// Paged QLoRA base loading: a run's block matrices quantized as they are read
// (trit_checkpoint_load_quantizing) have the codes and scales of quantizing the loaded f32 base
// (trit_gpt_quantize), keep no f32 values, and leave every other tensor as loaded; a quantized
// run is taken as its codes; the run's config is read from the training-state header alone.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "qbase_check.h"
#include "train_fixture.h"

static char root[512], run[600];

static int setup(void **state) {
    (void)state;
    char text[600];
    tfile_mkdtemp(root, sizeof root, "qlora-base");
    snprintf(text, sizeof text, "%s/corpus.txt", root);
    snprintf(run, sizeof run, "%s/run", root);
    tf_write_corpus(text);
    trit_train_config c;
    tf_tiny_config(&c, text, run);
    c.layers = 2;
    c.dim = 64;
    c.steps = 2;
    assert_int_equal(trit_train_run(&c, NULL, NULL), TRIT_OK);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    tfile_rm_rf(root);
    return 0;
}

static void check_spec(trit_dtype dt, int64_t group, int64_t dq_block) {
    const trit_quant_spec spec = qb_spec(dt, group, dq_block);
    trit_gpt *ref = trit_checkpoint_load_model(run, NULL);
    qb_quantize_whole(ref, &spec, 2);
    bool made = false;
    int64_t step = -1;
    trit_gpt *m = trit_checkpoint_load_quantizing(run, &step, &spec, &made);
    assert_non_null(m);
    assert_true(made);
    assert_int_equal(step, 2);
    assert_int_equal(qb_expect_model(m, ref), 8);
    trit_gpt_free(m);
    trit_gpt_free(ref);
}

static void test_codes_equal_quantizing_the_loaded_base(void **state) {
    (void)state;
    check_spec(TRIT_NF4, 0, 256);  // QLoRA's NF4 with double quantization
    check_spec(TRIT_NF4, 0, 0);
    check_spec(TRIT_QINT8, 0, 0);
    check_spec(TRIT_QINT4, 64, 0);
    check_spec(TRIT_TERNARY, 0, 0);
}

// Through the base reader a fine-tune uses: a plain run is quantized as read, a quantized run
// (`trit quantize`'s file) is taken as its own codes, a NULL spec quantizes nothing.
static void test_base_reader(void **state) {
    (void)state;
    const trit_quant_spec spec = trit_quant_spec_default(TRIT_NF4);
    trit_base b;
    assert_int_equal(trit_base_load_quantizing(run, &spec, &b), TRIT_OK);
    assert_true(b.quantized_on_load);
    int coded = 0;
    for (int i = 0; i < trit_gpt_num_tensors(b.model); i++) coded += trit_gpt_quantized(b.model, i) != NULL;
    assert_int_equal(coded, 8);
    trit_base_free(&b);
    assert_int_equal(trit_base_load(run, &b), TRIT_OK);
    assert_false(b.quantized_on_load);
    for (int i = 0; i < trit_gpt_num_tensors(b.model); i++) assert_null(trit_gpt_quantized(b.model, i));
    trit_base_free(&b);

    char qrun[700], dst[800];
    snprintf(qrun, sizeof qrun, "%s/quantized", root);
    assert_int_equal(mkdir(qrun, 0755), 0);
    trit_gpt *m = trit_checkpoint_load_model(run, NULL);
    assert_non_null(m);
    trit_quantize_report r;
    const trit_quant_spec q8 = trit_quant_spec_default(TRIT_QINT8);
    assert_int_equal(trit_gpt_quantize(m, &q8, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    snprintf(dst, sizeof dst, "%s/%s", qrun, TRIT_CKPT_MODEL);
    assert_int_equal(trit_checkpoint_save_model(m, dst, 2), TRIT_OK);
    bool made = true;
    trit_gpt *k = trit_checkpoint_load_quantizing(qrun, NULL, &spec, &made);
    assert_non_null(k);
    assert_false(made);
    coded = 0;
    for (int i = 0; i < trit_gpt_num_tensors(k); i++)
        if (trit_gpt_quantized(k, i)) {
            assert_int_equal(trit_gpt_quantized(k, i)->dtype, TRIT_QINT8);  // the file's codes, not NF4
            qb_expect_same_codes(trit_gpt_quantized(k, i), trit_gpt_quantized(m, i));
            coded++;
        }
    assert_int_equal(coded, 8);
    trit_gpt_free(k);
    trit_gpt_free(m);
}

// The config of a run comes from its state file's header: a file whose tensors were cut off
// still gives it (trit_train_run_info, which checks the whole file's CRC, refuses it).
static void test_run_config_from_header(void **state) {
    (void)state;
    char st[700], dir[700], path[800];
    snprintf(st, sizeof st, "%s/%s", run, TRIT_CKPT_STATE);
    snprintf(dir, sizeof dir, "%s/cut", root);
    snprintf(path, sizeof path, "%s/%s", dir, TRIT_CKPT_STATE);
    assert_int_equal(mkdir(dir, 0755), 0);
    uint8_t *b;
    size_t n;
    assert_int_equal(trit_file_read_all(st, &b, &n), TRIT_OK);
    const size_t header_end = 24 + (size_t)(b[16] | b[17] << 8 | b[18] << 16 | (uint32_t)b[19] << 24);
    tfile_write(path, b, header_end + 8);
    trit_train_config c;
    assert_int_equal(trit_train_run_config(dir, &c), TRIT_OK);
    assert_int_equal(c.layers, 2);
    assert_int_equal(c.dim, 64);
    assert_int_not_equal(trit_train_run_info(dir, &c, NULL), TRIT_OK);
    tfile_write(path, b, header_end - 1);  // the header itself cut short: refused
    assert_int_not_equal(trit_train_run_config(dir, &c), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "truncated"));
    tfile_write(path, "TRITSTAX", 8);
    assert_int_not_equal(trit_train_run_config(dir, &c), TRIT_OK);
    free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes_equal_quantizing_the_loaded_base),
        cmocka_unit_test(test_base_reader),
        cmocka_unit_test(test_run_config_from_header),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
