// GGUF export: the file a GPT becomes is read back field by field: header, the gpt2 keys and
// tokenizer arrays, each tensor's name, dims (innermost first), type and aligned offset, and its
// bytes (f32 values as stored; q8_0/q4_0 blocks equal to the dtype table's encoding). Models
// llama.cpp's gpt2 cannot express are refused.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "scratch.h"
#include "trit/trit.h"

typedef struct reader {
    const uint8_t *p, *end;
} reader;

static uint64_t u64(reader *r) {
    assert_true(r->p + 8 <= r->end);
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | r->p[i];
    r->p += 8;
    return v;
}

static uint32_t u32(reader *r) {
    assert_true(r->p + 4 <= r->end);
    const uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}

static void str(reader *r, char *buf, size_t cap) {
    const uint64_t n = u64(r);
    assert_true(r->p + n <= r->end);
    const size_t k = n < cap - 1 ? (size_t)n : cap - 1;
    memcpy(buf, r->p, k);
    buf[k] = 0;
    r->p += n;
}

// Skips one value of GGUF type t; returns a u32 value when t is u32.
static uint64_t value(reader *r, uint32_t t, int64_t *count) {
    static const int size[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    char s[256];
    if (t == 8) {
        str(r, s, sizeof s);
        return 0;
    }
    if (t == 9) {
        const uint32_t et = u32(r);
        const uint64_t n = u64(r);
        if (count) *count = (int64_t)n;
        for (uint64_t i = 0; i < n; i++) value(r, et, NULL);
        return 0;
    }
    assert_true(t < 13);
    if (t == 4) return u32(r);
    r->p += size[t];
    return 0;
}

static trit_gpt *model(int64_t V, int64_t C) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 2, c.n_embd = C, c.n_head = 2, c.seq_len = 32, c.vocab_size = V;
    trit_gpt *m = trit_gpt_new(&c, 3);
    assert_non_null(m);
    return m;
}

// The file of a model of width C exported as dt (ggml type ggml_type): header, keys, and the
// bytes of one block matrix and of the head, which ternary types keep in q8_0.
static void check_file(trit_dtype dt, uint32_t ggml_type, int64_t C) {
    static const char text[] = "the king and the queen\nrode to sea.";
    trit_tokenizer *tok = trit_tokenizer_train_char(text, sizeof text - 1);
    trit_gpt *m = model(trit_tokenizer_vocab_size(tok), C);
    const bool ternary = dt == TRIT_TQ2_0 || dt == TRIT_TQ1_0;
    const char *path = tfile_path("m.gguf");
    assert_int_equal(trit_export_gguf(m, tok, dt, path), TRIT_OK);
    uint8_t *data;
    size_t n;
    assert_int_equal(trit_file_read_all(path, &data, &n), TRIT_OK);
    reader r = {data, data + n};
    assert_memory_equal(r.p, "GGUF", 4);
    r.p += 4;
    assert_int_equal(u32(&r), 3);
    const uint64_t n_tensors = u64(&r), n_kv = u64(&r);
    assert_int_equal(n_tensors, 5 + 12 * 2);
    int found = 0;
    for (uint64_t i = 0; i < n_kv; i++) {
        char k[128];
        str(&r, k, sizeof k);
        const uint32_t t = u32(&r);
        int64_t count = -1;
        const uint64_t v = value(&r, t, &count);
        if (strcmp(k, "gpt2.block_count") == 0) found++, assert_int_equal(v, 2);
        if (strcmp(k, "gpt2.embedding_length") == 0) found++, assert_int_equal(v, C);
        if (strcmp(k, "gpt2.feed_forward_length") == 0) found++, assert_int_equal(v, 4 * C);
        if (strcmp(k, "tokenizer.ggml.tokens") == 0) found++, assert_int_equal(count, trit_tokenizer_vocab_size(tok) + 1);
        if (strcmp(k, "tokenizer.ggml.eos_token_id") == 0) found++, assert_int_equal(v, trit_tokenizer_vocab_size(tok));
        if (strcmp(k, "tokenizer.ggml.merges") == 0) found++, assert_int_equal(count, 0);
    }
    assert_int_equal(found, 6);
    const uint8_t *info_end = NULL;
    reader ri = r;
    for (uint64_t i = 0; i < n_tensors; i++) {  // first pass: where the data starts
        char name[96];
        str(&ri, name, sizeof name);
        const uint32_t nd = u32(&ri);
        ri.p += 8 * nd + 4 + 8;
    }
    info_end = ri.p;
    const size_t data_start = ((size_t)(info_end - data) + 31) / 32 * 32;
    for (uint64_t i = 0; i < n_tensors; i++) {
        char name[96];
        str(&r, name, sizeof name);
        const uint32_t nd = u32(&r);
        uint64_t ne[4] = {1, 1, 1, 1};
        for (uint32_t d = 0; d < nd; d++) ne[d] = u64(&r);
        const uint32_t type = u32(&r);
        const uint64_t off = u64(&r);
        assert_int_equal(off % 32, 0);
        if (strcmp(name, "blk.1.attn_qkv.weight") == 0 || strcmp(name, "output.weight") == 0) {
            const trit_tensor *w = trit_gpt_find(m, name[0] == 'o' ? "wte.weight" : "h.1.attn.c_attn.weight");
            const int64_t extra = name[0] == 'o';  // the end-of-text token's zero row
            const int64_t shape[2] = {w->shape[0] + extra, w->shape[1]};
            const bool head_q8 = ternary && extra;
            assert_int_equal(nd, 2);
            assert_int_equal(ne[0], shape[1]);
            assert_int_equal(ne[1], shape[0]);
            assert_int_equal(type, head_q8 ? 8 : ggml_type);
            trit_tensor *f = trit_tensor_new(TRIT_F32, 2, shape), *want = trit_tensor_new(head_q8 ? TRIT_Q8_0 : dt, 2, shape);
            memcpy(f->data, w->data, trit_tensor_nbytes(w));
            assert_int_equal(trit_tensor_copy(want, f), TRIT_OK);
            trit_tensor_free(f);
            assert_true(data_start + off + trit_tensor_nbytes(want) <= n);
            assert_memory_equal(data + data_start + off, trit_tensor_ptr(want), trit_tensor_nbytes(want));
            trit_tensor_free(want);
        }
        if (strcmp(name, "blk.0.attn_norm.bias") == 0) assert_true(nd == 1 && (int64_t)ne[0] == C && type == 0);
    }
    free(data);
    trit_gpt_free(m);
    trit_tokenizer_free(tok);
}

