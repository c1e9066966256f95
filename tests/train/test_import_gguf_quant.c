// trit_import_gguf keeps a GGUF's quantized matrices as codes, losslessly, on files the `gguf`
// Python package wrote (tests/reference/make_gguf_quant_fixture.py: q8_0, q4_0, tq2_0 and tq1_0
// models, with each matrix's scales, first values and CRC-32s of its values and codes as
// gguf.quants.dequantize gives them):
//   - every matrix is a quantized copy in trit's side-scaled dtype (qint8 / qint4 in groups of
//     32, ternary in 256s) with no f32 values, whose scales, codes and decoded values are the
//     fixture's bit for bit;
//   - the decoder samples the same tokens and logits as a model whose codes were made by another
//     route (the dtype table's decoding of the file's blocks divided by the fixture's scales,
//     packed here by hand): the same codes, so the same kernels' bits;
//   - a checkpoint of the import reads back the codes, and exports to the file's weight bytes,
//     also for codes that encoding their values again would not give;
//   - a damaged block (a code ggml never writes, a NaN scale), an unknown block type and a
//     truncated file are refused with a message that names the problem.
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/io_internal.h"
#include "scratch.h"
#include "trit/trit.h"

typedef struct kind {
    const char *name;
    trit_dtype blocked, side;  // the blocks' dtype and the side-scaled one they become
    int64_t group;
} kind;

static const kind kinds[] = {
    {"q8_0", TRIT_Q8_0, TRIT_QINT8, 32},
    {"q4_0", TRIT_Q4_0, TRIT_QINT4, 32},
    {"tq2_0", TRIT_TQ2_0, TRIT_TERNARY, 256},
    {"tq1_0", TRIT_TQ1_0, TRIT_TERNARY, 256},
};
enum { KINDS = sizeof kinds / sizeof kinds[0] };

static const char *fixture(const char *name, const char *ext) {
    static char path[4][PATH_MAX];
    static int k;
    const char *src = getenv("TRIT_SOURCE_DIR");
    char *p = path[k++ % 4];
    snprintf(p, PATH_MAX, "%s/tests/reference/fixtures/gguf_quant/%s%s", src ? src : ".", name, ext);
    FILE *fp = fopen(p, "rb");
    if (!fp) fail_msg("fixture '%s' is missing: run tests/reference/make_gguf_quant_fixture.py", p);
    fclose(fp);
    return p;
}

// The file's name of a matrix parameter.
static void gguf_name(const char *param, char *out, size_t n) {
    static const char *const pairs[][2] = {{"attn.c_attn.weight", "attn_qkv.weight"},
                                           {"attn.c_proj.weight", "attn_output.weight"},
                                           {"mlp.c_fc.weight", "ffn_up.weight"},
                                           {"mlp.c_proj.weight", "ffn_down.weight"}};
    if (strcmp(param, "wte.weight") == 0) {
        snprintf(out, n, "token_embd.weight");
        return;
    }
    int layer = -1, at = 0;
    assert_int_equal(sscanf(param, "h.%d.%n", &layer, &at), 1);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        if (strcmp(param + at, pairs[i][0]) == 0) {
            snprintf(out, n, "blk.%d.%s", layer, pairs[i][1]);
            return;
        }
    fail_msg("'%s' is not a matrix of the model", param);
}

// Element k's code as stored in a side-scaled tensor (ternary: c + 1 stored).
static int code_at(const trit_tensor *q, int64_t k) {
    const uint8_t *p = trit_tensor_ptr(q);
    if (q->dtype == TRIT_QINT8) return (int8_t)p[k];
    if (q->dtype == TRIT_QINT4) return ((p[k >> 1] >> ((k & 1) * 4)) & 15) - 8;
    return ((p[k >> 2] >> ((k & 3) * 2)) & 3) - 1;
}

static uint32_t meta_u32(const trit_safetensors *f, const char *tensor, const char *what) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", tensor, what);
    const char *v = trit_safetensors_meta(f, key);
    if (!v) fail_msg("the reference has no '%s'", key);
    return (uint32_t)strtoul(v, NULL, 10);
}

static trit_tensor *ref_tensor(const trit_safetensors *f, const char *tensor, const char *what) {
    char key[160];
    snprintf(key, sizeof key, "%s.%s", tensor, what);
    trit_tensor *t = trit_safetensors_read_tensor(f, key);
    if (!t) fail_msg("the reference has no tensor '%s': %s", key, trit_last_error());
    return t;
}

