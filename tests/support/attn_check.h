// Checks shared by the tests of the two causal attention ops (straightforward and flash): graph
// inputs, one run's output and gradients, causality and rejected input.
#ifndef TRIT_TEST_ATTN_CHECK_H
#define TRIT_TEST_ATTN_CHECK_H

#include "trit/trit.h"

typedef trit_tensor *(*ta_attn_fn)(trit_graph *g, trit_tensor *q, trit_tensor *k, trit_tensor *v, int n_head);

// out and d(weighted sum of out)/d q, k, v of one run, as doubles.
typedef struct ta_result {
    int64_t n;       // elements of each of the four arrays
    double *v[4];    // out, gq, gk, gv
} ta_result;

void ta_result_free(ta_result *r);

// Runs fn on copies of the f64 parameters p64 (q, k, v: (B, T, C)) in dtype dt with `threads`
// threads (0 = default).
ta_result ta_run(ta_attn_fn fn, trit_dtype dt, trit_tensor **p64, int n_head, int threads);

// A graph (of g's dtype) with graph inputs q, k, v of shape s (B, T, C); returns fn's output
// (kept) after compiling.
trit_tensor *ta_input_graph(trit_graph *g, ta_attn_fn fn, const int64_t *s, int n_head, trit_tensor **qkv);

// Changing q, k and v at position t0 of a (B, T, C) input leaves every output before t0
// bit-identical and changes the output at t0.
void ta_check_causal(ta_attn_fn fn, trit_dtype dt, int64_t B, int64_t T, int64_t C, int n_head, int64_t t0);

// Mismatched shapes, a C not divisible by n_head, n_head 0, a 2-d input, an i32 input and a NULL
// input are each refused with the right code and message.
void ta_check_bad_input(ta_attn_fn fn);

#endif
