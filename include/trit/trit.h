// trit: the whole public API.
#ifndef TRIT_H
#define TRIT_H

#include "trit/base.h"
#include "trit/tensor.h"
#include "trit/graph.h"
#include "trit/ops.h"

#endif