// Every matrix of m is a quantized copy of k's side dtype, without f32 values, whose scales,
// decoded values and codes are the reference's bit for bit; returns how many there are.
static int check_lossless(const kind *k, const trit_gpt *m, const trit_safetensors *ref) {
    int n = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i), *q = trit_gpt_quantized(m, i);
        if (t->ndim != 2 || strcmp(t->name, "wpe.weight") == 0) {
            assert_null(q);
            continue;
        }
        char name[96];
        gguf_name(t->name, name, sizeof name);
        const bool embd_q8 = strcmp(t->name, "wte.weight") == 0 && k->side == TRIT_TERNARY;  // as trit exports
        if (!q) fail_msg("%s: '%s' was not kept quantized", k->name, t->name);
        assert_null(t->data);  // no f32 copy
        assert_int_equal(q->dtype, embd_q8 ? TRIT_QINT8 : k->side);
        assert_int_equal(q->quant->group_size, embd_q8 ? 32 : k->group);
        assert_null(q->quant->zero_points);
        trit_tensor *scales = ref_tensor(ref, name, "scales"), *head = ref_tensor(ref, name, "head");
        assert_int_equal(trit_tensor_numel(scales), q->quant->num_groups);
        if (memcmp(scales->data, q->quant->scales, sizeof(float) * (size_t)q->quant->num_groups) != 0)
            fail_msg("%s: the scales of '%s' are not the file's", k->name, t->name);
        trit_tensor *d = trit_dequantize(q);
        assert_non_null(d);
        const int64_t numel = trit_tensor_numel(d);
        if (memcmp(d->data, head->data, sizeof(float) * 256) != 0)
            fail_msg("%s: the first values of '%s' differ from gguf's dequantize", k->name, t->name);
        const uint32_t crc = trit_crc32(0, d->data, sizeof(float) * (size_t)numel);
        if (crc != meta_u32(ref, name, "values_crc32"))
            fail_msg("%s: the values of '%s' differ from gguf's dequantize (CRC-32 %u)", k->name, t->name, crc);
        int8_t *codes = malloc((size_t)numel);
        for (int64_t e = 0; e < numel; e++) codes[e] = (int8_t)code_at(q, e);
        assert_int_equal(trit_crc32(0, codes, (size_t)numel), meta_u32(ref, name, "codes_crc32"));
        free(codes);
        trit_tensor_free(d), trit_tensor_free(scales), trit_tensor_free(head);
        n++;
    }
    return n;
}

static void test_import_is_lossless(void **state) {
    (void)state;
    for (int i = 0; i < KINDS; i++) {
        trit_tokenizer *tok = NULL;
        trit_gpt *m = trit_import_gguf(fixture(kinds[i].name, ".gguf"), &tok);
        if (!m) fail_msg("%s: %s", kinds[i].name, trit_last_error());
        assert_non_null(tok);
        trit_safetensors *ref = trit_safetensors_open(fixture(kinds[i].name, ".ref.safetensors"));
        assert_non_null(ref);
        // Every matrix the fixture quantized (scales, head per matrix) was checked.
        assert_int_equal(check_lossless(&kinds[i], m, ref), trit_safetensors_count(ref) / 2);
        trit_safetensors_close(ref);
        trit_tokenizer_free(tok);
        trit_gpt_free(m);
    }
}

