// The bytes a decode step reads (trit_gpt_decode_read_bytes, what `trit bench --decode` holds
// against the read bandwidth), against the sum of the tensors a token reads, worked out here
// from the model's shape and each format's definition: every weight whole in the form the
// decoder multiplies with (codes packed at the format's bits, one f32 scale per group and row
// of a matrix), the position table's one row, and the keys and values of pos + 1 positions in
// every layer.
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "trit/train.h"
#include "trit/quant.h"

enum { L = 2, H = 2, C = 128, T = 32, V = 64 };  // V and the matrices' rows whole 16-row panels

static trit_gpt_config config(void) {
    trit_gpt_config c = trit_gpt_config_default();
    c.n_layer = L, c.n_head = H, c.n_embd = C, c.seq_len = T, c.vocab_size = V;
    return c;
}

// A matrix of N rows of K codes at `bits` bits, with one f32 scale per group of g codes of a row.
static size_t matrix(int64_t N, int64_t K, int bits, int64_t g) { return (size_t)(N * K * bits / 8 + N * (K / g) * 4); }

// The four block matrices (c_attn 3C x C, attn c_proj C x C, c_fc 4C x C, mlp c_proj C x 4C) of
// one block in a format of `bits` bits and groups of g (0: one per row).
static size_t block_matrices(int bits, int64_t g) {
    const int64_t gr = g ? g : C, gr4 = g ? g : 4 * C;
    return matrix(3 * C, C, bits, gr) + matrix(C, C, bits, gr) + matrix(4 * C, C, bits, gr) + matrix(C, 4 * C, bits, gr4);
}

// f32 vectors: per block the two LayerNorms (2 C each) and the biases (3C + C + 4C + C), ln_f;
// and one row of the position table.
static size_t f32_vectors(void) { return 4 * (size_t)(L * (4 * C + 9 * C) + 2 * C + C); }

static size_t kv_bytes(int64_t pos, int elem) { return (size_t)(2 * L * (pos + 1) * C * elem); }

static trit_gpt *make(const trit_quant_spec *blocks, const trit_quant_spec *head) {
    const trit_gpt_config c = config();
    trit_gpt *m = trit_gpt_new_quantized(&c, 1, blocks, head);
    assert_non_null(m);
    return m;
}

static void test_fp32(void **state) {
    (void)state;
    trit_gpt *m = make(NULL, NULL);
    // f32 matrices: 12 C^2 per block, the V x C token embedding (the head).
    const size_t weights = 4 * (size_t)(L * 12 * C * C + V * C) + f32_vectors();
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_F32, 0), weights + kv_bytes(0, 4));
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_F32, 17), weights + kv_bytes(17, 4));
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_F16, 17), weights + kv_bytes(17, 2));
    // The whole position table is held, one row of it read.
    assert_int_equal(trit_gpt_weight_bytes(m), weights + 4 * (size_t)((T - 1) * C));
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_F32, -1), 0);
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_BF16, 0), 0);
    assert_int_equal(trit_gpt_decode_read_bytes(NULL, TRIT_F32, 0), 0);
    trit_gpt_free(m);
}

// Integer formats the decoder keeps as panels of codes with f32 scales.
static void test_integer_formats(void **state) {
    (void)state;
    const trit_quant_spec q8 = trit_quant_spec_default(TRIT_QINT8), q4 = trit_quant_spec_default(TRIT_QINT4);
    const trit_quant_spec t2 = trit_quant_spec_default(TRIT_TERNARY);
    assert_int_equal(q8.group_size, TRIT_QGROUP_CHANNEL);  // one scale per row
    assert_int_equal(q4.group_size, 128);
    // int8 blocks and head
    trit_gpt *m = make(&q8, &q8);
    size_t weights = L * block_matrices(8, 0) + matrix(V, C, 8, C) + f32_vectors();
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_F16, 31), weights + kv_bytes(31, 2));
    trit_gpt_free(m);
    // int4 blocks (groups of 128), int8 head
    m = make(&q4, &q8);
    weights = L * block_matrices(4, 128) + matrix(V, C, 8, C) + f32_vectors();
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_F32, 5), weights + kv_bytes(5, 4));
    trit_gpt_free(m);
    // ternary blocks (one absmean scale per matrix, which the panels hold once per row), int8 head
    m = make(&t2, &q8);
    weights = L * block_matrices(2, 0) + matrix(V, C, 8, C) + f32_vectors();
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_F32, 0), weights + kv_bytes(0, 4));
    trit_gpt_free(m);
}

// NF4 is multiplied from its codes (4 bits) and f32 scales per group of 64, not panels.
static void test_nf4(void **state) {
    (void)state;
    const trit_quant_spec nf4 = trit_quant_spec_default(TRIT_NF4);
    assert_int_equal(nf4.group_size, 64);
    trit_gpt *m = make(&nf4, &nf4);
    const size_t weights = L * block_matrices(4, 64) + matrix(V, C, 4, 64) + f32_vectors();
    assert_int_equal(trit_gpt_decode_read_bytes(m, TRIT_F32, 9), weights + kv_bytes(9, 4));
    trit_gpt_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32),
        cmocka_unit_test(test_integer_formats),
        cmocka_unit_test(test_nf4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
