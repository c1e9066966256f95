// Embedding lookup: rows of a (V, C) table gathered by integer indices.
#ifndef TRIT_OPS_EMBEDDING_H
#define TRIT_OPS_EMBEDDING_H

#include "ops/op_def.h"

TRIT_DECLARE_REAL(const trit_op_def, trit_op_embedding);

#endif
