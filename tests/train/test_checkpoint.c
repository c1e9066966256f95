// Checkpoint files: a model saved to safetensors loads back bit for bit with its config from
// the metadata; a corrupt header, a foreign safetensors file, a truncated or bit-flipped
// training-state file are each refused with a message; every write is atomic (no temp file
// left behind).
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>

#include "train_fixture.h"
#include "io/io_internal.h"

static trit_gpt *small_model(uint64_t seed, bool rope, bool subln) {
    trit_gpt_config g = trit_gpt_config_default();
    g.subln = subln;
    g.vocab_size = 13;
    g.seq_len = 8;
    g.n_layer = 2;
    g.n_head = 2;
    g.n_embd = 8;
    if (rope) {
        g.pos = TRIT_POS_ROPE;
        g.norm = TRIT_NORM_RMS;
        g.mlp = TRIT_MLP_SWIGLU;
        g.bias = false;
    }
    trit_gpt *m = trit_gpt_new(&g, seed);
    assert_non_null(m);
    return m;
}

static void expect_same_weights(const trit_gpt *a, const trit_gpt *b) {
    assert_int_equal(trit_gpt_num_tensors(a), trit_gpt_num_tensors(b));
    for (int i = 0; i < trit_gpt_num_tensors(a); i++) {
        const trit_tensor *x = trit_gpt_tensor(a, i), *y = trit_gpt_tensor(b, i);
        assert_string_equal(x->name, y->name);
        assert_int_equal(trit_tensor_nbytes(x), trit_tensor_nbytes(y));
        assert_memory_equal(trit_tensor_ptr(x), trit_tensor_ptr(y), trit_tensor_nbytes(x));
    }
}

static void test_model_round_trip(void **state) {
    (void)state;
    char root[512], path[600];
    tfile_mkdtemp(root, sizeof root, "ckpt");
    for (int v = 0; v < 4; v++) {
        const bool rope = v & 1, subln = v & 2;
        snprintf(path, sizeof path, "%s/m%d.safetensors", root, v);
        trit_gpt *a = small_model(5, rope, subln);
        assert_int_equal(trit_checkpoint_save_model(a, path, 77), TRIT_OK);
        int64_t step = 0;
        trit_gpt *b = trit_checkpoint_load_model(path, &step);
        if (!b) fail_msg("%s", trit_last_error());
        assert_int_equal(step, 77);
        const trit_gpt_config *ca = trit_gpt_get_config(a), *cb = trit_gpt_get_config(b);
        assert_int_equal(cb->n_layer, 2);
        assert_int_equal(cb->pos, ca->pos);
        assert_int_equal(cb->mlp, ca->mlp);
        assert_int_equal(cb->bias, ca->bias);
        assert_int_equal(cb->subln, subln);
        expect_same_weights(a, b);
        trit_gpt_free(a);
        trit_gpt_free(b);
    }
    tfile_rm_rf(root);
}

static void expect_load_error(const char *path, const char *msg) {
    trit_gpt *m = trit_checkpoint_load_model(path, NULL);
    if (m) fail_msg("'%s' loaded", path);
    if (!strstr(trit_last_error(), msg)) fail_msg("'%s': message '%s' lacks '%s'", path, trit_last_error(), msg);
}

static void test_bad_model_files(void **state) {
    (void)state;
    char root[512], path[600];
    tfile_mkdtemp(root, sizeof root, "badckpt");
    // A header length beyond the file.
    snprintf(path, sizeof path, "%s/corrupt.safetensors", root);
    uint8_t junk[64] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{'};
    tfile_write(path, junk, sizeof junk);
    expect_load_error(path, "safetensors");
    // Valid JSON length, broken JSON.
    uint8_t broken[24] = {16, 0, 0, 0, 0, 0, 0, 0};
    memcpy(broken + 8, "{\"a\": {\"dtype\":", 16);
    tfile_write(path, broken, sizeof broken);
    expect_load_error(path, "JSON");
    // A valid safetensors file that is not a trit model.
    snprintf(path, sizeof path, "%s/foreign.safetensors", root);
    trit_tensor *t = trit_tensor_new(TRIT_F32, 1, (int64_t[]){4});
    trit_safetensors_entry e = {"x", t};
    assert_int_equal(trit_safetensors_write(path, &e, 1, NULL, 0), TRIT_OK);
    expect_load_error(path, "not written by `trit train`");
    trit_tensor_free(t);
    // A trit model whose config promises a tensor the file lacks (a layer count edited).
    snprintf(path, sizeof path, "%s/edited.safetensors", root);
    trit_gpt *m = small_model(1, false, false);
    int n = trit_gpt_num_tensors(m);
    trit_safetensors_entry *es = calloc((size_t)n, sizeof *es);
    for (int i = 0; i < n; i++) es[i] = (trit_safetensors_entry){trit_gpt_tensor(m, i)->name, trit_gpt_tensor(m, i)};
    char *cfg = trit_checkpoint_config_to_json(trit_gpt_get_config(m));
    char *l2 = strstr(cfg, "\"n_layer\":2");
    assert_non_null(l2);
    l2[10] = '3';
    trit_safetensors_kv meta[] = {{"format", "trit-gpt"}, {"config", cfg}};
    assert_int_equal(trit_safetensors_write(path, es, n, meta, 2), TRIT_OK);
    expect_load_error(path, "h.2.");
    // Found by fuzz/fuzz_safetensors: a config edited to a 2 GiB embedding in a file of a few KB
    // made the loader allocate the whole model before looking at the tensors.
    trit_gpt_config big = *trit_gpt_get_config(m);
    big.vocab_size = 65536;
    big.n_embd = 8192;
    char *big_cfg = trit_checkpoint_config_to_json(&big);
    trit_safetensors_kv big_meta[] = {{"format", "trit-gpt"}, {"config", big_cfg}};
    assert_int_equal(trit_safetensors_write(path, es, n, big_meta, 2), TRIT_OK);
    expect_load_error(path, "describes a model of at least");
    free(big_cfg);
    free(cfg);
    free(es);
    trit_gpt_free(m);
    // No temp files anywhere.
    DIR *d = opendir(root);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) assert_null(strstr(de->d_name, ".tmp."));
    closedir(d);
    tfile_rm_rf(root);
}