static void test_types(void **state) {
    (void)state;
    check_file(TRIT_F32, 0, 64);
    check_file(TRIT_F16, 1, 64);
    check_file(TRIT_Q8_0, 8, 64);
    check_file(TRIT_Q4_0, 2, 64);
    check_file(TRIT_TQ2_0, 35, 256);
    check_file(TRIT_TQ1_0, 34, 256);
}

static void test_refused(void **state) {
    (void)state;
    static const char text[] = "abcabc";
    trit_tokenizer *tok = trit_tokenizer_train_char(text, 6);
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = 1, c.n_embd = 64, c.n_head = 2, c.seq_len = 8, c.vocab_size = 3, c.norm = TRIT_NORM_RMS;
    trit_gpt *m = trit_gpt_new(&c, 1);
    assert_int_equal(trit_export_gguf(m, tok, TRIT_F32, tfile_path("x.gguf")), TRIT_ERR_UNSUPPORTED);
    assert_false(tfile_exists(tfile_path("x.gguf")));
    trit_gpt_free(m);
    c.norm = TRIT_NORM_LAYER, c.n_embd = 48;
    m = trit_gpt_new(&c, 1);
    assert_int_equal(trit_export_gguf(m, tok, TRIT_Q4_0, tfile_path("x.gguf")), TRIT_ERR_SHAPE);
    assert_int_equal(trit_export_gguf(m, tok, TRIT_QINT4, tfile_path("x.gguf")), TRIT_ERR_INVALID);
    assert_int_equal(trit_export_gguf(m, tok, TRIT_TQ1_0, tfile_path("x.gguf")), TRIT_ERR_SHAPE);
    trit_gpt_free(m);
    c.n_embd = 64, c.subln = true;  // llama.cpp's gpt2 has no sub-norms
    m = trit_gpt_new(&c, 1);
    assert_int_equal(trit_export_gguf(m, tok, TRIT_F32, tfile_path("x.gguf")), TRIT_ERR_UNSUPPORTED);
    assert_non_null(strstr(trit_last_error(), "SubLN"));
    assert_false(tfile_exists(tfile_path("x.gguf")));
    trit_gpt_free(m);
    trit_tokenizer_free(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