// Parameter i of a (made without values, rows first rows of the file's tensor) from the file's
// blocks by another route: the dtype table decodes them to values, the reference's scales divide
// them back to codes (exact: a value is code x scale), packed here into the side dtype.
static trit_tensor *codes_by_hand(const trit_gguf_file *f, const trit_safetensors *ref, const trit_tensor *t) {
    char name[96];
    gguf_name(t->name, name, sizeof name);
    const trit_gguf_tensor *g = trit_gguf_find_tensor(f, name);
    assert_non_null(g);
    const trit_dtype bt = g->type == TRIT_GGML_Q8_0   ? TRIT_Q8_0
                          : g->type == TRIT_GGML_Q4_0 ? TRIT_Q4_0
                          : g->type == TRIT_GGML_TQ2_0 ? TRIT_TQ2_0
                                                        : TRIT_TQ1_0;
    const trit_dtype side = bt == TRIT_Q8_0 ? TRIT_QINT8 : bt == TRIT_Q4_0 ? TRIT_QINT4 : TRIT_TERNARY;
    const int64_t numel = trit_tensor_numel(t), G = trit_dtype_block(bt);
    float *v = malloc(sizeof(float) * (size_t)numel);
    trit_dtype_traits_of(bt)->to_f32(v, g->data, numel, NULL, 0);
    trit_tensor *scales = ref_tensor(ref, name, "scales");
    trit_tensor *q = trit_tensor_new(side, 2, t->shape);
    trit_quant_info *qi = trit_quant_info_new(numel, G, false, 0);
    memcpy(qi->scales, scales->data, sizeof(float) * (size_t)qi->num_groups);
    uint8_t *p = trit_tensor_ptr(q);
    for (int64_t e = 0; e < numel; e++) {
        const float s = qi->scales[e / G];
        const int c = s != 0 ? (int)(v[e] / s) : 0;
        assert_true((float)c * s == v[e]);
        if (side == TRIT_QINT8) p[e] = (uint8_t)(int8_t)c;
        else if (side == TRIT_QINT4) p[e / 2] |= (uint8_t)((c + 8) << (e % 2 * 4));
        else p[e / 4] |= (uint8_t)((c + 1) << (e % 4 * 2));
    }
    assert_int_equal(trit_tensor_set_quant(q, qi), TRIT_OK);
    free(v);
    trit_tensor_free(scales);
    return q;
}

static bool quantized_in(const char *name, void *m) {
    const trit_tensor *t = trit_gpt_find(m, name);
    return t && !t->data;
}

// Greedy logits after a prompt, then sampled tokens, of a decode-only model.
static void decode(const trit_gpt *m, float *logits, int32_t *tokens, int64_t *n) {
    static const int32_t prompt[6] = {5, 77, 120, 3, 250, 42};
    int32_t greedy[8];
    trit_gpt_cache *c = trit_gpt_cache_new(m);
    assert_non_null(c);
    assert_int_equal(trit_greedy_decode(m, c, prompt, 6, 8, greedy, logits), TRIT_OK);
    trit_gpt_cache_free(c);
    trit_sample_config sc = trit_sample_config_default();
    sc.max_tokens = 20, sc.seed = 9;
    assert_int_equal(trit_generate(m, prompt, 6, &sc, tokens, n, NULL, NULL), TRIT_OK);
}

static void test_sample_equals_codes_made_by_hand(void **state) {
    (void)state;
    for (int i = 0; i < KINDS; i++) {
        const char *path = fixture(kinds[i].name, ".gguf");
        trit_gpt *a = trit_import_gguf(path, NULL);
        assert_non_null(a);
        trit_gguf_file *f = trit_gguf_open(path);
        trit_safetensors *ref = trit_safetensors_open(fixture(kinds[i].name, ".ref.safetensors"));
        assert_non_null(f);
        assert_non_null(ref);
        trit_gpt *b = trit_gpt_new_without(trit_gpt_get_config(a), 3, quantized_in, a);
        assert_non_null(b);
        int kept = 0;
        for (int p = 0; p < trit_gpt_num_tensors(a); p++) {
            const trit_tensor *t = trit_gpt_tensor(a, p);
            if (t->data) {
                assert_int_equal(trit_tensor_copy(trit_gpt_tensor(b, p), t), TRIT_OK);
                continue;
            }
            trit_tensor *q = codes_by_hand(f, ref, t);
            const trit_tensor *qa = trit_gpt_quantized(a, p);
            assert_int_equal(q->dtype, qa->dtype);
            if (memcmp(trit_tensor_ptr(q), trit_tensor_ptr(qa), trit_tensor_nbytes(q)) != 0)
                fail_msg("%s: the import's codes of '%s' are not the file's", kinds[i].name, t->name);
            assert_int_equal(trit_gpt_attach_quantized(b, p, q), TRIT_OK);
            kept++;
        }
        assert_int_equal(kept, 5);  // the embedding and the block's four matrices
        assert_int_equal(trit_gpt_make_decode_only(a), TRIT_OK);
        assert_int_equal(trit_gpt_make_decode_only(b), TRIT_OK);
        // The kernels multiply by the codes: the decoder holds no f32 copy of a matrix (codes
        // and f32 scales take 1.2 bytes a weight at most, f32 values 4).
        int64_t weights = 0;
        for (int p = 0; p < trit_gpt_num_tensors(a); p++) weights += trit_tensor_numel(trit_gpt_tensor(a, p));
        if (trit_gpt_weight_bytes(a) > 2 * (size_t)weights)
            fail_msg("%s: the decoder holds %zu bytes for %lld weights: an f32 copy", kinds[i].name,
                     trit_gpt_weight_bytes(a), (long long)weights);
        const int64_t V = trit_gpt_get_config(a)->vocab_size;
        float *la = malloc(sizeof(float) * (size_t)V), *lb = malloc(sizeof(float) * (size_t)V);
        int32_t ta[20], tb[20];
        int64_t na = 0, nb = 0;
        decode(a, la, ta, &na);
        decode(b, lb, tb, &nb);
        assert_int_equal(na, 20);
        assert_int_equal(nb, 20);
        if (memcmp(la, lb, sizeof(float) * (size_t)V) != 0) fail_msg("%s: the logits differ", kinds[i].name);
        assert_memory_equal(ta, tb, sizeof ta);
        free(la), free(lb);
        trit_safetensors_close(ref);
        trit_gguf_close(f);
        trit_gpt_free(a), trit_gpt_free(b);
    }
}

