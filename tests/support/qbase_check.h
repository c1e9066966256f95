// Checks of a base whose block matrices were quantized as they were read, against the same base
// loaded whole and then quantized (tests/train/test_qlora_base*.c).
#ifndef TRIT_TEST_QBASE_CHECK_H
#define TRIT_TEST_QBASE_CHECK_H

#include "trit/trit.h"

// a and b are the same codes: dtype, shape, bytes, every group's scale (and its double-quantized
// code) and zero points. Fails the test otherwise, naming a's tensor and group.
void qb_expect_same_codes(const trit_tensor *a, const trit_tensor *b);

// m (read quantizing) against ref (loaded whole, then trit_gpt_quantize'd): ref's quantized
// tensors are the same codes in m with no f32 copy, every other tensor the same values; the
// count of coded tensors is returned.
int qb_expect_model(const trit_gpt *m, const trit_gpt *ref);

// The quantization spec of dt with a group size (0: dt's default) and a double-quantization
// block (0: none).
trit_quant_spec qb_spec(trit_dtype dt, int64_t group, int64_t dq_block);

// Quantizes ref's block matrices whole (trit_gpt_quantize) and expects n_blocks x 4 of them
// (c_attn, attn.c_proj, c_fc, mlp.c_proj). ref may be NULL: the test fails.
void qb_quantize_whole(trit_gpt *ref, const trit_quant_spec *spec, int n_blocks);

#endif
