// trit: the whole public API.
#ifndef TRIT_H
#define TRIT_H

#include "trit/version.h"
#include "trit/base.h"
#include "trit/tensor.h"
#include "trit/quant.h"
#include "trit/graph.h"
#include "trit/ops.h"
#include "trit/optim.h"
#include "trit/io.h"
#include "trit/tokenizer.h"
#include "trit/nn.h"
#include "trit/interop.h"
#include "trit/train.h"
#include "trit/bench.h"
#include "trit/dist.h"

#endif