// Tensor `name` of a and b: the same type and dims, and b's data begins with a's bytes (b's
// embedding and head have the end-of-text row trit's export appends).
static void same_tensor(const trit_gguf_file *a, const trit_gguf_file *b, const char *name, const char *kind_name) {
    const trit_gguf_tensor *x = trit_gguf_find_tensor(a, name), *y = trit_gguf_find_tensor(b, name);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(x->type, y->type);
    assert_int_equal(x->ne[0], y->ne[0]);
    const bool extra_row = strcmp(name, "token_embd.weight") == 0 || strcmp(name, "output.weight") == 0;
    assert_int_equal(x->ne[1] + (extra_row ? 1 : 0), y->ne[1]);
    if (memcmp(x->data, y->data, x->nbytes) != 0) fail_msg("%s: tensor '%s' did not come back byte for byte", kind_name, name);
}

// The import of `path` saved as a checkpoint reads back its codes, and exported as dt (from the
// checkpoint, whose f32 values are decoded from the codes, and from the import itself, which has
// no f32 values) gives the file's weight tensors byte for byte.
static void round_trip(const char *path, trit_dtype dt, const char *kind_name) {
    trit_tokenizer *tok = NULL;
    trit_gpt *m = trit_import_gguf(path, &tok);
    if (!m) fail_msg("%s: %s", kind_name, trit_last_error());
    const char *ckpt = tfile_path("m.safetensors"), *out = tfile_path("m.gguf");
    assert_int_equal(trit_checkpoint_save_model(m, ckpt, 0), TRIT_OK);
    trit_gpt *back = trit_checkpoint_load_model(ckpt, NULL);
    assert_non_null(back);
    for (int p = 0; p < trit_gpt_num_tensors(m); p++) {
        const trit_tensor *q = trit_gpt_quantized(m, p), *r = trit_gpt_quantized(back, p);
        if (!q) continue;
        assert_non_null(r);
        assert_int_equal(q->dtype, r->dtype);
        assert_int_equal(q->quant->group_size, r->quant->group_size);
        assert_memory_equal(trit_tensor_ptr(q), trit_tensor_ptr(r), trit_tensor_nbytes(q));
        assert_memory_equal(q->quant->scales, r->quant->scales, sizeof(float) * (size_t)q->quant->num_groups);
    }
    for (int from = 0; from < 2; from++) {
        assert_int_equal(trit_export_gguf(from ? m : back, tok, dt, out), TRIT_OK);
        trit_gguf_file *a = trit_gguf_open(path), *b = trit_gguf_open(out);
        assert_non_null(a);
        assert_non_null(b);
        assert_int_equal(trit_gguf_num_tensors(a), trit_gguf_num_tensors(b));
        for (int64_t t = 0; t < trit_gguf_num_tensors(a); t++) same_tensor(a, b, trit_gguf_tensor_at(a, t)->name, kind_name);
        trit_gguf_close(a), trit_gguf_close(b);
    }
    trit_gpt_free(back);
    trit_gpt_free(m);
    trit_tokenizer_free(tok);
}