// A training-state file with one flipped byte, or cut short, is refused by its CRC or length.
static void test_state_file_integrity(void **state) {
    (void)state;
    char root[512], text[600], out[600], st[700];
    tfile_mkdtemp(root, sizeof root, "state");
    snprintf(text, sizeof text, "%s/corpus.txt", root);
    snprintf(out, sizeof out, "%s/run", root);
    snprintf(st, sizeof st, "%s/%s", out, TRIT_CKPT_STATE);
    tf_write_corpus(text);
    trit_train_config c;
    tf_tiny_config(&c, text, out);
    c.steps = 2;
    assert_int_equal(trit_train_run(&c, NULL, NULL), TRIT_OK);
    trit_train_config saved;
    int64_t step = 0;
    assert_int_equal(trit_train_run_info(out, &saved, &step), TRIT_OK);
    assert_int_equal(step, 2);
    assert_int_equal(saved.layers, 1);

    uint8_t *b;
    size_t n;
    assert_int_equal(trit_file_read_all(st, &b, &n), TRIT_OK);
    b[n / 2] ^= 0x10;
    tfile_write(st, b, n);
    assert_int_not_equal(trit_train_run_info(out, &saved, &step), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "CRC"));
    b[n / 2] ^= 0x10;
    tfile_write(st, b, n - 100);
    assert_int_not_equal(trit_train_run_info(out, &saved, &step), TRIT_OK);
    tfile_write(st, "TRITSTAT", 8);
    assert_int_not_equal(trit_train_run_info(out, &saved, &step), TRIT_OK);
    // Counters out of range with a valid CRC: refused by the reader, not left to overflow in
    // the trainer (found reviewing the reader for fuzz/fuzz_train_state.c).
    const char *edits[][2] = {{"\"step\":\"2\"", "\"step\":\"-2\""},
                              {"\"step\":\"2\"", "\"step\":\"4611686018427387904\""},
                              {"\"skipped\":\"0\"", "\"skipped\":\"3\""},
                              {"\"crc32\":\"", "\"crc32\":\"-"}};
    for (int i = 0; i < 4; i++) {
        const char *at = memmem(b, n, edits[i][0], strlen(edits[i][0]));
        assert_non_null(at);
        const size_t pre = (size_t)((const uint8_t *)at - b), old = strlen(edits[i][0]), neu = strlen(edits[i][1]);
        const size_t m = n - old + neu;
        uint8_t *e = malloc(m);
        memcpy(e, b, pre);
        memcpy(e + pre, edits[i][1], neu);
        memcpy(e + pre + neu, b + pre + old, n - pre - old);
        trit_le64_store(e + 16, trit_le64_load(b + 16) + neu - old);
        trit_le32_store(e + m - 4, trit_crc32(0, e, m - 4));
        tfile_write(st, e, m);
        free(e);
        assert_int_not_equal(trit_train_run_info(out, &saved, &step), TRIT_OK);
        if (!strstr(trit_last_error(), "outside [")) fail_msg("edit %d: %s", i, trit_last_error());
    }
    free(b);
    // A fresh run may not overwrite another run's directory.
    tf_tiny_config(&c, text, out);
    assert_int_not_equal(trit_train_run(&c, NULL, NULL), TRIT_OK);
    assert_non_null(strstr(trit_last_error(), "--resume"));
    tfile_rm_rf(root);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_model_round_trip),
        cmocka_unit_test(test_bad_model_files),
        cmocka_unit_test(test_state_file_integrity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
