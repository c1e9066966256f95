// A TRITFIX1 fixture case run in an f32 or f64 graph, with inputs that are parameters (their
// gradients compared with <case>.d<name>) or constants of a chosen dtype (masks, lengths,
// targets). tf_check_case (tritfix.h) covers the f64, all-parameter case; this one also gives
// the f32 parity PyTorch fixtures promise (about 1e-5 relative).
#ifndef TRIT_TEST_FIXTURE_CASE_H
#define TRIT_TEST_FIXTURE_CASE_H

#include "tritfix.h"

typedef struct fc_input {
    const char *name;  // the record <case>.<name>
    bool param;        // a parameter of the graph's dtype whose gradient is compared
    trit_dtype dtype;  // a constant's dtype (ignored for parameters)
} fc_input;

// Builds `build` on the n inputs (parameters and constants, in order) in a graph of dtype
// graph_dt; the loss is the output when it is a scalar, else sum(out * <case>.r). Compares the
// output and each parameter's gradient with the fixture: max |got - want| over a tensor divided
// by max(max |want|, 1e-12) over it. Fails the test above tol; returns the worst error.
double fc_check(const tf_file *f, const char *fcase, trit_dtype graph_dt, tg_build_fn build, void *ctx, int n,
                const fc_input *in, double tol);

#endif
