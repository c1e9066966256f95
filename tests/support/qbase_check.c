#include "qbase_check.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

void qb_expect_same_codes(const trit_tensor *a, const trit_tensor *b) {
    assert_int_equal(a->dtype, b->dtype);
    assert_true(trit_tensor_same_shape(a, b));
    assert_int_equal(trit_tensor_nbytes(a), trit_tensor_nbytes(b));
    assert_memory_equal(trit_tensor_ptr(a), trit_tensor_ptr(b), trit_tensor_nbytes(a));
    const trit_quant_info *x = a->quant, *y = b->quant;
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(x->group_size, y->group_size);
    assert_int_equal(x->num_groups, y->num_groups);
    assert_int_equal(x->dq_block, y->dq_block);
    for (int64_t g = 0; g < x->num_groups; g++) {
        if (trit_quant_info_scale(x, g) != trit_quant_info_scale(y, g))
            fail_msg("'%s': group %lld's scale %.9g, %.9g quantized after loading", a->name, (long long)g,
                     (double)trit_quant_info_scale(x, g), (double)trit_quant_info_scale(y, g));
        if (x->qscales) assert_int_equal(x->qscales[g], y->qscales[g]);
    }
    assert_true((x->zero_points == NULL) == (y->zero_points == NULL));
    if (x->zero_points) assert_memory_equal(x->zero_points, y->zero_points, sizeof(float) * (size_t)x->num_groups);
}

int qb_expect_model(const trit_gpt *m, const trit_gpt *ref) {
    assert_int_equal(trit_gpt_num_tensors(m), trit_gpt_num_tensors(ref));
    int coded = 0;
    for (int i = 0; i < trit_gpt_num_tensors(m); i++) {
        const trit_tensor *t = trit_gpt_tensor(m, i), *u = trit_gpt_tensor(ref, i);
        assert_string_equal(t->name, u->name);
        if (trit_gpt_quantized(ref, i)) {
            assert_null(t->data);  // codes only: no f32 copy of the matrix
            assert_non_null(trit_gpt_quantized(m, i));
            qb_expect_same_codes(trit_gpt_quantized(m, i), trit_gpt_quantized(ref, i));
            coded++;
        } else {
            assert_null(trit_gpt_quantized(m, i));
            assert_non_null(t->data);
            assert_memory_equal(trit_tensor_ptr(t), trit_tensor_ptr(u), trit_tensor_nbytes(t));
        }
    }
    return coded;
}

trit_quant_spec qb_spec(trit_dtype dt, int64_t group, int64_t dq_block) {
    trit_quant_spec spec = trit_quant_spec_default(dt);
    if (group) spec.group_size = group;
    spec.double_quant_block = dq_block;
    return spec;
}

void qb_quantize_whole(trit_gpt *ref, const trit_quant_spec *spec, int n_blocks) {
    trit_quantize_report r;
    assert_non_null(ref);
    assert_int_equal(trit_gpt_quantize(ref, spec, TRIT_QUANTIZE_BLOCKS, &r), TRIT_OK);
    assert_int_equal(r.tensors, 4 * n_blocks);
}
