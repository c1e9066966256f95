// Fake quantization for quantization-aware training (see trit_fake_quant in trit/ops.h).
#ifndef TRIT_OPS_FAKE_QUANT_H
#define TRIT_OPS_FAKE_QUANT_H

#include "ops/op_def.h"
#include "trit/ops.h"

typedef struct trit_fake_quant_attr {
    trit_fake_quant_spec spec;
} trit_fake_quant_attr;

TRIT_DECLARE_REAL(const trit_op_def, trit_op_fake_quant);

#endif