static void test_checkpoint_and_export_round_trip(void **state) {
    (void)state;
    for (int i = 0; i < KINDS; i++) round_trip(fixture(kinds[i].name, ".gguf"), kinds[i].blocked, kinds[i].name);
    // Codes that encoding their values again would not give: q8_0 blocks whose largest code is 63
    // (a quantizer other than ggml's; ggml's gives each block a code of magnitude 127, and trit's
    // encoder would double these codes and halve d). Export must write the codes it holds.
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(fixture("q8_0", ".gguf"), &d, &n), TRIT_OK);
    trit_gguf_file *f = trit_gguf_parse(d, n, "x");
    const trit_gguf_tensor *g = trit_gguf_find_tensor(f, "blk.0.ffn_up.weight");
    uint8_t *blocks = d + (g->data - d);
    for (size_t b = 0; b < 8; b++)
        for (int k = 0; k < 32; k++) blocks[34 * b + 2 + k] = (uint8_t)(int8_t)((int8_t)blocks[34 * b + 2 + k] / 2);
    trit_gguf_close(f);
    tfile_write(tfile_path("halved.gguf"), d, n);
    free(d);
    round_trip(tfile_path("halved.gguf"), TRIT_Q8_0, "q8_0 with halved codes");
}

// The fixture's bytes, with `name`'s data (or, when info, its type field) at offset `at` patched.
static void patched(const char *kind_name, const char *name, bool info, size_t at, const void *bytes, size_t n,
                    const char *out) {
    uint8_t *d = NULL;
    size_t size = 0;
    assert_int_equal(trit_file_read_all(fixture(kind_name, ".gguf"), &d, &size), TRIT_OK);
    trit_gguf_file *f = trit_gguf_parse(d, size, "x");
    assert_non_null(f);
    const trit_gguf_tensor *g = trit_gguf_find_tensor(f, name);
    size_t where = (size_t)(g->data - d) + at;
    if (info) {  // the info: name (u64 length + bytes), ndim u32, dims u64 each, type u32
        const uint8_t *s = memmem(d, size, name, strlen(name));
        assert_non_null(s);
        where = (size_t)(s - d) + strlen(name) + 4 + 8 * (size_t)g->ndim;
    }
    trit_gguf_close(f);
    memcpy(d + where, bytes, n);
    tfile_write(out, d, size);
    free(d);
}

static void refused(const char *path, const char *what) {
    assert_null(trit_import_gguf(path, NULL));
    if (!strstr(trit_last_error(), what)) fail_msg("expected '%s' in: %s", what, trit_last_error());
}

static void test_damaged_files_refused(void **state) {
    (void)state;
    const char *x = tfile_path("x.gguf");
    const int8_t minus128 = -128;  // q8_0 block 1's code 5
    patched("q8_0", "blk.0.ffn_up.weight", false, 34 + 2 + 5, &minus128, 1, x);
    refused(x, "block 1 (of 512) holds the code -128");
    const uint8_t three = 0xff;  // tq2_0 codes 3 (2d)
    patched("tq2_0", "blk.0.attn_output.weight", false, 66 * 2 + 7, &three, 1, x);
    refused(x, "tq2_0 block 2 (of 256) holds the 2-bit code 3");
    const uint16_t nan16 = 0x7e00;
    patched("q4_0", "blk.0.attn_qkv.weight", false, 18 * 3, &nan16, 2, x);
    refused(x, "q4_0 block 3 (of 384) holds a scale that is not finite");
    const uint32_t q4_k = 12;
    patched("tq1_0", "blk.0.ffn_down.weight", true, 0, &q4_k, 4, x);
    refused(x, "tensor 'blk.0.ffn_down.weight' has ggml type 12");
    uint8_t *d = NULL;
    size_t n = 0;
    assert_int_equal(trit_file_read_all(fixture("q4_0", ".gguf"), &d, &n), TRIT_OK);
    tfile_write(x, d, n - 300);
    free(d);
    refused(x, "the file is truncated");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_import_is_lossless),
        cmocka_unit_test(test_sample_equals_codes_made_by_hand),
        cmocka_unit_test(test_checkpoint_and_export_round_trip),
        cmocka_unit_test(test_damaged_files_refused),
    };
    return cmocka_run_group_tests(tests, tfile_group_setup, tfile_group_teardown);
}
